"""safetensors → GGUF for BERT-family models, with numpy and the `gguf` package only.

Why our own converter instead of llama.cpp's `convert_hf_to_gguf.py`:

* it needs torch and transformers, which funes does not ship;
* it drops `pooler.dense`, which `BertForSequenceClassification` cross-encoders need
  (`score = classifier(tanh(pooler(h_cls)))`), so their rank scores come out on the wrong scale
  and, on close pairs, in the wrong order;
* llama.cpp adds token-type (segment) row 0 to every position, while a BERT cross-encoder was
  trained with segment 1 on the passage. We fix that in the weights (see
  `convert_cross_encoder`), which only a converter of our own can do.

The output is deterministic: the same input files give a byte-identical GGUF (no timestamps,
paths or dict-order dependence), so a model is pinned by the sha256 of its GGUF even when it is
built locally rather than downloaded.

The pitfalls below were each measured to abort the process or to change results:

* `token_types` and `position_embd` stay F32: an F16 `token_types` aborts on the first decode
  (ggml cannot add an F16 row view to an F32 activation).
* The vocabulary is written the way llama.cpp's tokenizer for it expects (WordPiece: the
  phantom-space form; SentencePiece Unigram: scores and the precompiled charsmap), see
  `funes.inference.vocab`.
* `pooling_type` is MEAN for the sentence embedder and RANK for the cross-encoder, and
  `attention.causal` is false.

One file because the converter is one mapping: the tensor-name table and the metadata must
agree with each other and with llama.cpp's loader, and are read together when llama.cpp
changes; the tokenizer, which has a second kind, is `funes.inference.vocab`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from funes.inference.errors import ConversionError
from funes.inference.vocab import (
    MAX_WORD_CHARS_KEY,
    PASSAGE_PREFIX_KEY,
    QUERY_PREFIX_KEY,
    Vocab,
    load_vocab,
    read_json,
    write_vocab,
)
from funes.storage.atomic import sha256_file

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "CONVERTER_VERSION",
    "ConversionResult",
    "Precision",
    "convert_cross_encoder",
    "convert_embedding",
    "file_sha256",
    "read_safetensors",
]

#: Bumped whenever the bytes the converter writes change; it is recorded in every GGUF it
#: writes (`funes.converter_version`), and pinned sha256 values depend on it.
CONVERTER_VERSION = 1

#: GGUF key (our own namespace; llama.cpp ignores it) holding the size of the original
#: vocabulary in a cross-encoder whose token table carries a segment-1 copy.
SEGMENT_OFFSET_KEY = "funes.segment_vocab_offset"
#: GGUF key holding the token cap the model was trained or tuned for (sentence-transformers'
#: `max_seq_length`), which can be smaller than its position table.
MAX_TOKENS_KEY = "funes.max_tokens"
#: GGUF key naming what the model is for: "embed" or "rerank".
KIND_KEY = "funes.kind"
# safetensors dtype name → (numpy dtype, bytes per element); BF16 is widened by hand.
_ST_DTYPES: dict[str, tuple[str, int]] = {
    "F64": ("<f8", 8),
    "F32": ("<f4", 4),
    "F16": ("<f2", 2),
    "BF16": ("<u2", 2),
    "I64": ("<i8", 8),
    "I32": ("<i4", 4),
    "I16": ("<i2", 2),
    "I8": ("i1", 1),
    "U8": ("u1", 1),
    "BOOL": ("u1", 1),
}
# Tensors whose values llama.cpp reads through row views or get_rows with F32 arithmetic:
# keep them F32 whatever the precision (see the module docstring).
_ALWAYS_F32 = ("token_types.weight", "position_embd.weight")


class Precision(StrEnum):
    """Storage type of the weight matrices (1-D tensors are always F32)."""

    F16 = "f16"
    F32 = "f32"


@dataclass(frozen=True)
class ConversionResult:
    """What a conversion produced: the file, its identity, and the parameters funes needs."""

    path: Path
    sha256: str
    kind: Literal["embed", "rerank"]
    #: Width of an embedding (for a reranker: of the hidden state; it outputs one score).
    dim: int
    pooling: Literal["mean", "cls", "rank"]
    #: Longest input funes will give the model, [CLS] and [SEP]s included.
    max_tokens: int
    #: Size of the position table: a hard limit beyond which llama.cpp aborts.
    n_ctx_train: int
    #: Original vocabulary size (a cross-encoder GGUF holds twice as many rows).
    vocab_size: int
    precision: Precision


# --------------------------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------------------------


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """Map every tensor of a `.safetensors` file without copying it.

    The format is an 8-byte little-endian header length, a JSON header naming each tensor's
    dtype, shape and byte range, then the raw little-endian data. Arrays are read-only views of
    a memory map, so a 90 MB model costs no resident memory until a tensor is touched. BF16 is
    widened to F32 (numpy has no bfloat16).

    Raises:
        ConversionError: the file is truncated, inconsistent or uses an unknown dtype.
    """
    size = path.stat().st_size
    with path.open("rb") as fh:
        prefix = fh.read(8)
        if len(prefix) != 8:
            raise ConversionError(str(path), "not a safetensors file (too short)")
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > min(size - 8, 100 * 1024 * 1024):
            raise ConversionError(str(path), "not a safetensors file (bad header length)")
        try:
            header = json.loads(fh.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConversionError(str(path), f"unreadable safetensors header: {exc}") from exc
    if not isinstance(header, dict):
        raise ConversionError(str(path), "safetensors header is not a JSON object")
    data_start = 8 + header_len
    data_len = size - data_start
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=data_start, shape=(data_len,))
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype_name = str(spec["dtype"])
            shape = tuple(int(d) for d in spec["shape"])
            begin, end = (int(x) for x in spec["data_offsets"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ConversionError(str(path), f"bad header entry for {name}") from exc
        if dtype_name not in _ST_DTYPES:
            raise ConversionError(str(path), f"tensor {name} has unsupported dtype {dtype_name}")
        np_dtype, width = _ST_DTYPES[dtype_name]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= data_len or end - begin != count * width:
            raise ConversionError(str(path), f"tensor {name} lies outside the file")
        array = raw[begin:end].view(np_dtype).reshape(shape)
        if dtype_name == "BF16":
            array = (array.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = array
    return tensors


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file (a model's identity is its GGUF file's digest)."""
    return sha256_file(path)[1]


