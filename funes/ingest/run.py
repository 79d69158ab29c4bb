"""One indexing run: sources → turns → redacted blocks → chunks → commits in bounded batches.

Deterministic and incremental: each source is resumed where the last run stopped (see
funes.ingest.state), secrets are redacted before anything is chunked or stored, and the
repository skips chunks it already holds, so running twice adds nothing.

Bounded: chunks are committed whenever `batch_chunks` chunks or `batch_bytes` bytes of text
are pending (and at the end), and the read positions of the files finished by then are saved
right after each commit. So memory stays bounded whatever the history's size, and a run
killed at any point loses at most the batch in flight: the next run resumes from the saved
positions (a file cut across two batches is read again; chunk ids make that idempotent).

Newest first, answering while it runs: sources are read most recently modified first, the
first commit comes after `FIRST_BATCH_CHUNKS` chunks rather than a whole batch, and the
caller's `searchable` step runs after every commit (the API folds the new rows into the
full-text index there). So on a first run over months of history, recall answers from the
latest sessions within seconds, and each batch after that widens what it reaches
(docs/design.md §4, "Cold start"; bench/results/day0.md).
"""

from __future__ import annotations

import collections
import functools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from funes.errors import FunesError
from funes.ingest.parsers.registry import cursor_kind
from funes.ingest.reader import PARALLEL_MIN_FILES, default_workers, read_all
from funes.ingest.redact import rules_version
from funes.ingest.scrub import note_ingest
from funes.ingest.sources import SourceFile
from funes.ingest.state import FileState, Plan, SourceStates, plan, snapshot
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
#: The first commit of a run comes after this many chunks (about two seconds of reading), so a
#: first run over a long history is searchable almost at once.
FIRST_BATCH_CHUNKS = 5_000
#: What makes a memory's newly committed rows searchable (the API's full-text upkeep).
Searchable = Callable[[Repository], None]


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
    outside: int = 0  # turns a `scope` left out (another project's, for `--workdir`)
    excluded: int = 0  # turns an exclusion rule kept out (funes.storage.exclusions)
    errors: list[str] = field(default_factory=list)  # unreadable sources (not fatal)
    commits: dict[str, CommitResult] = field(default_factory=dict)  # repo path → result
    by_harness: collections.Counter[str] = field(default_factory=collections.Counter)
    #: Seconds from the start of the run until its first commit was searchable (None: no
    #: commit), and how many commits (batches) the run made.
    first_searchable_s: float | None = None
    batches: int = 0


def commit_message(chunks: Iterable[Chunk], added: int) -> str:
    """`index: claude 3 sessions, codex 1 sessions, 412 chunks`."""
    sessions: dict[str, set[str]] = collections.defaultdict(set)
    for c in chunks:
        sessions[c.harness].add(c.session_id)
    who = ", ".join(f"{h} {len(s)} sessions" for h, s in sorted(sessions.items()))
    return f"index: {who}, {added} chunks"


