"""forget → push → pull hides content everywhere; scrub replaces dirty chunks; gc erases bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from funes import api
from funes.api import security as sec
from funes.errors import UsageError
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk
from tests.remotes.conftest import World, visible
from tests.security.conftest import AWS_KEY

WORD = "swordfishmarmalade"


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _seed(repo: Repository) -> str:
    secret = make_chunk(50, session="oops", text=f"the launch code is {WORD} remember it")
    repo.commit_chunks([*make_batch(0, 10), secret], "index: a1")
    return secret.id


def test_forget_travels_and_gc_erases(world: World) -> None:
    a = world.machine("a")
    target = _seed(a)
    api.push(a)
    b = world.clone("b")
    assert target in visible(b)

    done = sec.forget(a, match=WORD)
    assert done.chunks == [target] and done.commit
    assert not api.recall(a.settings, a, WORD, vector=False, rerank=False).hits
    api.push(a)
    api.pull(b)
    assert target not in visible(b)
    assert not api.recall(b.settings, b, WORD, vector=False, rerank=False).hits
    # Indexing the same transcript again on B does not bring it back.
    b.commit_chunks([*make_batch(0, 10), make_chunk(50, session="oops",
                     text=f"the launch code is {WORD} remember it")], "index: again")
    assert target not in visible(b)
    assert not api.recall(b.settings, b, WORD, vector=False, rerank=False).hits

    # A's disk still holds the bytes (tombstones hide); gc removes them, fsck stays clean.
    assert _files_containing(a.path, WORD.encode())
    result = sec.gc(a)
    assert result.rows_removed == 1 and result.fragments_rewritten == 1
    assert _files_containing(a.path, WORD.encode()) == []
    report = api.fsck(a)
    assert report.ok, report.problems
    assert len(visible(a)) == 10
    assert api.recall(a.settings, a, "passage number 3", vector=False, rerank=False).hits
    # Life goes on after gc: index, push, pull.
    a.commit_chunks(make_batch(10, 3), "index: a2")
    api.push(a)
    api.pull(b)
    assert len(visible(b)) == 13 and target not in visible(b)
    assert api.fsck(a).ok and api.fsck(b).ok


def test_forget_selectors(repo: Repository) -> None:
    old = make_chunk(1, session="s-old", ts="2025-01-01T00:00:00Z")
    new = make_chunk(2, session="s-new", ts="2026-06-01T00:00:00Z")
    repo.commit_chunks([old, new, *make_batch(10, 3, session="keep")], "seed")
    assert sec.forget(repo, before="2025-06-01", dry_run=True).chunks == [old.id]
    assert sec.forget(repo, session="s-new", dry_run=True).chunks == [new.id]
    assert sec.forget(repo, chunk=new.id[:10], dry_run=True).chunks == [new.id]
    assert sec.forget(repo, session="keep", match="number 11").chunks == [
        make_chunk(11, session="keep").id
    ]
    assert len(visible(repo)) == 4
    with pytest.raises(UsageError):
        sec.forget(repo)
    # The tombstone's reason never carries the --match text.
    stone = repo.objects.tombstone(repo.head_commit().tombstones[0])  # type: ignore[union-attr]
    assert "number 11" not in stone.reason


def test_scrub_replaces_dirty_chunks_and_gc_erases_them(repo: Repository) -> None:
    dirty = make_chunk(7, text=f"aws key {AWS_KEY} in the env")
    repo.commit_chunks([*make_batch(0, 5), dirty], "seed (before the detector existed)")
    preview = sec.scrub(repo, dry_run=True)
    assert [c.old for c in preview.replaced] == [dirty.id] and preview.commit is None
    done = sec.scrub(repo)
    assert done.commit and done.kinds == {"aws-access-key-id": 1}
    rows = visible(repo)
    assert dirty.id not in rows and len(rows) == 6
    copy = rows[done.replaced[0].new]
    assert AWS_KEY not in copy["text"] and "[REDACTED:" in copy["text"]
    assert copy["session_id"] == dirty.session_id and copy["turn_id"] == dirty.turn_id
    assert not sec.scrub(repo).replaced  # idempotent
    sec.gc(repo)
    assert _files_containing(repo.path, AWS_KEY.encode()) == []
    assert api.fsck(repo).ok


def test_cli_forget_scrub_gc(repo: Repository, run: object) -> None:
    repo.commit_chunks([*make_batch(0, 3), make_chunk(9, text=f"k={AWS_KEY}")], "seed")
    os.chdir(repo.path.parent)
    r = run("forget", "--session", "s1", "--match", "number 1", "-n")  # type: ignore[operator]
    assert r.exit_code == 0 and "would forget 1 chunk(s)" in r.stdout
    r = run("scrub")  # type: ignore[operator]
    assert r.exit_code == 0 and "redacted 1 of 4" in r.stdout and AWS_KEY not in r.stdout
    r = run("gc")  # type: ignore[operator]
    assert r.exit_code == 0 and "removed 1 tombstoned row(s)" in r.stdout
    r = run("forget")  # type: ignore[operator]
    assert r.exit_code == 2


def test_push_after_gc_sends_the_rewritten_fragments(world: World) -> None:
    """Commits made before gc name fragment files gc replaced: a push still works and carries
    none of the removed rows."""
    a = world.machine("a")
    target = _seed(a)
    sec.forget(a, chunk=target)
    sec.gc(a)
    result = api.push(a)
    assert not result.held
    if world.hub is not None:
        assert WORD.encode() not in world.hub.uploaded_bytes()
    else:
        assert _files_containing(Path(world.url), WORD.encode()) == []
    b = world.clone("b")
    assert len(visible(b)) == 10 and target not in visible(b)
    assert api.fsck(b).ok and api.fsck(a).ok


@pytest.mark.slow
def test_forgotten_content_stays_hidden_after_embedding_on_the_other_machine(
    tmp_path: Path, settings: object, with_models: Path
) -> None:
    """B pulls a tombstone, then embeds (what `funes embed`/`reindex` run): the forgotten chunk
    gets no vector and neither signal returns it."""
    from dataclasses import replace as _replace

    a = Repository.init(tmp_path / "a" / ".funes", settings)  # type: ignore[arg-type]
    api.remote_add(a, "origin", str(tmp_path / "remote"))
    target = _seed(a)
    api.push(a)
    b = Repository.open(api.clone(_replace(a.settings, cwd=tmp_path),
                                  str(tmp_path / "remote"), "b").path, a.settings)
    sec.forget(a, session="oops")
    api.push(a)
    api.pull(b)
    api.embed(b.settings, b)
    embedded = set(b.vectors.dataset().to_table(columns=["id"]).column("id").to_pylist())
    assert target not in embedded and len(embedded) == 10
    hits = api.recall(b.settings, b, f"the launch code is {WORD}", k=20, rerank=False).hits
    assert "vector" in api.recall(b.settings, b, "launch code", rerank=False).signals
    assert target not in [h.row["id"] for h in hits]


def test_gc_sweeps_unreachable_objects_and_files_once_they_are_old(repo: Repository) -> None:
    from funes.model.objects import Tombstone

    repo.commit_chunks(make_batch(0, 3), "seed")
    stray = repo.objects.put(Tombstone(("a" * 64,), "never committed", "T <t@x>", "t"))
    stray_path = repo.path / "objects" / stray[:2] / stray[2:]
    from funes.storage.tables import chunks_to_arrow

    rows = chunks_to_arrow([make_chunk(99, text="orphaned row")])
    orphan = repo.chunks.write_fragments(rows)[0].files[0].path
    orphan_path = repo.chunks.path / orphan
    (repo.path / "tmp" / "fetch-old").mkdir(parents=True)
    first = sec.gc(repo)  # everything is young: kept (a push or fetch may own it)
    assert first.objects_deleted == 0 and stray_path.exists() and orphan_path.exists()
    old = 1_000_000_000
    for path in (stray_path, orphan_path, repo.path / "tmp" / "fetch-old"):
        os.utime(path, (old, old))
    second = sec.gc(repo)
    assert second.objects_deleted == 1 and second.files_deleted == 1
    assert not stray_path.exists() and not orphan_path.exists()
    assert not (repo.path / "tmp" / "fetch-old").exists()
    assert api.fsck(repo).ok and len(visible(repo)) == 3
