"""One indexing run: sources → turns → redacted blocks → chunks → commits in bounded batches.

Deterministic and incremental: each source is resumed where the last run stopped (see
funes.ingest.state), secrets are redacted before anything is chunked or stored, and the
repository skips chunks it already holds, so running twice adds nothing.

Bounded: chunks are committed whenever `batch_chunks` chunks or `batch_bytes` bytes of text
are pending (and at the end), and the read positions of the files finished by then are saved
right after each commit. So memory stays bounded whatever the history's size, and a run
killed at any point loses at most the batch in flight: the next run resumes from the saved
positions (a file cut across two batches is read again; chunk ids make that idempotent).
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from funes.errors import FunesError
from funes.ingest.chunking import chunk_turn
from funes.ingest.parsers.base import SourceTruncatedError
from funes.ingest.parsers.registry import cursor_kind, parse_file
from funes.ingest.redact import redact_turn
from funes.ingest.scrub import note_ingest
from funes.ingest.sources import SourceFile
from funes.ingest.state import FileState, SourceStates, plan, snapshot
from funes.model.chunk import Chunk
from funes.model.turns import Turn
from funes.storage.exclusions import Exclusions
from funes.storage.exclusions import active as active_exclusions
from funes.storage.repo import CommitResult, Repository

#: (files done, files total, path being read)
Progress = Callable[[int, int, str], None]
#: Which memory a turn belongs in (docs/design.md §7 routing); None means "nowhere: count it
#: skipped".
Router = Callable[[Turn], Repository | None]

#: Default batch bounds (config `index.batchChunks`, `index.batchBytes`): about 150 MB of peak
#: memory for a batch of ordinary chunks.
BATCH_CHUNKS = 20_000
BATCH_BYTES = 64 << 20


@dataclass
class IndexSummary:
    """What one run read, stored and skipped."""

    files: int = 0
    files_unchanged: int = 0
    files_reread: int = 0
    sessions: int = 0
    turns: int = 0
    chunks: int = 0  # chunks produced from the turns read
    added: int = 0  # chunks new to the memory
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    redactions: collections.Counter[str] = field(default_factory=collections.Counter)
    unroutable: int = 0  # turns with no memory to go to
    excluded: int = 0  # turns an exclusion rule kept out (funes.storage.exclusions)
    errors: list[str] = field(default_factory=list)  # unreadable sources (not fatal)
    commits: dict[str, CommitResult] = field(default_factory=dict)  # repo path → result
    by_harness: collections.Counter[str] = field(default_factory=collections.Counter)



def commit_message(chunks: Iterable[Chunk], added: int) -> str:
    """`index: claude 3 sessions, codex 1 sessions, 412 chunks`."""
    sessions: dict[str, set[str]] = collections.defaultdict(set)
    for c in chunks:
        sessions[c.harness].add(c.session_id)
    who = ", ".join(f"{h} {len(s)} sessions" for h, s in sorted(sessions.items()))
    return f"index: {who}, {added} chunks"


def _since_ok(turn: Turn, since: datetime | None) -> bool:
    if since is None:
        return True
    try:
        ts = datetime.fromisoformat(turn.ts)
    except ValueError:
        return False
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=since.tzinfo)
    return ts >= since


def _keeps_tool_results(repo: Repository, asked: bool | None, seen: dict[Path, bool]) -> bool:
    """Whether tool output goes into `repo`: the caller's choice, else its config (cached)."""
    if asked is not None:
        return asked
    if repo.path not in seen:
        seen[repo.path] = (repo.config.get("index.toolResults") or "true") == "true"
    return seen[repo.path]


def _excluded(repo: Repository, turn: Turn, seen: dict[Path, Exclusions]) -> bool:
    """Whether an exclusion of `repo` keeps `turn` out (its rules read once per run)."""
    if repo.path not in seen:
        seen[repo.path] = active_exclusions(repo)
    rules = seen[repo.path]
    return bool(rules) and rules.turn_rule(turn) is not None


def _combined(before: CommitResult | None, after: CommitResult) -> CommitResult:
    """One memory's commits of a run, summed (the run reports once, at the end)."""
    if before is None:
        return after
    return CommitResult(
        after.commit or before.commit,
        before.added + after.added,
        before.duplicates + after.duplicates,
        before.collisions + after.collisions,
        after.chunk_count,
    )


