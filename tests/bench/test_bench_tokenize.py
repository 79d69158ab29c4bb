"""bench/bench_tokenize.py's code path on one repeat, so the benchmark cannot rot."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_tokenize as bt  # noqa: E402


def test_the_benchmark_measures_both_targets() -> None:
    per_kb = bt.tokenizer_per_kb(bt.transcript_text()[:20_000], 1)
    seconds, chunks = bt.chunking_seconds(bt.tool_log(400), 1)
    assert len(per_kb) == 1 and per_kb[0] >= 0
    assert len(seconds) == 1 and chunks > 2
