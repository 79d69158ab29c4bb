r"""Turn files (``.funes.jsonl`` v1): turns already in funes's shape, from any producer.

This is the public turn format of the Rust funes (huggingface/funes, ``docs/funes-jsonl.md``
and ``src/traces/funes_jsonl.rs``), read here as a source like any agent's transcript, so the
converters written for it feed this memory too; docs/agents.md ("The turn contract") states
it as the contract. One JSON object per line, one turn per object:

    {"format": 1, "session_id": "…", "turn_uuid": "…", "seq": 0, "ts": "2026-09-18T09:41:07Z",
     "role": "user", "harness": "opencode", "cwd": "/home/me/x", "parent_uuid": "…",
     "blocks": [{"block_type": "text", "text": "…", "tool_name": "…", "tool_use_id": "…"}]}

Validation is the Rust funes' own, never coercion: a line that is not a JSON object, an unknown
field (on the turn or a block), a missing required field or one of the wrong type, an unknown
``block_type``, a ``ts`` that is not RFC 3339 in UTC with ``Z``, an unknown ``format``, a ``:``
in ``session_id`` or ``turn_uuid``, or a ``harness`` outside ``[a-z0-9_-]`` refuses the lines
read: nothing of them is indexed, and the error names the file, the line and the field
(:class:`TurnFileError`). Beyond the Rust rules, funes also refuses a negative ``seq`` (the
format says it counts from 0), an empty id, a ``role`` that is empty or longer than 64
characters, a field given twice, bytes that are not UTF-8, and a line over
:data:`MAX_LINE_BYTES`.

A file is read incrementally like any JSONL transcript (byte offset plus fingerprint): a file
that grows is read from where the last read stopped, and each read is accepted or refused
whole; a refused read is tried again once the file changes. A turn whose
``(session_id, turn_uuid)`` the file gave among its last 256 turns is a ``duplicate`` and is
dropped (the first one stands; the format says an edit is a new turn, ``<id>@<updated_at>``).

Mapping: ``turn_uuid`` is the turn id, ``parent_uuid`` its parent, ``cwd`` its working
directory (the project is derived from it), ``tool_use_id`` a block's ``tool_call_id``, and
the harness is the producer's name (``claude_code``, the Rust funes' name for Claude Code,
reads as ``claude``). Blocks pass through ``make_block`` like every parser's, so base64
payloads are elided and empty blocks contribute nothing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from funes._env import Settings
from funes.ingest.parsers.base import (
    ParseError,
    ParseResult,
    bounded_put,
    iter_complete_lines,
    make_block,
    state_int,
    state_map,
    walk_files,
)
from funes.ingest.parsers.skeleton import Parser, Shape, parser_spec
from funes.model.turns import BLOCK_TYPES, Block, BlockType, Source, Turn, is_harness, is_role

#: The registry name of the format (`funes index --agent funes-jsonl`).
FORMAT: Final = "funes-jsonl"
SUFFIX: Final = ".funes.jsonl"
#: Format versions this reader knows.
VERSIONS: Final = (1,)
#: Largest line read: a turn holding a long tool output is large, a line of 64 MiB is not one.
MAX_LINE_BYTES: Final = 64 << 20
#: Producer names the Rust funes stores for agents funes names otherwise.
HARNESS_ALIASES: Final = {"claude_code": "claude"}

_TURN_FIELDS: Final = {
    "format": int, "session_id": str, "turn_uuid": str, "seq": int, "ts": str, "role": str,
    "harness": str, "cwd": str, "parent_uuid": str, "blocks": list,
}
_TURN_REQUIRED: Final = ("session_id", "turn_uuid", "seq", "ts", "role", "harness", "blocks")
_BLOCK_FIELDS: Final = {"block_type": str, "text": str, "tool_name": str, "tool_use_id": str}
_BLOCK_REQUIRED: Final = ("block_type", "text")
#: Turns of a file remembered to drop a repeated one (ids arrive in order: a repeat is near).
_SEEN_KEPT: Final = 256
#: What `chrono::DateTime::parse_from_rfc3339` accepts, in UTC with `Z` (the Rust rule).
_RFC3339_UTC: Final = re.compile(r"^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d{1,9})?Z$")


class TurnFileError(ParseError):
    """A turn file broke the format; the message names the line and the field."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(
            f"refused at line {line}: {problem}",
            hint="fix the producer (docs/agents.md, \"The turn contract\"); nothing of the lines "
            "read was indexed, the file is read again once it changes",
        )
        self.path = path
        self.line = line
        self.problem = problem