def index_sources(
    sources: Iterable[SourceFile],
    router: Router,
    states: SourceStates,
    *,
    since: datetime | None = None,
    max_tokens: int = 256,
    progress: Progress | None = None,
    lock_timeout: float | None = None,
    batch_chunks: int = BATCH_CHUNKS,
    batch_bytes: int = BATCH_BYTES,
    tool_results: bool | None = None,
) -> IndexSummary:
    """Read every source incrementally and commit the new chunks to their memories.

    Commits happen in batches (see the module docstring). With `since`, only turns at or
    after that time are kept, and the read positions are not remembered (a one-off partial
    run must not hide older turns from the next full run). `tool_results=False` leaves tool
    output out (the calls stay); None asks each memory's `index.toolResults` (default true).
    Chunk ids do not depend on it: a lean memory and a full one agree on every chunk both hold.
    """
    summary = IndexSummary()
    pending: dict[Path, tuple[Repository, list[Chunk]]] = {}
    pending_chunks = pending_bytes = 0
    sessions: dict[str, set[str]] = collections.defaultdict(set)
    source_list = list(sources)
    keeps: dict[Path, bool] = {}
    exclusions: dict[Path, Exclusions] = {}
    new_states: dict[Path, FileState] = {}

    def flush() -> None:
        nonlocal pending_chunks, pending_bytes
        for repo, chunks in pending.values():
            note_ingest(repo)  # which redaction rules the stored chunks met (funes status)
            committed = repo.commit_chunks(
                chunks, functools.partial(commit_message, chunks), lock_timeout=lock_timeout
            )
            key = str(repo.path)
            summary.commits[key] = _combined(summary.commits.get(key), committed)
            summary.added += committed.added
        pending.clear()
        pending_chunks = pending_bytes = 0
        if since is None and new_states:
            for path, state in new_states.items():
                states.put(path, state)
            states.save()
            new_states.clear()

    for done, source in enumerate(source_list):
        if progress:
            progress(done, len(source_list), str(source.path))
        summary.files += 1
        try:
            cursor = cursor_kind(source.path, source.harness)
            prev = states.get(source.path)
            if prev is not None and prev.harness != source.harness:
                prev = None
            planned = plan(source.path, cursor, prev)
            if planned.reason == "unchanged":
                summary.files_unchanged += 1
                continue
            if planned.reason == "rewritten":
                summary.files_reread += 1
            try:
                result = parse_file(source.path, source.harness, start_offset=planned.start,
                                    state=planned.state)
            except SourceTruncatedError:
                summary.files_reread += 1
                result = parse_file(source.path, source.harness)
        except (FunesError, OSError) as exc:
            summary.errors.append(f"{source.path}: {exc}")
            continue
        summary.skipped.update(result.skipped)
        stranded = 0
        for turn in result.turns:
            if not _since_ok(turn, since):
                continue
            repo = router(turn)
            if repo is None:
                stranded += 1
                continue
            if _excluded(repo, turn, exclusions):
                summary.excluded += 1
                continue
            summary.turns += 1
            sessions[turn.harness].add(turn.session_id)
            clean, found = redact_turn(turn)
            summary.redactions.update(found)
            chunks = chunk_turn(clean, max_tokens=max_tokens)
            if not _keeps_tool_results(repo, tool_results, keeps):
                chunks = [c for c in chunks if c.block_type != "tool_result"]
            summary.chunks += len(chunks)
            pending.setdefault(repo.path, (repo, []))[1].extend(chunks)
            pending_chunks += len(chunks)
            pending_bytes += sum(len(c.text) for c in chunks)
            if pending_chunks >= batch_chunks or pending_bytes >= batch_bytes:
                flush()  # this file's position is saved only once all of it is committed
        summary.unroutable += stranded
        if not stranded:  # keep turns with nowhere to go for a later run (e.g. after init)
            new_states[source.path] = snapshot(
                source.path, source.harness, cursor, planned, result.end_offset, result.state
            )
        del result
    if progress:
        progress(len(source_list), len(source_list), "")
    summary.by_harness = collections.Counter({h: len(s) for h, s in sessions.items()})
    summary.sessions = sum(summary.by_harness.values())
    flush()
    if since is None:
        states.save()
    return summary
