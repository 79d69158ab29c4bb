r"""The incremental, resumable parser contract and the helpers every parser shares.

Transcripts are append-only files that grow while an agent works, and funes indexes them
turn by turn from hooks. So a parser never reads a whole file when it does not have to: it
starts at a byte offset with the JSON state it saved last time, consumes complete lines only,
and hands back the offset just after the last complete line plus its new state. The contract
the incremental indexer relies on, and that the tests check on every real fixture:

* **Resumable.** Parsing a file in one go yields exactly the same turns (and skip counts) as
  parsing it in any number of pieces split at line boundaries, with the state passed through
  ``json.loads(json.dumps(state))`` between pieces. Everything a later line needs to know about
  earlier lines (session id, working directory, seq counters, tool-call names, parent links)
  lives in that state, bounded so it stays small.
* **Deterministic.** Turn ids, seq and session ids are functions of the file's content: the
  transcript's own ids where it has them, otherwise ``<session id>#<record index>``.
* **Never fatal on content.** Bytes that are not JSON, JSON that is not an object, records of
  unknown or drifting shape are skipped and counted by reason in ``ParseResult.skipped``; only
  an unreadable file raises (a :class:`~funes.errors.FunesError`).
* **Incomplete tail.** A trailing line without ``\n`` is still being written: it is not
  consumed and ``end_offset`` stops before it.

SQLite and Parquet sources have no byte-addressable records; for them the offsets are row
cursors (see :func:`cursor_kind`).

Skip reasons used across parsers: ``blank-line``, ``invalid-json``, ``not-an-object``,
``missing-field`` (a known record without the field it needs, or with the wrong JSON type),
``unknown-type:<t>`` (a record type this parser does not know: format drift),
``ignored:<t>`` (a known record type that carries no conversation, such as metadata),
``empty`` (a conversation record with no content left), ``duplicate`` (the same message
written twice by the agent) and ``malformed-record`` (a record whose shape defeated the parser;
pinned to zero on every real fixture).
"""

from __future__ import annotations

import collections
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

from funes.errors import FunesError, UsageError
from funes.model.turns import HARNESSES, Block, BlockType, Harness, Source, Turn

#: Version of the state layout; bumped when a parser's state changes incompatibly.
STATE_VERSION = 1

#: Bounds on the maps a parser keeps in its state. Tool results almost always follow their
#: call within a few records, and parent links point a few records back, so small windows
#: lose nothing in practice while keeping the saved state a few kilobytes.
TOOL_MAP_LIMIT = 512
LINK_MAP_LIMIT = 1024

_TYPE_LABEL_MAX = 64

CursorKind = Literal["bytes", "rowid", "rows"]


class ParseError(FunesError):
    """A source could not be read at all (missing, unreadable, not the format it claims)."""


class UnknownHarnessError(UsageError):
    """No parser is registered for the harness name, or none could be sniffed."""


class SourceTruncatedError(FunesError):
    """The file is shorter than the offset we resumed from: it was rewritten, not appended."""


@dataclass
class ParseResult:
    """What one parse call produced, and where the next call resumes.

    Attributes:
        turns: Turns completed in the bytes (or rows) consumed, in file order.
        skipped: Records not turned into turns, by reason (see the module docstring).
        end_offset: Byte offset just after the last complete line consumed (for SQLite
            sources the last message id read, for Parquet the next row index).
        state: JSON-serialisable parser state to pass back with ``end_offset``.
    """

    turns: list[Turn]
    skipped: collections.Counter[str]
    end_offset: int
    state: dict[str, Any]


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------

def _bytes_cursor(_path: Path) -> CursorKind:
    return "bytes"


#: A parser: (path, start offset, state or None, final) -> ParseResult.
ParseFunc = Callable[[Path, int, "dict[str, Any] | None", bool], ParseResult]
#: A sniffer: (path, first complete lines decoded, or None for non-JSONL) -> True if it claims it.
SniffFunc = Callable[[Path, "list[Any] | None"], bool]


@dataclass(frozen=True)
class ParserSpec:
    """One registered harness parser."""

    harness: str
    parse: ParseFunc
    sniff: SniffFunc
    #: Sniffing order: lower runs first (more specific formats first).
    priority: int = 100
    #: How this parser interprets offsets for a given path.
    cursor: Callable[[Path], CursorKind] = field(default=lambda _path: _bytes_cursor(_path))


# --------------------------------------------------------------------------------------------
# Sniffing helpers (dispatch itself lives in funes.ingest.parsers.registry)
# --------------------------------------------------------------------------------------------

_SNIFF_BYTES = 1 << 20
_SNIFF_LINES = 25