def _check_fields(obj: dict[str, Any], fields: Mapping[str, type], required: tuple[str, ...],
                  where: str) -> None:
    for key in obj:
        if key not in fields:
            raise ValueError(f"{where}unknown field {key!r}")
    for key in required:
        if key not in obj:
            raise ValueError(f"{where}missing field {key!r}")
    for key, value in obj.items():
        want = fields[key]
        # JSON has one number type: a bool is not an integer here, and a float is not either.
        ok = isinstance(value, want) and not (want is int and isinstance(value, bool))
        if value is None and key not in required:
            ok = False  # optional fields are absent, never null (the Rust reader refuses null)
        if not ok:
            raise ValueError(f"{where}{key!r} must be {_type_word(want)}, not {_json_word(value)}")


def _type_word(want: type) -> str:
    return {int: "an integer", str: "a string", list: "an array"}[want]


def _json_word(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def _check_ts(ts: str) -> None:
    ok = bool(_RFC3339_UTC.match(ts))
    if ok:
        try:
            datetime.fromisoformat(ts[:-1] + "+00:00")
        except ValueError:
            ok = False  # 2026-13-40T…: the shape, not a time
    if not ok:
        raise ValueError(f"'ts' {ts[:40]!r} is not an RFC 3339 time in UTC ending in Z")


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"field {key!r} appears twice")
        out[key] = value
    return out


def decode(line: bytes) -> object:
    """One line's JSON, strictly: UTF-8, no field twice (the Rust reader refuses both)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"the line is not UTF-8 (byte {exc.start})") from None
    if not text.strip():
        raise ValueError("the line is blank, not a turn")
    try:
        return json.loads(text, object_pairs_hook=_no_repeats)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at column {exc.colno}") from None


def validate(obj: object) -> dict[str, Any]:
    """One decoded line, checked against the format; the message of the ValueError names why."""
    if not isinstance(obj, dict):
        raise ValueError(f"the line is {_json_word(obj)}, not a JSON object")
    _check_fields(obj, _TURN_FIELDS, _TURN_REQUIRED, "")
    version = obj.get("format", 1)
    if version not in VERSIONS:
        raise ValueError(f"'format' {version} is unknown (this funes reads {VERSIONS})")
    for key in ("session_id", "turn_uuid", "parent_uuid"):
        value = obj.get(key)
        if value is None:
            continue
        if not value:
            raise ValueError(f"{key!r} is empty")
        if key != "parent_uuid" and ":" in value:
            raise ValueError(f"{key!r} {value[:60]!r} contains ':'")
    if not is_harness(obj["harness"]):
        raise ValueError(f"'harness' {obj['harness'][:40]!r} is not [a-z0-9_-]")
    if obj["seq"] < 0:
        raise ValueError(f"'seq' {obj['seq']} is negative (it counts from 0)")
    if not is_role(obj["role"]):
        raise ValueError(f"'role' {obj['role'][:40]!r} is not a short printable name")
    _check_ts(obj["ts"])
    for i, block in enumerate(obj["blocks"]):
        where = f"blocks[{i}]."
        if not isinstance(block, dict):
            raise ValueError(f"blocks[{i}] is {_json_word(block)}, not an object")
        _check_fields(block, _BLOCK_FIELDS, _BLOCK_REQUIRED, where)
        if block["block_type"] not in BLOCK_TYPES:
            raise ValueError(f"{where}block_type {block['block_type'][:40]!r} is unknown "
                             f"(one of {', '.join(BLOCK_TYPES)})")
    return obj


def to_turn(obj: dict[str, Any], source: Source, project: str | None) -> Turn:
    """A validated line as the turn funes indexes (see the module docstring for the mapping)."""
    blocks: list[Block] = []
    for raw in obj["blocks"]:
        kind: BlockType = raw["block_type"]
        block = make_block(kind, raw["text"], tool_name=raw.get("tool_name"),
                           tool_call_id=raw.get("tool_use_id"))
        if block is not None:
            blocks.append(block)
    harness = HARNESS_ALIASES.get(obj["harness"], obj["harness"])
    return Turn(
        harness=harness,
        session_id=obj["session_id"],
        turn_id=obj["turn_uuid"],
        seq=obj["seq"],
        ts=obj["ts"],
        role=obj["role"],
        blocks=tuple(blocks),
        parent_turn_id=obj.get("parent_uuid"),
        workdir=obj.get("cwd"),
        project=project,
        source=source,
    )


class TurnFileParser(Parser):
    """A ``.funes.jsonl`` file: each read validates every line it consumes, or refuses them all."""

    harness = FORMAT

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Read the complete lines after ``start``; any bad one refuses this read whole."""
        end = start
        line_no = state_int(self.state, "n")
        seen = state_map(self.state, "turns")
        for line_start, line_end, line in iter_complete_lines(self.path, start, final):
            line_no += 1
            end = line_end
            if line_end - line_start > MAX_LINE_BYTES:
                raise TurnFileError(self.path, line_no, f"the line is {line_end - line_start} "
                                    f"bytes, more than {MAX_LINE_BYTES}")
            try:
                obj = validate(decode(line))
            except RecursionError:
                raise TurnFileError(self.path, line_no, "the JSON nests too deep") from None
            except ValueError as exc:
                raise TurnFileError(self.path, line_no, str(exc)) from None
            key = hashlib.sha1(f"{obj['session_id']}:{obj['turn_uuid']}".encode(),
                               usedforsecurity=False).hexdigest()[:12]
            if key in seen:
                self.skip("duplicate")
                continue
            bounded_put(seen, key, 1, _SEEN_KEPT)
            turn = to_turn(obj, Source(self.source_path, line_start, line_end),
                           self.project(obj.get("cwd")))
            if turn.blocks:
                self.turns.append(turn)
            else:
                self.skip("empty")
        self.state["n"] = line_no
        return self.result(end)


