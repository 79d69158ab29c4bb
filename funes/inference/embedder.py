"""Sentence embeddings on the CPU through llama.cpp (the shared `runtime.Runtime`).

An `Embedder` frames each text as `[CLS] … [SEP]` (`<s> … </s>` for a SentencePiece model; the
body truncated so the frame fits the model's cap, the closing token kept last), decodes it,
and L2-normalises the pooled vector in float32. The result: token ids identical to the
reference tokenizer (`tokenizers`) on everything tested, and embeddings within cosine 0.99999
of a float64 reference BERT (the tokenisation rules live in `funes.inference.runtime`).

Some models are trained to see a query and a passage differently (multilingual-e5: "query: "
and "passage: " before the text). Their GGUF records the two prefixes (`funes.query_prefix`,
`funes.passage_prefix`, written by the converter from the catalog), and `embed_query` /
`embed_passages` put them on; `embed` embeds text exactly as given. A memory's stamp is the
GGUF's sha256, so vectors made with and without a model's prefixes can never be mixed.

The module keeps one loaded model per file per process (`open_embedder`), because loading
costs tens of milliseconds and a context tens of megabytes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from funes.inference.runtime import CONTEXT_QUANTUM, Runtime, clean_text, default_threads
from funes.inference.vocab import PASSAGE_PREFIX_KEY, QUERY_PREFIX_KEY

if TYPE_CHECKING:
    import numpy.typing as npt

    from funes._env import Settings
    from funes.inference.models import ModelInfo, Progress

__all__ = [
    "CONTEXT_QUANTUM",
    "Embedder",
    "clean_text",
    "default_threads",
    "load_embedder",
    "open_embedder",
]


class Embedder:
    """A loaded embedding model: text in, unit-length float32 vectors out.

    Get one with `load_embedder(settings)` or `open_embedder(path)` (both cached per process)
    rather than constructing it.
    """

    def __init__(
        self, path: Path, *, max_tokens: int | None = None, n_threads: int | None = None
    ) -> None:
        """Load `path`; `max_tokens` can lower (never raise) the cap recorded in the GGUF."""
        runtime = Runtime(
            path, kind="embed", max_tokens=max_tokens, n_threads=n_threads or default_threads()
        )
        self._rt = runtime
        self.path = path
        #: Width of the vectors.
        self.dim = runtime.n_embd
        #: Most tokens one input may have, specials included (longer text is truncated).
        self.max_tokens = runtime.max_tokens
        #: Most tokens of text one input keeps (the cap minus [CLS] and [SEP]).
        self.max_text_tokens = self.max_tokens - len(runtime.prefix) - len(runtime.suffix)
        #: GGUF metadata (strings), e.g. `general.name`.
        self.metadata = dict(runtime.metadata)
        #: Text put before a query / a passage ("" for a model that wants none).
        self.query_prefix = self.metadata.get(QUERY_PREFIX_KEY, "")
        self.passage_prefix = self.metadata.get(PASSAGE_PREFIX_KEY, "")
        #: Registry identity, set when loaded through `load_embedder` (None if opened by path).
        self.info: ModelInfo | None = None

    @property
    def n_threads(self) -> int:
        """Threads llama.cpp uses for this model."""
        return self._rt.n_threads

    def tokenize(self, text: str) -> list[int]:
        """All token ids of `text` (no specials, no truncation): what the chunker measures."""
        with self._rt.lock:
            return self._rt.tokenize(text)

    def count_tokens(self, text: str) -> int:
        """Number of tokens `text` has for this model, [CLS]/[SEP] not counted.

        A text fits one embedding window when `count_tokens(text) <= max_text_tokens`.
        """
        return len(self.tokenize(text))

    def input_ids(self, text: str) -> list[int]:
        """The exact ids one `embed` call gives llama.cpp for `text` (truncated, framed)."""
        rt = self._rt
        with rt.lock:
            body = rt.tokenize_head(text, self.max_text_tokens)
        return [*rt.prefix, *body, *rt.suffix]

    def embed(self, texts: Iterable[str]) -> npt.NDArray[np.float32]:
        """Embed texts, one llama.cpp decode each; returns an (n, dim) float32 array.

        Rows are L2-normalised (a zero vector stays zero). Text beyond `max_text_tokens`
        tokens is cut off; empty text embeds as `[CLS] [SEP]`, like the reference model.

        Raises:
            TypeError: an element is not a str.
        """
        items = list(texts)
        out = np.empty((len(items), self.dim), dtype=np.float32)
        rt = self._rt
        for i, text in enumerate(items):
            with rt.lock:
                body = rt.tokenize_head(text, self.max_text_tokens)
                vec = rt.run([*rt.prefix, *body, *rt.suffix])
            norm = float(np.linalg.norm(vec))
            out[i] = vec / norm if norm > 0 else vec
        return out

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """Embed one query (after the model's query prefix); a (dim,) float32 unit vector."""
        vec: npt.NDArray[np.float32] = self.embed([self.query_prefix + _text(text)])[0]
        return vec

    def embed_passages(self, texts: Iterable[str]) -> npt.NDArray[np.float32]:
        """Embed passages (each after the model's passage prefix), as `embed` does."""
        return self.embed(self.passage_prefix + _text(t) for t in texts)

    def close(self) -> None:
        """Free llama.cpp's memory; the embedder is unusable afterwards."""
        with _CACHE_LOCK:
            for key, value in list(_EMBEDDERS.items()):
                if value is self:
                    del _EMBEDDERS[key]
        self._rt.close()


def _text(value: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    return value


_CACHE_LOCK = threading.Lock()
_EMBEDDERS: dict[tuple[str, int | None, int | None], Embedder] = {}


def open_embedder(
    path: Path, *, max_tokens: int | None = None, n_threads: int | None = None
) -> Embedder:
    """The process-wide `Embedder` for a GGUF file, loading it on first use.

    Args:
        path: The GGUF file.
        max_tokens: Lower the model's own cap (never raise it).
        n_threads: llama.cpp threads; defaults to the CPUs available to this process.

    Raises:
        ModelLoadError: llama.cpp cannot load the file, or it is not an embedding model.
    """
    key = (str(Path(path).resolve()), max_tokens, n_threads)
    with _CACHE_LOCK:
        found = _EMBEDDERS.get(key)
        if found is None:
            found = Embedder(Path(key[0]), max_tokens=max_tokens, n_threads=n_threads)
            _EMBEDDERS[key] = found
        return found


def load_embedder(
    settings: Settings,
    name_or_path: str | Path | None = None,
    *,
    install_missing: bool = True,
    progress: Progress | None = None,
    max_tokens: int | None = None,
    n_threads: int | None = None,
) -> Embedder:
    """The embedding model to index and query with, by name (default) or path, loaded once.

    Resolves through the registry (`models.resolve`: the cache, else installing a known model,
    offline sources first), so `embedder.info.id` is the stamp to record in or check against a
    repository.

    Raises:
        ModelError: unknown, not installable, or not loadable (see `funes.inference.errors`).
    """
    from funes.inference import models

    info, path = models.resolve(
        name_or_path or models.DEFAULT_EMBED_MODEL,
        settings,
        kind="embed",
        install_missing=install_missing,
        progress=progress,
    )
    embedder = open_embedder(path, max_tokens=max_tokens, n_threads=n_threads)
    embedder.info = info
    return embedder
