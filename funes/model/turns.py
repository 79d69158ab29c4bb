"""Turns and blocks: the one shape every agent's transcript is parsed into.

Parsers (funes.ingest.parsers) produce these; chunking turns them into `Chunk`s. Keeping the
shape small and agent-neutral is what lets every transcript format share one ingest path:
the turn contract every parser meets is written down in docs/agents.md ("The turn contract").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal

#: The agents funes reads natively, and `import` (the generic import, docs/import.md).
HARNESSES: tuple[str, ...] = (
    "claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor", "copilot", "import"
)
#: What any harness name looks like: a turn file (`.funes.jsonl`, docs/agents.md) names its
#: producer freely within this shape, so an agent funes has no parser for keeps its own name.
HARNESS_RE: Final = re.compile(r"^[a-z0-9_-]{1,64}$")

BlockType = Literal["text", "thinking", "tool_use", "tool_result"]
BLOCK_TYPES: tuple[str, ...] = ("text", "thinking", "tool_use", "tool_result")


def is_harness(name: str) -> bool:
    """Whether `name` can be a turn's harness (lowercase letters, digits, `_`, `-`)."""
    return bool(HARNESS_RE.match(name))


def is_role(name: object) -> bool:
    """Whether `name` can be a turn's role: a short printable name (producers choose theirs)."""
    return isinstance(name, str) and 0 < len(name) <= 64 and name.isprintable()


@dataclass(frozen=True)
class Block:
    """One piece of a turn: prose, reasoning, a tool call or a tool's result."""

    type: BlockType
    text: str
    tool_name: str | None = None
    tool_call_id: str | None = None
    #: Why this block is scaffolding rather than someone's own words (e.g. "system-reminder",
    #: "environment", "compaction"), or None. Tagged blocks are kept but down-weighted.
    noise: str | None = None


@dataclass(frozen=True)
class Source:
    """Where a turn was read from: a file and the byte range of its records."""

    path: str
    start: int
    end: int


@dataclass(frozen=True)
class Turn:
    """One message of a session, in order, with its provenance."""

    harness: str  # one of HARNESSES, or a turn file's producer (is_harness)
    session_id: str
    turn_id: str
    seq: int
    ts: str  # UTC ISO-8601, e.g. "2026-05-11T11:26:55.123Z"; "" when the transcript has none
    role: str  # "user" | "assistant" | "system" | "tool"
    blocks: tuple[Block, ...]
    parent_turn_id: str | None = None
    workdir: str | None = None
    project: str | None = None
    source: Source | None = None
    #: For subagent sessions: the session and turn that spawned this one.
    parent_session_id: str | None = None
    extra: dict[str, str] = field(default_factory=dict, compare=False)


#: The roles native parsers give turns (a turn file's producer may use its own).
ROLES: tuple[str, ...] = ("user", "assistant", "tool", "system")
_TS_RE: Final = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$")


def contract_problems(turn: Turn) -> list[str]:
    """How a turn breaks the turn contract (docs/agents.md, "The turn contract"); [] if it holds.

    Every parser's turns meet it, and so does every turn read from a turn file: a harness
    name, non-empty ids, a seq from 0, a time in UTC ending in `Z` (or "" when the transcript
    has none), a short role, at least one block, each of a known type with text.
    """
    out = []
    if not is_harness(turn.harness):
        out.append(f"harness {turn.harness!r}")
    if not turn.session_id or not turn.turn_id:
        out.append("empty session or turn id")
    if isinstance(turn.seq, bool) or not isinstance(turn.seq, int) or turn.seq < 0:
        out.append(f"seq {turn.seq!r}")
    if turn.ts and not _TS_RE.match(turn.ts):
        out.append(f"ts {turn.ts!r}")
    if not is_role(turn.role):
        out.append(f"role {turn.role!r}")
    if not turn.blocks:
        out.append("no blocks")
    for i, b in enumerate(turn.blocks):
        if b.type not in BLOCK_TYPES or not b.text.strip():
            out.append(f"blocks[{i}] ({b.type}, {len(b.text)} chars)")
    if turn.parent_turn_id == turn.turn_id:
        out.append("its own parent")
    return out