# --------------------------------------------------------------------------------------------
# The Hugging Face model directory
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _HFModel:
    source: str
    config: dict[str, Any]
    tensors: dict[str, npt.NDArray[Any]]
    vocab: Vocab
    max_tokens: int
    pooling: Literal["mean", "cls"]
    weights_sha256: str


def _load_hf_model(model_dir: Path) -> _HFModel:
    source = str(model_dir)
    config = read_json(model_dir / "config.json")
    if config.get("model_type") not in (None, "bert"):
        raise ConversionError(source, f"model_type {config.get('model_type')} is not bert")
    if config.get("hidden_act", "gelu") != "gelu":
        raise ConversionError(source, f"hidden_act {config.get('hidden_act')} is not gelu")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ConversionError(source, "only absolute position embeddings are supported")
    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise ConversionError(source, "no model.safetensors (pytorch .bin files are not read)")
    tensors = read_safetensors(weights)
    word = tensors.get("embeddings.word_embeddings.weight")
    if word is None:
        word = tensors.get("bert.embeddings.word_embeddings.weight")
    if word is None or word.ndim != 2:
        raise ConversionError(source, "missing tensor embeddings.word_embeddings.weight")
    n_pos = int(config.get("max_position_embeddings", 512))
    max_tokens = n_pos
    st_cfg = model_dir / "sentence_bert_config.json"
    if st_cfg.is_file():
        max_tokens = min(n_pos, int(read_json(st_cfg).get("max_seq_length") or n_pos))
    pooling: Literal["mean", "cls"] = "mean"
    pool_cfg = model_dir / "1_Pooling" / "config.json"
    if pool_cfg.is_file():
        pool = read_json(pool_cfg)
        if pool.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif not pool.get("pooling_mode_mean_tokens", True):
            raise ConversionError(source, "only mean or CLS pooling is supported")
    return _HFModel(
        source=source,
        config=config,
        tensors=tensors,
        vocab=load_vocab(model_dir, rows=int(word.shape[0])),
        max_tokens=max_tokens,
        pooling=pooling,
        weights_sha256=file_sha256(weights),
    )


