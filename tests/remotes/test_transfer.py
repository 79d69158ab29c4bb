"""Storage-level transfer rules: fetch leaves the tables alone, merges are journaled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.model.refs import branch_ref
from funes.storage.repo import Repository
from funes.storage.transfer import MissingFragmentError
from funes.storage.transfer import merge as merge_into
from tests.builders import make_batch
from tests.remotes.conftest import visible


def _pair(tmp_path: Path, settings: Any) -> tuple[Repository, Repository]:
    a = Repository.init(tmp_path / "a" / ".funes", settings)
    a.commit_chunks(make_batch(0, 8), "index: a")
    api.remote_add(a, "origin", str(tmp_path / "remote"))
    api.push(a)
    b = Repository.init(tmp_path / "b" / ".funes", settings)
    b.commit_chunks(make_batch(100, 4, session="s2"), "index: b")
    api.remote_add(b, "origin", str(tmp_path / "remote"))
    return a, b


def test_fetch_stores_files_but_leaves_the_tables_alone(tmp_path: Path, settings: Any) -> None:
    a, b = _pair(tmp_path, settings)
    version = b.chunks.dataset().version
    fetched = api.fetch(b)
    assert fetched.objects == 2 and fetched.files == 1
    assert b.chunks.dataset().version == version and len(visible(b)) == 4
    assert b.refs.read("refs/remotes/origin/main") == a.head()  # type: ignore[arg-type]
    assert api.fsck(b).ok
    again = api.fetch(b)
    assert (again.objects, again.files, again.updated) == (0, 0, [])


def test_merge_killed_before_the_ref_moved_is_finished_by_the_next_writer(
    tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, b = _pair(tmp_path, settings)
    api.fetch(b)
    before = b.head()
    tip = b.refs.read("refs/remotes/origin/main")  # type: ignore[arg-type]
    assert tip is not None

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the process dies between the Lance append and the ref move

    monkeypatch.setattr(b.refs, "set_if_equals", killed)
    with pytest.raises(KeyboardInterrupt):
        merge_into(b, tip, label="origin/main")
    monkeypatch.undo()
    assert b.head() == before and (b.path / "PENDING").exists()

    b.commit_chunks([], "recover", allow_empty=False)  # any writer finishes the merge first
    head = b.head_commit()
    assert head is not None and len(head.parents) == 2 and not (b.path / "PENDING").exists()
    assert len(visible(b)) == 12 and head.chunk_count == 12
    assert b.refs.reflog(branch_ref("main"))[-1].message == "recover: merge origin/main into main"
    assert api.fsck(b).ok


def test_merge_needs_the_fetched_files(tmp_path: Path, settings: Any) -> None:
    _, b = _pair(tmp_path, settings)
    api.fetch(b)
    for data in (b.path / "chunks.lance" / "data").iterdir():
        if data.name not in {p.removeprefix("data/") for p in b.chunks.file_paths()}:
            data.unlink()
    with pytest.raises(MissingFragmentError) as missing:
        api.merge(b, "origin/main")
    assert "funes fetch" in (missing.value.hint or "")
    assert b.head_commit() is not None and len(visible(b)) == 4


def test_hub_remote_in_a_folder(hub: Any, tmp_path: Path) -> None:
    from funes._env import settings as load

    settings = load()
    a = Repository.init(tmp_path / "a" / ".funes", settings)
    a.commit_chunks(make_batch(0, 5), "index")
    api.remote_add(a, "origin", "hf://datasets/org/shared/memories/team")
    api.push(a)
    files = hub.files("org/shared")
    assert "memories/team/refs/heads/main" in files and "refs/heads/main" not in files
    assert any(p.startswith("memories/team/chunks.lance/data/") for p in files)
    clone = api.clone(settings, "hf://datasets/org/shared/memories/team", str(tmp_path / "c"))
    assert clone.chunks == 5
