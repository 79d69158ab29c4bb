from __future__ import annotations

from pathlib import Path

import pytest

from funes.errors import CorruptObjectError, NotARepositoryError
from funes.model.objects import ModelStamp, Tombstone
from funes.model.refs import InvalidRefError, check_ref_name
from funes.storage.refs import RefMovedError
from funes.storage.repo import (
    ModelMismatchError,
    Repository,
    RepositoryExistsError,
)
from funes.storage.revisions import BadRevisionError
from tests.builders import make_batch, make_chunk


def test_init_creates_an_empty_repository(repo: Repository) -> None:
    assert (repo.path / "FORMAT").read_text() == "funes-repository 2\n"
    assert repo.head() is None
    assert repo.head_branch() == "refs/heads/main"
    assert repo.chunks.exists()
    assert repo.chunk_ids() == set()


def test_init_twice_is_refused(repo: Repository, settings) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RepositoryExistsError):
        Repository.init(repo.path, settings)


def test_discovery_walks_up_then_falls_back_to_global(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    project = tmp_path / "proj"
    Repository.init(project / ".funes", settings)
    deep = project / "a" / "b"
    deep.mkdir(parents=True)
    found = Repository.discover(replace(settings, cwd=deep))
    assert found.path == (project / ".funes").resolve()
    assert not found.is_global

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(NotARepositoryError):
        Repository.discover(replace(settings, cwd=elsewhere))
    Repository.init(settings.home, settings, is_global=True)
    found = Repository.discover(replace(settings, cwd=elsewhere))
    assert found.is_global


def test_commit_appends_chunks_and_is_idempotent(repo: Repository) -> None:
    first = repo.commit_chunks(make_batch(0, 50), "index: first")
    assert first.commit is not None and first.added == 50 and first.chunk_count == 50
    again = repo.commit_chunks(make_batch(0, 50), "index: again")
    assert again.commit is None and again.added == 0 and again.duplicates == 50
    more = repo.commit_chunks(make_batch(40, 20), "index: more")
    assert more.added == 10 and more.duplicates == 10 and more.chunk_count == 60
    assert len(repo.chunk_ids()) == 60
    log = list(repo.walk())
    assert [c.message for _, c in log] == ["index: more", "index: first"]
    assert log[0][1].parents == (first.commit,)


def test_duplicate_ids_within_a_batch_are_counted_not_stored_twice(repo: Repository) -> None:
    a = make_chunk(1)
    b = make_chunk(1)
    from dataclasses import replace

    c = replace(a, project="github.com/other/project")  # same id: annotation is not identity
    assert c.id == a.id
    result = repo.commit_chunks([a, b, c], "index: dupes")
    assert result.added == 1 and result.duplicates == 2 and result.collisions == 1


def test_chunk_ids_are_content_addressed() -> None:
    from dataclasses import replace

    a = make_chunk(3)
    assert a.id == make_chunk(3).id
    assert replace(a, text=a.text + " ").id != a.id
    assert replace(a, turn_id="other").id != a.id
    assert replace(a, split_idx=1).id != a.id
    # machine-dependent annotations do not change identity
    assert replace(a, source="/elsewhere.jsonl:0-1", workdir="/x", project=None).id == a.id


def test_stored_rows_round_trip(repo: Repository) -> None:
    batch = make_batch(0, 5, text="voilà — 日本語 🎉 \x00 nul")
    repo.commit_chunks(batch, "index: unicode")
    rows = repo.chunks.dataset().to_table().to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(c.id for c in batch)
    assert all(r["text"] == "voilà — 日本語 🎉 \x00 nul" for r in rows)
    assert rows[0]["time"] is not None


def test_resolve_revisions(repo: Repository) -> None:
    c1 = repo.commit_chunks(make_batch(0, 3), "one").commit
    c2 = repo.commit_chunks(make_batch(3, 3), "two").commit
    assert c1 and c2
    assert repo.resolve("HEAD") == c2
    assert repo.resolve("main") == c2
    assert repo.resolve("refs/heads/main") == c2
    assert repo.resolve("HEAD~1") == c1
    assert repo.resolve(c1[:8]) == c1
    for bad in ("nope", "HEAD~2", "HEAD~x", "zzzz", "../../etc/passwd"):
        with pytest.raises(BadRevisionError):
            repo.resolve(bad)


def test_refs_compare_and_swap_and_reflog(repo: Repository) -> None:
    c1 = repo.commit_chunks(make_batch(0, 2), "one").commit
    c2 = repo.commit_chunks(make_batch(2, 2), "two").commit
    assert c1 and c2
    ref = check_ref_name("refs/heads/main")
    with pytest.raises(RefMovedError):
        repo.refs.set_if_equals(ref, c1, c1, who="x", time="t", message="stale")
    log = repo.refs.reflog(ref)
    assert [(e.old, e.new) for e in log] == [(None, c1), (c1, c2)]
    assert [e.message for e in repo.refs.reflog(check_ref_name("HEAD"))] == ["one", "two"]


@pytest.mark.parametrize(
    "name",
    [
        "refs/heads/../x",
        "refs/heads/a b",
        "/etc/passwd",
        "refs/heads/x.lock",
        "refs/x",
        "refs/heads/.hidden",
        "refs/heads/a\\b",
        "refs/heads/",
    ],
)
def test_bad_ref_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidRefError):
        check_ref_name(name)


