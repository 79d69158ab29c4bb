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
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


#: Largest legacy `sources.json` read back (input from disk: bounded; a bigger one is ignored,
#: which costs a re-read of the sources, never wrong data).
_LEGACY_MAX_BYTES = 256 << 20


def _state_dict(state: FileState) -> dict[str, Any]:
    # built by hand: dataclasses.asdict deep-copies the parser state, which cost more than
    # the rest of a hook's call once a memory had a few thousand sources
    return {"harness": state.harness, "offset": state.offset, "size": state.size,
            "mtime_ns": state.mtime_ns, "fingerprint": state.fingerprint,
            "parser_state": state.parser_state}


def _from_dict(value: Any) -> FileState | None:
    try:
        return FileState(**value) if isinstance(value, dict) else None
    except TypeError:
        return None


class SourceStates:
    """The remembered state of every source: one row per source file in a SQLite table.

    A hook's call reads and writes the rows of the one or two transcripts it indexes, never
    the whole table: the state of every source as one JSON file, rewritten on every call,
    made the 3,000th call of a memory pay for its 3,000 transcripts (bench/results/life.md).
    `path` is the database (`index/sources.sqlite`, or `state/sources.sqlite` under
    `$FUNES_HOME` for routed runs). A `sources.json` beside it (what funes wrote before) is
    read until the next save, which moves it into the table and deletes it.

    Each `save` is one transaction, so a run killed at any point leaves the rows of the last
    save. It is a cache: deleting the database costs a full re-read, never wrong data.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.legacy = path.with_suffix(".json")
        #: States not saved yet, and legacy ones to move into the table at the next save.
        self._dirty: dict[str, FileState] = {}
        self._imported: dict[str, FileState] = self._read_legacy()
        self._db: sqlite3.Connection | None = None
        #: Every saved row as its JSON text, once `preload` ran (None: asked row by row).
        self._rows: dict[str, str] | None = None

    def _read_legacy(self) -> dict[str, FileState]:
        try:
            if self.legacy.stat().st_size > _LEGACY_MAX_BYTES:
                return {}
            data = json.loads(self.legacy.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != STATE_FORMAT:
            return {}
        files = data.get("files")
        out = {}
        for key, value in (files.items() if isinstance(files, dict) else ()):
            state = _from_dict(value)
            if state is not None:
                out[str(key)] = state
        return out

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        if not create and not self.path.exists():
            return None
        try:
            self._db = self._open()
        except sqlite3.DatabaseError:  # damaged: it is only a cache
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None, timeout=10.0)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS sources "
                       "(path TEXT PRIMARY KEY, state TEXT NOT NULL)")
            db.execute("SELECT 1 FROM sources LIMIT 1").fetchone()  # unreadable: damaged
        except BaseException:
            db.close()
            raise
        return db

    def preload(self) -> None:
        """Read every saved row in one query, for a run that asks about most of them.

        A run over a whole history (`funes add` on an indexed memory: 19,000 unchanged
        sessions) asked one query per file, a third of its time; a hook's run asks about one
        or two files and keeps querying them alone.
        """
        db = self._connect(create=False)
        self._rows = dict(db.execute("SELECT path, state FROM sources").fetchall()) if db else {}

    def get(self, path: Path) -> FileState | None:
        """The state of a source, if remembered."""
        key = os.fspath(path)
        if key in self._dirty:
            return self._dirty[key]
        if key in self._imported:
            return self._imported[key]
        if self._rows is not None:
            text = self._rows.get(key)
        else:
            db = self._connect(create=False)
            if db is None:
                return None
            row = db.execute("SELECT state FROM sources WHERE path = ?", (key,)).fetchone()
            text = row[0] if row is not None else None
        if text is None:
            return None
        try:
            return _from_dict(json.loads(text))
        except ValueError:
            return None

    def put(self, path: Path, state: FileState) -> None:
        """Remember a source's state (saved by `save`)."""
        self._dirty[os.fspath(path)] = state

    def save(self) -> None:
        """Write the states put since the last save, in one transaction."""
        if not self._dirty and not self._imported:
            return
        rows = {**self._imported, **self._dirty}
        db = self._connect(create=True)
        assert db is not None
        texts = {k: json.dumps(_state_dict(v), separators=(",", ":")) for k, v in rows.items()}
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("INSERT OR REPLACE INTO sources VALUES (?, ?)", texts.items())
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if self._rows is not None:
            self._rows.update(texts)
        if self._imported:
            self.legacy.unlink(missing_ok=True)
            self._imported = {}
        self._dirty = {}

    def close(self) -> None:
        """Close the database (also done when the object is collected)."""
        if self._db is not None:
            self._db.close()
            self._db = None


def memory_states(repo_path: Path) -> SourceStates:
    """The read positions of sources indexed into one memory (`funes index PATH`, a bound hook)."""
    return SourceStates(repo_path / "index" / "sources.sqlite")


def routed_states(home: Path) -> SourceStates:
    """The read positions of sources routed to their memories (a bare `funes index`, hooks)."""
    return SourceStates(home / "state" / "sources.sqlite")
