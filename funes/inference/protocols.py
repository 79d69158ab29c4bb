"""What recall, the backlog and the api need of an embedder and a reranker, as Protocols.

The llama.cpp classes (`embedder.Embedder`, `reranker.Reranker`) satisfy them, and so does the
deterministic fake in `funes.inference.fake`: code typed against these can be tested without
loading a model where the model is not the point (llm's `EmbedDemo` is the pattern).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from funes.inference.registry import ModelInfo

__all__ = ["EmbedderProtocol", "RerankerProtocol"]


class EmbedderProtocol(Protocol):
    """Text in, unit-length float32 vectors out."""

    #: Width of the vectors.
    dim: int
    #: The model file (its hash is the stamp when `info` is None).
    path: Path
    #: Registry identity: what a repository is stamped with.
    info: ModelInfo | None

    @property
    def n_threads(self) -> int:
        """Threads the model runs with (reported by the hook worker)."""
        ...

    def embed(self, texts: Iterable[str]) -> npt.NDArray[np.float32]:
        """An (n, dim) array of L2-normalised rows, one per text."""
        ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """One (dim,) unit vector for a query (the model's query prefix put on)."""
        ...

    def embed_passages(self, texts: Iterable[str]) -> npt.NDArray[np.float32]:
        """An (n, dim) array for passages (the model's passage prefix put on)."""
        ...


class RerankerProtocol(Protocol):
    """(query, passage) pairs in, relevance logits out (higher is better)."""

    #: Registry identity, when loaded by name.
    info: ModelInfo | None

    def score(self, query: str, passages: Iterable[str]) -> list[float]:
        """One logit per passage, in input order."""
        ...
