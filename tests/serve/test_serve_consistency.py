"""Snapshots: a recall sees one state of the memory even while `funes index` commits."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.api import warm
from funes.errors import UsageError
from funes.model.chunk import Chunk
from funes.storage.repo import Repository
from funes.storage.snapshot import PinnedTable, Snapshot, snapshot
from tests.serve.helpers import child_env, funes_cmd, write_session

WORD = "lighthouse"


def _chunk(i: int, text: str) -> Chunk:
    return Chunk(text=text, harness="import", session_id="sess-late", turn_id=f"late-{i}",
                 seq=i, ts="2026-10-30T10:00:00Z", role="user", block_type="text",
                 block_idx=0, split_idx=0, workdir="/src/app", project=None)


def test_snapshot_pins_head_and_tables(memory: Repository, settings: Any) -> None:
    api.recall(settings, memory, "warm", vector=False)  # the search indexes exist (as usual)
    view = snapshot(memory)
    assert isinstance(view, Snapshot) and snapshot(view) is view
    rows, head = view.chunks.dataset().count_rows(), view.head()
    versions = view.versions
    memory.commit_chunks([_chunk(0, f"the {WORD} keeper logged a storm")], "late")
    assert memory.head() != head
    assert view.head() == head and view.versions == versions
    assert view.chunks.dataset().count_rows() == rows
    assert not api.recall(settings, view, WORD, vector=False).hits
    assert api.recall(settings, memory, WORD, vector=False).hits  # the live memory sees it
    with pytest.raises(UsageError, match="read-only"):
        view.commit_chunks([_chunk(1, "x")], "refused")


def test_a_table_created_after_the_snapshot_stays_invisible(tmp_path: Path,
                                                            settings: Any) -> None:
    repo = Repository.init(tmp_path / "fresh" / ".funes", settings)
    view = snapshot(repo)
    assert isinstance(view.vectors, PinnedTable) and not view.vectors.exists()
    assert view.versions["vectors"] is None and view.versions["chunks"] is not None


def _check_hits(result: Any, live: Repository, seen: set[str]) -> None:
    for hit in result.hits:
        row = hit.row
        turns = api.get(live, row["session_id"], row["turn_id"])  # every hit resolvable
        target = [t for t in turns if t.target]
        assert target and any(row["text"] in b.text for b in target[0].blocks)
        for n in hit.neighbors:
            assert n["session_id"] == row["session_id"]
        if WORD in row["text"]:
            seen.add(row["session_id"])


def test_recalls_during_concurrent_index_commits(memory: Repository, settings: Any,
                                                 start_server: Any, tmp_path: Path) -> None:
    server = start_server(memory)
    batches = 4
    sources = tmp_path / "late"
    sources.mkdir()
    errors: list[BaseException] = []
    seen: set[str] = set()
    done = threading.Event()
    counts = {"recalls": 0}

    def index_runs() -> None:
        try:
            for b in range(batches):
                path = write_session(sources / f"late-{b}.jsonl", f"late-{b}", "/src/app", [
                    ("user", f"Entry {b}: the {WORD} lamp needs a new mantle.",
                     f"2026-10-3{b % 2}T10:00:00Z"),
                    ("assistant", f"Logged {WORD} maintenance item {b} with the harbour office.",
                     f"2026-10-3{b % 2}T10:01:00Z"),
                ])
                done_run = subprocess.run(
                    funes_cmd("--memory", str(memory.path), "index", "--agent", "import",
                              str(path)),
                    capture_output=True, env=child_env(), timeout=120, check=False)
                assert done_run.returncode == 0, done_run.stderr
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def recalls() -> None:
        try:
            while not done.is_set():
                data = warm.request(settings, "recall", memory.path,
                                    {"query": f"{WORD} maintenance", "k": 8, "neighbors": 1})
                _check_hits(warm.decode_recall(data), memory, seen)
                counts["recalls"] += 1
        except BaseException as exc:
            errors.append(exc)

    writer = threading.Thread(target=index_runs)
    readers = [threading.Thread(target=recalls) for _ in range(3)]
    writer.start()
    for r in readers:
        r.start()
    writer.join(300)
    for r in readers:
        r.join(60)
    assert not errors, (errors, server.output())
    assert counts["recalls"] >= batches
    # After the last commit a recall sees every session the index runs added.
    final = warm.decode_recall(warm.request(settings, "recall", memory.path,
                                            {"query": f"{WORD} maintenance", "k": 20}))
    _check_hits(final, memory, seen)
    assert {f"late-{b}" for b in range(batches)} <= seen
    messages = [c.message for _, c in memory.walk()]
    assert messages[:batches] == ["index: import 1 sessions, 2 chunks"] * batches  # 4 commits
    assert server.status(settings).requests["recall"] == counts["recalls"] + 1
