"""Pooled recall: one ranking over several memories (`--memory A --memory B …`).

A user often has their own memory, a team's and a public project's. Asking each and merging
by hand loses the ranking; asking them here gives one list:

1. Each memory is opened the way a single recall opens it (the caller hands in the
   `MemoryChoice` the single-memory path made: which memory, its label, whose it is), pinned
   to a snapshot, and searched in its own thread without reranking (BM25, vectors, fusion,
   recency: funes.retrieval.recall). The query is embedded once per embedding model.
2. The candidates are merged; a chunk held by several memories (a team clone of one's own)
   is kept once, labelled with the first of them that is the user's (else the first listed).
3. One cross-encoder pass re-scores the best fused passages of the whole pool, within the
   recall's time budget, exactly as a single recall re-scores its own: reranker scores are
   comparable across memories, fused scores are not, so reranked passages lead.
4. Top k without repeated text, then each memory attaches its hits' neighbouring turns and
   marks its passages signed by untrusted keys. Every hit's row names its memory
   (`row["memory"]`, the label `--memory` takes) and the agent format prints it in the `→`
   line; a memory that is not the user's gets its own warning line and marks.

The cost is one retrieval per memory (concurrent) plus one reranking, so three memories cost
far less than three recalls (bench/results/browse.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from funes._env import Settings
from funes.api import freshness
from funes.api.ingest import parse_since
from funes.api.memory import MemoryChoice
from funes.api.search import (
    Budgeted,
    RecallRequest,
    _config_budget,
    _deferred_reranker,
    _embedder_for,
    _mark_untrusted,
)
from funes.errors import UsageError
from funes.retrieval import indexes
from funes.retrieval.recall import (
    MAX_K,
    Filters,
    Hit,
    Options,
    RecallResult,
    _select,
    attach_neighbors,
    passage_factor,
    retrieve,
)
from funes.retrieval.speaker import speaker_of
from funes.storage.repo import Repository
from funes.storage.snapshot import snapshot

if TYPE_CHECKING:
    from funes.inference.embedder import Embedder

__all__ = ["MAX_POOL", "pool_choices", "recall_pooled"]

#: Most memories one pooled recall reads.
MAX_POOL = 8


@dataclass(frozen=True)
class _Member:
    choice: MemoryChoice
    view: Repository


class _OneQuery:
    """An embedder that embeds the recall's query once, whichever memory asks for it."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._lock = threading.Lock()
        self._vectors: dict[str, Any] = {}

    def embed_query(self, text: str) -> Any:
        with self._lock:
            if text not in self._vectors:
                self._vectors[text] = self._embedder.embed_query(text)
            return self._vectors[text]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)


def recall_pooled(settings: Settings, choices: Sequence[MemoryChoice],
                  request: RecallRequest) -> RecallResult:
    """One recall over the memories of `choices`, ranked together (module docstring).

    Raises:
        UsageError: no memory, more than MAX_POOL, or options recall refuses.
    """
    if not choices:
        raise UsageError("a pooled recall needs at least one memory")
    if len(choices) > MAX_POOL:
        raise UsageError(f"at most {MAX_POOL} memories in one recall, not {len(choices)}")
    freshness.check_mode(request.fresh)
    r = request
    first = choices[0].repo
    k = r.k if r.k is not None else int(first.config.get("recall.k") or 8)
    pool_size = r.rerank_pool if r.rerank_pool is not None \
        else int(first.config.get("recall.rerankPool") or Options.rerank_pool)
    opts = Options(
        k=min(MAX_K, max(k * 2, pool_size)), candidates=r.candidates, depth=r.depth,
        rerank_pool=0,
        half_life_days=r.half_life if r.half_life is not None
        else float(first.config.get("recall.halfLife") or 90),
        neighbors=0, now=r.now, vector=r.vector, bm25=r.bm25, context=r.context,
        time_hints=r.time_hints, speaker=r.speaker, supersede=r.supersede,
        as_of=parse_since(r.as_of, option="--as-of") if r.as_of else None,
        filters=Filters(harness=r.harness, block_type=r.block_type, project=r.project,
                        session=r.session, role=r.role,
                        since=parse_since(r.since) if r.since else None,
                        until=parse_since(r.until, option="--until") if r.until else None,
                        turns=r.turns),
    )
    opts.check()
    Options(k=k, rerank_pool=pool_size).check()
    members = _open(choices, r.bm25)
    embedders: dict[str, _OneQuery] = {}
    started = time.monotonic()  # the budget counts the searches too, as in a single recall
    per_memory = _search(settings, members, r.query, opts, embedders)
    hits = _merge(members, per_memory)
    signals = list(dict.fromkeys(s for result in per_memory for s in result.signals))
    if r.rerank and pool_size and hits:
        _rerank(settings, members[0].view, r, hits, pool_size, opts, started, signals)
    hits.sort(key=lambda h: h.score, reverse=True)
    chosen = _select(hits, freshness.overfetch(k, r.fresh) if r.code else k, 1.0)
    by_label = {m.choice.label: m for m in members}
    for label, member in by_label.items():
        mine = [h for h in chosen if h.row["memory"] == label]
        if r.neighbors:
            attach_neighbors(member.view, mine, r.neighbors)
        if r.code and r.fresh != "off":
            freshness.annotate(settings, member.view, mine, r.code)
        _mark_untrusted(member.view, RecallResult(r.query, mine, []))
    if r.code and r.fresh != "off":
        chosen = freshness.order(chosen, r.fresh, k)
    return RecallResult(r.query, chosen[:k], [*signals, "pool"],
                        sum(res.backlog for res in per_memory),
                        sum(res.candidates for res in per_memory))