def read_head_records(path: Path, max_lines: int = _SNIFF_LINES) -> list[Any] | None:
    """Decode the first complete JSON lines of a file; None if it does not look like JSONL."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return None
    if head.startswith((b"SQLite format 3\x00", b"PAR1")):
        return None
    records: list[Any] = []
    for raw in head.split(b"\n")[:-1][: max_lines * 4]:
        if not raw.strip():
            continue
        try:
            records.append(loads_line(raw))
        except (ValueError, RecursionError):
            continue
        if len(records) >= max_lines:
            break
    return records


# --------------------------------------------------------------------------------------------
# Reading lines
# --------------------------------------------------------------------------------------------


def loads_line(line: bytes) -> Any:
    """One JSONL record; bytes that are not UTF-8 become U+FFFD instead of losing the turn.

    A tool's binary output pasted into a transcript, or a log in another encoding, should
    cost a few characters, not the whole turn.
    """
    try:
        return json.loads(line)
    except UnicodeDecodeError:
        return json.loads(line.decode("utf-8", "replace"))


def iter_complete_lines(
    path: Path, start: int, final: bool = False
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(start, end, line)`` for each complete (newline-terminated) line from ``start``.

    With ``final``, a last line without a newline counts as complete.

    Raises:
        ParseError: The file cannot be opened.
        SourceTruncatedError: ``start`` lies beyond the end of the file.
    """
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed in the finally below
    except OSError as exc:
        raise ParseError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        size = os.fstat(f.fileno()).st_size
        if start > size:
            raise SourceTruncatedError(
                f"{path} is {size} bytes but was read up to {start}: it was rewritten",
                hint="re-read it from offset 0",
            )
        f.seek(start)
        pos = start
        for line in f:
            if not line.endswith(b"\n") and not final:
                return
            end = pos + len(line)
            yield pos, end, line
            pos = end
    finally:
        f.close()


# --------------------------------------------------------------------------------------------
# Small value helpers (parsers read untrusted JSON: nothing is assumed about types)
# --------------------------------------------------------------------------------------------


def as_str(value: object) -> str | None:
    """``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


def as_dict(value: object) -> dict[str, Any] | None:
    """``value`` if it is a JSON object, else None."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def as_list(value: object) -> list[Any] | None:
    """``value`` if it is a JSON array, else None."""
    return value if isinstance(value, list) else None


def type_label(value: object) -> str:
    """A short, safe label for a record type taken from untrusted data (for skip reasons)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:_TYPE_LABEL_MAX]


def render_json(value: object) -> str:
    """Render a tool call's input as JSON text, in the transcript's own key order.

    Key order comes from the file, so the rendering is deterministic without sorting, and
    reads the way the agent wrote it. Strings stay strings (a raw patch is not re-quoted).
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def norm_ts(value: object) -> str | None:
    """Normalise a timestamp to UTC ISO-8601 with milliseconds, e.g. ``2026-05-11T11:26:55.123Z``.

    Accepts ISO strings (``Z``, offsets, or naive — read as UTC because the transcript does not
    say otherwise), epoch numbers in seconds, milliseconds or microseconds, and datetimes.

    Returns:
        The normalised string, or None when the value is not a usable timestamp.
    """
    if isinstance(value, bool):
        return None
    try:
        if isinstance(value, datetime):  # Parquet timestamp columns
            dt = value if value.tzinfo else value.replace(tzinfo=UTC)
            dt = dt.astimezone(UTC)
        elif isinstance(value, int | float):
            x = float(value)
            if not math.isfinite(x):
                return None
            if abs(x) >= 1e14:
                x /= 1e6
            elif abs(x) >= 1e11:
                x /= 1e3
            dt = datetime.fromtimestamp(x, tz=UTC)
        elif isinstance(value, str):
            s = value.strip()
            if not s or len(s) > 64:
                return None
            try:
                dt = datetime.fromisoformat(s)
            except ValueError:
                try:
                    return norm_ts(float(s))
                except ValueError:
                    return None
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=UTC)
            dt = dt.astimezone(UTC)
        else:
            return None
    except (OverflowError, OSError, ValueError):
        return None
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
        f"{dt.second:02d}.{dt.microsecond // 1000:03d}Z"
    )


def bounded_put(mapping: dict[str, Any], key: str, value: Any, limit: int) -> None:
    """Insert into an insertion-ordered map, evicting the oldest entries beyond ``limit``.

    Dicts keep insertion order through a JSON round trip, so eviction is the same whether a
    file is parsed whole or in pieces.
    """
    mapping.pop(key, None)
    mapping[key] = value
    while len(mapping) > limit:
        del mapping[next(iter(mapping))]


def state_map(state: dict[str, Any], key: str) -> dict[str, Any]:
    """The sub-map ``state[key]``, created if missing or of the wrong type."""
    value = state.get(key)
    if not isinstance(value, dict):
        value = {}
        state[key] = value
    return value


