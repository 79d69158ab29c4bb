"""Supersession at read time: a passage that a later turn of the same project revisits.

A memory is append-only (docs/design.md §2), so a decision amended a month later is still
stored next to its amendment, and both answer a question about it. Recency alone cannot tell
them apart: with a half-life of 90 days, passages weeks apart differ by a few percent. So
recall looks, among the passages it is about to show, for later ones of the same place that
revisit a hit's subject, says so on the hit (`Hit.revisited`, printed as `revisited later:
funes get …`), and ranks the later passage at least as high as the earlier one.

A passage b revisits an earlier hit a when all of these hold:

* **both are in the head**: the first HEAD passages of the result, what an agent reads first
  (fixed, not k: asked for 50 passages, a recall must not reorder its whole tail by date);
* **a later conversation of the same place**: b belongs to another session than a, of the
  same project (else the same working directory; passages with neither count as one place,
  a single user's history), and is dated after a, not after the recall's `now`. Within one
  session nothing is marked or lifted: a conversation keeps coming back to its subject (the
  question, the answer, "done, tests pass"), and its later turns do not amend its earlier ones;
* **the same subject**: some passage of one session is close to some passage of the other,
  among each session's best EVIDENCE candidates (a decision's summary and its amendment's,
  even when the hit itself is the question that started it and the summaries rank below the
  head). Close means both: embeddings at cosine ≥ MIN_COSINE, and a share ≥ MIN_OVERLAP of
  their words in common, each word weighted by its rarity among the candidates, the question's
  own words left out. Either signal alone links too much in one person's long history: on
  LongMemEval a cosine ≥ 0.6 alone joined so many unrelated sessions that R@1 fell 0.649 →
  0.560.
* **without vectors** (the embedding backlog: day zero, when `funes add` has indexed the words
  and the backfill has not reached them), the words must carry the subject alone, and words
  the candidates hold in common are mostly the question's topic: the candidates are what the
  question found, and in one person's history several sessions talk about the same cameras or
  the same lake. So two passages count as close when they share words that at most PRIVATE of
  the candidates' sessions use (the two, and one more for a decision amended twice): a share
  ≥ MIN_PRIVATE of both passages' words (the cosine of their word sets, counting only those).
  A rarity-weighted overlap instead (≥ 0.3, the first rule) joined later sessions on the same
  topic to LongMemEval's answer sessions and cost a tenth of the first hits (day-zero layout,
  1,000 sessions, BM25: hit@1 69 → 61); IDF over the whole memory, a sparse cosine, the
  sessions' key terms or the share of the query both passages match did not separate those
  from sde-bench's amendments either (bench/results/supersede.md).

A hit points at the latest session that revisits it (its best passage there): the newest word
on the subject. A revisit that also answers the question nearly as well (a score ≥ LIFT × the
hit's) is lifted just above the hit, older revisits below newer ones, so the order among
everything else stays as it was; one that answers it clearly worse keeps its place, and the
hit's `revisited later` line still points at it.

Only candidates count, so this costs no query: the vectors of the head sessions' candidates
are read by id in one lookup. Measured on sde-bench's amended decisions and LongMemEval's
knowledge updates in bench/results/supersede.md (bench/bench_supersede.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

__all__ = [
    "EVIDENCE", "HEAD", "LIFT", "MIN_COSINE", "MIN_OVERLAP", "MIN_PRIVATE", "PRIVATE", "place",
    "supersede",
]

#: The hits that can be marked and the passages that can revisit them: the first an agent
#: reads. Fixed, not k: asked for 50, a recall must not reorder its whole tail by date.
HEAD = 12
#: A revisit is lifted above the hit only when it scores at least this share of the hit's.
LIFT = 0.65
#: Candidates of each session (its best) that say what the session is about.
EVIDENCE = 6
#: Cosine of two passages' embeddings from which they are about the same thing.
MIN_COSINE = 0.6
#: Rarity-weighted share of words two passages must have in common, besides the cosine.
MIN_OVERLAP = 0.25
#: Candidate sessions that may use a word for it to count as a pair's private word: the two,
#: and one more (a decision amended twice).
PRIVATE = 3
#: Share of their words (set cosine) two passages must have privately in common when one of
#: them has no vector yet.
MIN_PRIVATE = 0.15

_WORD = re.compile(r"[^\W_](?:[\w'-]*[^\W_])?", re.UNICODE)

Cosine = Callable[[str, str], float | None]


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


class _Subject:
    """Whether two passages, or two sessions' best candidates, are about the same thing."""

    def __init__(self, hits: Sequence[Scored], query: str, cosine: Cosine) -> None:
        self._cosine = cosine
        asked = _words(query)
        words = {str(h.row["id"]): _words(str(h.row.get("text") or "")) - asked for h in hits}
        self._words = words
        df: dict[str, int] = {}
        for ws in words.values():
            for word in ws:
                df[word] = df.get(word, 0) + 1
        n = len(hits)
        # a word a quarter of the candidates hold is the topic they share, not a subject
        weight = {w: (math.log((n + 1) / (c + 0.5)) if c <= max(2.0, n / 4) else 0.0)
                  for w, c in df.items()}
        self._weights = {cid: {w: weight[w] for w in ws if weight[w] > 0}
                         for cid, ws in words.items()}
        self._totals = {cid: sum(ws.values()) for cid, ws in self._weights.items()}
        # how many of the candidates' sessions use each word: what two sessions share and
        # (almost) no other candidate session says is their own subject, not the query's topic
        held: dict[str, set[str]] = {}
        for h in hits:
            held.setdefault(str(h.row["session_id"]), set()).update(words[str(h.row["id"])])
        self._sessions_using: dict[str, int] = {}
        for ws in held.values():
            for word in ws:
                self._sessions_using[word] = self._sessions_using.get(word, 0) + 1

    def _overlap(self, ia: str, ib: str) -> float:
        wa, wb = self._weights[ia], self._weights[ib]
        ta, tb = self._totals[ia], self._totals[ib]
        if ta <= 0 or tb <= 0:
            return 0.0
        small, other = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
        return sum(v for w, v in small.items() if w in other) / min(ta, tb)

    def private(self, ia: str, ib: str) -> float:
        """How much of two passages' words only they (and PRIVATE - 2 more sessions) use.

        The cosine of their word sets, counting as shared only the words that at most PRIVATE
        of the candidates' sessions use.
        """
        wa, wb = self._words[ia], self._words[ib]
        if not wa or not wb:
            return 0.0
        small, other = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
        shared = sum(1 for w in small if w in other and self._sessions_using[w] <= PRIVATE)
        return shared / math.sqrt(len(wa) * len(wb))

    def pair(self, a: Scored, b: Scored) -> bool:
        ia, ib = str(a.row["id"]), str(b.row["id"])
        sim = self._cosine(ia, ib)
        if sim is None:  # the embedding backlog: the words only the two sessions use
            return self.private(ia, ib) >= MIN_PRIVATE
        return sim >= MIN_COSINE and self._overlap(ia, ib) >= MIN_OVERLAP

    def sessions(self, xs: Sequence[Scored], ys: Sequence[Scored]) -> bool:
        return any(self.pair(x, y) for x in xs for y in ys)


