"""A deterministic embedder and reranker for tests of the logic around models.

`FakeEmbedder` hashes words into a fixed number of signed buckets (feature hashing): texts that
share words get similar vectors, unrelated texts nearly orthogonal ones, the same text the same
vector on every machine. `FakeReranker` scores a passage by the share of the query's words it
contains. Neither is a language model: use them where recall's plumbing (fusion, sessions,
time, backlog, upgrades) is under test, and the real llama.cpp models where quality is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from funes.inference.registry import ModelInfo

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["FakeEmbedder", "FakeReranker"]

_WORD = re.compile(r"\w+", re.UNICODE)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class FakeEmbedder:
    """Feature-hashed bag of words; satisfies `protocols.EmbedderProtocol`."""

    def __init__(self, dim: int = 64, name: str = "fake-hash") -> None:
        """`name` and `dim` make the identity: two fakes differ in stamp if either differs."""
        self.dim = dim
        self.path = Path(f"{name}.gguf")
        self.info: ModelInfo | None = ModelInfo(
            name=name, sha256=_digest(f"funes-fake-embedder|1|{name}|{dim}"), kind="embed",
            dim=dim, pooling="mean", max_tokens=256, n_ctx=256, source="fake",
        )
        #: Texts embedded so far (tests count re-embeds with it).
        self.calls = 0

    @property
    def n_threads(self) -> int:
        """A fake runs on the caller's thread."""
        return 1

    def embed(self, texts: Iterable[str]) -> npt.NDArray[np.float32]:
        """Hash each word into a signed bucket, then L2-normalise each row."""
        import numpy as np

        items = list(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            self.calls += 1
            for word in _words(text):
                h = int(_digest(word)[:8], 16)
                out[row, h % self.dim] += 1.0 if (h >> 31) & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """One text's vector."""
        vec: npt.NDArray[np.float32] = self.embed([text])[0]
        return vec

    def embed_passages(self, texts: Iterable[str]) -> npt.NDArray[np.float32]:
        """Passages embed like any text: the fake has no prefixes."""
        return self.embed(texts)


class FakeReranker:
    """Share of the query's distinct words found in the passage, as a logit in [-4, 4]."""

    def __init__(self, name: str = "fake-rerank") -> None:
        """The identity mirrors a registry entry so callers can report it."""
        self.info: ModelInfo | None = ModelInfo(
            name=name, sha256=_digest(f"funes-fake-reranker|1|{name}"), kind="rerank",
            dim=1, pooling="rank", max_tokens=512, n_ctx=512, source="fake",
        )
        #: Passages scored so far.
        self.calls = 0

    def score(self, query: str, passages: Iterable[str]) -> list[float]:
        """One logit per passage, in input order."""
        wanted = set(_words(query))
        out = []
        for passage in passages:
            self.calls += 1
            have = set(_words(passage))
            share = len(wanted & have) / len(wanted) if wanted else 0.0
            out.append(8.0 * share - 4.0)
        return out
