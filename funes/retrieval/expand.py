"""Query expansion from the first pass's best passages (pseudo-relevance feedback, RM3-style).

A question and the passage that answers it often share few words: "can you suggest a camera
lens?" against "I just got a Sony A7 and love landscape shots". The passages a first search
ranks best are often about the same thing, and their words that are rare among the other
candidates ("sony", "landscape") are the vocabulary the question lacks. `expansion_terms`
picks them, weighted like relevance model 1 (each term's share of each feedback passage,
weighted by the passage's score) times how rare the term is among the candidates; recall adds
them to the BM25 query at a fraction of the question's own weight (funes.retrieval.recall).

Only words: no stemming, no model, no list tied to one benchmark's phrasing. Function words
are dropped by a short English list, since a handful of feedback passages is too small a
sample to tell "the" from a topic word by rarity alone.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["expansion_terms", "words"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

#: English function words and chat filler; never expansion terms.
_STOP_WORDS = """
a about above after again against all also am an and any are aren as at be because been before
being below between both but by can cannot could couldn did didn do does doesn doing don down
during each even ever few for from further get got had has have having he her here hers herself
him himself his how however i if in into is isn it its itself just let like ll made make many
may me might more most much must my myself need no nor not now of off often on once one only or
other our ours ourselves out over own per please re really same see she should so some such sure
than that the their theirs them themselves then there these they thing things this those
through to too under until up upon us use used using ve very via was wasn way we well were
weren what when where whether which while who whom why will with within without won would yes
yet you your yours yourself yourselves also actually great good help thanks thank want know
think going lot something anything everything
"""
STOP = frozenset(_STOP_WORDS.split())


def words(text: str) -> list[str]:
    """Lower-cased words as the full-text index splits them (letters and digits)."""
    return _WORD.findall(text.lower())


def expansion_terms(
    query: str,
    feedback: Sequence[tuple[str, float]],
    background: Sequence[str],
    n: int,
) -> list[tuple[str, float]]:
    """Up to `n` (term, weight) pairs, weights in (0, 1], best first.

    `feedback` holds the (text, score) of the first pass's best passages, `background` the
    texts of every candidate (the feedback ones included), from which a term's rarity is
    judged: log((N + 1) / (df + 0.5)), so a word most candidates share adds nothing. Terms of
    the query itself, function words, numbers and words under 3 letters are never chosen.
    """
    asked = set(words(query))
    df: Counter[str] = Counter()
    for text in background:
        df.update(set(words(text)))
    total = len(background)
    weight: Counter[str] = Counter()
    for text, score in feedback:
        tokens = words(text)
        if not tokens or score <= 0:
            continue
        for term, tf in Counter(tokens).items():
            if len(term) < 3 or term.isdigit() or term in STOP or term in asked:
                continue
            weight[term] += score * tf / len(tokens)
    scored = {t: w * math.log((total + 1) / (df.get(t, 0) + 0.5)) for t, w in weight.items()}
    best = sorted((t for t in scored if scored[t] > 0), key=lambda t: (-scored[t], t))[:n]
    if not best:
        return []
    top = scored[best[0]]
    return [(t, scored[t] / top) for t in best]
