"""Which parser reads which harness, and the calls that dispatch to it.

Each built-in parser module defines a ``SPEC`` (a :class:`~funes.ingest.parsers.base.ParserSpec`)
and imports nothing from here; this module maps harness names to those modules and imports a
module only when its harness is first needed, so the dependency runs one way (registry →
parsers → base) and indexing one agent never loads the other parsers' code. Parsers outside
funes join with :func:`register`.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from funes.ingest.parsers.base import (
    CursorKind,
    ParseError,
    ParseResult,
    ParserSpec,
    UnknownHarnessError,
    read_head_records,
)

#: Built-in harnesses and the module whose ``SPEC`` reads them.
BUILTIN: dict[str, str] = {
    "claude": "funes.ingest.parsers.claude",
    "codex": "funes.ingest.parsers.codex",
    "pi": "funes.ingest.parsers.pi",
    "hermes": "funes.ingest.parsers.hermes",
    "opencode": "funes.ingest.parsers.opencode",
    "gemini": "funes.ingest.parsers.gemini",
    "cursor": "funes.ingest.parsers.cursor",
    "copilot": "funes.ingest.parsers.copilot",
    "import": "funes.ingest.parsers.generic",
    "funes-jsonl": "funes.ingest.parsers.turnfile",
}

#: Every built-in format `funes index --agent` can name: the agents, the generic import and
#: turn files.
FORMATS: tuple[str, ...] = tuple(BUILTIN)

_EXTRA: dict[str, ParserSpec] = {}
_LOADED: dict[str, ParserSpec] = {}


def register(spec: ParserSpec) -> None:
    """Register (or replace) the parser for a harness, so :func:`parse_file` dispatches to it."""
    _EXTRA[spec.harness] = spec


def spec(harness: str) -> ParserSpec:
    """The parser of a harness (importing a built-in one on first use)."""
    if harness in _EXTRA:
        return _EXTRA[harness]
    if harness not in _LOADED:
        if harness not in BUILTIN:
            known = ", ".join(sorted({*BUILTIN, *_EXTRA}))
            raise UnknownHarnessError(
                f"no parser for harness {harness!r}", hint=f"use one of: {known}"
            )
        module = importlib.import_module(BUILTIN[harness])
        loaded: ParserSpec = module.SPEC
        _LOADED[harness] = loaded
    return _LOADED[harness]


def registered() -> dict[str, ParserSpec]:
    """Every parser, by harness name (the built-in ones are imported)."""
    out = {h: spec(h) for h in BUILTIN}
    out.update(_EXTRA)
    return out


def parse_file(
    path: Path | str,
    harness: str | None,
    *,
    start_offset: int = 0,
    state: dict[str, Any] | None = None,
    final: bool = False,
) -> ParseResult:
    """Parse a transcript from ``start_offset``, resuming with ``state``.

    Args:
        path: The transcript file (or an agent's SQLite store, or a Parquet import).
        harness: Registered harness name; None sniffs it from the content.
        start_offset: Where to resume: ``end_offset`` of the previous call (0 for a new file).
        state: ``state`` of the previous call, after a JSON round trip; None for a new file.
        final: The file is complete (an export, not a live transcript): a last line without
            a newline is consumed too instead of being left for the next call.

    Returns:
        The turns completed since ``start_offset``, skip counts, and the resume point.

    Raises:
        UnknownHarnessError: ``harness`` is unknown, or None and the content is not recognised.
        ParseError: The file cannot be read.
        SourceTruncatedError: The file is shorter than ``start_offset`` (it was rewritten).
    """
    path = Path(path)
    if harness is None:
        harness = detect_harness(path)
        if harness is None:
            raise UnknownHarnessError(
                f"cannot tell which agent wrote {path}", hint="name the harness explicitly"
            )
    chosen = spec(harness)
    if start_offset < 0:
        raise ValueError("start_offset must be >= 0")
    if state is not None and state.get("parser") not in (None, harness):
        raise ParseError(
            f"saved parser state for {path} belongs to {state.get('parser')!r}, not {harness!r}",
            hint="re-read the file from offset 0 without state",
        )
    return chosen.parse(path, start_offset, state, final)


def cursor_kind(path: Path | str, harness: str) -> CursorKind:
    """How ``start_offset``/``end_offset`` are to be read for this source.

    ``bytes`` for JSONL transcripts (fingerprint the bytes before the offset to detect a
    rewrite), ``rowid`` for SQLite (the last row id read), ``rows`` for files rewritten whole
    (Parquet imports, Gemini's older JSON sessions, OpenCode's JSON tree): compare their size
    and mtime, and read them again whole when they change.
    """
    # a Path is not parsed again: Path(Path) costs as much as the first parse, and a run over
    # a long history asks this of every file it lists
    return spec(harness).cursor(path if isinstance(path, Path) else Path(path))


def detect_harness(path: Path | str) -> str | None:
    """Tell which agent wrote a file from its first lines (or its magic bytes).

    Returns:
        A registered harness name, or None when no parser recognises the content.
    """
    path = Path(path)
    records = read_head_records(path)
    for candidate in sorted(registered().values(), key=lambda s: (s.priority, s.harness)):
        try:
            if candidate.sniff(path, records):
                return candidate.harness
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
    return None
