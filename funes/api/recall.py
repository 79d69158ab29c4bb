"""Recall verbs: recall, get, embed (the backlog), and the search side of status."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from funes._env import Settings
from funes.api.ingest import parse_since
from funes.ingest import backlog as _backlog
from funes.retrieval import indexes
from funes.retrieval.get import TurnView, get_turns
from funes.retrieval.recall import Filters, Options, RecallResult
from funes.retrieval.recall import recall as _recall
from funes.storage.repo import Repository
from funes.storage.snapshot import Snapshot, snapshot

if TYPE_CHECKING:
    from funes.inference.embedder import Embedder
    from funes.inference.reranker import Reranker

__all__ = ["DrainResult", "RecallResult", "SearchStatus", "TurnView", "embed", "get",
           "memory_label", "recall", "reindex", "search_status"]

DrainResult = _backlog.DrainResult


def memory_label(repo: Repository) -> str:
    """How output names a memory: what `--memory` takes to open it again."""
    from funes.api.sync import remote_label

    return remote_label(repo) or str(repo.path)


def owned(repo: Repository) -> bool:
    """Whether the memory is the user's own (recall marks others' passages untrusted)."""
    return (repo.config.get("core.owned") or "true") == "true"


def _embedder_for(repo: Repository, settings: Settings) -> Embedder | None:
    """The stamped model, loaded once per process; None when the memory has no vectors."""
    stamp = repo.model_stamp()
    if stamp is None or not repo.vectors.exists():
        return None
    from funes.inference.embedder import load_embedder

    embedder = load_embedder(settings, stamp.name)
    repo.check_model(_backlog.stamp_of(embedder))
    return embedder


def _reranker(settings: Settings, repo: Repository) -> Reranker | None:
    from funes.inference.reranker import load_reranker

    return load_reranker(settings, repo.config.get("model.rerank"), max_tokens=256)


def recall(
    settings: Settings,
    repo: Repository,
    query: str,
    *,
    k: int | None = None,
    candidates: int = 50,
    rerank_pool: int | None = None,
    half_life: float | None = None,
    neighbors: int = 1,
    harness: Sequence[str] = (),
    block_type: Sequence[str] = (),
    project: Sequence[str] = (),
    session: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    turns: frozenset[tuple[str, str]] | None = None,
    rerank: bool = True,
    vector: bool = True,
    bm25: bool = True,
    now: datetime | None = None,
    context: bool = False,
    time_hints: bool = False,
) -> RecallResult:
    """Hybrid recall over one memory (docs/design.md §8).

    `rerank_pool` (default: config `recall.rerankPool`, 4) is how many fused passages the
    cross-encoder re-scores: each costs about 40 ms on 2 cores, so it is the knob that trades
    latency for precision (bench/results/recall.md); 0 skips reranking like `rerank=False`.
    `context=True` and `time_hints=True` add the neighbour/session evidence and the question's
    time window (funes.retrieval.recall); both are off by default because neither beat the
    pipeline without them on LongMemEval (bench/results/recall-levers.md).
    """
    filters = Filters(
        harness=tuple(harness), block_type=tuple(block_type), project=tuple(project),
        session=tuple(session),
        since=parse_since(since) if since else None,
        until=parse_since(until) if until else None,
        turns=turns,
    )
    opts = Options(
        k=k if k is not None else int(repo.config.get("recall.k") or 8),
        candidates=candidates,
        rerank_pool=rerank_pool if rerank_pool is not None
        else int(repo.config.get("recall.rerankPool") or Options.rerank_pool),
        half_life_days=half_life if half_life is not None
        else float(repo.config.get("recall.halfLife") or 90),
        neighbors=neighbors,
        filters=filters,
        now=now,
        vector=vector,
        bm25=bm25,
        context=context,
        time_hints=time_hints,
    )
    opts.check()
    if not isinstance(repo, Snapshot):  # the warm server hands in its own, made the same way
        if bm25 and repo.chunks.exists():
            indexes.ensure(repo)  # index maintenance writes: on the live repository, first
        # One HEAD and one version of each table for the whole query, even while an index
        # run commits (funes.storage.snapshot).
        repo = snapshot(repo)
    embedder = _embedder_for(repo, settings) if vector else None
    reranker = _reranker(settings, repo) if rerank and opts.rerank_pool else None
    # The exact backlog scans every id (≈0.45 s at 100k chunks); a recall only needs to say
    # roughly how much is not embedded yet.
    waiting = _backlog.estimate(repo) if vector else 0
    result = _recall(repo, query, opts, embedder=embedder, reranker=reranker, backlog=waiting)
    _mark_untrusted(repo, result)
    return result


def _mark_untrusted(repo: Repository, result: RecallResult) -> None:
    """Set `row["untrusted"]` on hits added only by commits signed with an untrusted key."""
    if not result.hits:
        return
    from funes.storage.signing import untrusted_chunk_ids

    doubtful = untrusted_chunk_ids(repo)
    for hit in result.hits:
        if hit.row.get("id") in doubtful:
            hit.row["untrusted"] = True


def get(repo: Repository, session_id: str, turn_id: str, window: int = 0) -> list[TurnView]:
    """A turn and its neighbours, whole."""
    return get_turns(repo, session_id, turn_id, window)


def embed(
    settings: Settings,
    repo: Repository,
    *,
    budget: float | None = None,
    limit: int | None = None,
    model: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    lock_timeout: float | None = None,
    n_threads: int | None = None,
) -> DrainResult:
    """Embed the backlog newest first, within a time budget and/or a count.

    `lock_timeout=0` gives up at once when another process is writing (what hooks want);
    `n_threads` caps llama.cpp's threads (default: every CPU this process may use).
    """
    from funes.inference.embedder import load_embedder

    stamp = repo.model_stamp()
    name = model or (stamp.name if stamp else None) or repo.config.get("model.embed")
    embedder = load_embedder(settings, name, n_threads=n_threads)
    result = _backlog.drain(repo, embedder, budget=budget, limit=limit, progress=progress,
                            lock_timeout=lock_timeout)
    indexes.ensure_vectors(repo)
    return result


def reindex(
    settings: Settings,
    repo: Repository,
    model: str,
    *,
    budget: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> DrainResult:
    """Re-stamp the memory with `model` and re-embed every chunk with it, on purpose."""
    from funes.inference.embedder import load_embedder

    return _backlog.reindex(repo, load_embedder(settings, model), budget=budget,
                            progress=progress)


@dataclass(frozen=True)
class SearchStatus:
    """The search side of `status`."""

    backlog: int
    embedded: int
    not_embedded: int
    fts_index: bool
    unindexed_rows: int
    reranker: str | None
    ann_index: bool = False


def search_status(settings: Settings, repo: Repository) -> SearchStatus:
    """Embedding backlog, index state and whether a reranker is installed."""
    from funes.inference import models

    waiting = _backlog.backlog(repo)
    state = indexes.state(repo)
    found = models.find_installed(settings, kind="rerank")
    ann, _ = indexes.vector_index_state(repo)
    return SearchStatus(waiting.waiting, waiting.embedded, waiting.skipped, state.fts,
                        state.unindexed_rows, found[0].name if found else None, ann)


