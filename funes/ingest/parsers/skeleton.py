r"""The one skeleton every parser is: reading, bounding, noise, linking, resuming.

An agent's module says only what is its own: where its files live (``locate``), which files it
claims (``sniff``) and how one of its records becomes turns (``Parser.handle``). Everything a
parser of any agent must get right lives here once, so a new agent is a small module:

* **Reading.** :meth:`Parser.run` walks complete JSONL lines from a byte offset
  (:func:`~funes.ingest.parsers.base.iter_complete_lines`); :class:`SqliteParser` walks a
  database read-only by row id; a whole-file reader (a JSON session, a Parquet export) feeds its
  records to :meth:`Parser.feed`. Each record goes through one guard: bytes that are not JSON,
  JSON that is not an object and records whose shape defeats ``handle`` are skipped and counted
  (``invalid-json``, ``not-an-object``, ``malformed-record``), never fatal, and a record that
  fails half-way leaves no turn behind.
* **Bounding.** The maps kept across calls (tool names, tree links, seq counters) are bounded
  insertion-ordered maps (``bounded_put``), whole files are read up to a stated size
  (``read_json_file``), and SQLite is read in batches.
* **Noise.** Blocks are made by ``make_block``, which elides base64 payloads and drops empty
  text; agents tag scaffolding with the reasons of :mod:`funes.ingest.noise`.
* **Linking.** A turn's parent is given explicitly, or ``FOLLOW`` (the previous turn of the
  file, or of the session when ``chain = "session"``); tree formats resolve a parent id
  through records that became no turn (:meth:`Parser.link_record`).
* **Resuming.** Everything a later record needs lives in ``self.state`` (JSON, small), which the
  incremental indexer saves with the offset :meth:`run` returns; parsing a file whole or in
  pieces gives the same turns (tests/ingest/test_parsers.py checks it on every fixture).

The turns all parsers produce meet one contract, the turn record of docs/agents.md ("The turn
contract"), which is also what a ``.funes.jsonl`` file holds (funes.ingest.parsers.turnfile).
"""

from __future__ import annotations

import collections
import os
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final, Literal

from funes._env import Settings
from funes.ingest.parsers.base import (
    LINK_MAP_LIMIT,
    STATE_VERSION,
    TOOL_MAP_LIMIT,
    CursorKind,
    ParseError,
    ParseResult,
    ParserSpec,
    SniffFunc,
    as_str,
    bounded_put,
    connect_readonly,
    harness_name,
    iter_complete_lines,
    loads_line,
    norm_ts,
    state_int,
    state_map,
    type_label,
)
from funes.model.turns import Block, Source, Turn

__all__ = ["FOLLOW", "RECORD_ERRORS", "Parser", "Shape", "SqliteParser", "parser_spec"]

#: Exceptions a handler may raise on a record of unexpected shape; they skip the record.
RECORD_ERRORS = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


class _Follow:
    """The parent of a turn that follows the previous one (see :meth:`Parser.emit`)."""

    def __repr__(self) -> str:
        return "FOLLOW"


#: ``emit(parent=FOLLOW)``: the parent is the previous turn of the chain.
FOLLOW: Final = _Follow()

#: Sessions whose seq counters (and, with ``chain = "session"``, last turns) the state keeps.
_SESSIONS_KEPT = 64


