"""Supersession at read time: a passage that a later turn of the same project revisits.

A memory is append-only (docs/design.md §2), so a decision amended a month later is still
stored next to its amendment, and both answer a question about it. Recency alone cannot tell
them apart: with a half-life of 90 days, passages weeks apart differ by a few percent. So
recall looks, among its own candidates, for later passages of the same place that revisit a
hit's subject, says so on the hit (`Hit.revisited`, printed as `revisited later: funes get …`),
and ranks the later passage at least as high as the earlier one.

A passage b revisits an earlier passage a when all of these hold:

* **the same place**: the same project (else the same working directory; passages with
  neither count as one place, a single user's history), or the same session;
* **later**: b's turn is dated after a's (a later turn of the same session counts);
* **the same subject**: their embeddings are close (cosine ≥ MIN_COSINE), or, where either
  has no vector yet, they share enough of their rare words (`overlap` ≥ MIN_OVERLAP);
* **b answers the question too**: it is a candidate whose score is at least ANSWERS × a's.

Only candidates count, so this costs no query: the vectors of the head and of the passages
that could revisit it are read by id, one lookup. Measured on sde-bench's amended decisions and
LongMemEval's knowledge updates (bench/bench_supersede.py, bench/results/supersede.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = ["ANSWERS", "HEAD", "MIN_COSINE", "MIN_OVERLAP", "overlap", "place", "supersede"]

#: Hits (from the top) whose later revisits are looked for: the result and a little more, so a
#: passage just below the cut that a revisit would lift is seen too.
HEAD = 12
#: Cosine of two passages' embeddings from which they are about the same thing.
MIN_COSINE = 0.6
#: Share of the rarer passage's distinctive words the other must hold, without vectors.
MIN_OVERLAP = 0.35
#: A later passage answers the question too when its score is at least this share of the hit's.
ANSWERS = 0.6

_WORD = re.compile(r"[^\W_](?:[\w'-]*[^\W_])?", re.UNICODE)


class Scored(Protocol):
    """What supersession reads and writes on a recall hit (funes.retrieval.recall.Hit)."""

    row: dict[str, Any]
    score: float
    revisited: dict[str, Any] | None


def place(row: dict[str, Any]) -> str:
    """Where a passage was said: its project, else its working directory, else ""."""
    return str(row.get("project") or row.get("workdir") or "")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


def overlap(a: set[str], b: set[str]) -> float:
    """Share of the smaller word set found in the other (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def supersede(
    hits: list[Any],
    query: str,
    cosine: Callable[[Sequence[str]], Callable[[str, str], float | None]],
) -> int:
    """Mark revisited hits and lift their revisits; `hits` sorted best first, re-sorted.

    `cosine(ids)` prepares the embeddings of `ids` and returns a function giving the cosine of
    two of them (None when either has no vector). Returns the number of hits marked.
    """
    if len(hits) < 2:
        return 0
    head: list[Scored] = hits[:HEAD]
    floor = min(h.score for h in head) * ANSWERS
    later_of: dict[int, list[Scored]] = {}
    wanted: dict[str, None] = {}
    for i, a in enumerate(head):
        when, where = a.row.get("time"), place(a.row)
        if when is None:
            continue
        found = [b for b in hits if b is not a and b.score >= a.score * ANSWERS
                 and b.score >= floor and _later(b.row, when)
                 and (place(b.row) == where or b.row["session_id"] == a.row["session_id"])]
        if found:
            later_of[i] = found
            wanted[str(a.row["id"])] = None
            wanted.update((str(b.row["id"]), None) for b in found)
    if not later_of:
        return 0
    cos = cosine(list(wanted))
    asked = _words(query)
    words: dict[str, set[str]] = {}

    def distinct(hit: Scored) -> set[str]:
        cid = str(hit.row["id"])
        if cid not in words:
            words[cid] = _words(str(hit.row.get("text") or "")) - asked
        return words[cid]

    marked = 0
    for i, found in later_of.items():
        a = head[i]
        best: tuple[float, Scored] | None = None
        for b in found:
            sim = cos(str(a.row["id"]), str(b.row["id"]))
            if sim is None:
                same = overlap(distinct(a), distinct(b)) >= MIN_OVERLAP
            else:
                same = sim >= MIN_COSINE
            if same and (best is None or b.score > best[0]):
                best = (b.score, b)
        if best is None:
            continue
        revisit = best[1]
        a.revisited = revisit.row
        marked += 1
        if revisit.score <= a.score:
            # just above: the earlier passage keeps its place relative to everything else
            revisit.score = math.nextafter(a.score, math.inf)
    hits.sort(key=lambda h: h.score, reverse=True)
    return marked


def _later(row: dict[str, Any], when: Any) -> bool:
    other = row.get("time")
    return other is not None and other > when
