"""Searching a memory: recall, get, embed (the backlog), and the search side of status.

Named for what it does rather than for its main verb, so that `funes.api.recall` is one thing:
the porcelain function (tests/test_architecture.py forbids a module named like an export).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from funes._env import Settings
from funes.api import freshness
from funes.api.ingest import parse_since
from funes.api.memory import check_writable
from funes.api.trust import mark_rows, mark_turns, passage_trust
from funes.ingest import backlog as _backlog
from funes.model.turns import HARNESSES, is_harness, is_role
from funes.retrieval import indexes
from funes.retrieval.get import TurnView, get_turns
from funes.retrieval.recall import Filters, Options, RecallResult, retrieve
from funes.storage.repo import Repository
from funes.storage.snapshot import Snapshot, snapshot

if TYPE_CHECKING:
    from funes.api.backfill import BackfillStatus
    from funes.inference.embedder import Embedder
    from funes.inference.reranker import Reranker

__all__ = [
    "BLOCK_TYPES",
    "DEFAULT_BUDGET_MS",
    "HARNESSES",
    "ROLES",
    "TOKENIZERS",
    "DrainResult",
    "RecallRequest",
    "RecallResult",
    "SearchStatus",
    "TurnView",
    "embed",
    "get",
    "is_harness",
    "is_role",
    "recall",
    "recall_in_process",
    "reindex",
    "search_status",
]

DrainResult = _backlog.DrainResult
#: Full-text tokenizers a memory can be stamped with (`funes reindex --tokenizer`).
TOKENIZERS = tuple(indexes.TOKENIZERS)
#: What `--harness` and `--type` accept: the vocabularies of recall's filters, for the CLI,
#: MCP and the warm server alike (the harnesses are funes.model.turns's).
BLOCK_TYPES = ("text", "thinking", "tool_use", "tool_result")
#: What `--role` accepts (funes.model.turns.Turn.role).
ROLES = ("user", "assistant", "system", "tool")
#: Milliseconds a recall may take before reranking stops (config `recall.budget`): agents
#: wait for every recall, and 300 ms is where a tool call starts to feel slow.
DEFAULT_BUDGET_MS = 300.0


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


def preload_reranker(settings: Settings, repo: Repository) -> None:
    """Load the memory's reranker into this process now (the warm server's warm-up)."""
    _reranker(settings, repo)


def _deferred_reranker(settings: Settings, repo: Repository) -> Deferred | None:
    """The installed reranker, to be loaded when a recall first needs it; None: none installed."""
    from funes.inference import models

    if models.find_installed(settings, kind="rerank", name=repo.config.get("model.rerank")) is None:
        return None
    return Deferred(lambda: _reranker(settings, repo))


@dataclass(frozen=True)
class RecallRequest:
    """One recall's question and knobs: spelled once, for the CLI, the server and the library.

    The CLI builds it from its options, `funes.api.warm` sends it to the warm server as JSON
    (`encode`/`decode`), and `recall` runs it. `None` means "the memory's config, else the
    default" (`recall.k`, `recall.rerankPool`, `recall.halfLife`, `recall.budget`).
    """

    query: str
    k: int | None = None
    candidates: int = 50
    #: Each signal returns depth × candidates passages (funes.retrieval.recall.Options.depth).
    depth: int = Options.depth
    #: Fused passages the cross-encoder re-scores (each ≈ 40 ms on 2 cores); 0 skips it.
    rerank_pool: int | None = None
    half_life: float | None = None
    neighbors: int = 1
    harness: tuple[str, ...] = ()
    block_type: tuple[str, ...] = ()
    project: tuple[str, ...] = ()
    session: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    #: Read the memory as it stood then (funes.retrieval.recall.Options.as_of): a date, an
    #: ISO time or an age (`30d`), like `since`.
    as_of: str | None = None
    turns: frozenset[tuple[str, str]] | None = None
    rerank: bool = True
    vector: bool = True
    bm25: bool = True
    now: datetime | None = None
    #: Neighbour/session evidence and the question's time window (off: measured not to help).
    context: bool = False
    time_hints: bool = False
    #: Favour the prose of the speaker the question is about (funes.retrieval.recall.speaker_of).
    speaker: bool = True
    #: Mark hits a later passage revisits, and rank it at least as high (retrieval.supersede).
    supersede: bool = True
    #: Milliseconds the whole recall may take before reranking stops (score what fits, in
    #: order); 0 never stops it early.
    budget_ms: float | None = None
    #: Only passages of these speakers (user, assistant, system, tool).
    role: tuple[str, ...] = ()
    #: A git work tree to check hits against (funes.api.freshness), and what to do with hits
    #: whose files changed since: "mark", "prefer" (after the others), "only" (drop), "off".
    code: str | None = None
    fresh: str = "mark"

    def __post_init__(self) -> None:
        for name in ("harness", "block_type", "project", "session", "role"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))  # lists from callers or the wire
        if self.turns is not None and not isinstance(self.turns, frozenset):
            object.__setattr__(self, "turns", frozenset(tuple(p) for p in self.turns))

    def encode(self) -> dict[str, Any]:
        """The request as JSON-able data (funes.protocol tags the datetime)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.turns is not None:
            out["turns"] = sorted(list(pair) for pair in self.turns)
        return out

    @classmethod
    def decode(cls, data: dict[str, Any]) -> RecallRequest:
        """The request `encode` described.

        Raises:
            TypeError: a field this code does not know (a client running other code).
        """
        return cls(**data)