def state_int(state: dict[str, Any], key: str, default: int = 0) -> int:
    """``state[key]`` as an int (tolerating a state that was tampered with)."""
    value = state.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def harness_literal(name: str) -> Harness:
    """Narrow a harness name to the model's literal type."""
    if name not in HARNESSES:
        raise UnknownHarnessError(f"unknown harness {name!r}")
    return cast(Harness, name)


def make_block(
    type_: BlockType,
    text: str,
    *,
    tool_name: str | None = None,
    tool_call_id: str | None = None,
    noise: str | None = None,
) -> Block | None:
    r"""Build a block, eliding base64 payloads; None when no text is left.

    Whitespace-only text is dropped (agents write ``"\n\n"`` placeholders), but the kept text
    is verbatim: the chunker owns any further normalisation.
    """
    from funes.ingest.noise import elide_base64

    if not text or not text.strip():
        return None
    return Block(
        type=type_,
        text=elide_base64(text),
        tool_name=tool_name,
        tool_call_id=tool_call_id,
        noise=noise,
    )


# --------------------------------------------------------------------------------------------
# The line-oriented parser skeleton
# --------------------------------------------------------------------------------------------

#: Exceptions a handler may raise on a record of unexpected shape; they skip the record.
RECORD_ERRORS = (TypeError, ValueError, KeyError, AttributeError, IndexError, RecursionError)


class LineParser:
    """Reads complete JSONL lines from an offset and hands each decoded object to :meth:`handle`.

    Subclasses keep everything they need across calls in ``self.state`` (a JSON-able dict)
    and call :meth:`emit` for each turn and :meth:`skip` for each record they drop.
    """

    harness: ClassVar[str]

    def __init__(self, path: Path, state: dict[str, Any] | None) -> None:
        self.path = path
        self.source_path = os.path.abspath(path)
        self.state: dict[str, Any] = dict(state) if state else {}
        self.state["parser"] = self.harness
        self.state["v"] = STATE_VERSION
        self.turns: list[Turn] = []
        self.skipped: collections.Counter[str] = collections.Counter()
        self._project_cache: dict[str | None, str | None] = {}

    # -- the loop ------------------------------------------------------------------------------

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Consume complete lines from ``start`` and return the result."""
        end = start
        for line_start, line_end, line in iter_complete_lines(self.path, start, final):
            index = state_int(self.state, "n")
            self.state["n"] = index + 1
            end = line_end
            if not line.strip():
                self.skip("blank-line")
                continue
            try:
                record = loads_line(line)
            except (ValueError, RecursionError):
                self.skip("invalid-json")
                continue
            if not isinstance(record, dict):
                self.skip("not-an-object")
                continue
            before = len(self.turns)
            try:
                self.handle(record, index, line_start, line_end)
            except RECORD_ERRORS:
                del self.turns[before:]
                self.skip("malformed-record")
        self.finish()
        return ParseResult(self.turns, self.skipped, end, self.state)

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """Turn one decoded record into zero or more turns (or a skip)."""
        raise NotImplementedError

    def finish(self) -> None:
        """Hook run after the last line of a call (nothing by default)."""

    # -- helpers for subclasses ---------------------------------------------------------------

    def skip(self, reason: str) -> None:
        """Count a record that produced no turn."""
        self.skipped[reason] += 1

    def source(self, start: int, end: int) -> Source:
        """Provenance of a record range in this file."""
        return Source(self.source_path, start, end)

    def next_seq(self, session_id: str) -> int:
        """The next seq of a session (order of its turns in this file)."""
        seqs = state_map(self.state, "seq")
        value = seqs.get(session_id)
        seq = value if isinstance(value, int) and not isinstance(value, bool) else 0
        bounded_put(seqs, session_id, seq + 1, 64)
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

    def emit(
        self,
        *,
        session_id: str,
        turn_id: str,
        ts: str,
        role: str,
        blocks: list[Block],
        start: int,
        end: int,
        parent_turn_id: str | None = None,
        workdir: str | None = None,
        parent_session_id: str | None = None,
        extra: dict[str, str] | None = None,
        seq: int | None = None,
    ) -> Turn | None:
        """Append a turn (None and an ``empty`` skip when it has no blocks)."""
        if not blocks:
            self.skip("empty")
            return None
        if parent_turn_id == turn_id:
            parent_turn_id = None  # trimmed transcripts reuse one id: never a self-loop
        turn = Turn(
            harness=harness_literal(self.harness),
            session_id=session_id,
            turn_id=turn_id,
            seq=self.next_seq(session_id) if seq is None else seq,
            ts=ts,
            role=role,
            blocks=tuple(blocks),
            parent_turn_id=parent_turn_id,
            workdir=workdir,
            project=self.project(workdir),
            source=self.source(start, end),
            parent_session_id=parent_session_id,
            extra=dict(extra or {}),
        )
        self.turns.append(turn)
        return turn