def test_model_stamp_is_kept_and_a_different_model_refused(repo: Repository) -> None:
    a = ModelStamp("minilm-l6-v2", "a" * 64, 384)
    b = ModelStamp("other-model", "b" * 64, 768)
    repo.commit_chunks(make_batch(0, 2), "stamp", model=a)
    repo.commit_chunks(make_batch(2, 2), "more")
    assert repo.model_stamp() == a
    with pytest.raises(ModelMismatchError) as err:
        repo.commit_chunks(make_batch(4, 2), "other", model=b)
    assert "minilm-l6-v2" in str(err.value) and "other-model" in str(err.value)


def test_tombstones_hide_chunks_and_block_their_return(repo: Repository) -> None:
    batch = make_batch(0, 4)
    repo.commit_chunks(batch, "index")
    tomb = Tombstone((batch[0].id,), "forget", "me", "2026-01-01T00:00:00Z")
    result = repo.commit_chunks([], "forget one", tombstones=[tomb])
    assert result.chunk_count == 3
    assert repo.tombstoned_ids() == {batch[0].id}
    assert repo.commit_chunks(batch, "re-index").commit is None
    assert repo.stats().chunks == 3


def test_reading_a_corrupt_object_names_it(repo: Repository) -> None:
    oid = repo.commit_chunks(make_batch(0, 2), "one").commit
    assert oid
    path = repo.objects.path_of(oid)
    data = bytearray(path.read_bytes())
    data[10] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptObjectError) as err:
        repo.head_commit()
    assert oid in str(err.value)


def test_stats_by_harness(repo: Repository) -> None:
    repo.commit_chunks(make_batch(0, 3) + make_batch(0, 2, session="s2", harness="codex"), "x")
    stats = repo.stats()
    assert stats.chunks == 5 and stats.sessions == 2
    assert stats.by_harness == {
        "claude": {"chunks": 3, "sessions": 1},
        "codex": {"chunks": 2, "sessions": 1},
    }


def test_id_index_is_a_disposable_cache(repo: Repository) -> None:
    repo.commit_chunks(make_batch(0, 20), "one")
    repo.commit_chunks(make_batch(20, 20), "two")
    (repo.path / "index" / "ids.sqlite").unlink()
    for extra in repo.path.glob("index/ids.sqlite-*"):
        extra.unlink()
    again = repo.commit_chunks(make_batch(0, 45), "three")
    assert again.added == 5 and again.duplicates == 40
    # a marker that is not an ancestor of HEAD forces a rebuild, not a wrong answer
    import sqlite3

    with sqlite3.connect(repo.path / "index" / "ids.sqlite") as db:
        db.execute("UPDATE meta SET value=? WHERE key='head'", ("f" * 64,))
        db.execute("DELETE FROM ids")
    assert repo.commit_chunks(make_batch(0, 45), "four").commit is None