def newest_first(sources: Iterable[SourceFile]) -> list[SourceFile]:
    """Sources by modification time, newest first (ties and unreadable files keep their order).

    A first run over a long history then commits the sessions the user is most likely to ask
    about first; the order changes nothing else (chunk ids do not depend on it).
    """
    listed = list(sources)

    def mtime(source: SourceFile) -> float:
        try:
            return -source.path.stat().st_mtime
        except OSError:
            return 0.0

    return sorted(listed, key=mtime)


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
    first_batch: int = FIRST_BATCH_CHUNKS,
    searchable: Searchable | None = None,
    workers: int | None = None,
    scope: Callable[[Turn], bool] | None = None,
    newest: bool = False,
) -> IndexSummary:
    """Read every source incrementally and commit the new chunks to their memories.

    Sources are read in the order given, or with `newest` the most recently modified first
    (by the modification time their plan saw: `newest_first` without a second stat of every
    file). Commits happen
    in batches (see the module docstring): the first after `first_batch` chunks, the others
    after `batch_chunks`; `searchable(repo)` runs after each commit that added rows. With
    `since`, only turns at or after that time are kept, and the read positions are not
    remembered (a one-off partial run must not hide older turns from the next full run).
    `tool_results=False` leaves tool output out (the calls stay); None asks each memory's
    `index.toolResults` (default true). Files are read in `workers` processes (None: one per
    CPU when there are PARALLEL_MIN_FILES files or more to read, else in this process;
    funes.ingest.reader); the result does not depend on it. `scope` keeps only the turns it
    accepts (`funes index --workdir`); a file with turns it left out keeps its read position,
    so a later run without a scope still reads them.
    Chunk ids do not depend on it: a lean memory and a full one agree on every chunk both hold.
    """
    started = time.monotonic()
    summary = IndexSummary()
    pending: dict[Path, tuple[Repository, list[Chunk]]] = {}
    bound = min(batch_chunks, first_batch)
    # nothing read, nothing to remember: a run over an indexed history writes nothing (its
    # state file is tens of MB for a long history)
    saved_any = False
    pending_chunks = pending_bytes = 0
    sessions: dict[str, set[str]] = collections.defaultdict(set)
    source_list = list(sources)
    keeps: dict[Path, bool] = {}
    exclusions: dict[Path, Exclusions] = {}
    new_states: dict[Path, FileState] = {}

    def flush() -> None:
        nonlocal pending_chunks, pending_bytes, bound, saved_any
        for repo, chunks in pending.values():
            note_ingest(repo)  # which redaction rules the stored chunks met (funes status)
            committed = repo.commit_chunks(
                chunks, functools.partial(commit_message, chunks), lock_timeout=lock_timeout,
                redaction=rules_version(),
            )
            key = str(repo.path)
            summary.commits[key] = _combined(summary.commits.get(key), committed)
            summary.added += committed.added
            if committed.added:
                summary.batches += 1
                if searchable is not None:
                    searchable(repo)
                if summary.first_searchable_s is None:
                    summary.first_searchable_s = time.monotonic() - started
        bound = batch_chunks
        pending.clear()
        pending_chunks = pending_bytes = 0
        if since is None and new_states:
            for path, state in new_states.items():
                states.put(path, state)
            states.save()
            new_states.clear()
            saved_any = True

    jobs: list[tuple[SourceFile, str, Plan]] = []
    if len(source_list) >= PARALLEL_MIN_FILES:
        states.preload()  # one query for all, not one per file
    for source in source_list:
        summary.files += 1
        try:
            cursor = cursor_kind(source.path, source.harness)
            prev = states.get(source.path)
            if prev is not None and prev.harness != source.harness:
                prev = None
            planned = plan(source.path, cursor, prev)
        except (FunesError, OSError) as exc:
            summary.errors.append(f"{source.path}: {exc}")
            continue
        if planned.reason == "unchanged":
            summary.files_unchanged += 1
            continue
        if planned.reason == "rewritten":
            summary.files_reread += 1
        jobs.append((source, cursor, planned))
    if newest:
        jobs.sort(key=lambda job: -job[2].mtime_ns)  # stable: ties keep the given order
    if workers is None:
        workers = default_workers() if len(jobs) >= PARALLEL_MIN_FILES else 1
    reads = read_all(jobs, since=since, max_tokens=max_tokens, workers=workers)
    try:
        for done, (source, _, _) in enumerate(jobs):
            if progress:
                progress(done, len(jobs), str(source.path))
            read = next(reads)
            if read.error is not None:
                summary.errors.append(read.error)
                continue
            summary.files_reread += read.reread
            summary.skipped.update(read.skipped)
            stranded = stranded_out = 0
            for item in read.turns:
                if scope is not None and not scope(item.turn):
                    stranded_out += 1
                    continue
                repo = router(item.turn)
                if repo is None:
                    stranded += 1
                    continue
                if _excluded(repo, item.turn, exclusions):
                    summary.excluded += 1
                    continue
                summary.turns += 1
                sessions[item.turn.harness].add(item.turn.session_id)
                summary.redactions.update(item.redactions)
                chunks = item.chunks
                if not _keeps_tool_results(repo, tool_results, keeps):
                    chunks = [c for c in chunks if c.block_type != "tool_result"]
                summary.chunks += len(chunks)
                pending.setdefault(repo.path, (repo, []))[1].extend(chunks)
                pending_chunks += len(chunks)
                pending_bytes += sum(len(c.text) for c in chunks)
                if pending_chunks >= bound or pending_bytes >= batch_bytes:
                    flush()  # this file's position is saved only once all of it is committed
            summary.unroutable += stranded
            summary.outside += stranded_out
            # keep turns with nowhere to go (e.g. before init) or out of scope for a later run
            if not stranded and not stranded_out:
                new_states[source.path] = snapshot(
                    source.path, source.harness, read.cursor, read.planned, read.end_offset,
                    read.state
                )
            del read
    finally:
        reads.close()  # stops the workers, also when a commit fails
    if progress:
        progress(len(jobs), len(jobs), "")
    summary.by_harness = collections.Counter({h: len(s) for h, s in sessions.items()})
    summary.sessions = sum(summary.by_harness.values())
    flush()
    if since is None and saved_any:
        states.save()
    return summary
