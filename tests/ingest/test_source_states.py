"""Read positions, one row per source: older memories' `sources.json` moves in, damage heals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from funes import api
from funes.ingest.state import FileState, SourceStates, memory_states
from funes.storage.repo import Repository


def _transcript(path: Path, turns: int) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for t in range(turns):
            fh.write(json.dumps({
                "type": "user", "uuid": f"u-{path.stem}-{t}", "parentUuid": None,
                "sessionId": path.stem, "timestamp": f"2026-03-01T10:00:{t:02d}.000Z",
                "cwd": "/work", "message": {"role": "user", "content": f"turn {t} of {path.stem}"},
            }) + "\n")


def test_states_save_only_what_changed_and_read_back(tmp_path: Path) -> None:
    states = SourceStates(tmp_path / "sources.sqlite")
    assert states.get(tmp_path / "a") is None
    assert not (tmp_path / "sources.sqlite").exists()  # nothing saved, nothing created
    a = FileState("claude", 10, 10, 1, "f", {"turns": {"x": "y"}})
    states.put(tmp_path / "a", a)
    states.save()
    states.close()
    again = SourceStates(tmp_path / "sources.sqlite")
    assert again.get(tmp_path / "a") == a and again.get(tmp_path / "b") is None
    again.put(tmp_path / "b", FileState("codex", 1, 1, 1, "g"))
    again.save()
    assert again.get(tmp_path / "a") == a  # a save touches the rows put, not the others


def test_a_memory_indexed_by_an_older_funes_keeps_its_positions(
    tmp_path: Path, settings: Any
) -> None:
    repo = Repository.init(tmp_path / "m" / ".funes", settings)
    source = tmp_path / "s1.jsonl"
    _transcript(source, 3)
    first = api.index(settings, memory=str(repo.path), paths=[str(source)])
    assert first.added == 3
    # what a funes before the table wrote: one JSON file of every source
    states = memory_states(repo.path)
    kept = states.get(source)
    states.close()
    assert kept is not None
    for suffix in ("", "-wal", "-shm"):
        (repo.path / "index" / f"sources.sqlite{suffix}").unlink(missing_ok=True)
    legacy = repo.path / "index" / "sources.json"
    legacy.write_text(json.dumps({"format": 1, "files": {str(source): {
        "harness": kept.harness, "offset": kept.offset, "size": kept.size,
        "mtime_ns": kept.mtime_ns, "fingerprint": kept.fingerprint,
        "parser_state": kept.parser_state}}}))

    again = api.index(settings, memory=str(repo.path), paths=[str(source)])
    assert again.files_unchanged == 1 and again.added == 0  # the position was read from it
    _transcript(source, 2)  # the file grows: the next call reads only the new turns
    grown = api.index(settings, memory=str(repo.path), paths=[str(source)])
    assert grown.added == 2 and grown.files_reread == 0
    assert not legacy.exists()  # moved into the table at the first save
    assert memory_states(repo.path).get(source) is not None


def test_a_damaged_state_table_is_rebuilt_by_reading_again(tmp_path: Path, settings: Any) -> None:
    repo = Repository.init(tmp_path / "m" / ".funes", settings)
    source = tmp_path / "s1.jsonl"
    _transcript(source, 3)
    api.index(settings, memory=str(repo.path), paths=[str(source)])
    for suffix in ("-wal", "-shm"):
        (repo.path / "index" / f"sources.sqlite{suffix}").unlink(missing_ok=True)
    (repo.path / "index" / "sources.sqlite").write_bytes(b"not a database" * 100)
    again = api.index(settings, memory=str(repo.path), paths=[str(source)])
    assert again.errors == [] and again.added == 0 and again.chunks == 3  # read whole again
    assert memory_states(repo.path).get(source) is not None