def recall(
    settings: Settings,
    repo: Repository,
    query: str | RecallRequest,
    *,
    via_server: bool = False,
    **options: Any,
) -> RecallResult:
    """Hybrid recall over one memory (docs/design.md §8).

    Takes `query` and, as keywords, the fields of `RecallRequest` (or one whole request).

    With `via_server`, a running warm server answers (funes.api.warm; the CLI asks for it),
    else this process does; the result is the same either way. `rerank_pool` (default: config
    `recall.rerankPool`, 4) is how many fused passages the cross-encoder re-scores: each costs
    about 40 ms on 2 cores, so it is the knob that trades latency for precision
    (bench/results/recall.md); 0 skips reranking like `rerank=False`. `context=True` and
    `time_hints=True` add the neighbour/session evidence and the question's time window
    (funes.retrieval.recall); both are off by default because neither beat the pipeline
    without them on LongMemEval (bench/results/recall-levers.md).

    Raises:
        TypeError: an option `RecallRequest` does not have.
    """
    request = query if isinstance(query, RecallRequest) else RecallRequest(query, **options)
    if via_server:
        from funes.api import warm

        return warm.recall_via_server(settings, repo, request,
                                      lambda: recall_in_process(settings, repo, request))
    return recall_in_process(settings, repo, request)


def recall_in_process(settings: Settings, repo: Repository,
                      request: RecallRequest) -> RecallResult:
    """`recall` in this process (the warm server calls it with its pinned snapshot)."""
    r = request
    filters = Filters(
        harness=r.harness, block_type=r.block_type, project=r.project, session=r.session,
        since=parse_since(r.since) if r.since else None,
        until=parse_since(r.until, option="--until") if r.until else None,
        turns=r.turns, role=r.role,
    )
    freshness.check_mode(r.fresh)
    k = r.k if r.k is not None else int(repo.config.get("recall.k") or 8)
    opts = Options(
        k=freshness.overfetch(k, r.fresh) if r.code else k,
        candidates=r.candidates,
        depth=r.depth,
        rerank_pool=r.rerank_pool if r.rerank_pool is not None
        else int(repo.config.get("recall.rerankPool") or Options.rerank_pool),
        half_life_days=r.half_life if r.half_life is not None
        else float(repo.config.get("recall.halfLife") or 90),
        neighbors=r.neighbors,
        filters=filters,
        now=r.now,
        as_of=parse_since(r.as_of, option="--as-of") if r.as_of else None,
        vector=r.vector,
        bm25=r.bm25,
        context=r.context,
        time_hints=r.time_hints,
        speaker=r.speaker,
        supersede=r.supersede,
    )
    opts.check()
    budget = r.budget_ms if r.budget_ms is not None else _config_budget(repo)
    if not isinstance(repo, Snapshot):  # the warm server hands in its own, made the same way
        if r.bm25 and repo.chunks.exists():
            # index maintenance writes: on the live repository, first; a tokenizer stamp
            # pulled from elsewhere rebuilds the full-text index here (funes reindex)
            indexes.retokenize(repo)
        # One HEAD and one version of each table for the whole query, even while an index
        # run commits (funes.storage.snapshot).
        repo = snapshot(repo)
    embedder = _embedder_for(repo, settings) if r.vector else None
    reranker = _deferred_reranker(settings, repo) if r.rerank and opts.rerank_pool else None
    # The budget counts the search, not loading models (a cold process's one-off cost; the
    # reranker's, loaded only when a recall gets to reranking, is added to the deadline).
    started = time.monotonic()
    timed = None
    if reranker is not None and budget > 0:
        timed = Budgeted(reranker, started + budget / 1000.0)
    # The query embedding runs beside BM25 (llama.cpp and Lance both release the GIL).
    ahead = Prefetched(embedder, r.query) if embedder is not None else None
    # The exact backlog scans every id (≈0.45 s at 100k chunks); a recall only needs to say
    # roughly how much is not embedded yet.
    waiting = _backlog.estimate(repo) if r.vector else 0
    # Both wrappers do what retrieval asks of an embedder and a reranker (duck-typed).
    result = retrieve(repo, r.query, opts, embedder=cast("Embedder | None", ahead),
                     reranker=cast("Reranker | None", timed or reranker), backlog=waiting)
    if timed is not None:
        timed.report(result.signals)
    if r.code and r.fresh != "off":
        freshness.annotate(settings, repo, result.hits, r.code)
        result.hits = freshness.order(result.hits, r.fresh, k)
    _mark_untrusted(repo, result)
    _note_foreign(repo, result)
    if timed is not None:
        timed.finish()
    return result


