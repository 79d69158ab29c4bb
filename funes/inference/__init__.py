"""Local models: GGUF conversion, the model registry, embedding and reranking (llama.cpp).

Import the submodule you need (`funes.inference.models`, `.embedder`, `.reranker`,
`.convert`). This package's `__init__` imports nothing heavy: `funes.inference.models` is on
cold CLI paths, so numpy, gguf and llama_cpp load only when a model is actually used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from funes.inference.embedder import Embedder, load_embedder, open_embedder
    from funes.inference.models import KNOWN_MODELS, ModelInfo, install, resolve
    from funes.inference.reranker import Reranker, load_reranker, open_reranker

__all__ = [
    "KNOWN_MODELS",
    "Embedder",
    "ModelInfo",
    "Reranker",
    "install",
    "load_embedder",
    "load_reranker",
    "open_embedder",
    "open_reranker",
    "resolve",
]

_LAZY = {
    "Embedder": "funes.inference.embedder",
    "load_embedder": "funes.inference.embedder",
    "open_embedder": "funes.inference.embedder",
    "open_reranker": "funes.inference.reranker",
    "Reranker": "funes.inference.reranker",
    "load_reranker": "funes.inference.reranker",
    "KNOWN_MODELS": "funes.inference.models",
    "ModelInfo": "funes.inference.models",
    "install": "funes.inference.models",
    "resolve": "funes.inference.models",
}


def __getattr__(name: str) -> Any:
    """Load a public name's module on first access (keeps `import funes.inference` cheap)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