# --------------------------------------------------------------------------------------------
# Tensor names
# --------------------------------------------------------------------------------------------

_LAYER_MAP = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
_GLOBAL_MAP = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.LayerNorm": "token_embd_norm",
    "pooler.dense": "cls",
    "classifier": "cls.output",
}


def _gguf_name(hf_name: str) -> str | None:
    """llama.cpp's name for a Hugging Face BERT tensor, or None for one we do not know."""
    name = hf_name.removeprefix("bert.")
    if name.endswith(".gamma"):
        name = name[: -len(".gamma")] + ".weight"
    elif name.endswith(".beta"):
        name = name[: -len(".beta")] + ".bias"
    stem, _, leaf = name.rpartition(".")
    if leaf not in ("weight", "bias"):
        return None
    if stem in _GLOBAL_MAP:
        return f"{_GLOBAL_MAP[stem]}.{leaf}"
    parts = stem.split(".", 3)
    if len(parts) == 4 and parts[0] == "encoder" and parts[1] == "layer" and parts[2].isdigit():
        mapped = _LAYER_MAP.get(parts[3])
        if mapped is not None:
            return f"blk.{int(parts[2])}.{mapped}.{leaf}"
    return None


def _mapped_tensors(
    model: _HFModel, keep: Callable[[str], bool]
) -> Iterator[tuple[str, npt.NDArray[Any]]]:
    """Yield (gguf name, array) in a fixed order, refusing tensors we would silently drop."""
    # Tensors that carry nothing llama.cpp uses: position_ids is an index buffer; the MLM and
    # next-sentence heads are pre-training leftovers.
    ignorable = ("embeddings.position_ids", "cls.predictions.", "cls.seq_relationship.")
    mapped: dict[str, npt.NDArray[Any]] = {}
    for hf_name, array in model.tensors.items():
        bare = hf_name.removeprefix("bert.")
        if bare.startswith(ignorable):
            continue
        gguf_name = _gguf_name(hf_name)
        if gguf_name is None:
            raise ConversionError(model.source, f"unexpected tensor {hf_name}")
        if not keep(gguf_name):
            continue
        if gguf_name in mapped:
            raise ConversionError(model.source, f"two tensors map to {gguf_name}")
        mapped[gguf_name] = array
    # Sorted order makes the file independent of the safetensors header's order.
    for gguf_name in sorted(mapped, key=_tensor_sort_key):
        yield gguf_name, mapped[gguf_name]


def _tensor_sort_key(name: str) -> tuple[int, int, str]:
    if name.startswith("blk."):
        return (1, int(name.split(".")[1]), name)
    return (0 if not name.startswith("cls") else 2, 0, name)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _store(name: str, array: npt.NDArray[Any], precision: Precision) -> npt.NDArray[Any]:
    """The array as it is stored: matrices in the chosen precision, the rest F32.

    The rank head (`cls.*`) stays F32 too: it is tiny, and it is where scores are made.
    """
    if (
        array.ndim >= 2
        and precision is Precision.F16
        and name not in _ALWAYS_F32
        and not name.startswith("cls")
    ):
        return np.ascontiguousarray(array, dtype=np.float16)
    return np.ascontiguousarray(array, dtype=np.float32)