def _note_foreign(repo: Repository, result: RecallResult) -> None:
    """A copy of a Rust-funes memory whose vectors cannot be used here says so (lexical only)."""
    from funes.api.foreign import foreign_signal

    signal = foreign_signal(repo)
    if signal is not None and "vector" not in result.signals:
        result.signals.append(signal)


def _config_budget(repo: Repository) -> float:
    value = repo.config.get("recall.budget")
    try:
        return float(value) if value else DEFAULT_BUDGET_MS
    except ValueError:
        return DEFAULT_BUDGET_MS


class Prefetched:
    """An embedder whose query vector is being computed already, in a thread of its own.

    Retrieval asks for the vector after BM25 has run; by then it is usually ready, so the two
    overlap instead of adding up. Any other text is embedded the ordinary way.
    """

    def __init__(self, embedder: Embedder, query: str) -> None:
        self._embedder = embedder
        self._query = query
        self._vector: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="embed-query", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._vector = self._embedder.embed_query(self._query)
        except BaseException as exc:  # re-raised in the caller's thread
            self._error = exc

    def embed_query(self, text: str) -> Any:
        if text != self._query:
            return self._embedder.embed_query(text)
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._vector

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)


class Deferred:
    """A reranker loaded on its first use, so a recall that never reranks never loads it.

    A cold process pays ≈ 0.15 s CPU to load the cross-encoder, and its first recall often
    does not use it: the head was decided (funes.retrieval.margin) or the budget was spent
    reading cold indexes. `ready` loads it and says how long that took.
    """

    def __init__(self, load: Callable[[], Reranker | None]) -> None:
        self._load = load
        self._reranker: Reranker | None = None
        self._loaded = False

    def ready(self) -> float:
        """Load the reranker if not yet; the seconds that took (0 once loaded)."""
        if self._loaded:
            return 0.0
        started = time.monotonic()
        self._reranker = self._load()
        self._loaded = True
        return time.monotonic() - started

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.ready()
        if self._reranker is None:  # uninstalled since the recall began
            return []
        return self._reranker.score(query, passages)


#: Most of a deadline the measured tail may reserve (a slow outlier must not stop reranking).
MAX_TAIL_S = 0.1