def _open(choices: Sequence[MemoryChoice], bm25: bool) -> list[_Member]:
    members = []
    seen: set[str] = set()
    for choice in choices:
        key = str(choice.repo.path.resolve())
        if key in seen:
            continue  # the same memory named twice reads once
        seen.add(key)
        if bm25 and choice.repo.chunks.exists():
            indexes.retokenize(choice.repo)  # index maintenance writes: before pinning
        members.append(_Member(choice, snapshot(choice.repo)))
    return members


def _search(settings: Settings, members: Sequence[_Member], query: str, opts: Options,
            embedders: dict[str, _OneQuery]) -> list[RecallResult]:
    """Each memory's candidates (no reranking), searched concurrently."""
    from funes.ingest import backlog as _backlog

    def one(member: _Member) -> RecallResult:
        view = member.view
        embedder = None
        if opts.vector:
            found = _embedder_for(view, settings)
            if found is not None:
                embedder = embedders.setdefault(str(found.path), _OneQuery(found))
        waiting = _backlog.estimate(view) if opts.vector else 0
        result = retrieve(view, query, opts, embedder=cast("Embedder | None", embedder),
                          backlog=waiting)
        for hit in result.hits:
            hit.row["memory"] = member.choice.label
        return result

    if len(members) == 1:
        return [one(members[0])]
    with ThreadPoolExecutor(max_workers=len(members), thread_name_prefix="pool") as run:
        return list(run.map(one, members))


def _merge(members: Sequence[_Member], results: Sequence[RecallResult]) -> list[Hit]:
    """Every memory's hits in one list, a chunk held by several kept once (module docstring)."""
    owned = {m.choice.label: m.choice.owned for m in members}
    best: dict[str, Hit] = {}
    for result in results:
        for hit in result.hits:
            kept = best.get(hit.id)
            if kept is None:
                best[hit.id] = hit
                continue
            label = kept.row["memory"]
            if not owned[label] and owned[hit.row["memory"]]:
                label = hit.row["memory"]
            top = max(kept, hit, key=lambda h: h.score)
            best[hit.id] = replace(top, row={**top.row, "memory": label})
    return sorted(best.values(), key=lambda h: h.score, reverse=True)


def _rerank(settings: Settings, repo: Repository, r: RecallRequest, hits: list[Hit],
            pool_size: int, opts: Options, started: float, signals: list[str]) -> None:
    """Re-score the best `pool_size` hits of the pool with one cross-encoder pass."""
    reranker = _deferred_reranker(settings, repo)
    if reranker is None:
        return
    budget = r.budget_ms if r.budget_ms is not None else _config_budget(repo)
    scorer: Any = Budgeted(reranker, started + budget / 1000.0) if budget > 0 else reranker
    head = hits[:pool_size]
    scores = scorer.score(r.query, [h.row["text"] for h in head])
    now = opts.as_of or opts.now or datetime.now(UTC)
    about = speaker_of(r.query) if opts.speaker else None
    for hit, s in zip(head[: len(scores)], scores, strict=True):
        probability = 1.0 / (1.0 + math.exp(-s))
        hit.rerank = s
        hit.score = (1.0 + probability) * passage_factor(hit.row, now, opts.half_life_days,
                                                         about)
    if scores:
        signals.append("rerank")
    if isinstance(scorer, Budgeted):
        scorer.report(signals)
        scorer.finish()


def pool_choices(settings: Settings, memories: Sequence[str], *,
                 default: str | None = None) -> list[MemoryChoice]:
    """The memories one recall reads, each opened the way a single recall opens it.

    Several `--memory` values: those. One: that one. None: `default` (else the memory found
    from the current directory) and the memories its `recall.pool` config lists
    (space-separated; a relative path is read against the memory's parent directory).
    """
    from funes.api.memory import choose_memory, is_remote_memory

    named = list(dict.fromkeys(memories))
    if len(named) > 1:
        return [choose_memory(settings, m) for m in named]
    base = choose_memory(settings, named[0] if named else default)
    if named:
        return [base]
    extra = []
    for entry in (base.repo.config.get("recall.pool") or "").split():
        if not is_remote_memory(entry, settings.cwd) and not Path(entry).expanduser().is_absolute():
            entry = str((base.repo.path.parent / entry).resolve())
        extra.append(choose_memory(settings, entry))
    return [base, *extra]
