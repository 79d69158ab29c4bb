"""Cross-encoder reranking through llama.cpp's rank pooling.

llama-cpp-python has no rerank API, so this drives the same low-level runtime as the embedder:
one (query, passage) pair per decode, the score read from the pooled output (rank pooling runs
`cls.output(tanh(cls(h_[CLS])))`, BERT's pooler plus classifier).

Segment ids: llama.cpp gives every token segment 0, while a BERT cross-encoder reads the passage
as segment 1. A GGUF converted by funes carries a second copy of the vocabulary whose rows
already include the segment-1 embedding (`funes.segment_vocab_offset`); the passage and its
closing [SEP] are fed as `id + offset`, which reproduces BERT's input exactly. Other GGUFs
(e.g. XLM-RoBERTa rerankers, which have a single segment) are fed as llama.cpp's server does.

Recall must work without a reranker: `load_reranker` returns None when none is installed, and
the caller says so to the user rather than failing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from funes.inference.convert import SEGMENT_OFFSET_KEY
from funes.inference.errors import ModelLoadError
from funes.inference.runtime import Runtime, default_threads

if TYPE_CHECKING:
    from funes._env import Settings
    from funes.inference.models import ModelInfo

__all__ = ["Reranker", "load_reranker", "open_reranker"]


class Reranker:
    """A loaded cross-encoder: (query, passage) pairs in, relevance logits out."""

    def __init__(
        self, path: Path, *, max_tokens: int | None = None, n_threads: int | None = None
    ) -> None:
        """Load `path`; `max_tokens` can lower (never raise) the pair cap in the GGUF.

        Raises:
            ModelLoadError: not a rank-pooling GGUF with exactly one output.
        """
        rt = Runtime(
            path, kind="rerank", max_tokens=max_tokens, n_threads=n_threads or default_threads()
        )
        if rt.n_cls_out != 1:
            rt.close()
            raise ModelLoadError(str(path), f"a reranker must output 1 score, not {rt.n_cls_out}")
        self._rt = rt
        self.path = path
        #: Most tokens one pair may have, specials included.
        self.max_tokens = rt.max_tokens
        #: GGUF metadata (strings).
        self.metadata = dict(rt.metadata)
        offset = rt.metadata.get(SEGMENT_OFFSET_KEY)
        #: Added to passage ids so they read as segment 1; None when the model has no copy.
        self.segment_offset: int | None = int(offset) if offset is not None else None
        if self.segment_offset is not None and self.segment_offset * 2 != rt.n_vocab:
            rt.close()
            raise ModelLoadError(str(path), "segment vocabulary offset does not match the vocab")
        self._frame = self._pair_frame()
        #: Registry identity, set when loaded through `load_reranker` (None if opened by path).
        self.info: ModelInfo | None = None

    def _pair_frame(self) -> tuple[list[int], list[int], list[int]]:
        """Special ids before the query, between query and passage, and after the passage."""
        rt = self._rt
        llama = rt.llama
        vocab = rt.vocab
        if rt.rules.wordpiece:
            # BERT: [CLS] query [SEP] passage [SEP]
            return list(rt.prefix), list(rt.suffix), list(rt.suffix)
        # What llama.cpp's server does for rerankers without a template.
        eos = int(llama.llama_vocab_eos(vocab))
        if eos < 0:
            eos = int(llama.llama_vocab_sep(vocab))
        before = [int(llama.llama_vocab_bos(vocab))] if llama.llama_vocab_get_add_bos(vocab) else []
        middle: list[int] = []
        after: list[int] = []
        if llama.llama_vocab_get_add_eos(vocab) and eos >= 0:
            middle.append(eos)
            after.append(eos)
        if llama.llama_vocab_get_add_sep(vocab):
            sep = int(llama.llama_vocab_sep(vocab))
            if sep >= 0:
                middle.append(sep)
        return before, middle, after

    def pair_ids(self, query: str, passage: str, *, segments: bool = True) -> list[int]:
        """The ids one pair is scored on: passage truncated first, query only if it must be.

        The query keeps all its tokens unless the passage would then get fewer than half of
        the room; so a long passage is cut to fit, and a runaway query cannot crowd it out.

        Args:
            query: The question.
            passage: The candidate text.
            segments: Offset the passage into the segment-1 vocabulary (the faithful input);
                False reproduces what plain llama.cpp would see, for comparison only.
        """
        rt = self._rt
        before, middle, after = self._frame
        budget = self.max_tokens - len(before) - len(middle) - len(after)
        with rt.lock:
            q = rt.tokenize_head(query, budget)
            p = rt.tokenize_head(passage, budget)
        q = q[: budget - min(len(p), budget // 2)]
        p = p[: budget - len(q)]
        tail = [*p, *after]
        if segments and self.segment_offset is not None:
            tail = [t + self.segment_offset for t in tail]
        return [*before, *q, *middle, *tail]

    def score_ids(self, ids: Sequence[int]) -> float:
        """The score of an already-built input (see `pair_ids`)."""
        rt = self._rt
        with rt.lock:
            return float(rt.run(ids)[0])

    def score(self, query: str, passages: Iterable[str]) -> list[float]:
        """Relevance logits of each passage for `query`, in input order; higher is better.

        Scores are raw logits (apply a sigmoid for a 0–1 relevance); one decode per pair.

        Raises:
            TypeError: the query or a passage is not a str.
        """
        return [self.score_ids(self.pair_ids(query, passage)) for passage in passages]

    def score_pairs(self, pairs: Iterable[tuple[str, str]]) -> list[float]:
        """Relevance logits of (query, passage) pairs, in input order."""
        return [self.score_ids(self.pair_ids(q, p)) for q, p in pairs]

    def close(self) -> None:
        """Free llama.cpp's memory; the reranker is unusable afterwards."""
        with _CACHE_LOCK:
            for key, value in list(_RERANKERS.items()):
                if value is self:
                    del _RERANKERS[key]
        self._rt.close()


_CACHE_LOCK = threading.Lock()
_RERANKERS: dict[tuple[str, int | None, int | None], Reranker] = {}


def open_reranker(
    path: Path, *, max_tokens: int | None = None, n_threads: int | None = None
) -> Reranker:
    """The process-wide `Reranker` for a GGUF file, loading it on first use."""
    key = (str(Path(path).resolve()), max_tokens, n_threads)
    with _CACHE_LOCK:
        found = _RERANKERS.get(key)
        if found is None:
            found = Reranker(Path(key[0]), max_tokens=max_tokens, n_threads=n_threads)
            _RERANKERS[key] = found
        return found


def load_reranker(
    settings: Settings,
    name: str | None = None,
    *,
    max_tokens: int | None = None,
    n_threads: int | None = None,
) -> Reranker | None:
    """The installed reranker, or None when there is none (recall then skips reranking).

    Never downloads or converts anything: installing a reranker is an explicit step
    (`funes models install`), because it may need the network.

    Args:
        settings: Where the model cache is.
        name: A reranker name; defaults to the first installed reranker, preferring
            `models.DEFAULT_RERANK_MODEL`.
        max_tokens: Lower the pair cap (e.g. 256 for speed on long passages).
        n_threads: llama.cpp threads; defaults to the CPUs available.

    Raises:
        ModelError: the named reranker is installed but cannot be loaded or is corrupt.
    """
    from funes.inference import models

    info_path = models.find_installed(settings, kind="rerank", name=name)
    if info_path is None:
        return None
    info, path = info_path
    reranker = open_reranker(path, max_tokens=max_tokens, n_threads=n_threads)
    reranker.info = info
    return reranker