class Parser:
    """Reads one agent's records into turns; subclasses say how a record maps to turns.

    Subclasses set ``harness``, implement :meth:`handle` and call :meth:`emit` for each turn
    and :meth:`skip` for each record they drop. ``chain`` says what ``FOLLOW`` links to: the
    previous turn of the file (``"file"``), of the same session (``"session"``), or nothing
    kept (None: the format gives every parent itself).
    """

    harness: ClassVar[str]
    chain: ClassVar[Literal["file", "session"] | None] = None
    #: A reader of files rewritten whole (``rows`` cursor) starts from no state on every read.
    rereads_whole: ClassVar[bool] = False
    #: A tree format whose files may repeat a record id (:meth:`node_turn` keeps turn ids
    #: unique by remembering the ids used, at the cost of a bounded map in the state).
    repeats_ids: ClassVar[bool] = False

    def __init__(self, path: Path, state: dict[str, Any] | None) -> None:
        self.path = path
        self.source_path = os.path.abspath(path)
        self.state: dict[str, Any] = dict(state) if state and not self.rereads_whole else {}
        self.state["parser"] = self.harness
        self.state["v"] = STATE_VERSION
        self.turns: list[Turn] = []
        self.skipped: collections.Counter[str] = collections.Counter()
        #: Where the record being handled is: (record index, first byte or row, end).
        self.at: tuple[int, int, int] = (0, 0, 0)
        self._project_cache: dict[str | None, str | None] = {}

    # -- reading -------------------------------------------------------------------------------

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Consume complete JSONL lines from ``start`` (with ``final``, a last unterminated one)."""
        end = start
        for line_start, line_end, line in iter_complete_lines(self.path, start, final):
            index = state_int(self.state, "n")
            self.state["n"] = index + 1
            end = line_end
            record = self.decode(line)
            if record is not None:
                self.at = (index, line_start, line_end)
                self.guard(self.handle, record, index, line_start, line_end)
        self.finish()
        return self.result(end)

    def decode(self, line: bytes) -> dict[str, Any] | None:
        """One line as a JSON object, or None with the reason counted."""
        if not line.strip():
            self.skip("blank-line")
            return None
        try:
            record = loads_line(line)
        except (ValueError, RecursionError):
            self.skip("invalid-json")
            return None
        if not isinstance(record, dict):
            self.skip("not-an-object")
            return None
        return record

    def feed(self, records: Iterable[tuple[int, int, int, object]]) -> None:
        """Handle ``(index, start, end, record)`` items that came whole (JSON sessions, rows)."""
        for index, start, end, raw in records:
            if not isinstance(raw, dict):
                self.skip("not-an-object")
                continue
            self.at = (index, start, end)
            self.guard(self.handle, raw, index, start, end)

    def guard(self, handler: Callable[..., None], *args: Any) -> None:
        """Run a record handler; a record of unexpected shape is skipped and leaves no turn."""
        before = len(self.turns)
        try:
            handler(*args)
        except RECORD_ERRORS:
            del self.turns[before:]
            self.skip("malformed-record")

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """Turn one decoded record into zero or more turns (or a skip)."""
        raise NotImplementedError

    def finish(self) -> None:
        """Hook run after the last record of a call (nothing by default)."""

    def result(self, end: int) -> ParseResult:
        """What this call produced, resuming at ``end``."""
        return ParseResult(self.turns, self.skipped, end, self.state)

    # -- sessions, times, projects -------------------------------------------------------------

    def default_session(self) -> str:
        """The session id when the records name none: the file's own name by default."""
        return self.path.stem

    def session(self) -> str:
        """The file's session id, fixed by the first record that gives one (or the default)."""
        session = as_str(self.state.get("session"))
        if not session:
            session = self.default_session()
            self.state["session"] = session
        return session

    def workdir(self) -> str | None:
        """The working directory of the file's session, as its records gave it (``cwd``)."""
        return as_str(self.state.get("cwd"))

    def skip(self, reason: str) -> None:
        """Count a record that produced no turn."""
        self.skipped[reason] += 1

    def kind(self, record: dict[str, Any], key: str = "type") -> str | None:
        """The record's type, or None with the skip counted (``missing-field``, ``unknown-type``).

        A record without a usable type is still a node of a tree format: it is linked.
        """
        kind = record.get(key)
        if isinstance(kind, str):
            return kind
        self.link_record(record)
        self.skip("missing-field" if kind is None else f"unknown-type:{type_label(kind)}")
        return None

    def next_seq(self, session_id: str) -> int:
        """The next seq of a session (order of its turns in this file)."""
        seqs = state_map(self.state, "seq")
        value = seqs.get(session_id)
        seq = value if isinstance(value, int) and not isinstance(value, bool) else 0
        bounded_put(seqs, session_id, seq + 1, _SESSIONS_KEPT)
        return seq

    def ts(self, value: object) -> str:
        """Normalise a timestamp, carrying the last good one forward when a record has none.

        Records without a usable time (legacy Codex items, trimmed fixtures) inherit the time
        of the record before them, which keeps recency ordering sensible; "" before any.
        """
        norm = norm_ts(value)
        if norm is not None:
            self.state["ts"] = norm
            return norm
        last = self.state.get("ts")
        return last if isinstance(last, str) else ""

    def project(self, workdir: str | None) -> str | None:
        """The project identity of a working directory (cached per call)."""
        if workdir not in self._project_cache:
            from funes.ingest.project import project_identity

            self._project_cache[workdir] = project_identity(workdir)
        return self._project_cache[workdir]

    # -- linking -------------------------------------------------------------------------------

    def resolve_parent(self, parent_id: object) -> str | None:
        """The turn a ``parentId`` means, looking through records that carried no turn.

        Formats whose records form a chain or tree (pi, Copilot CLI) link metadata records too;
        a turn's parent is the nearest ancestor that became a turn (see :meth:`link_record`).
        """
        pid = as_str(parent_id)
        if not pid:
            return None
        links = state_map(self.state, "links")
        if pid in links:
            target = links[pid]
            return target if isinstance(target, str) else None
        return pid

    def link_record(self, record: dict[str, Any]) -> None:
        """Remember that a record (``id``/``parentId``) that became no turn leads to its parent."""
        entry_id = as_str(record.get("id"))
        if entry_id:
            links = state_map(self.state, "links")
            if entry_id not in links:
                bounded_put(links, entry_id, self.resolve_parent(record.get("parentId")),
                            LINK_MAP_LIMIT)

    def remember_tool(self, call_id: str | None, name: str | None) -> None:
        """Remember a tool call's name so its result can be labelled with it."""
        if call_id and name:
            bounded_put(state_map(self.state, "tools"), call_id, name, TOOL_MAP_LIMIT)

    def tool_name_for(self, call_id: str | None) -> str | None:
        """The name of the tool a result answers, if its call was seen."""
        if not call_id:
            return None
        name = state_map(self.state, "tools").get(call_id)
        return name if isinstance(name, str) else None

    def _followed(self, session_id: str) -> str | None:
        if self.chain == "file":
            last = self.state.get("last_turn")
        else:
            last = state_map(self.state, "last").get(session_id)
        return last if isinstance(last, str) else None

    def _chained(self, session_id: str, turn_id: str) -> None:
        if self.chain == "file":
            self.state["last_turn"] = turn_id
        elif self.chain == "session":
            bounded_put(state_map(self.state, "last"), session_id, turn_id, _SESSIONS_KEPT)

    # -- emitting ------------------------------------------------------------------------------

    def emit(
        self,
        *,
        session_id: str,
        turn_id: str,
        ts: str,
        role: str,
        blocks: Iterable[Block | None],
        start: int,
        end: int,
        parent: str | _Follow | None = None,
        workdir: str | None = None,
        parent_session_id: str | None = None,
        extra: dict[str, str] | None = None,
        seq: int | None = None,
        source: Source | None = None,
    ) -> Turn | None:
        """Append a turn (None, and an ``empty`` skip, when no block is left).

        ``parent=FOLLOW`` links to the previous turn of the chain (see the class docstring);
        every emitted turn becomes the chain's last one. ``source`` defaults to the byte (or
        row) range ``start``..``end`` of this file.
        """
        kept = tuple(b for b in blocks if b is not None)
        if not kept:
            self.skip("empty")
            return None
        parent_turn_id = self._followed(session_id) if isinstance(parent, _Follow) else parent
        if parent_turn_id == turn_id:
            parent_turn_id = None  # trimmed transcripts reuse one id: never a self-loop
        turn = Turn(
            harness=harness_name(self.harness),
            session_id=session_id,
            turn_id=turn_id,
            seq=self.next_seq(session_id) if seq is None else seq,
            ts=ts,
            role=role,
            blocks=kept,
            parent_turn_id=parent_turn_id,
            workdir=workdir,
            project=self.project(workdir),
            source=source or Source(self.source_path, start, end),
            parent_session_id=parent_session_id,
            extra=dict(extra or {}),
        )
        self.turns.append(turn)
        self._chained(session_id, turn_id)
        return turn


    def turn(
        self,
        role: str,
        blocks: Iterable[Block | None],
        *,
        ts: object,
        turn_id: str | None = None,
        parent: str | _Follow | None = FOLLOW,
        extra: dict[str, str] | None = None,
        at: tuple[int, int, int] | None = None,
    ) -> Turn | None:
        """Emit a turn of the file's session for the record at ``at`` (default: the current one).

        What most agents need: the record's own id, else ``<session>#<record index>``; its
        time normalised (carried forward when it has none); the working directory and parent
        session the state holds (``cwd``, ``parent_session``).
        """
        index, start, end = at or self.at
        session = self.session()
        return self.emit(
            session_id=session,
            turn_id=turn_id or f"{session}#{index}",
            ts=self.ts(ts),
            role=role,
            blocks=blocks,
            start=start,
            end=end,
            parent=parent,
            workdir=self.workdir(),
            parent_session_id=as_str(self.state.get("parent_session")),
            extra=extra,
        )


    def node_turn(
        self,
        record: dict[str, Any],
        role: str,
        blocks: Iterable[Block | None],
        *,
        ts: object,
        extra: dict[str, str] | None = None,
    ) -> Turn | None:
        """Emit the turn of a record of a tree format (``id``, ``parentId``: pi, Copilot CLI).

        The turn id is the record's ``id`` (``<session>#<record index>`` when it has none, or,
        with ``repeats_ids``, when that id was already a turn); the parent is its
        ``parentId`` resolved through records that became no turn, else the previous turn. A
        record that becomes no turn is remembered as a link.
        """
        node_id = as_str(record.get("id"))
        seen = state_map(self.state, "ids") if self.repeats_ids else {}
        fresh = node_id if node_id and node_id not in seen else None
        linked = node_id or "parentId" in record
        turn = self.turn(role, blocks, ts=ts, turn_id=fresh, extra=extra,
                         parent=self.resolve_parent(record.get("parentId")) if linked else FOLLOW)
        if turn is None:
            self.link_record(record)
        elif node_id and self.repeats_ids:
            bounded_put(seen, node_id, 1, LINK_MAP_LIMIT)
        return turn