def supersede(
    hits: list[Any],
    query: str,
    cosine: Callable[[Sequence[str]], Cosine],
    now: Any = None,
) -> int:
    """Mark revisited hits and lift their revisits; `hits` sorted best first, re-sorted.

    `cosine(ids)` prepares the embeddings of `ids` and returns a function giving the cosine of
    two of them (None when either has no vector). Nothing dated after `now` revisits anything:
    what had not been said yet cannot have amended a decision (a recall asked as of a past
    moment, or a clock running ahead). Returns the number of hits marked.
    """
    head: list[Scored] = [h for h in hits[:HEAD] if h.row.get("time") is not None]
    if len(head) < 2:
        return 0
    # each head session's best candidates, head or not: evidence of what it is about
    sessions: dict[str, list[Scored]] = {str(h.row["session_id"]): [] for h in head}
    for h in hits:
        evidence = sessions.get(str(h.row["session_id"]))
        if evidence is not None and len(evidence) < EVIDENCE:
            evidence.append(h)
    # candidate (hit, later passage) pairs before any vector is read
    later: list[tuple[Scored, list[Scored]]] = []
    for a in head:
        found = [b for b in head if b.row["time"] > a.row["time"]
                 and (now is None or b.row["time"] <= now)
                 and b.row["session_id"] != a.row["session_id"] and place(b.row) == place(a.row)]
        if found:
            later.append((a, found))
    if not later:
        return 0
    subject = _Subject(hits, query, cosine([str(h.row["id"]) for hs in sessions.values()
                                            for h in hs]))
    linked: dict[tuple[str, str], bool] = {}

    def revisits(a: Scored, b: Scored) -> bool:
        sa, sb = str(a.row["session_id"]), str(b.row["session_id"])
        if (sa, sb) not in linked:
            linked[(sa, sb)] = subject.sessions(sessions[sa], sessions[sb])
        return linked[(sa, sb)]

    marked = 0
    for a, found in later:  # best first: a lift never lowers what an earlier step raised
        best: dict[str, Scored] = {}  # the best revisiting passage of each later session
        for b in found:
            sid = str(b.row["session_id"])
            if revisits(a, b) and (sid not in best or b.score > best[sid].score):
                best[sid] = b
        if not best:
            continue
        by_time = sorted(best.values(), key=lambda b: b.row["time"])
        a.revisited = by_time[-1].row
        marked += 1
        floor = a.score
        for b in by_time:  # older revisits just above the hit, newer ones above them
            if b.score < a.score * LIFT:
                continue  # it revisits the subject but answers the question less well
            if b.score <= floor:
                b.score = math.nextafter(floor, math.inf)
            floor = max(floor, b.score)
    hits.sort(key=lambda h: h.score, reverse=True)
    return marked