class Budgeted:
    """A reranker that scores passages in order until the recall's deadline, then stops.

    The cross-encoder costs about 40 ms a passage on a quiet 2-core machine and twice that
    when the other core is busy; a deadline keeps the recall's latency where agents feel it
    and spends what is left on the best-fused passages first. A passage is started only when
    the time the previous one took still fits; the first one, when the last passage this
    process scored would still fit (a first passage started blindly overran the 300 ms budget
    at 113k chunks beside a busy core, bench/results/fast-path.md). That estimate is halved
    each time it alone keeps a recall from reranking, so one slow passage cannot stop
    reranking for good. `report` then says in the result's signals how many of the pool
    were scored (`rerank budget: 2/4`; `rerank` is there when any was).
    """

    #: Seconds the last passage scored in this process took (one reranker per process).
    passage_cost = 0.0
    #: Seconds the last budgeted recall spent after reranking (ordering, neighbouring turns,
    #: trust marks): the deadline is for the whole recall, so reranking leaves room for it.
    tail_cost = 0.0

    def __init__(self, reranker: Reranker | Deferred, deadline: float) -> None:
        self._reranker = reranker
        self._deadline = deadline
        self.asked = 0
        self.scored = 0
        self._done: float | None = None

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.asked = len(passages)
        scores: list[float] = []
        cost = Budgeted.passage_cost
        for passage in passages:
            now = time.monotonic()
            if now + cost + Budgeted.tail_cost > self._deadline:
                if not scores and now <= self._deadline:
                    Budgeted.passage_cost = cost / 2  # only the estimate said no
                break
            if isinstance(self._reranker, Deferred):
                self._deadline += self._reranker.ready()  # loading is not searching
                now = time.monotonic()
            scores.extend(self._reranker.score(query, [passage]))
            cost = Budgeted.passage_cost = time.monotonic() - now
        self.scored = len(scores)
        self._done = time.monotonic()
        return scores

    def finish(self) -> None:
        """Note how long the recall ran after reranking, for the next one's deadline."""
        if self._done is not None:
            Budgeted.tail_cost = min(time.monotonic() - self._done, MAX_TAIL_S)

    def report(self, signals: list[str]) -> None:
        """Add `rerank budget: scored/asked` to the signals when the deadline cut the pool."""
        if self.asked and self.scored < self.asked:
            signals.append(f"rerank budget: {self.scored}/{self.asked}")


def _mark_untrusted(repo: Repository, result: RecallResult) -> None:
    """Set `row["untrusted"]` on the hits and neighbours the trust decision marks.

    funes.api.trust decides for every output: another owner's memory marks everything but
    the user's own turns; the user's memory marks rows no commit they trust vouches for.
    """
    if not result.hits:
        return
    trust = passage_trust(repo)
    mark_rows(trust, (hit.row for hit in result.hits))
    mark_rows(trust, (n for hit in result.hits for n in hit.neighbors))


def get(repo: Repository, session_id: str, turn_id: str, window: int = 0, *,
        via_server: bool = False) -> list[TurnView]:
    """A turn and its neighbours, whole, each marked untrusted as funes.api.trust decides.

    With `via_server`, a running warm server answers (funes.api.warm), else this process.
    """
    if via_server:
        from funes.api import warm

        return warm.get_via_server(repo.settings, repo, session_id, turn_id, window,
                                   lambda: get(repo, session_id, turn_id, window))
    return mark_turns(passage_trust(repo), get_turns(repo, session_id, turn_id, window))


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

    check_writable(repo, command="embed")
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
    model: str | None = None,
    *,
    tokenizer: str | None = None,
    budget: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> DrainResult | None:
    """Re-embed the memory with `model`, and/or re-stamp its full-text tokenizer, on purpose.

    `model` re-stamps the embedding model and re-embeds every chunk with it; `tokenizer` (one
    of `indexes.TOKENIZERS`) re-stamps the tokenizer and rebuilds the full-text index. The
    tokenizer stamp travels with the commits (a clone or a pull rebuilds its index on its
    first recall), so every machine searches the memory the same way. Returns the embedding
    result, None when only the tokenizer changed.

    Raises:
        UsageError: neither given, or a tokenizer funes does not know.
    """
    from funes.errors import UsageError

    check_writable(repo, command="reindex")
    if model is None and tokenizer is None:
        raise UsageError("nothing to re-index", hint="pass --model NAME and/or --tokenizer NAME")
    if tokenizer is not None:
        if tokenizer not in indexes.TOKENIZERS:
            raise UsageError(f"unknown tokenizer {tokenizer!r}",
                             hint=f"use one of: {', '.join(indexes.TOKENIZERS)}")
        repo.commit_chunks([], f"reindex: full-text tokenizer {tokenizer}", tokenizer=tokenizer)
        indexes.retokenize(repo)
    if model is None:
        return None
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
    #: The background embedding (funes.api.backfill), when one ever ran on this memory.
    backfill: BackfillStatus | None = None


def search_status(settings: Settings, repo: Repository) -> SearchStatus:
    """Embedding backlog, index state, the backfill and whether a reranker is installed."""
    from funes.api.backfill import backfill_status
    from funes.inference import models

    waiting = _backlog.backlog(repo)
    state = indexes.state(repo)
    found = models.find_installed(settings, kind="rerank")
    ann, _ = indexes.vector_index_state(repo)
    return SearchStatus(waiting.waiting, waiting.embedded, waiting.skipped, state.fts,
                        state.unindexed_rows, found[0].name if found else None, ann,
                        backfill_status(repo))


