"""safetensors → GGUF: determinism, the pinned bytes, and the layout llama.cpp needs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from funes.inference.convert import (
    SEGMENT_OFFSET_KEY,
    ConversionResult,
    Precision,
    convert_cross_encoder,
    convert_embedding,
    file_sha256,
    read_safetensors,
)
from funes.inference.errors import ConversionError
from funes.inference.models import MINILM_L6_V2_SHA256


def _fields(path: Path) -> dict[str, Any]:
    import gguf

    reader = gguf.GGUFReader(path)
    out: dict[str, Any] = {k: f.contents() for k, f in reader.fields.items()}
    out["__tensors__"] = {
        t.name: (t.tensor_type.name, tuple(int(d) for d in t.shape)) for t in reader.tensors
    }
    return out


def test_conversion_is_deterministic_and_pinned(
    minilm_dir: Path, embed_conversion: ConversionResult, tmp_path: Path
) -> None:
    again = convert_embedding(
        minilm_dir, tmp_path / "again.gguf", precision=Precision.F16, name="minilm-l6-v2"
    )
    assert again.sha256 == embed_conversion.sha256 == file_sha256(again.path)
    assert again.path.read_bytes() == embed_conversion.path.read_bytes()
    # the default embedding model's identity: a change here changes every repository's stamp
    assert again.sha256 == MINILM_L6_V2_SHA256
    assert 40_000_000 < again.path.stat().st_size < 50_000_000


def test_embedding_gguf_layout(embed_gguf: Path) -> None:
    f = _fields(embed_gguf)
    assert f["general.architecture"] == "bert"
    assert f["bert.pooling_type"] == 1  # MEAN
    assert f["bert.attention.causal"] is False
    assert f["bert.context_length"] == 512 and f["funes.max_tokens"] == 256
    assert f["tokenizer.ggml.model"] == "bert"
    tensors = f["__tensors__"]
    # the abort pitfall: these two must stay F32 in an F16 file
    assert tensors["token_types.weight"][0] == "F32"
    assert tensors["position_embd.weight"][0] == "F32"
    assert tensors["token_embd.weight"][0] == "F16"
    assert tensors["blk.0.attn_q.weight"][0] == "F16"
    assert tensors["blk.5.layer_output_norm.bias"][0] == "F32"
    assert not any(name.startswith("cls") for name in tensors)
    tokens = f["tokenizer.ggml.tokens"]
    types = f["tokenizer.ggml.token_type"]
    assert tokens[101] == "[CLS]" and types[101] == 3  # CONTROL, text kept
    assert tokens[0] == "[PAD]" and types[0] == 3
    the = tokens.index("\u2581the")  # a word-start piece gets U+2581
    assert types[the] == 1
    assert "ing" in tokens and "##ing" not in tokens  # continuation pieces lose "##"


def test_cross_encoder_gguf_layout(rerank_gguf: Path) -> None:
    f = _fields(rerank_gguf)
    assert f["bert.pooling_type"] == 4  # RANK
    assert f[SEGMENT_OFFSET_KEY] == 30522
    tensors = f["__tensors__"]
    assert tensors["token_embd.weight"][1] == (384, 61044)  # a second, segment-1 vocabulary
    assert tensors["cls.weight"][1] == (384, 384)  # BERT's pooler, kept
    assert "cls.output.weight" in tensors and "cls.output.bias" in tensors
    tokens = f["tokenizer.ggml.tokens"]
    assert len(tokens) == 61044 and len(set(tokens)) == 61044
    assert tokens[30522 + 101] == "[seg1][CLS]"


def test_segment_rows_are_word_plus_type_difference(
    rerank_gguf: Path, cross_encoder_dir: Path
) -> None:
    import gguf

    reader = gguf.GGUFReader(rerank_gguf)
    table = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert table.tensor_type.name == "F16"  # the shipped default precision
    rows = np.asarray(table.data).reshape(-1, 384)
    src = read_safetensors(cross_encoder_dir / "model.safetensors")
    word = np.asarray(src["bert.embeddings.word_embeddings.weight"], dtype=np.float32)
    types = np.asarray(src["bert.embeddings.token_type_embeddings.weight"], dtype=np.float32)
    assert np.array_equal(rows[:30522], word.astype(np.float16))
    assert np.array_equal(rows[30522:], (word + (types[1] - types[0])).astype(np.float16))


def test_safetensors_reader(tmp_path: Path, write_safetensors: Any) -> None:
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, dtype=np.float32)}
    write_safetensors(tmp_path / "m.safetensors", arrays)
    got = read_safetensors(tmp_path / "m.safetensors")
    assert set(got) == {"a", "b"}
    assert np.array_equal(got["a"], arrays["a"]) and np.array_equal(got["b"], arrays["b"])
    data = (tmp_path / "m.safetensors").read_bytes()
    (tmp_path / "short.safetensors").write_bytes(data[:-8])
    with pytest.raises(ConversionError):
        read_safetensors(tmp_path / "short.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(ConversionError):
        read_safetensors(tmp_path / "junk.safetensors")


def test_unsupported_models_are_refused(minilm_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "roberta"
    bad.mkdir()
    for name in ("tokenizer.json", "model.safetensors"):
        (bad / name).symlink_to(minilm_dir / name)
    config = json.loads((minilm_dir / "config.json").read_text())
    config["model_type"] = "roberta"
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConversionError, match="roberta"):
        convert_embedding(bad, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists()
    # an embedding model has no classifier: it is not a cross-encoder
    with pytest.raises(ConversionError, match="classifier"):
        convert_cross_encoder(minilm_dir, tmp_path / "y.gguf")
    assert not list(tmp_path.glob("*.tmp"))


def test_f32_conversion_is_the_same_model(minilm_dir: Path, tmp_path: Path, embedder: Any) -> None:
    from funes.inference.embedder import Embedder

    f32 = convert_embedding(minilm_dir, tmp_path / "f32.gguf", precision=Precision.F32)
    assert f32.path.stat().st_size > 85_000_000
    other = Embedder(f32.path)
    try:
        texts = ["precision check", "def f(x): return x"]
        cos = np.sum(other.embed(texts) * embedder.embed(texts), axis=1)
        assert float(cos.min()) > 0.9999
    finally:
        other.close()
    shutil.rmtree(tmp_path, ignore_errors=True)
