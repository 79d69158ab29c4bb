"""Helpers shared by the ingest tests: where the real fixtures are, and piecewise parsing.

`trace(rel)` finds a transcript in the repository's own small set (tests/fixtures/traces)
first, then in the large optional set (../shared/fixtures/traces), and skips the test with a
message saying so when neither has it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from funes.ingest.parsers import parse_file
from funes.model.turns import Turn
from tests.conftest import FIXTURES, OWN_FIXTURES, SHARED_MISSING, trace_path

TRACES = FIXTURES / "traces"

#: For tests over the whole large set (every file in ../shared/fixtures/traces).
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=SHARED_MISSING)


def trace(rel: str) -> Path:
    """A fixture file by its path relative to the traces folder (skips when it is absent)."""
    path = trace_path(rel)
    if not path.is_file():
        pytest.skip(f"{SHARED_MISSING} ({rel})")
    return path


def all_traces() -> list[Path]:
    """Every fixture transcript: the large set when present, else the repository's own."""
    folder = TRACES if TRACES.is_dir() else OWN_FIXTURES / "traces"
    return sorted(folder.glob("*/*.jsonl"))


def line_ends(path: Path) -> list[int]:
    """Byte offsets just after each complete line."""
    ends = []
    pos = 0
    for line in path.read_bytes().splitlines(keepends=True):
        pos += len(line)
        if line.endswith(b"\n"):
            ends.append(pos)
    return ends


class GrowingFile:
    """A copy of a transcript that is appended to piece by piece, like a live session file."""

    def __init__(self, source: Path, target: Path) -> None:
        self.data = source.read_bytes()
        self.path = target
        self.path.write_bytes(b"")
        self.size = 0

    def grow_to(self, end: int) -> None:
        """Append to the copy until it is the first ``end`` bytes of the source."""
        if end > self.size:
            with open(self.path, "ab") as f:
                f.write(self.data[self.size : end])
            self.size = end


def parse_growing(
    source: Path, harness: str, cuts: list[int], workdir: Path
) -> tuple[list[Turn], dict[str, int], int]:
    """Parse a file that grows to each cut in turn, then to its full length.

    Cuts may fall mid-line: the parser must leave the incomplete line for the next call.
    Turns' ``source.path`` is the growing copy's; callers compare everything else.
    """
    grow = GrowingFile(source, workdir / source.name)
    turns: list[Turn] = []
    skipped: dict[str, int] = {}
    offset = 0
    state: dict[str, Any] | None = None
    for cut in [*cuts, len(grow.data)]:
        grow.grow_to(cut)
        result = parse_file(grow.path, harness, start_offset=offset, state=state)
        turns += result.turns
        for key, value in result.skipped.items():
            skipped[key] = skipped.get(key, 0) + value
        offset = result.end_offset
        state = json.loads(json.dumps(result.state))
    return turns, skipped, offset


def comparable(turns: list[Turn]) -> list[tuple[Any, ...]]:
    """Turns as tuples of every field (extra included), with the source path dropped."""
    out = []
    for t in turns:
        out.append(
            (
                t.harness, t.session_id, t.turn_id, t.seq, t.ts, t.role, t.blocks,
                t.parent_turn_id, t.workdir, t.project,
                (t.source.start, t.source.end) if t.source else None,
                t.parent_session_id, tuple(sorted(t.extra.items())),
            )
        )
    return out