@dataclass(frozen=True)
class TurnFileCheck:
    """What `funes index --check` found in one turn file (nothing written)."""

    path: Path
    turns: int
    chunks: int
    sessions: int
    duplicates: int
    #: Why the file is refused (`path:line: problem`), or None when it is valid.
    error: str | None


def check(path: Path) -> TurnFileCheck:
    """Validate a turn file the way indexing would, and count what it would give.

    Chunks are cut as indexing cuts them (default tokenizer and window), so ``chunks`` is
    the number of rows the file would add to an empty memory.
    """
    from funes.ingest.chunking import chunk_turn

    try:
        result = TurnFileParser(path, None).run(0, final=True)
    except TurnFileError as exc:
        return TurnFileCheck(path, 0, 0, 0, 0, f"{path}:{exc.line}: {exc.problem}")
    chunks = sum(len(chunk_turn(t)) for t in result.turns)
    sessions = len({t.session_id for t in result.turns})
    return TurnFileCheck(path, len(result.turns), chunks, sessions,
                         result.skipped.get("duplicate", 0), None)


def is_turn_file(path: Path) -> bool:
    """Whether a file is named as a turn file (``*.funes.jsonl``)."""
    return path.name.endswith(SUFFIX)


def spool_root(settings: Settings) -> Path:
    """Where producers write turn files: ``$FUNES_HOME/spool/<producer>/`` (the Rust layout)."""
    return settings.home / "spool"


def locate(settings: Settings) -> list[Path]:
    """Every turn file in the spool, one directory per producer (named like a harness)."""
    root = spool_root(settings)
    try:
        producers = sorted(p for p in root.iterdir() if p.is_dir() and is_harness(p.name))
    except OSError:
        return []
    return [f for d in producers for f in walk_files(d) if is_turn_file(f)]


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if is_turn_file(path):
        return True
    if not records or not isinstance(records[0], dict):
        return False
    first = records[0]
    return {"session_id", "turn_uuid", "blocks", "seq"} <= set(first)


SPEC = parser_spec(FORMAT, _sniff, Shape(TurnFileParser), priority=0, locate=locate)


def to_record(turn: Turn) -> dict[str, Any]:
    """A turn as one line of a turn file: what a converter writes for it (``to_turn`` inverted).

    What the format cannot carry is left out: noise tags, `extra`, the parent session and the
    source (the reader stamps its own). A turn whose ids hold `:` or whose time is unknown
    cannot be written (the reader would refuse the line).
    """
    record: dict[str, Any] = {
        "format": 1, "session_id": turn.session_id, "turn_uuid": turn.turn_id, "seq": turn.seq,
        "ts": turn.ts, "role": turn.role, "harness": turn.harness,
    }
    if turn.workdir:
        record["cwd"] = turn.workdir
    if turn.parent_turn_id:
        record["parent_uuid"] = turn.parent_turn_id
    blocks = []
    for b in turn.blocks:
        block: dict[str, Any] = {"block_type": b.type, "text": b.text}
        if b.tool_name is not None:
            block["tool_name"] = b.tool_name
        if b.tool_call_id is not None:
            block["tool_use_id"] = b.tool_call_id
        blocks.append(block)
    record["blocks"] = blocks
    return record
