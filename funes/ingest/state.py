"""Where each transcript was read up to, so a new turn costs only the new turn.

Transcripts are append-only while an agent works. For each source file we remember the byte
offset just after the last complete line, the parser's resume state, and a fingerprint of the
bytes before the offset (the first and last 4 KiB of that prefix). Next time:

* same size and mtime → unchanged, nothing is read;
* grown, fingerprint matches → parse from the offset with the saved state;
* shorter than the offset, or fingerprint differs → the file was rewritten: re-read it whole
  (chunk ids make that idempotent: nothing already stored is stored twice).

The state is a cache: losing it costs a full re-read, never wrong data.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from funes.storage.atomic import write_atomic

_WINDOW = 4096
STATE_FORMAT = 1


@dataclass
class FileState:
    """How far one source was read."""

    harness: str
    offset: int
    size: int
    mtime_ns: int
    fingerprint: str
    parser_state: dict[str, Any] = field(default_factory=dict)


def fingerprint(path: Path, offset: int) -> str:
    """Hash the head and the tail of the first `offset` bytes of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        h.update(fh.read(min(_WINDOW, offset)))
        if offset > _WINDOW:
            fh.seek(max(_WINDOW, offset - _WINDOW))
            h.update(fh.read(offset - max(_WINDOW, offset - _WINDOW)))
    h.update(str(offset).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class Plan:
    """Where to resume one source, and why."""

    start: int
    state: dict[str, Any] | None
    reason: str  # "new", "grown", "unchanged", "rewritten"
    #: The file's size and mtime when planned: remembered with the result, so bytes that
    #: arrive while we parse are seen as growth next time rather than missed.
    size: int = 0
    mtime_ns: int = 0


def plan(path: Path, cursor: str, prev: FileState | None) -> Plan:
    """Decide how to read a source given what we remember of it."""
    st = path.stat()
    size, mtime = st.st_size, st.st_mtime_ns
    if prev is None:
        return Plan(0, None, "new", size, mtime)
    if cursor == "rowid":
        # SQLite (WAL): the main file's size and mtime can stay put while rows arrive, and the
        # parser reads only rows after the saved id, so asking is cheap.
        return Plan(prev.offset, prev.parser_state, "grown", size, mtime)
    if (size, mtime) == (prev.size, prev.mtime_ns):
        return Plan(prev.offset, prev.parser_state, "unchanged", size, mtime)
    if cursor == "rows":  # Parquet files are rewritten whole
        return Plan(0, None, "rewritten", size, mtime)
    if size < prev.offset or fingerprint(path, prev.offset) != prev.fingerprint:
        return Plan(0, None, "rewritten", size, mtime)
    return Plan(prev.offset, prev.parser_state, "grown", size, mtime)


def snapshot(
    path: Path, harness: str, cursor: str, planned: Plan, offset: int, parser_state: dict[str, Any]
) -> FileState:
    """What to remember after reading `path` up to `offset`."""
    fp = fingerprint(path, offset) if cursor == "bytes" else ""
    return FileState(harness, offset, planned.size, planned.mtime_ns, fp, parser_state)


class SourceStates:
    """The remembered state of every source, as one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files: dict[str, FileState] = {}
        try:
            data = json.loads(path.read_text("utf-8"))
        except (FileNotFoundError, ValueError, OSError):
            return
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            return
        for key, value in (data.get("files") or {}).items():
            try:
                self.files[key] = FileState(**value)
            except TypeError:
                continue

    def get(self, path: Path) -> FileState | None:
        """The state of a source, if remembered."""
        return self.files.get(os.fspath(path))

    def put(self, path: Path, state: FileState) -> None:
        """Remember a source's state (saved by `save`)."""
        self.files[os.fspath(path)] = state

    def save(self) -> None:
        """Write the states atomically."""
        # `vars`, not `asdict`: no deep copy of every parser state (a first run saves after
        # each batch, and `asdict` over 19,000 files made that a second each time).
        data = {"format": STATE_FORMAT, "files": {k: vars(v) for k, v in self.files.items()}}
        write_atomic(self.path, json.dumps(data, separators=(",", ":")).encode("utf-8"))
