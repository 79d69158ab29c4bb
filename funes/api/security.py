"""Security verbs: forget, scrub, gc (and keys, signature checks as they land).

Each returns a dataclass and never prints; funes.cli.commands.security renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from funes.ingest.scrub import ScrubbedChunk, ScrubResult
from funes.ingest.scrub import scrub as _scrub
from funes.storage import forget as _forget
from funes.storage.gc import GcResult
from funes.storage.gc import gc as _gc
from funes.storage.repo import Repository

__all__ = [
    "ForgetResult",
    "GcResult",
    "ScrubResult",
    "ScrubbedChunk",
    "forget",
    "gc",
    "scrub",
]


@dataclass(frozen=True)
class ForgetResult:
    """What `forget` hid."""

    chunks: list[str]
    commit: str | None
    dry_run: bool = False


def forget(
    repo: Repository,
    *,
    session: str | None = None,
    chunk: str | None = None,
    before: str | None = None,
    match: str | None = None,
    dry_run: bool = False,
) -> ForgetResult:
    """Hide the chunks matching every criterion given, with one tombstone commit."""
    selection = _forget.Selection(session, chunk, before, match)
    ids = _forget.select(repo, selection)
    if dry_run or not ids:
        return ForgetResult(ids, None, dry_run)
    result = _forget.tombstone(repo, ids, selection.describe())
    return ForgetResult(ids, result.commit, False)


def scrub(repo: Repository, *, dry_run: bool = False) -> ScrubResult:
    """Redact stored chunks again; replace dirty ones (tombstone + redacted copy)."""
    return _scrub(repo, dry_run=dry_run)


def gc(repo: Repository) -> GcResult:
    """Remove tombstoned rows and unreachable objects and files from this machine's disk."""
    return _gc(repo)
