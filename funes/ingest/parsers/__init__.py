"""Transcript parsers, one module per agent, behind one resumable API.

``parse_file(path, harness, start_offset=..., state=...)`` dispatches to the parser of
``harness`` (see :mod:`funes.ingest.parsers.base` for the contract and
:mod:`funes.ingest.parsers.registry` for the map of harness → parser module);
``detect_harness`` sniffs the harness from a file's first lines. Another parser can join with
:func:`register`.
"""

from __future__ import annotations

from funes.ingest.parsers.base import (
    CursorKind,
    ParseError,
    ParseResult,
    ParserSpec,
    SourceTruncatedError,
    UnknownHarnessError,
)
from funes.ingest.parsers.registry import (
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