class SqliteParser(Parser):
    """An agent's SQLite store, read read-only and WAL-safe, resumed by row id.

    ``start``/``end`` offsets are the last row id read; :meth:`read` reads rows after it in
    batches and returns the last one read. A database that is not the agent's (its tables
    are missing) is a :class:`ParseError`, and so is any SQLite failure.
    """

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Read every row after ``start``."""
        self.state["db"] = True
        conn = connect_readonly(self.path)
        try:
            last = self.read(conn, start)
        except sqlite3.Error as exc:
            raise ParseError(f"cannot read {self.path}: {exc}") from exc
        finally:
            conn.close()
        self.state["last_id"] = last
        return self.result(last)

    def read(self, conn: sqlite3.Connection, start: int) -> int:
        """Emit the turns of rows after ``start``; the last row id read."""
        raise NotImplementedError


@dataclass(frozen=True)
class Shape:
    """One on-disk form of an agent's sessions: which files have it and who reads them."""

    reader: type[Parser]
    #: Whether a file has this form (the last shape of a spec takes whatever is left).
    claims: Callable[[Path], bool] = lambda _path: True
    #: How offsets count in it (funes.ingest.parsers.base, "cursor kinds").
    cursor: CursorKind = "bytes"


def parser_spec(
    harness: str,
    sniff: SniffFunc,
    *shapes: Shape,
    priority: int = 100,
    locate: Callable[[Settings], list[Path]] | None = None,
) -> ParserSpec:
    """The registry entry of an agent: its shapes (first claimer reads), sniffer and files."""

    def pick(path: Path) -> Shape:
        return next((s for s in shapes if s.claims(path)), shapes[-1])

    def parse(path: Path, start: int, state: dict[str, Any] | None, final: bool) -> ParseResult:
        return pick(path).reader(path, state).run(start, final)

    def cursor(path: Path) -> CursorKind:
        return pick(path).cursor

    return ParserSpec(harness, parse, sniff, priority=priority, cursor=cursor, locate=locate)
