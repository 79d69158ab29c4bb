"""Recall: the hybrid retrieval pipeline of docs/design.md §8.

Filters → BM25 and vector candidates → score fusion → rerank → recency → supersession (a later
session that revisits a hit's subject ranks at least as high, funes.retrieval.supersede) →
dedup → top-k → neighbouring context. `Options.as_of` reads the memory as it stood then.

Fusion (`fuse`): every BM25 candidate also gets its true cosine (looked up by id, so a passage
that BM25 found and the vector top-N just missed is not scored as if unrelated); each signal's
scores become z-scores over its candidates, and the fused score is the convex mix
BM25_WEIGHT·z_bm25 + (1 − BM25_WEIGHT)·z_cos, rescaled to [0, 1]. On LongMemEval this beat
reciprocal-rank fusion (RRF) and max- or min-max-normalised mixes: it keeps the vector path's
lead where BM25 is weak (S sample) and stops a weak vector signal from dragging down a strong
BM25 one (pooled oracle), over a flat range of weights (0.35–0.425): bench/results/
fusion-study.md and the knob sweep in bench/results/recall.md.

Each signal returns `Options.depth` × `candidates` passages, but the z-scores' scale comes from
its first `candidates` only: the head is scored as before, and a passage one signal ranked just
past the cut and the other ranks high can still rise (recall-levers.md, round four).

Around the fused score, on request (`Options.context`, `Options.time_hints`; both off by
default, because neither beat the pipeline without them on LongMemEval, bench/results/recall-
levers.md): a passage is also judged by where it sits. Its neighbouring turns in the candidate
pool lend it part of their score (an answer is found through the question it answers, and the
other way round), and a session with several good passages lends each of them part of its
second- and third-best scores, so a session that holds the answer in several places beats a lone
lucky match. When the question names a time ("last week", "three days ago", `timeexpr`),
passages from then are boosted (never filtered). In the final top k, every further passage of a
session that already has one counts a little less, so one long session cannot crowd the others
out.

Each signal can be missing without breaking the others: chunks still waiting for embeddings
take part through BM25, a memory with no vectors at all answers through BM25 alone, and with
no reranker installed the fused order stands. The result says which signals ran.

One file because every step reads and rescores the same candidate pool and its rows; split,
each module would take and return all of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from funes.errors import UsageError
from funes.ingest.represent import vector_label
from funes.retrieval import indexes, timeexpr
from funes.retrieval.intent import asks_advice
from funes.retrieval.margin import RERANK_SKIPPED, head_decided
from funes.retrieval.speaker import speaker_factor, speaker_of
from funes.retrieval.supersede import supersede
from funes.storage.repo import Repository

if TYPE_CHECKING:
    from funes.inference.protocols import EmbedderProtocol, RerankerProtocol

#: Reciprocal-rank-fusion constant (Cormack et al.): damps the head of each list. Orders a
#: single signal's candidates (BM25 alone, or vectors alone); two signals are fused by score.
RRF_K = 60
#: Share of BM25 in the fused score of two signals; the vector similarity has the rest.
BM25_WEIGHT = 0.4
#: BM25's share when the question asks for advice (funes.retrieval.intent): its words name a
#: need, and the passage that answers it says the user's situation in other words, which the
#: vector similarity reaches and BM25 does not. Pooled LongMemEval oracle, preference
#: questions (29 of 30 are advice requests): R@5 0.367 → 0.467 at 0.1, no other question
#: touched; day zero (1,000 sessions, embedded): preference hit@1 4 → 6 of 20, hit@1 / hit@5
#: 69 / 86 → 71 / 87 (bench/results/recall-levers.md round five, bench/results/day0.md).
ADVICE_BM25_WEIGHT = 0.1
#: Weight of recency in the final score: at most this fraction of a passage's score depends on
#: its age, so recency orders near-equals but never buries an old passage that is the answer.
RECENCY_WEIGHT = 0.10
#: Scaffolding (system reminders, injected context) counts this much of its score.
NOISE_FACTOR = 0.6
#: Tool output counts this much of its score: on real coding traces it took 12-35% of the top 8
#: for the users' own requests asked back, and the turn that answered was found more often
#: without it (bench/results/tool-output.md). It stays searchable: an error message or an
#: identifier only tool output holds still ranks first on its words.
TOOL_RESULT_FACTOR = 0.8
#: Share of the best neighbouring turn's fused score a passage borrows (see `with_context`).
NEIGHBOR_WEIGHT = 0.15
#: Share of its session's second- and third-best fused scores a passage borrows.
SESSION_WEIGHT = 0.15
#: Each further passage of a session already in the top k counts this much more weakly.
SESSION_REPEAT = 0.9
#: Most a passage inside the question's time window gains (× 1 + TIME_WEIGHT).
TIME_WEIGHT = 0.5
#: ANN candidates re-scored on full vectors, per result wanted (see `vector_search`).
REFINE_FACTOR = 2
MAX_K = 200
MAX_RERANK_POOL = 200
MAX_CANDIDATES = 1000
MAX_DEPTH = 4

ROW_COLUMNS = [
    "id", "text", "harness", "session_id", "turn_id", "parent_turn_id", "seq", "ts", "time",
    "role", "block_type", "block_idx", "split_idx", "tool_name", "workdir", "project", "noise",
]


class InvalidQueryError(UsageError):
    """A query or option recall cannot run with."""


@dataclass(frozen=True)
class Filters:
    """Restrictions applied before any search ranks anything."""

    harness: tuple[str, ...] = ()
    block_type: tuple[str, ...] = ()
    project: tuple[str, ...] = ()
    session: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    #: (session_id, turn_id) pairs allowed (e.g. the turns linked to a code commit).
    turns: frozenset[tuple[str, str]] | None = None
    #: Speakers allowed (user, assistant, …). The embedding tables have no role column, so
    #: vector candidates are filtered after the search (`admits`), chunk queries before it.
    role: tuple[str, ...] = ()

    def sql(self, *, chunks: bool = False) -> str | None:
        """The filter as a Lance SQL predicate over vector columns, or `chunks` columns."""
        parts = []
        if chunks and self.role:
            parts.append(f"role IN ({', '.join(_lit(v) for v in self.role)})")
        for column, values in (
            ("harness", self.harness),
            ("block_type", self.block_type),
            ("session_id", self.session),
        ):
            if values:
                parts.append(f"{column} IN ({', '.join(_lit(v) for v in values)})")
        if self.project:
            ors = [f"project = {_lit(p)} OR workdir = {_lit(p)}" for p in self.project]
            parts.append("(" + " OR ".join(ors) + ")")
        if self.since:
            parts.append(f"time >= {_ts(self.since)}")
        if self.until:
            parts.append(f"time < {_ts(self.until)}")
        if self.turns is not None:
            sessions = sorted({s for s, _ in self.turns}) or ["\0none"]
            parts.append(f"session_id IN ({', '.join(_lit(s) for s in sessions)})")
        return " AND ".join(parts) if parts else None

    def admits(self, row: dict[str, Any]) -> bool:
        """The part of the filter SQL cannot say exactly (turn pairs, roles of vector hits)."""
        if self.role and row.get("role") not in self.role:
            return False
        return self.turns is None or (row["session_id"], row["turn_id"]) in self.turns


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ts(when: datetime) -> str:
    return f"TIMESTAMP '{when.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}'"


@dataclass
class Hit:
    """One recalled passage with its provenance and how it scored."""

    row: dict[str, Any]
    score: float
    bm25_rank: int | None = None
    vector_rank: int | None = None
    rerank: float | None = None
    neighbors: list[dict[str, Any]] = field(default_factory=list)
    #: Other passages with the same text (`session_id`, `turn_id`, `harness`, `ts`) that the
    #: top k leaves out for this one (`_select`): a session resumed or copied says the same
    #: words again, and the words must not take two places, but where else they were said is
    #: still an answer (a session-level question is answered by either session).
    copies: list[dict[str, Any]] = field(default_factory=list)
    #: The row of a later passage of the same place that revisits this one's subject
    #: (funes.retrieval.supersede); None when nothing later does.
    revisited: dict[str, Any] | None = None

    @property
    def id(self) -> str:
        """The chunk id."""
        return str(self.row["id"])


@dataclass
class RecallResult:
    """Hits, plus what ran: the agent contract reports degraded signals honestly."""

    query: str
    hits: list[Hit]
    signals: list[str]  # e.g. ["bm25", "vector", "rerank", "recency"]
    backlog: int = 0  # chunks not embedded yet (searchable through BM25 only)
    candidates: int = 0


@dataclass(frozen=True)
class Options:
    """Knobs of one recall."""

    k: int = 8
    #: Passages per signal the fusion is normalised on (see `fuse`).
    candidates: int = 50
    #: Each signal returns `depth` × `candidates` passages; the ones past the first
    #: `candidates` join the pool without changing how the first are scored (`fuse`).
    depth: int = 2
    #: Passages the cross-encoder scores (about 40 ms each at a 256-token pair cap on 2
    #: cores, against ≈ 110 ms for the rest of a recall at 100k chunks): 4 keeps a warm
    #: recall's p50 within 300 ms there (bench/results/recall.md). 0 turns reranking off.
    rerank_pool: int = 4
    half_life_days: float = 90.0
    neighbors: int = 1
    filters: Filters = Filters()
    now: datetime | None = None
    #: Read the memory as it stood at this moment: only passages dated before it, recency
    #: measured from it, and only what was said by then can revisit a hit.
    as_of: datetime | None = None
    vector: bool = True
    bm25: bool = True
    #: Neighbouring turns and session evidence (`with_context`) and session diversity. Off by
    #: default: measured against the pipeline without it, it lowered R@1 on LongMemEval
    #: (bench/results/recall-levers.md).
    context: bool = False
    #: Boost passages from the time the question names (`timeexpr`). Off by default: level
    #: within noise on LongMemEval (bench/results/recall-levers.md).
    time_hints: bool = False
    #: Favour the prose of the speaker the question is about (funes.retrieval.speaker).
    speaker: bool = True
    #: Mark hits that a later passage revisits and rank that passage at least as high
    #: (funes.retrieval.supersede).
    supersede: bool = True

    def check(self) -> None:
        """Refuse options that cannot make sense, with the bound in the message."""
        if not 1 <= self.k <= MAX_K:
            raise InvalidQueryError(f"-k must be between 1 and {MAX_K}, not {self.k}")
        if not 1 <= self.candidates <= MAX_CANDIDATES:
            raise InvalidQueryError(
                f"--candidates must be between 1 and {MAX_CANDIDATES}, not {self.candidates}"
            )
        if not math.isfinite(self.half_life_days) or self.half_life_days < 0:
            raise InvalidQueryError(
                "--half-life must be a finite number ≥ 0 days (0 turns recency off)")
        if not 0 <= self.rerank_pool <= MAX_RERANK_POOL:
            raise InvalidQueryError(
                f"--rerank-pool must be between 0 and {MAX_RERANK_POOL}, not {self.rerank_pool}"
            )
        if not 0 <= self.neighbors <= 20:
            raise InvalidQueryError("--neighbors must be between 0 and 20")
        if not 1 <= self.depth <= MAX_DEPTH:
            raise InvalidQueryError(f"depth must be between 1 and {MAX_DEPTH}, not {self.depth}")


_FTS_SAFE = re.compile(r"[^\w\s]", re.UNICODE)


def bm25(repo: Repository, query: str, opts: Options, where: str | None) -> list[dict[str, Any]]:
    """Top rows by BM25 (Lance's inverted index; rows appended since are scanned flat)."""
    terms = " ".join(_FTS_SAFE.sub(" ", query).split())
    if not terms:
        return []
    ds = repo.chunks.dataset()
    table = ds.to_table(
        full_text_query=terms,
        columns=[*ROW_COLUMNS, "_score"],
        filter=where,
        prefilter=True,
        limit=opts.candidates * opts.depth,
    )
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def vector_search(
    repo: Repository, qvec: Any, opts: Options, where: str | None
) -> list[tuple[str, float]]:
    """Top chunk ids by cosine similarity (exact while small; Lance ANN when indexed).

    With the ANN index the scalar-quantised distances only pick candidates: `refine_factor`
    re-scores REFINE_FACTOR × k of them on the full vectors, so the order and the cosines the
    fusion blends are exact (recall@50 against exact search 0.987 → 0.996 on real LongMemEval
    vectors, +3 ms). A flat search ignores it.
    """
    if not repo.vectors.exists():
        return []
    wanted = vector_label(repo)
    if wanted is None:
        return []
    # Vectors of a model re-indexed away from, or of another representation, stay on disk:
    # only the memory's own kind is searched (see funes.ingest.represent).
    only_model = f"model = {_lit(wanted)}"
    ds = repo.vectors.dataset()
    table = ds.to_table(
        nearest={"column": "vector", "q": qvec, "k": opts.candidates * opts.depth,
                 "metric": "cosine", "refine_factor": REFINE_FACTOR},
        columns=["id", "_distance"],
        filter=f"{only_model} AND ({where})" if where else only_model,
        prefilter=True,
    )
    ids = table.column("id").to_pylist()
    dists = table.column("_distance").to_pylist()
    return [(i, 1.0 - float(d)) for i, d in zip(ids, dists, strict=True)]


def fetch_rows(repo: Repository, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Chunk rows by id (the B-tree index makes this a lookup, not a scan)."""
    if not ids:
        return {}
    quoted = ", ".join(_lit(i) for i in ids)
    table = repo.chunks.dataset().to_table(columns=ROW_COLUMNS, filter=f"id IN ({quoted})")
    return {row["id"]: row for row in table.to_pylist()}


def _age_days(row: dict[str, Any], now: datetime) -> float | None:
    """Days between the passage and `now`, either way.

    A passage can postdate `now`: a memory merged from a machine whose clock runs ahead (then
    the distance is minutes and it counts as new), or a recall asked as of a past moment (then
    a passage months after it is no more "recent" than one months before). Counting it as age
    0 would give it the full boost in both cases.
    """
    when = row.get("time")
    if when is None:
        return None
    return abs(float((now - when).total_seconds())) / 86400


def recency_factor(age_days: float | None, half_life: float) -> float:
    """1 for a passage from now, falling to 1 − RECENCY_WEIGHT for a very old one."""
    if half_life <= 0 or age_days is None:
        return 1.0
    decay = math.pow(0.5, age_days / half_life)
    return (1.0 - RECENCY_WEIGHT) + RECENCY_WEIGHT * decay


def _normalise(text: str) -> str:
    return " ".join(text.lower().split())


def retrieve(
    repo: Repository,
    query: str,
    opts: Options,
    *,
    embedder: EmbedderProtocol | None = None,
    reranker: RerankerProtocol | None = None,
    backlog: int = 0,
) -> RecallResult:
    """Run the pipeline; see the module docstring."""
    if not query.strip():
        raise InvalidQueryError(
            "the query is empty", hint='pass the words to look for: funes recall "…"'
        )
    opts.check()
    now = opts.as_of or opts.now or datetime.now(UTC)
    signals: list[str] = []
    filters = opts.filters
    if opts.as_of is not None:
        until = opts.as_of if filters.until is None else min(filters.until, opts.as_of)
        filters = replace(filters, until=until)
    where = filters.sql()
    hidden = repo.tombstoned_ids()

    lexical: list[dict[str, Any]] = []
    # an empty table has no full-text index to search (and nothing to find)
    if opts.bm25 and repo.chunks.exists() and indexes.ensure(repo).fts:
        lexical = [r for r in bm25(repo, query, opts, filters.sql(chunks=True))
                   if r["id"] not in hidden and filters.admits(r)]
        signals.append("bm25")
    semantic: list[tuple[str, float]] = []
    cosines: dict[str, float] = {}
    advice = asks_advice(query)
    if opts.vector and embedder is not None and repo.vectors.exists():
        qvec = embedder.embed_query(query)
        semantic = [(i, s) for i, s in vector_search(repo, qvec, opts, where) if i not in hidden]
        signals.append("vector")
        if lexical:
            found = {i for i, _ in semantic}
            cosines = vector_scores(repo, qvec, [r["id"] for r in lexical if r["id"] not in found])

    seen_bm25 = _tied_ranks([(r["id"], float(r["_score"])) for r in lexical])
    seen_vec = _tied_ranks(semantic)
    weight = ADVICE_BM25_WEIGHT if advice else BM25_WEIGHT
    fused = fuse(lexical, semantic, cosines, head=opts.candidates, bm25_weight=weight)
    # Stable sort: equal scores keep BM25's order, then the vector list's.
    pool = sorted(fused, key=lambda c: fused[c], reverse=True)
    rows = {r["id"]: r for r in lexical}
    missing = [c for c in pool if c not in rows]
    rows.update(fetch_rows(repo, missing))
    pool = [c for c in pool if c in rows and opts.filters.admits(rows[c])]
    if not pool:
        return RecallResult(query, [], signals, backlog, 0)

    base = {c: fused[c] for c in pool}
    if opts.context:
        base = with_context(base, rows)
        signals.append("context")
    window = timeexpr.parse(query, now) if opts.time_hints else None
    if window is not None:
        base = with_time(base, rows, window)
        signals.append("time")
    # The adjusted order decides which passages the cross-encoder reads.
    pool = sorted(pool, key=lambda c: base[c], reverse=True)
    rerank_scores: dict[str, float] = {}
    decided = reranker is not None and opts.rerank_pool > 0 and head_decided(pool, base)
    if decided:
        signals.append(RERANK_SKIPPED)
    if reranker is not None and opts.rerank_pool and not decided:
        head = pool[: opts.rerank_pool]
        scores = reranker.score(query, [rows[c]["text"] for c in head])
        # A time-budgeted reranker (funes.api.search.Budgeted) may score only the first few.
        for cid, s in zip(head[: len(scores)], scores, strict=True):
            rerank_scores[cid] = s
        # Reranked passages lead, ordered by the cross-encoder; the rest keep fused order.
        probs = {c: 1.0 / (1.0 + math.exp(-s)) for c, s in rerank_scores.items()}
        base = {c: (1.0 + probs[c]) if c in probs else base[c] for c in pool}
        if scores:
            signals.append("rerank")
    if opts.half_life_days > 0:
        signals.append("recency")
    about = speaker_of(query) if opts.speaker else None
    if about is not None:
        signals.append("speaker")

    hits = []
    for cid in pool:
        row = rows[cid]
        score = base[cid] * passage_factor(row, now, opts.half_life_days, about)
        hits.append(Hit(row, score, seen_bm25.get(cid), seen_vec.get(cid),
                        rerank_scores.get(cid)))
    hits.sort(key=lambda h: h.score, reverse=True)
    if opts.supersede and supersede(hits, query, lambda ids: _pair_cosines(repo, ids), now):
        signals.append("supersede")

    chosen = _select(hits, opts.k, SESSION_REPEAT if opts.context else 1.0)
    if opts.neighbors:
        attach_neighbors(repo, chosen, opts.neighbors)
    return RecallResult(query, chosen, signals, backlog, len(pool))


def passage_factor(row: dict[str, Any], now: datetime, half_life_days: float,
                   about: str | None) -> float:
    """What multiplies a passage's base score: recency, noise, tool output, the speaker.

    One function for a single memory's recall and for a pooled one (funes.api.pool), which
    re-scores passages of several memories with one reranker.
    """
    factor = recency_factor(_age_days(row, now), half_life_days)
    if row.get("noise"):
        factor *= NOISE_FACTOR
    if row.get("block_type") == "tool_result":
        factor *= TOOL_RESULT_FACTOR
    elif about is not None:
        factor *= speaker_factor(row, about)
    return factor


def _select(hits: list[Hit], k: int, repeat: float) -> list[Hit]:
    """The top k, without repeated text, each further passage of a session discounted.

    `hits` is sorted best first. A session's n-th passage competes with its score times
    `repeat`**n (n from 0), so a long session needs clearly better passages to take several
    places; with `repeat` = 1 this is the plain order.
    """
    chosen: list[Hit] = []
    texts: dict[str, Hit] = {}
    per_session: dict[str, int] = {}
    waiting = list(hits)
    while waiting and len(chosen) < k:
        best_i, best = 0, -math.inf
        for i, hit in enumerate(waiting):
            if hit.score <= best:
                break  # sorted: no later hit can beat the best discounted score so far
            value = hit.score * repeat ** per_session.get(hit.row["session_id"], 0)
            if value > best:
                best_i, best = i, value
        hit = waiting.pop(best_i)
        key = _normalise(hit.row["text"])
        kept = texts.get(key)
        if kept is not None:
            # the same words said twice (copies, retries): keep the best-scored, say where
            # else they were said
            kept.copies.append({name: hit.row.get(name)
                                for name in ("session_id", "turn_id", "harness", "ts")})
            continue
        texts[key] = hit
        per_session[hit.row["session_id"]] = per_session.get(hit.row["session_id"], 0) + 1
        chosen.append(hit)
    return chosen


def with_context(base: dict[str, float], rows: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Fused scores plus what each passage's neighbours and session add, rescaled to [0, 1].

    A passage borrows NEIGHBOR_WEIGHT of the best candidate in the turn just before or after
    it (the question an answer answers, the answer a question got) and SESSION_WEIGHT of its
    session's evidence beyond its own: the best and second-best other candidates of the
    session, the second at half weight. Only candidates count, so this costs no query.
    """
    by_turn: dict[tuple[str, int], float] = {}
    by_session: dict[str, list[tuple[float, str]]] = {}
    for cid, score in base.items():
        row = rows[cid]
        key = (row["session_id"], int(row["seq"]))
        by_turn[key] = max(by_turn.get(key, 0.0), score)
        by_session.setdefault(row["session_id"], []).append((score, cid))
    for scored in by_session.values():
        scored.sort(reverse=True)
    out: dict[str, float] = {}
    for cid, score in base.items():
        row = rows[cid]
        sid, seq = row["session_id"], int(row["seq"])
        near = max(by_turn.get((sid, seq - 1), 0.0), by_turn.get((sid, seq + 1), 0.0))
        others = [s for s, c in by_session[sid] if c != cid][:2]
        support = sum(w * s for w, s in zip((1.0, 0.5), others, strict=False))
        out[cid] = score + NEIGHBOR_WEIGHT * near + SESSION_WEIGHT * support
    top = max(out.values(), default=0.0)
    return {c: s / top if top > 0 else s for c, s in out.items()}


def with_time(
    base: dict[str, float], rows: dict[str, dict[str, Any]], window: timeexpr.TimeWindow
) -> dict[str, float]:
    """Scores × (1 + TIME_WEIGHT × closeness to the question's window), rescaled to [0, 1]."""
    out = {}
    for cid, score in base.items():
        when = rows[cid].get("time")
        near = window.closeness(when) if when is not None else 0.0
        out[cid] = score * (1.0 + TIME_WEIGHT * near)
    top = max(out.values(), default=0.0)
    return {c: s / top if top > 0 else s for c, s in out.items()}


def _unit_vectors(repo: Repository, ids: Sequence[str]) -> tuple[list[str], Any]:
    """(ids found, their vectors of the stamped model as unit rows); ([], None) when none."""
    wanted = vector_label(repo)
    if not ids or wanted is None or not repo.vectors.exists():
        return [], None
    import numpy as np

    quoted = ", ".join(_lit(i) for i in ids)
    table = repo.vectors.dataset().to_table(
        columns=["id", "vector"], filter=f"model = {_lit(wanted)} AND id IN ({quoted})"
    )
    if not table.num_rows:
        return [], None
    matrix = np.asarray(table.column("vector").to_pylist(), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return table.column("id").to_pylist(), matrix / np.where(norms > 0, norms, 1.0)


def vector_scores(repo: Repository, qvec: Any, ids: Sequence[str]) -> dict[str, float]:
    """The cosine of the query with each of `ids` that has a vector of the stamped model."""
    found, matrix = _unit_vectors(repo, ids)
    if not found:
        return {}
    import numpy as np

    q = np.asarray(qvec, dtype=np.float32)
    sims = matrix @ (q / (float(np.linalg.norm(q)) or 1.0))
    return dict(zip(found, (float(s) for s in sims), strict=True))


def _pair_cosines(repo: Repository, ids: Sequence[str]) -> Any:
    """A function giving the cosine of two of `ids` (None when either has no vector)."""
    found, matrix = _unit_vectors(repo, ids)
    at = {cid: i for i, cid in enumerate(found)}

    def cosine(a: str, b: str) -> float | None:
        if a not in at or b not in at:
            return None
        return float(matrix[at[a]] @ matrix[at[b]])

    return cosine


def fuse(
    lexical: Sequence[dict[str, Any]],
    semantic: Sequence[tuple[str, float]],
    cosines: dict[str, float] | None = None,
    head: int | None = None,
    bm25_weight: float = BM25_WEIGHT,
) -> dict[str, float]:
    """Every candidate's base score in [0, 1]: BM25's candidates first, then the vector list's.

    That order is the tie-break of the caller's stable sort.

    Two signals: the convex mix of z-scores described in the module docstring, their mean and
    spread taken over each signal's first `head` candidates (all when None). `cosines` holds
    the true cosine of BM25 candidates outside the vector top-N; a candidate with no vector yet
    (the embedding backlog) or outside the BM25 list gets that signal's lowest z-score, so it
    is neither rewarded nor ruled out for what was not measured.

    One signal: its reciprocal ranks averaged with its max-normalised raw scores, which keeps
    the margin RRF alone throws away (rank 1 and 2 differ by under 2% whether their BM25
    scores were 6.3 and 6.2 or 6.3 and 0.3), so recency stays gentle.
    """
    bm: dict[str, float] = {}
    for r in lexical:
        bm.setdefault(r["id"], float(r["_score"]))
    cos: dict[str, float] = {}
    for cid, sim in semantic:
        cos.setdefault(cid, sim)
    if not (bm and cos):
        return _single(bm or cos)
    for cid, sim in (cosines or {}).items():
        cos.setdefault(cid, sim)
    ref_b = list(bm)[:head]
    # ordered (not a set): the sums below must add in the same order in every process, or
    # the scores differ in their last digits between the warm server and the CLI
    ref_v = list(dict.fromkeys([*(c for c, _ in semantic[:head]),
                                *(c for c in ref_b if c in cos)]))
    zb, floor_b = _zscores(bm, ref_b)
    zv, floor_v = _zscores(cos, ref_v)
    mixed = {
        cid: bm25_weight * zb.get(cid, floor_b) + (1.0 - bm25_weight) * zv.get(cid, floor_v)
        for cid in [*bm, *(c for c, _ in semantic)]
    }
    lo, hi = min(mixed.values()), max(mixed.values())
    return {c: (s - lo) / (hi - lo) if hi > lo else 1.0 for c, s in mixed.items()}


def _zscores(scores: dict[str, float], ref: Collection[str]) -> tuple[dict[str, float], float]:
    """Z-scores on `ref`'s mean and sd (0 if all equal), and the lowest of `ref` (the floor)."""
    values = [scores[c] for c in ref if c in scores] or list(scores.values())
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    z = {c: (s - mean) / sd if sd > 0 else 0.0 for c, s in scores.items()}
    return z, (min(values) - mean) / sd if sd > 0 else 0.0


def _single(scores: dict[str, float]) -> dict[str, float]:
    """One signal's base scores (see `fuse`); `scores` in rank order."""
    if not scores:
        return {}
    ranks = _tied_ranks(list(scores.items()))
    best = max(scores.values())
    return {
        c: 0.5 * (RRF_K + 1) / (RRF_K + ranks[c] + 1)
        + 0.5 * (max(0.0, s) / best if best > 0 else 0.0)
        for c, s in scores.items()
    }


def _tied_ranks(scored: Sequence[tuple[str, float]]) -> dict[str, int]:
    """Rank ids by score, best first; equal scores share a rank, so recency can order ties.

    An id listed twice (a merged memory can hold one chunk twice) keeps its best rank.
    """
    ranks: dict[str, int] = {}
    previous: float | None = None
    rank = 0
    for position, (cid, score) in enumerate(scored):
        if previous is None or abs(score - previous) > 1e-6 * max(1.0, abs(score)):
            rank = position
        previous = score
        ranks.setdefault(cid, rank)
    return ranks


def attach_neighbors(repo: Repository, hits: list[Hit], window: int) -> None:
    """Give each hit the first chunk of the turns just before and after it in its session."""
    if not hits:
        return
    clauses = []
    for hit in hits:
        seq = int(hit.row["seq"])
        clauses.append(
            f"(session_id = {_lit(hit.row['session_id'])} AND seq >= {seq - window} "
            f"AND seq <= {seq + window} AND seq != {seq})"
        )
    table = repo.chunks.dataset().to_table(
        columns=["id", "session_id", "seq", "role", "block_type", "tool_name", "block_idx",
                 "split_idx", "text", "turn_id"],
        filter=" OR ".join(clauses),
    )
    by_session: dict[str, dict[int, dict[str, Any]]] = {}
    for row in sorted(table.to_pylist(),
                      key=lambda r: (r["seq"], r["block_idx"], r["split_idx"])):
        by_session.setdefault(row["session_id"], {}).setdefault(row["seq"], row)
    for hit in hits:
        seq = int(hit.row["seq"])
        turns = by_session.get(hit.row["session_id"], {})
        hit.neighbors = [turns[s] for s in sorted(turns) if abs(s - seq) <= window and s != seq]


def with_options(opts: Options, **changes: Any) -> Options:
    """A copy of `opts` with some fields changed (for callers building options stepwise)."""
    return replace(opts, **changes)
