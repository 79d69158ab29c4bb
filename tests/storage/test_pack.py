"""Packs: many small fragments rewritten into few without touching ids, history or sync."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes._env import settings as load_settings
from funes.model.objects import Tombstone
from funes.remotes.base import NonFastForwardError
from funes.retrieval.recall import Options, retrieve
from funes.storage import pack
from funes.storage.fsck import fsck
from funes.storage.gc import gc
from funes.storage.repo import Repository, now_iso
from funes.storage.snapshot import snapshot
from tests.builders import make_batch
from tests.conftest import REPO_ROOT


def _turns(repo: Repository, start: int, count: int, session: str = "s") -> None:
    """One small commit per turn, as the agent hook writes them."""
    for i in range(start, start + count):
        repo.commit_chunks(make_batch(i * 2, 2, session=f"{session}{i // 10}"), f"turn {i}")


def _visible(repo: Repository) -> dict[str, dict[str, Any]]:
    hidden = repo.tombstoned_ids()
    rows = repo.chunks.dataset().to_table().to_pylist()
    return {r["id"]: r for r in rows if r["id"] not in hidden}


def _hits(repo: Repository, query: str) -> list[str]:
    result = retrieve(snapshot(repo), query, Options(k=20, neighbors=1, vector=False))
    return [h.id for h in result.hits]


def test_pack_rewrites_fragments_and_keeps_ids_results_and_fsck(repo: Repository) -> None:
    _turns(repo, 0, 40)
    assert len(repo.chunks.dataset().get_fragments()) == 40
    before = _visible(repo)
    hits = _hits(repo, "passage topic 3")
    head = repo.head()

    result = pack.pack(repo)  # 40 ≥ the default threshold
    assert result.did_pack and result.packed["chunks"] == 40
    assert len(repo.chunks.dataset().get_fragments()) < 4
    assert repo.head() == head  # no commit: a pack is layout, not history
    assert _visible(repo) == before
    assert _hits(repo, "passage topic 3") == hits
    report = fsck(repo)
    assert report.ok and not report.warnings, [str(p) for p in report.problems + report.warnings]
    record = json.loads((repo.path / "packs.json").read_text())["chunks"]
    assert len(record["files"]) == 40  # every original is still there, named by its manifest
    assert all((repo.chunks.path / f).is_file() for f in record["files"])

    # later commits append as before, and a second pack keeps the big pack as it is
    _turns(repo, 40, 3)
    assert fsck(repo).ok
    assert pack.auto(repo) is None  # below the threshold: nothing to do
    again = pack.pack(repo, force=True)
    assert again.packed["chunks"] == 3  # the big pack is not rewritten for three small ones
    assert _visible(repo) == {**before, **{k: v for k, v in _visible(repo).items()
                                           if k not in before}}
    assert len(_visible(repo)) == 86
    assert fsck(repo).ok


def test_auto_follows_the_configured_threshold(repo: Repository) -> None:
    repo.config.set("pack.threshold", "5")
    _turns(repo, 0, 4)
    assert pack.auto(repo) is None
    _turns(repo, 4, 1)
    done = pack.auto(repo)
    assert done is not None and done.did_pack
    repo.config.set("pack.threshold", "0")
    _turns(repo, 5, 6)
    assert pack.auto(repo) is None


def test_tombstones_and_gc_after_packing(repo: Repository) -> None:
    _turns(repo, 0, 40)
    pack.pack(repo)
    victim = sorted(_visible(repo))[0]
    repo.commit_chunks([], "forget", tombstones=[
        Tombstone((victim,), "test", "t <t@t>", now_iso())])
    assert victim not in _visible(repo)
    result = gc(repo)
    assert result.rows_removed >= 2  # in the pack and in its original file
    assert victim not in {r["id"] for r in repo.chunks.dataset().to_table().to_pylist()}
    for path in (repo.chunks.path / "data").iterdir():  # on no file on disk any more
        from lance.file import LanceFileReader

        ids = LanceFileReader(str(path)).read_all().to_table().column("id").to_pylist()
        assert victim not in ids, path
    report = fsck(repo)
    assert report.ok, [str(p) for p in report.problems]
    assert len(_visible(repo)) == 79


def _machine(tmp_path: Path, settings: Any, name: str) -> Repository:
    repo = Repository.init(tmp_path / name / ".funes", settings)
    repo.config.set("pack.threshold", "8")
    return repo


def test_two_machines_that_pack_independently_sync_to_identical_content(
    tmp_path: Path, settings: Any
) -> None:
    import lance

    remote = tmp_path / "remote"
    a = _machine(tmp_path, settings, "a")
    _turns(a, 0, 12, session="a")
    assert pack.auto(a) is not None
    api.remote_add(a, "origin", str(remote))
    api.push(a)
    data = remote / "chunks.lance" / "data"
    assert len(list(data.iterdir())) == 12  # the originals the manifests name, never the pack

    b = _machine(tmp_path, settings, "b")
    api.remote_add(b, "origin", str(remote))
    api.pull(b)
    _turns(b, 100, 10, session="b")
    assert pack.auto(b) is not None and len(b.chunks.dataset().get_fragments()) < 5
    _turns(a, 200, 10, session="a2")
    pack.auto(a)
    sent_before = len(list(data.iterdir()))
    api.push(a)
    assert len(list(data.iterdir())) == sent_before + 10  # only what the remote lacked

    with pytest.raises(NonFastForwardError):
        api.push(b)
    api.pull(b)  # a merge of two packed memories
    pack.pack(b, force=True)
    api.push(b)
    api.pull(a)
    assert a.head() == b.head()
    assert _visible(a).keys() == _visible(b).keys() and len(_visible(a)) == 64
    for repo in (a, b):
        report = fsck(repo)
        assert report.ok, [str(p) for p in report.problems]
    # the remote is a plain Lance dataset holding every row once
    ds = lance.dataset(str(remote / "chunks.lance"))
    assert set(ds.to_table(columns=["id"]).column("id").to_pylist()) == _visible(a).keys()
    assert ds.count_rows() == 64

    # a fresh clone of the remote sees the same content
    c = Repository.open(api.clone(settings, str(remote), str(tmp_path / "c")).path, settings)
    assert _visible(c).keys() == _visible(a).keys()


PACKER = """
import sys, time
from pathlib import Path
from funes._env import settings
from funes.storage import pack
from funes.storage.repo import Repository
repo = Repository.open(Path(sys.argv[1]), settings())
print("ready", flush=True)
pack.pack(repo, force=True)
print("done", flush=True)
"""


@pytest.fixture(scope="module")
def sixty_turns(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A memory of 60 one-turn commits, built once: each kill below packs a copy of it."""
    base = tmp_path_factory.mktemp("sixty-turns")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(base))
        env.setenv("FUNES_HOME", str(base / ".funes"))
        env.setenv("FUNES_AUTHOR_NAME", "Test Author")
        env.setenv("FUNES_AUTHOR_EMAIL", "test@example.org")
        env.setenv("FUNES_SERVE", "off")
        repo = Repository.init(base / "project" / ".funes", load_settings())
        _turns(repo, 0, 60)
    return repo.path


