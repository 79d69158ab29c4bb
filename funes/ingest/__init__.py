"""Ingest: from agent transcripts on disk to :class:`~funes.model.turns.Turn` objects.

* :mod:`funes.ingest.sources` finds transcripts (default locations per agent, or paths).
* :mod:`funes.ingest.parsers` reads them incrementally into turns.
* :mod:`funes.ingest.noise` decides what in them is scaffolding.
* :mod:`funes.ingest.project` names the project a working directory belongs to.

Everything here is stdlib-only at import time (pyarrow is imported lazily for Parquet).
"""

from __future__ import annotations

from funes.ingest.parsers import (
    ParseError,
    ParseResult,
    SourceTruncatedError,
    UnknownHarnessError,
    cursor_kind,
    detect_harness,
    parse_file,
)
from funes.ingest.project import project_identity
from funes.ingest.sources import SourceFile, default_sources, explicit_sources

__all__ = [
    "ParseError",
    "ParseResult",
    "SourceFile",
    "SourceTruncatedError",
    "UnknownHarnessError",
    "cursor_kind",
    "default_sources",
    "detect_harness",
    "explicit_sources",
    "parse_file",
    "project_identity",
]
