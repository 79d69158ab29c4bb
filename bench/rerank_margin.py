"""How often the fused head is settled: the evidence behind RERANK_MARGIN (retrieval.margin).

Run:  python bench/rerank_margin.py [--per-type 15]   (prints a table; nothing is written)

On (a copy of) the pooled LongMemEval oracle memory, or its stratified subset, as
bench/longmemeval.py builds and caches it, every non-abstention question is recalled without a
reranker, and for each one this records the best fused passage's lead over the second as a
share of the pool's spread (`funes.retrieval.margin.head_margin`) and whether that passage's
session is a gold one. For a few thresholds it prints the share of questions whose rerank
would be skipped and how often their fused top passage was right, against the rest.

No real cross-encoder is installed offline, so this cannot say how often one would have
changed the top; it says how trustworthy the fused top is where the margin is clear.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import longmemeval as lme  # noqa: E402

from funes import api  # noqa: E402
from funes.retrieval import margin  # noqa: E402
from funes.retrieval import recall as rr  # noqa: E402

THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


class _Silent:
    """A reranker that scores nothing: recall then keeps the fused order."""

    def score(self, query: str, passages: Any) -> list[float]:
        return []


def measure(settings: Any, plan: list[tuple[lme.Entry, Any]]) -> list[tuple[float, bool]]:
    """(margin, fused top passage in a gold session) per question with a measurable margin."""
    seen: list[float | None] = []
    real = margin.head_margin

    def spy(pool: Any, base: Any) -> bool:
        seen.append(real(pool, base))
        return False

    out = []
    rr.head_decided = spy  # type: ignore[assignment]
    try:
        for entry, repo in plan:
            seen.clear()
            emb = importlib.import_module("funes.api.search")._embedder_for(repo, settings)
            opts = rr.Options(k=1, neighbors=0, now=lme.parse_date(entry["question_date"]))
            result = rr.retrieve(repo, entry["question"], opts, embedder=emb,
                               reranker=_Silent())  # type: ignore[arg-type]
            if seen and seen[0] is not None and result.hits:
                gold = lme.gold_of(entry).sessions
                out.append((seen[0], result.hits[0].row["session_id"] in gold))
    finally:
        rr.head_decided = real  # type: ignore[assignment]
    return out


def table(name: str, rows: list[tuple[float, bool]]) -> None:
    n = len(rows)
    right = sum(ok for _, ok in rows)
    print(f"\n{name}: {n} questions, fused top right {right / n:.3f}")
    print("| margin ≥ | skipped | top right when skipped | top right otherwise |")
    print("|---:|---:|---:|---:|")
    for t in THRESHOLDS:
        over = [ok for m, ok in rows if m >= t]
        under = [ok for m, ok in rows if m < t]
        print(f"| {t:.2f} | {len(over) / n:.1%} ({len(over)}) | {_share(over)} | "
              f"{_share(under)} |")


def _share(oks: list[bool]) -> str:
    return f"{sum(oks) / len(oks):.3f} ({sum(oks)}/{len(oks)})" if oks else "–"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-type", type=int, default=0,
                        help="the pooled subset of N questions per type (0: all 500)")
    args = parser.parse_args(argv)
    settings = lme.bench_settings()
    oracle = lme.load(lme.ORACLE_FILE)
    subset = lme.stratified(oracle, args.per_type) if args.per_type else None
    where = lme.oracle_dir(settings, subset)
    if not (where / "bench-build.json").exists():
        print(f"{where} is not built (bench/bench_recall.py builds it)", file=sys.stderr)
        return 1
    questions = [e for e in subset or oracle if not lme.is_abstention(e)]
    # A copy: recall may write index maintenance, and the cache may be in use by a build.
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(where / ".funes", Path(tmp) / ".funes", symlinks=True)
        repo = api.open_memory(settings, str(Path(tmp) / ".funes"))
        table(f"pooled oracle ({where.name})", measure(settings, [(e, repo) for e in questions]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