def _write_gguf(
    out_path: Path,
    model: _HFModel,
    *,
    name: str,
    kind: Literal["embed", "rerank"],
    pooling: Literal["mean", "cls", "rank"],
    max_tokens: int,
    precision: Precision,
    tensors: list[tuple[str, npt.NDArray[Any]]],
    vocab: Vocab,
    segment_offset: int | None,
    n_labels: int,
    prefixes: tuple[str, str] = ("", ""),
) -> str:
    import gguf

    cfg = model.config
    n_embd = int(cfg["hidden_size"])
    n_head = int(cfg["num_attention_heads"])
    if n_embd % n_head:
        raise ConversionError(model.source, "hidden_size is not a multiple of the head count")
    pooling_type = {
        "mean": gguf.PoolingType.MEAN,
        "cls": gguf.PoolingType.CLS,
        "rank": gguf.PoolingType.RANK,
    }[pooling]
    file_type = (
        gguf.LlamaFileType.MOSTLY_F16 if precision is Precision.F16 else gguf.LlamaFileType.ALL_F32
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=out_path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        writer = gguf.GGUFWriter(tmp, "bert")
        writer.add_name(name)
        writer.add_file_type(int(file_type))
        writer.add_context_length(int(cfg.get("max_position_embeddings", 512)))
        writer.add_embedding_length(n_embd)
        writer.add_feed_forward_length(int(cfg["intermediate_size"]))
        writer.add_block_count(int(cfg["num_hidden_layers"]))
        writer.add_head_count(n_head)
        writer.add_layer_norm_eps(float(cfg.get("layer_norm_eps", 1e-12)))
        writer.add_causal_attention(False)
        writer.add_pooling_type(pooling_type)
        if n_labels > 1:
            labels = cfg.get("id2label") or {}
            writer.add_classifier_output_labels(
                [str(labels.get(str(i), f"LABEL_{i}")) for i in range(n_labels)]
            )
        write_vocab(writer, vocab, int(cfg.get("type_vocab_size", 2)))
        writer.add_uint32("funes.converter_version", CONVERTER_VERSION)
        writer.add_string(KIND_KEY, kind)
        writer.add_uint32(MAX_TOKENS_KEY, max_tokens)
        if vocab.kind == "wordpiece":
            writer.add_uint32(MAX_WORD_CHARS_KEY, vocab.max_word_chars)
        writer.add_string("funes.source_weights_sha256", model.weights_sha256)
        # Written only when set, so a model without prefixes keeps its pinned bytes.
        for key, text in zip((QUERY_PREFIX_KEY, PASSAGE_PREFIX_KEY), prefixes, strict=True):
            if text:
                writer.add_string(key, text)
        if segment_offset is not None:
            writer.add_uint32(SEGMENT_OFFSET_KEY, segment_offset)
        for tname, array in tensors:
            writer.add_tensor(tname, _store(tname, array, precision))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        digest = file_sha256(tmp)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a model file is not a secret
        os.replace(tmp, out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return digest


def _check_shapes(model: _HFModel) -> None:
    cfg = model.config
    n_vocab = len(model.vocab.texts)
    word = _find(model, "embeddings.word_embeddings.weight")
    if word.shape != (n_vocab, int(cfg["hidden_size"])):
        raise ConversionError(
            model.source,
            f"word embeddings are {word.shape}, vocabulary has {n_vocab} tokens",
        )


def convert_embedding(
    model_dir: Path,
    out_path: Path,
    *,
    precision: Precision = Precision.F16,
    name: str | None = None,
    query_prefix: str = "",
    passage_prefix: str = "",
) -> ConversionResult:
    """Convert a BERT sentence-embedding model (sentence-transformers layout) to GGUF.

    Args:
        model_dir: Directory with config.json, model.safetensors and tokenizer.json or
            vocab.txt; sentence_bert_config.json and 1_Pooling/config.json are honoured.
        out_path: Where to write the GGUF (atomically: temp file, then rename).
        precision: Storage of the weight matrices. F16 halves the file and is what funes
            ships (cosine ≥ 0.9999 to the F32 reference; see docs/models.md).
        name: `general.name`; defaults to the directory name.
        query_prefix: Text the model wants before every query (e5: "query: "), recorded in
            the GGUF (`funes.query_prefix`) so every embedder of the file applies it.
        passage_prefix: The same before every passage (e5: "passage: ").

    Raises:
        ConversionError: the directory is not a BERT model this converter understands.
    """
    precision = Precision(precision)
    model = _load_hf_model(model_dir)
    _check_shapes(model)
    tensors = list(_mapped_tensors(model, keep=lambda n: not n.startswith("cls")))
    digest = _write_gguf(
        out_path,
        model,
        name=name or model_dir.name,
        kind="embed",
        pooling=model.pooling,
        max_tokens=model.max_tokens,
        precision=precision,
        tensors=tensors,
        vocab=model.vocab,
        segment_offset=None,
        n_labels=0,
        prefixes=(query_prefix, passage_prefix),
    )
    return ConversionResult(
        path=out_path,
        sha256=digest,
        kind="embed",
        dim=int(model.config["hidden_size"]),
        pooling=model.pooling,
        max_tokens=model.max_tokens,
        n_ctx_train=int(model.config.get("max_position_embeddings", 512)),
        vocab_size=model.vocab.size,
        precision=precision,
    )


def convert_cross_encoder(
    model_dir: Path,
    out_path: Path,
    *,
    precision: Precision = Precision.F16,
    name: str | None = None,
) -> ConversionResult:
    """Convert a `BertForSequenceClassification` cross-encoder to a rank-pooling GGUF.

    llama.cpp computes `cls.output(tanh(cls(h_[CLS])))`, which is BERT's pooler plus its
    classifier, so `pooler.dense` becomes `cls` and `classifier` becomes `cls.output`.

    The segment-id remedy: llama.cpp adds `token_types[0]` to every position, but the passage
    was trained with `token_types[1]`. Because the token, position and type embeddings are
    summed before the first LayerNorm, appending a second copy of the vocabulary whose rows are
    `word + type[1] − type[0]` and feeding passage tokens as `id + vocab_size` gives exactly
    BERT's input for segment 1. The offset is recorded under `funes.segment_vocab_offset`;
    the copy's tokens get distinct, untypable texts and type UNUSED so the tokenizer never
    produces them.

    Args:
        model_dir: The Hugging Face model directory (config.json, model.safetensors,
            tokenizer.json or vocab.txt).
        out_path: Where to write the GGUF.
        precision: F16 by default: measured as close to the reference as F32 (llama.cpp's
            f16 GELU table and flash attention dominate the error either way) at half the
            size; the rank head (`cls.*`) stays F32 regardless.
        name: `general.name`; defaults to the directory name.

    Raises:
        ConversionError: not a BERT sequence classifier with a pooler.
    """
    precision = Precision(precision)
    model = _load_hf_model(model_dir)
    _check_shapes(model)
    names = {n.removeprefix("bert.") for n in model.tensors}
    for needed in ("pooler.dense.weight", "classifier.weight"):
        if needed not in names:
            raise ConversionError(model.source, f"a cross-encoder needs {needed}")
    n_labels = int(_find(model, "classifier.weight").shape[0])
    if int(model.config.get("type_vocab_size", 2)) < 2:
        raise ConversionError(model.source, "no segment embeddings (type_vocab_size < 2)")
    if model.vocab.kind != "wordpiece":
        raise ConversionError(model.source, "the segment-id remedy of a cross-encoder needs a "
                                            "WordPiece vocabulary")
    texts, types = model.vocab.texts, model.vocab.types
    n_vocab = len(texts)
    from gguf import TokenType

    # The copy's texts contain "[" and "]", which the WPM tokenizer always splits off as
    # punctuation, so no input text can ever produce a segment-1 id by itself.
    texts = texts + [f"[seg1]{t}" for t in texts]
    types = types + [int(TokenType.UNUSED)] * n_vocab
    tensors: list[tuple[str, npt.NDArray[Any]]] = []
    for tname, array in _mapped_tensors(model, keep=lambda n: True):
        if tname == "token_embd.weight":
            type_rows = _find(model, "embeddings.token_type_embeddings.weight").astype(np.float32)
            word = np.asarray(array, dtype=np.float32)
            shifted = word + (type_rows[1] - type_rows[0])
            array = np.concatenate([word, shifted], axis=0)
        tensors.append((tname, array))
    digest = _write_gguf(
        out_path,
        model,
        name=name or model_dir.name,
        kind="rerank",
        pooling="rank",
        max_tokens=model.max_tokens,
        precision=precision,
        tensors=tensors,
        vocab=dataclasses.replace(model.vocab, texts=texts, types=types),
        segment_offset=n_vocab,
        n_labels=n_labels,
    )
    return ConversionResult(
        path=out_path,
        sha256=digest,
        kind="rerank",
        dim=int(model.config["hidden_size"]),
        pooling="rank",
        max_tokens=model.max_tokens,
        n_ctx_train=int(model.config.get("max_position_embeddings", 512)),
        vocab_size=n_vocab,
        precision=precision,
    )


def _find(model: _HFModel, name: str) -> npt.NDArray[Any]:
    for candidate in (name, f"bert.{name}"):
        if candidate in model.tensors:
            return model.tensors[candidate]
    raise ConversionError(model.source, f"missing tensor {name}")
