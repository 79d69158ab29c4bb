"""Plain Okapi BM25 over a memory's stored chunks: the day-zero benchmark's baseline.

The baseline is rank-bm25's `BM25Okapi` (k1 = 1.5, b = 0.75, epsilon = 0.25, its defaults)
over every chunk row of the memory, each tokenised as `\\w+` runs of its lower-cased text (no
stemming, no stop words): the same chunks funes searches, scored the textbook way. rank-bm25
keeps a dict per document and scores by looping over all of them, which at 323,000 chunks
took 3.6 GB and 12 minutes for 100 questions here; `OkapiIndex` computes the same scores
from postings arrays (a term's contribution is zero where it does not occur), and
`check_against_rank_bm25` holds the two to the same numbers on a sample of the chunks in
every run, so the figure stays rank-bm25's.
"""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

TOKEN = re.compile(r"\w+")
K1, B, EPSILON = 1.5, 0.75, 0.25


def tokens(text: str) -> list[str]:
    """The baseline's tokenizer: `\\w+` runs of the lower-cased text."""
    return TOKEN.findall(text.lower())


class OkapiIndex:
    """BM25Okapi's scores, from postings (term → documents, term frequencies)."""

    def __init__(self, texts: Sequence[str]) -> None:
        vocab: dict[str, int] = {}
        terms, docs, tfs = array("i"), array("i"), array("i")
        lengths = np.zeros(len(texts), dtype=np.float64)
        for d, text in enumerate(texts):
            counts = Counter(tokens(text))
            lengths[d] = sum(counts.values())
            for word, tf in counts.items():
                terms.append(vocab.setdefault(word, len(vocab)))
                docs.append(d)
                tfs.append(tf)
        term_arr = np.frombuffer(terms, dtype=np.int32)
        order = np.argsort(term_arr, kind="stable")
        self.docs = np.frombuffer(docs, dtype=np.int32)[order]
        self.tfs = np.frombuffer(tfs, dtype=np.int32)[order].astype(np.float64)
        df = np.bincount(term_arr, minlength=len(vocab))
        self.starts = np.concatenate([[0], np.cumsum(df)])
        self.vocab = vocab
        self.n = len(texts)
        self.avgdl = float(lengths.sum()) / max(1, self.n)
        self.norm = K1 * (1 - B + B * lengths / self.avgdl) if self.n else lengths
        # rank-bm25's idf: log((N - n + 0.5) / (n + 0.5)), negatives replaced by
        # epsilon × the mean idf (computed before the replacement)
        idf = np.log(self.n - df + 0.5) - np.log(df + 0.5)
        mean = float(idf.mean()) if len(idf) else 0.0
        self.idf = np.where(idf < 0, EPSILON * mean, idf)

    def scores(self, query: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Every document's score for `query` (a repeated query word counts again)."""
        out = np.zeros(self.n, dtype=np.float64)
        for word in tokens(query):
            t = self.vocab.get(word)
            if t is None:
                continue
            lo, hi = self.starts[t], self.starts[t + 1]
            d, tf = self.docs[lo:hi], self.tfs[lo:hi]
            out[d] += self.idf[t] * (tf * (K1 + 1) / (tf + self.norm[d]))
        return out

    def top(self, query: str, n: int) -> list[int]:
        """The `n` best documents, best first (ties in row order)."""
        s = self.scores(query)
        hit = np.flatnonzero(s > 0)
        ranked = hit[np.argsort(-s[hit], kind="stable")]
        return [int(i) for i in ranked[:n]]


def check_against_rank_bm25(texts: Sequence[str], queries: Sequence[str]) -> float:
    """The largest difference between OkapiIndex and rank-bm25 over `texts` (0 is exact)."""
    from rank_bm25 import BM25Okapi

    ours = OkapiIndex(texts)
    theirs = BM25Okapi([tokens(t) for t in texts])
    worst = 0.0
    for q in queries:
        a = ours.scores(q)
        b = np.asarray(theirs.get_scores(tokens(q)), dtype=np.float64)
        worst = max(worst, float(np.max(np.abs(a - b))) if len(a) else 0.0)
    return worst if math.isfinite(worst) else float("inf")
