"""Transcript parsers, one module per agent, behind one resumable API.

``parse_file(path, harness, start_offset=..., state=...)`` dispatches to the parser registered
for ``harness`` (see :mod:`funes.ingest.parsers.base` for the contract); ``detect_harness``
sniffs the harness from a file's first lines. The built-in parsers register themselves when
this package is imported; another parser can join with :func:`register`.
"""

from __future__ import annotations

from funes.ingest.parsers.base import (
    CursorKind,
    ParseError,
    ParseResult,
    ParserSpec,
    SourceTruncatedError,
    UnknownHarnessError,
    cursor_kind,
    detect_harness,
    parse_file,
    register,
    registered,
)

__all__ = [
    "CursorKind",
    "ParseError",
    "ParseResult",
    "ParserSpec",
    "SourceTruncatedError",
    "UnknownHarnessError",
    "cursor_kind",
    "detect_harness",
    "parse_file",
    "register",
    "registered",
]