# Two kill points in the quick suite, all five in the full one.
@pytest.mark.parametrize("delay", [0.0, 0.3, *(pytest.param(d, marks=pytest.mark.slow)
                                               for d in (0.05, 0.15, 0.6))])
def test_a_pack_killed_at_any_point_leaves_a_sound_repository(
    sixty_turns: Path, tmp_path: Path, settings: Any, delay: float
) -> None:
    path = tmp_path / "project" / ".funes"
    shutil.copytree(sixty_turns, path, symlinks=True)
    repo = Repository.open(path, settings)
    expected = _visible(repo)
    head = repo.head()
    proc = subprocess.Popen([sys.executable, "-c", PACKER, str(repo.path)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    # readers see everything at once, before any writer ran recovery
    assert _visible(repo) == expected
    report = fsck(repo)
    assert report.ok, [str(p) for p in report.problems]
    # the next writer completes what was interrupted; then all is as if the pack had finished
    repo.commit_chunks(make_batch(1000, 2, session="after"), "after the crash")
    assert not (repo.path / "PACKING").exists()
    pack.pack(repo, force=True)
    assert len(_visible(repo)) == len(expected) + 2
    assert repo.objects.commit(repo.head()).parents == (head,)  # type: ignore[arg-type]
    report = fsck(repo)
    assert report.ok and not report.warnings, [str(p) for p in report.problems + report.warnings]


def test_a_pending_pack_journal_is_applied_by_readers_and_recorded_by_the_next_writer(
    repo: Repository, monkeypatch: pytest.MonkeyPatch
) -> None:
    _turns(repo, 0, 40)

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # dies after Lance's commit, before the record is saved

    monkeypatch.setattr(pack, "_save", killed)
    with pytest.raises(KeyboardInterrupt):
        pack.pack(repo)
    monkeypatch.undo()
    assert (repo.path / "PACKING").exists() and not (repo.path / "packs.json").exists()
    assert len(repo.chunks.dataset().get_fragments()) < 4
    report = fsck(repo)  # the logical view applies the journal
    assert report.ok and not report.warnings, [str(p) for p in report.problems + report.warnings]
    with repo.writing():
        pass
    assert not (repo.path / "PACKING").exists() and (repo.path / "packs.json").exists()
    assert fsck(repo).ok


def test_old_versions_are_pruned_without_losing_a_data_file(repo: Repository) -> None:
    _turns(repo, 0, 40)
    files = set((repo.chunks.path / "data").iterdir())
    pack.pack(repo)
    deleted = pack.prune_versions(repo.chunks, grace=0)
    assert deleted > 30
    assert len(list((repo.chunks.path / "_versions").glob("*.manifest"))) == 1
    assert files <= set((repo.chunks.path / "data").iterdir())
    assert fsck(repo).ok
    _turns(repo, 40, 1)  # Lance still commits on top
    assert len(_visible(repo)) == 82


def test_maintenance_packs_and_folds_appended_rows_into_the_indexes(repo: Repository) -> None:
    from funes.retrieval import indexes

    _turns(repo, 0, 5)
    indexes.ensure(repo)  # the first recall builds the indexes over what exists
    _turns(repo, 5, 40)  # 80 rows appended since: searched flat until folded
    assert indexes.state(repo).unindexed_rows == 80 >= indexes.FOLD_AFTER
    hits = _hits(repo, "passage number 61")
    done = indexes.maintain(repo)
    assert done.packed is not None and done.packed.did_pack
    assert done.folded == 80 and indexes.state(repo).unindexed_rows == 0
    # the best hit stands (lower ranks may move: flat rows are scored with their own
    # statistics, indexed rows with the index's)
    assert _hits(repo, "passage number 61")[0] == hits[0]
    assert fsck(repo).ok
    again = indexes.maintain(repo)
    assert again.packed is None and again.folded == 0  # nothing due: nothing done


def test_a_pack_packed_again_is_deleted_once_readers_are_done_with_it(repo: Repository) -> None:
    _turns(repo, 0, 20)
    originals = set((repo.chunks.path / "data").iterdir())
    pack.pack(repo, force=True)
    first = set((repo.chunks.path / "data").iterdir()) - originals
    _turns(repo, 20, 30)  # more than the first pack: the next pack rewrites it too
    pack.pack(repo, force=True)
    record = json.loads((repo.path / "packs.json").read_text())["chunks"]
    assert {f"data/{p.name}" for p in first} == set(record["retired"])
    assert all(p.exists() for p in first)  # a reader that opened the old version may read them
    pack._drop_retired(repo.path, repo.chunks, grace=-1)
    assert not any(p.exists() for p in first)
    assert "retired" not in json.loads((repo.path / "packs.json").read_text())["chunks"]
    report = fsck(repo)
    assert report.ok and not report.warnings, [str(p) for p in report.problems + report.warnings]
    assert len(_visible(repo)) == 100


def test_the_vector_table_packs_too_and_vector_search_still_answers(repo: Repository) -> None:
    from funes.model.objects import ModelStamp
    from tests.builders import vector_table

    stamp = ModelStamp("m", "0" * 64, 4)
    for i in range(34):
        batch = make_batch(i * 2, 2, session=f"v{i}")
        vecs = [[1.0, float(i), float(j), 0.5] for j in range(2)]
        repo.commit_chunks(batch, f"turn {i}", model=stamp, vectors=vector_table(batch, vecs))
    before = repo.vectors.dataset().to_table(columns=["id", "vector"]).to_pylist()
    done = pack.pack(repo)
    assert done.packed == {"chunks": 34, "vectors16": 34}
    after = repo.vectors.dataset().to_table(columns=["id", "vector"]).to_pylist()
    assert sorted(map(str, after)) == sorted(map(str, before))
    found = repo.vectors.dataset().to_table(
        nearest={"column": "vector", "q": [1.0, 33.0, 1.0, 0.5], "k": 1}, columns=["id"])
    assert found.column("id")[0].as_py() == make_batch(67, 1, session="v33")[0].id
    report = fsck(repo)
    assert report.ok and not report.warnings, [str(p) for p in report.problems + report.warnings]
