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
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from funes.errors import FunesError, UsageError
from funes.model.turns import Block, BlockType, Turn, is_harness

if TYPE_CHECKING:
    from funes._env import Settings

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
    #: Where the agent keeps its sessions: every file to index, given the user's settings
    #: (None for a format that is only ever named, like the generic import).
    locate: Callable[[Settings], list[Path]] | None = None


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


def harness_name(name: str) -> str:
    """A harness name as turns carry it (lowercase ``[a-z0-9_-]``, see funes.model.turns)."""
    if not is_harness(name):
        raise UnknownHarnessError(f"invalid harness name {name[:40]!r}")
    return name


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
# Files: finding them, bounding them, opening databases read-only
# --------------------------------------------------------------------------------------------

_HIDDEN_RE = re.compile(r"^\.")
_UUID_RE = re.compile(
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", re.IGNORECASE
)
_SQLITE_MAGIC = b"SQLite format 3\x00"


def walk_files(root: Path) -> Iterator[Path]:
    """Regular files under ``root`` in sorted order, not following symlinked directories.

    Hidden directories are not entered; two runs over the same tree list the same files in
    the same order: top-down, a directory's files (by name) before its subdirectories (by
    name). `os.scandir` rather than `os.walk` and a stat per file: the entry types come with
    the listing, which made listing 19,000 sessions twice as cheap (a `funes add` on an
    indexed memory lists them all; bench/results/day0.md).
    """
    if root.is_dir():
        yield from _walk_dir(str(root))


def _walk_dir(top: str) -> Iterator[Path]:
    try:
        with os.scandir(top) as listing:
            entries = list(listing)
    except OSError:
        return
    files, dirs = [], []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                if not _HIDDEN_RE.match(entry.name):
                    dirs.append(entry.name)
            elif entry.is_file():
                files.append(entry.name)
        except OSError:
            continue
    base = Path(top)
    for name in sorted(files):
        yield base / name
    for name in sorted(dirs):
        yield from _walk_dir(os.path.join(top, name))


def uuid_in_name(path: Path) -> str:
    """The last UUID in a file's name (lowercased), else its stem: a session id agents use."""
    matches = _UUID_RE.findall(path.stem)
    return matches[-1].lower() if matches else path.stem


def has_magic(path: Path, magic: bytes) -> bool:
    """True if the file starts with ``magic`` (False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def is_sqlite(path: Path) -> bool:
    """True if the file starts with SQLite's magic header."""
    return has_magic(path, _SQLITE_MAGIC)


def read_json_file(path: Path, limit: int) -> tuple[Any, str | None]:
    """A whole JSON file of at most ``limit`` bytes: ``(value, None)``, or ``(None, reason)``.

    The reason is a skip reason: ``too-large``, ``unreadable`` or ``invalid-json``. Bytes
    that are not UTF-8 become U+FFFD (see :func:`loads_line`).
    """
    try:
        if path.stat().st_size > limit:
            return None, "too-large"
        data = path.read_bytes()
    except OSError:
        return None, "unreadable"
    try:
        return loads_line(data), None
    except (ValueError, RecursionError):
        return None, "invalid-json"


def connect_readonly(db: Path, attempts: int = 3) -> sqlite3.Connection:
    """Open a SQLite database read-only through a URI (WAL-safe; never creates or writes it).

    A reader can briefly see ``disk I/O error`` while a WAL writer checkpoints; a few short
    retries ride that out.

    Raises:
        ParseError: The database cannot be opened.
    """
    uri = "file:" + urllib.parse.quote(os.path.abspath(db)) + "?mode=ro"
    last: sqlite3.Error | None = None
    for attempt in range(attempts):
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=5.0)
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.Error as exc:
            last = exc
            time.sleep(0.05 * (attempt + 1))
    raise ParseError(f"cannot open {db} read-only: {last}")


def sqlite_schema(path: Path) -> dict[str, set[str]]:
    """The tables of a SQLite file and their columns ({} when it is not one, or unreadable)."""
    if not is_sqlite(path):
        return {}
    try:
        conn = connect_readonly(path, attempts=1)
    except ParseError:
        return {}
    try:
        names = [str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{name}")')}
                for name in names if '"' not in name}
    except sqlite3.Error:
        return {}
    finally:
        conn.close()


def sqlite_strings(db: Path, query: str) -> set[str]:
    """The first column of a query's rows, as strings (empty when the database is unreadable)."""
    try:
        conn = connect_readonly(db, attempts=1)
    except ParseError:
        return set()
    try:
        return {str(row[0]) for row in conn.execute(query)}
    except sqlite3.Error:
        return set()
    finally:
        conn.close()


def store_and_older(db: Path, ids_query: str, files: Iterable[Path]) -> list[Path]:
    """An agent's database (when present) and the older files of sessions it does not hold.

    Agents that moved from one file per session to a database (Hermes, OpenCode) may keep
    both; a file whose name (stem) is a session id the database knows is left out, so no
    session is indexed twice under different turn ids.
    """
    if not db.is_file():
        return list(files)
    known = sqlite_strings(db, ids_query)
    return [db, *(p for p in files if p.stem not in known)]


def dicts(value: object) -> list[dict[str, Any]]:
    """The JSON objects of a JSON array (anything else in it, or a non-array, gives none)."""
    return [cast("dict[str, Any]", v) for v in value if isinstance(v, dict)] \
        if isinstance(value, list) else []
