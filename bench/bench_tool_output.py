"""What tool output costs a memory, and what recall sees of it, on the shared real traces.

Run:  nice -n 10 python bench/bench_tool_output.py   # writes bench/results/tool-output.md

Every trace in ../shared/fixtures/traces (claude, codex, pi, hermes; real sessions) is indexed
twice through the real ingest path: as funes does by default, and with `--no-tool-results`.
Reported per harness: chunks stored, chunks the embedding backlog would embed (tool output
bodies are never embedded, docs/chunking.md), characters kept; and, for recall, the share of
tool output among the top 8 hits (BM25, the signal that reaches every chunk) when each real
user request of the traces is asked back as a query ("what did we do about <request>?"), plus
how often the turn that answered the request (the assistant's next text turn) is still in the
top 8 without tool output. No labels exist for these traces, so this measures exposure and
cost, not correctness.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TRACES = ROOT.parent / "shared" / "fixtures" / "traces"

from funes import api  # noqa: E402


def _load() -> str:
    import os

    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def _memory(settings: Any, root: Path, harness: str, files: list[Path], tools: bool) -> Any:
    root.mkdir(parents=True)
    api.init(settings, root)
    mem = str(root / ".funes")
    api.index(settings, memory=mem, paths=[str(f) for f in files], agents=[harness],
              tool_results=tools)
    return api.open_memory(settings, mem)


def _stats(repo: Any) -> dict[str, float]:
    if not repo.chunks.exists():
        return {"chunks": 0, "embedded": 0, "chars": 0, "tool": 0}
    table = repo.chunks.dataset().to_table(columns=["text", "block_type", "noise"])
    rows = table.to_pylist()
    return {
        "chunks": len(rows),
        "embedded": sum(1 for r in rows if r["noise"] != "tool-output-body"),
        "chars": sum(len(r["text"]) for r in rows),
        "tool": sum(1 for r in rows if r["block_type"] == "tool_result"),
    }


def _requests(repo: Any) -> list[tuple[str, str, int]]:
    """(query, session, seq) for each user request long enough to ask back."""
    rows = repo.chunks.dataset().to_table(
        columns=["text", "session_id", "seq", "role", "block_type", "split_idx", "noise"],
        filter="role = 'user' AND block_type = 'text' AND split_idx = 0").to_pylist()
    out = []
    for r in rows:
        words = r["text"].split()
        if r["noise"] is None and len(words) >= 5:
            out.append((" ".join(words[:30]), r["session_id"], int(r["seq"])))
    return out


def _answer_turn(repo: Any, session: str, seq: int) -> str | None:
    q = session.replace("'", "''")
    rows = repo.chunks.dataset().to_table(
        columns=["turn_id", "seq"],
        filter=f"session_id = '{q}' AND role = 'assistant' AND block_type = 'text' "
        f"AND seq > {seq}").to_pylist()
    return min(rows, key=lambda r: r["seq"])["turn_id"] if rows else None


@contextmanager
def _factor(value: float) -> Iterator[None]:
    """Recall with TOOL_RESULT_FACTOR set to `value` (1.0: tool output unweighted)."""
    from funes.retrieval import recall as core

    old = core.TOOL_RESULT_FACTOR
    core.TOOL_RESULT_FACTOR = value
    try:
        yield
    finally:
        core.TOOL_RESULT_FACTOR = old


def main() -> int:
    from funes._env import settings as load

    started = _load()
    t0 = time.perf_counter()
    lines = ["# Tool output in coding traces", "",
             f"`nice -n 10 python bench/bench_tool_output.py`, 2 shared CPUs, load {started} at "
             "start.", "", __doc__.split("\n\n", 2)[2].strip(), "",
             "| harness | files | chunks (default → lean) | tool-output chunks | embedded "
             "(default → lean) | characters (default → lean) | tool output in top 8 "
             "(unweighted → × TOOL_RESULT_FACTOR) | answer turn in top 8 (unweighted → "
             "weighted → lean) | queries |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="funes-tools-") as tmp:
        home = Path(tmp) / "home"
        settings = dataclasses.replace(load(), home=home)
        for harness in ("claude", "codex", "pi", "hermes"):
            files = sorted((TRACES / harness).glob("*.jsonl"))
            full = _memory(settings, Path(tmp) / f"{harness}-full", harness, files, True)
            lean = _memory(settings, Path(tmp) / f"{harness}-lean", harness, files, False)
            a, b = _stats(full), _stats(lean)
            shares, weighted, found_full, found_w, found_lean, asked = [], [], 0, 0, 0, 0
            for query, session, seq in _requests(full):
                want = _answer_turn(full, session, seq)
                with _factor(1.0):
                    hits_full = api.recall(settings, full, query, k=8, neighbors=0,
                                           vector=False).hits
                hits_w = api.recall(settings, full, query, k=8, neighbors=0, vector=False).hits
                hits_lean = api.recall(settings, lean, query, k=8, neighbors=0, vector=False).hits
                if not hits_full:
                    continue
                asked += 1
                shares.append(sum(h.row["block_type"] == "tool_result" for h in hits_full)
                              / len(hits_full))
                weighted.append(sum(h.row["block_type"] == "tool_result" for h in hits_w)
                                / max(1, len(hits_w)))
                if want is not None:
                    found_full += any(h.row["turn_id"] == want for h in hits_full)
                    found_w += any(h.row["turn_id"] == want for h in hits_w)
                    found_lean += any(h.row["turn_id"] == want for h in hits_lean)
            share = statistics.mean(shares) if shares else 0.0
            wshare = statistics.mean(weighted) if weighted else 0.0
            lines.append(
                f"| {harness} | {len(files)} | {a['chunks']} → {b['chunks']} | {a['tool']} | "
                f"{a['embedded']} → {b['embedded']} | {a['chars']:,} → {b['chars']:,} | "
                f"{share:.0%} → {wshare:.0%} | {found_full} → {found_w} → {found_lean} | "
                f"{asked} |")
    lines += ["", f"Wall {time.perf_counter() - t0:.0f} s; load at the end {_load()}.", ""]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "bench" / "results" / "tool-output.md"
    out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
