"""When the fused head is decided, the cross-encoder is not run (recall's rerank step).

Recall fuses BM25 and vector scores (funes.retrieval.recall.fuse), then lets a cross-encoder
re-score the head of the fused pool: the most precise signal and the most expensive one (≈ 40
ms a passage on 2 cores, most of a warm recall's time). When one passage leads the pool by a
clear margin, fusion has already settled the answer and the reranker's time is better saved;
the result's signals then say `rerank skipped: clear margin`, as they say a time-budget cut.
Apart from recall.py so the margin rule, its evidence and its tests stand on their own.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Lead of the best fused passage over the second, as a share of the pool's spread (best
#: minus worst fused score), from which the cross-encoder is not run (`head_decided`).
#: Both fusions put the best at 1 and spread the pool below it, so the share means the same
#: for one signal or two, and after the context and time steps' rescaling. The reranker costs
#: ≈ 40 ms a passage and only reorders the pool's head; when one passage leads by this much,
#: fusion has mostly settled the answer. On the pooled LongMemEval oracle (470 questions,
#: bench/rerank_margin.py) 20% of questions led by ≥ 0.2 and their fused top passage was
#: right 78% of the time against 58% for the rest (at 0.1: 74% / 52% over 44% of questions;
#: at 0.4: 90% but only 2% skipped). No real cross-encoder was available offline to measure
#: how often it would have fixed those 22%; this trades them for a fifth of the reranks.
RERANK_MARGIN = 0.2
#: Candidates a pool needs before its spread says anything: min-max scaling puts two
#: candidates at 1 and 0 whatever they scored, so a small pool is always reranked.
MARGIN_MIN_POOL = 10
#: The signal a skipped rerank leaves (beside `rerank budget: n/m` for a cut one).
RERANK_SKIPPED = "rerank skipped: clear margin"


def head_margin(pool: Sequence[str], base: dict[str, float]) -> float | None:
    """The best passage's lead over the second, as a share of the pool's spread.

    `pool` is sorted by `base`, best first. None when the pool is too small to say
    (MARGIN_MIN_POOL) or all its scores are equal.
    """
    if len(pool) < MARGIN_MIN_POOL:
        return None
    spread = base[pool[0]] - min(base[c] for c in pool)
    if spread <= 0:
        return None
    return (base[pool[0]] - base[pool[1]]) / spread


def head_decided(pool: Sequence[str], base: dict[str, float]) -> bool:
    """Whether the fused head is settled enough to skip the cross-encoder (RERANK_MARGIN)."""
    margin = head_margin(pool, base)
    return margin is not None and margin >= RERANK_MARGIN
