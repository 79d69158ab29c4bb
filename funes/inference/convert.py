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
* The WordPiece vocabulary is written the way llama.cpp's WPM tokenizer expects it: pieces that
  start a word get the U+2581 prefix, `##` continuation pieces lose their `##`, and the special
  tokens keep their text and are typed CONTROL.
* `pooling_type` is MEAN for the sentence embedder and RANK for the cross-encoder, and
  `attention.causal` is false.

One file because the converter is one mapping: the tensor-name table, the vocabulary
rewriting and the metadata must agree with each other and with llama.cpp's loader, and are
read together when llama.cpp changes.
"""

from __future__ import annotations

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
#: GGUF key holding WordPiece's per-word character cap (longer words become one [UNK]).
MAX_WORD_CHARS_KEY = "funes.wordpiece_max_word_chars"

_WORD_START = "\u2581"
_SPECIAL_NAMES = ("pad", "unk", "cls", "sep", "mask")
_DEFAULT_SPECIAL = {
    "pad": "[PAD]",
    "unk": "[UNK]",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "mask": "[MASK]",
}
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
class _Vocab:
    tokens: list[str]
    special: dict[str, int]  # pad/unk/cls/sep/mask → id
    control: frozenset[int]  # ids typed CONTROL
    lowercase: bool
    strip_accents: bool
    #: WordPiece maps a longer word to [UNK] whole; llama.cpp does not, so funes does it.
    max_word_chars: int


@dataclass(frozen=True)
class _HFModel:
    source: str
    config: dict[str, Any]
    tensors: dict[str, npt.NDArray[Any]]
    vocab: _Vocab
    max_tokens: int
    pooling: Literal["mean", "cls"]
    weights_sha256: str


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConversionError(str(path), f"unreadable JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ConversionError(str(path), "expected a JSON object")
    return value


def _special_names(model_dir: Path) -> dict[str, str]:
    names = dict(_DEFAULT_SPECIAL)
    for fname in ("special_tokens_map.json", "tokenizer_config.json"):
        path = model_dir / fname
        if not path.is_file():
            continue
        data = _read_json(path)
        for key in _SPECIAL_NAMES:
            value = data.get(f"{key}_token")
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str) and value:
                names[key] = value
    return names


def _load_vocab(model_dir: Path) -> _Vocab:
    """Read the WordPiece vocabulary and normaliser options, preferring tokenizer.json."""
    source = str(model_dir)
    names = _special_names(model_dir)
    control_texts: set[str] = set(names.values())
    lowercase: bool | None = None
    strip_accents: bool | None = None
    max_word_chars = 100
    tokens: list[str]
    tok_json = model_dir / "tokenizer.json"
    vocab_txt = model_dir / "vocab.txt"
    if tok_json.is_file():
        data = _read_json(tok_json)
        model = data.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ConversionError(source, f"tokenizer model is {model.get('type')}, not WordPiece")
        if model.get("continuing_subword_prefix", "##") != "##":
            raise ConversionError(source, "WordPiece continuation prefix is not '##'")
        vocab_map = model.get("vocab")
        if not isinstance(vocab_map, dict) or not vocab_map:
            raise ConversionError(source, "tokenizer.json has no vocabulary")
        by_id = sorted((int(i), str(t)) for t, i in vocab_map.items())
        if [i for i, _ in by_id] != list(range(len(by_id))):
            raise ConversionError(source, "vocabulary ids are not contiguous")
        tokens = [t for _, t in by_id]
        max_word_chars = int(model.get("max_input_chars_per_word") or 100)
        for added in data.get("added_tokens") or []:
            if added.get("special"):
                control_texts.add(str(added.get("content")))
        norm = data.get("normalizer") or {}
        if norm.get("type") == "BertNormalizer":
            lowercase = bool(norm.get("lowercase", True))
            sa = norm.get("strip_accents")
            strip_accents = lowercase if sa is None else bool(sa)
        elif norm:
            raise ConversionError(source, f"unsupported normalizer {norm.get('type')}")
    elif vocab_txt.is_file():
        lines = vocab_txt.read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        tokens = [line.rstrip("\r") for line in lines]
    else:
        raise ConversionError(source, "no tokenizer.json or vocab.txt")
    if lowercase is None:
        cfg_path = model_dir / "tokenizer_config.json"
        cfg = _read_json(cfg_path) if cfg_path.is_file() else {}
        lowercase = bool(cfg.get("do_lower_case", True))
        sa = cfg.get("strip_accents")
        strip_accents = lowercase if sa is None else bool(sa)
    index = {t: i for i, t in enumerate(tokens)}
    special: dict[str, int] = {}
    for key in _SPECIAL_NAMES:
        if names[key] not in index:
            raise ConversionError(source, f"special token {names[key]} is not in the vocabulary")
        special[key] = index[names[key]]
    control = frozenset(index[t] for t in control_texts if t in index)
    return _Vocab(tokens, special, control, lowercase, bool(strip_accents), max_word_chars)


def _load_hf_model(model_dir: Path) -> _HFModel:
    source = str(model_dir)
    config = _read_json(model_dir / "config.json")
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
    n_pos = int(config.get("max_position_embeddings", 512))
    max_tokens = n_pos
    st_cfg = model_dir / "sentence_bert_config.json"
    if st_cfg.is_file():
        max_tokens = min(n_pos, int(_read_json(st_cfg).get("max_seq_length") or n_pos))
    pooling: Literal["mean", "cls"] = "mean"
    pool_cfg = model_dir / "1_Pooling" / "config.json"
    if pool_cfg.is_file():
        pool = _read_json(pool_cfg)
        if pool.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif not pool.get("pooling_mode_mean_tokens", True):
            raise ConversionError(source, "only mean or CLS pooling is supported")
    return _HFModel(
        source=source,
        config=config,
        tensors=tensors,
        vocab=_load_vocab(model_dir),
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


def _vocab_texts(vocab: _Vocab) -> tuple[list[str], list[int]]:
    """Rewrite WordPiece pieces into llama.cpp's phantom-space form, with token types."""
    from gguf import TokenType

    texts: list[str] = []
    types: list[int] = []
    for i, tok in enumerate(vocab.tokens):
        if i in vocab.control:
            texts.append(tok)
            types.append(int(TokenType.CONTROL))
        elif tok.startswith("##"):
            texts.append(tok[2:])
            types.append(int(TokenType.NORMAL))
        else:
            texts.append(_WORD_START + tok)
            types.append(int(TokenType.NORMAL))
    return texts, types


