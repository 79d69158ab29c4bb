"""What the conversation-aware steps add to a recall's latency.

Run:  nice -n 10 python bench/bench_recall_steps.py MEMORY   # appends to results/recall-levers.md

MEMORY is a built LongMemEval memory with vectors (bench_recall.py --levers builds them under
~/.cache/funes-bench). Warm, in-process `api.recall` on LongMemEval questions, the new
defaults and with the new steps on (`context=True, time_hints=True`), alternating query by query,
with the embedding model and, when FUNES_HOME's model cache has one, a reranker loaded. The
steps themselves (`with_context`, `timeexpr.parse` + `with_time`, `_select`) are pure Python
over the candidate pool (at most 2 × candidates = 100 passages), so their cost does not grow
with the memory: it is also timed alone, on a 100-passage pool.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import longmemeval as lme  # noqa: E402

from funes import api  # noqa: E402
from funes.retrieval import recall as core  # noqa: E402
from funes.retrieval import timeexpr  # noqa: E402


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    memory = Path(sys.argv[1])
    settings = lme.bench_settings()
    home = lme.cache_root() / "home-rerank"
    if (home / "models").is_dir():
        from dataclasses import replace

        settings = replace(settings, home=home)
    repo = api.open_memory(settings, str(memory))
    questions = [e for e in lme.load(lme.ORACLE_FILE) if not lme.is_abstention(e)][::5][:60]
    started = _load()
    for e in questions[:3]:  # warm-up: models, indexes, caches
        api.recall(settings, repo, e["question"], now=lme.parse_date(e["question_date"]))
    new: list[float] = []
    old: list[float] = []
    signals: set[str] = set()
    for e in questions:
        now = lme.parse_date(e["question_date"])
        t0 = time.perf_counter()
        result = api.recall(settings, repo, e["question"], now=now, context=True,
                            time_hints=True)
        new.append(time.perf_counter() - t0)
        signals |= set(result.signals)
        t0 = time.perf_counter()
        api.recall(settings, repo, e["question"], now=now)
        old.append(time.perf_counter() - t0)
    # The steps alone on a 100-passage pool of real rows.
    rows = {r["id"]: r for r in repo.chunks.dataset().to_table(
        columns=core.ROW_COLUMNS, limit=100).to_pylist()}
    base = {cid: 1.0 / (i + 1) for i, cid in enumerate(rows)}
    hits = [core.Hit(rows[c], s) for c, s in base.items()]
    now = datetime(2023, 6, 1, tzinfo=UTC)
    steps: list[float] = []
    for _ in range(200):
        t0 = time.perf_counter()
        adjusted = core.with_context(base, rows)
        window = timeexpr.parse("what did I buy two weeks ago, before the trip?", now)
        assert window is not None
        core.with_time(adjusted, rows, window)
        core._select(hits, 8, core.SESSION_REPEAT)
        steps.append(time.perf_counter() - t0)

    def p50(xs: list[float]) -> float:
        return 1000 * statistics.median(xs)

    chunks = repo.chunks.dataset().count_rows()
    lines = [
        "## Latency of the new steps", "",
        f"`nice -n 10 python bench/bench_recall_steps.py {memory}` ({chunks} chunks, signals "
        f"{', '.join(sorted(signals))}); load {started} at start, {_load()} at the end.", "",
        "| measure | p50 (ms) | p95 (ms) | n |", "|---|---:|---:|---:|",
        f"| warm api.recall, context + time hints on | {p50(new):.0f} | "
        f"{1000 * sorted(new)[int(0.95 * len(new)) - 1]:.0f} | {len(new)} |",
        f"| warm api.recall, defaults (context and time hints off) | "
        f"{p50(old):.0f} | {1000 * sorted(old)[int(0.95 * len(old)) - 1]:.0f} | {len(old)} |",
        f"| the steps alone (with_context + parse + with_time + _select), 100 passages | "
        f"{p50(steps):.2f} | {1000 * sorted(steps)[int(0.95 * len(steps)) - 1]:.2f} | "
        f"{len(steps)} |", "",
    ]
    text = "\n".join(lines)
    print(text)
    with (ROOT / "bench" / "results" / "recall-levers.md").open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