def _check_unique(source: str, texts: list[str]) -> None:
    seen: dict[str, int] = {}
    for i, text in enumerate(texts):
        if text in seen:
            raise ConversionError(
                source, f"tokens {seen[text]} and {i} both become {text!r} in llama.cpp's form"
            )
        seen[text] = i


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
    token_texts: list[str],
    token_types: list[int],
    segment_offset: int | None,
    n_labels: int,
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
        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(token_texts)
        writer.add_token_types(token_types)
        writer.add_token_type_count(int(cfg.get("type_vocab_size", 2)))
        sp = model.vocab.special
        writer.add_bos_token_id(sp["cls"])
        writer.add_sep_token_id(sp["sep"])
        writer.add_unk_token_id(sp["unk"])
        writer.add_pad_token_id(sp["pad"])
        writer.add_mask_token_id(sp["mask"])
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(False)
        writer.add_add_sep_token(True)
        writer.add_bool("tokenizer.ggml.normalizer.lowercase", model.vocab.lowercase)
        writer.add_bool("tokenizer.ggml.normalizer.strip_accents", model.vocab.strip_accents)
        writer.add_uint32("funes.converter_version", CONVERTER_VERSION)
        writer.add_string(KIND_KEY, kind)
        writer.add_uint32(MAX_TOKENS_KEY, max_tokens)
        writer.add_uint32(MAX_WORD_CHARS_KEY, model.vocab.max_word_chars)
        writer.add_string("funes.source_weights_sha256", model.weights_sha256)
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
    n_vocab = len(model.vocab.tokens)
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
) -> ConversionResult:
    """Convert a BERT sentence-embedding model (sentence-transformers layout) to GGUF.

    Args:
        model_dir: Directory with config.json, model.safetensors and tokenizer.json or
            vocab.txt; sentence_bert_config.json and 1_Pooling/config.json are honoured.
        out_path: Where to write the GGUF (atomically: temp file, then rename).
        precision: Storage of the weight matrices. F16 halves the file and is what funes
            ships (cosine ≥ 0.9999 to the F32 reference; see docs/models.md).
        name: `general.name`; defaults to the directory name.

    Raises:
        ConversionError: the directory is not a BERT model this converter understands.
    """
    model = _load_hf_model(model_dir)
    _check_shapes(model)
    texts, types = _vocab_texts(model.vocab)
    _check_unique(model.source, texts)
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
        token_texts=texts,
        token_types=types,
        segment_offset=None,
        n_labels=0,
    )
    return ConversionResult(
        path=out_path,
        sha256=digest,
        kind="embed",
        dim=int(model.config["hidden_size"]),
        pooling=model.pooling,
        max_tokens=model.max_tokens,
        n_ctx_train=int(model.config.get("max_position_embeddings", 512)),
        vocab_size=len(model.vocab.tokens),
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
    model = _load_hf_model(model_dir)
    _check_shapes(model)
    names = {n.removeprefix("bert.") for n in model.tensors}
    for needed in ("pooler.dense.weight", "classifier.weight"):
        if needed not in names:
            raise ConversionError(model.source, f"a cross-encoder needs {needed}")
    n_labels = int(_find(model, "classifier.weight").shape[0])
    if int(model.config.get("type_vocab_size", 2)) < 2:
        raise ConversionError(model.source, "no segment embeddings (type_vocab_size < 2)")
    texts, types = _vocab_texts(model.vocab)
    _check_unique(model.source, texts)
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
        token_texts=texts,
        token_types=types,
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
