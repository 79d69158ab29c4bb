"""Tokenizer and chunking benchmark: the two speed targets the unit tests used to assert.

Run: python bench/bench_tokenize.py [--repeat 5]
Measures CPU time (process time, so the machine's other load matters less than for wall time):

- the WordPiece tokenizer's word spans over a real transcript (the first 200 KB of the shared
  tool-heavy Claude session, which holds 39 KB), per KB, once its word cache is warm (target:
  under 1 ms per KB; a 1 KB chunk must count in well under a millisecond, since ingest counts
  every chunk's tokens);
- chunking one long tool output (a 4,000-line log, about 400 KB) into 256-token chunks
  (target: under 2 s; long tool output is common and is chunked in the hook's detached run).

The unit tests keep only bounds against pathological inputs (quadratic blowups), far from
these targets. Writes bench/results/tokenize.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from funes.ingest.chunking import chunk_turn  # noqa: E402
from funes.ingest.tokenizer import get_tokenizer  # noqa: E402
from funes.model.turns import Block, Turn  # noqa: E402
from tests.builders import tool_log  # noqa: E402

TRACES = ROOT.parent / "shared" / "fixtures" / "traces"
TRANSCRIPT = TRACES / "claude" / "marot__spotter__tool_heavy.jsonl"
TOKENIZER_TARGET = 1e-3  # seconds of CPU per KB
CHUNKING_TARGET = 2.0  # seconds of CPU for the 400 KB log


def transcript_text() -> str:
    """Up to 200 KB of a real transcript, or the synthetic log when the shared fixtures are
    absent."""
    if TRANSCRIPT.exists():
        return TRANSCRIPT.read_text("utf-8")[:200_000]
    return tool_log()


def tokenizer_per_kb(text: str, repeat: int) -> list[float]:
    tok = get_tokenizer()
    tok.count(text)  # warm the word cache, as ingest's steady state is
    out = []
    for _ in range(repeat):
        start = time.process_time()
        tok.word_spans(text)
        out.append((time.process_time() - start) / (len(text) / 1000))
    return out


def chunking_seconds(output: str, repeat: int) -> tuple[list[float], int]:
    block = Block("tool_result", output, tool_name="Bash", tool_call_id="c9")
    turn = Turn(harness="claude", session_id="s", turn_id="t", seq=0, ts="", role="user",
                blocks=(Block("tool_use", '{"command": "run"}', tool_name="Bash"), block))
    out = []
    chunks = 0
    for _ in range(repeat):
        start = time.process_time()
        chunks = len(chunk_turn(turn))
        out.append(time.process_time() - start)
    return out, chunks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "tokenize.md")
    args = parser.parse_args()
    text = transcript_text()
    per_kb = tokenizer_per_kb(text, args.repeat)
    output = tool_log()
    chunking, chunks = chunking_seconds(output, args.repeat)
    tok_median = statistics.median(per_kb)
    chunk_median = statistics.median(chunking)
    rows = [
        ("tokenizer word spans, CPU per KB (median of "
         f"{args.repeat}, {len(text) // 1000} KB)",
         f"{tok_median * 1e6:.0f} µs (target < {TOKENIZER_TARGET * 1e6:.0f} µs)",
         "ok" if tok_median < TOKENIZER_TARGET else "MISSED"),
        (f"chunking {len(output) // 1000} KB of tool output into {chunks} chunks, CPU "
         f"(first run, words never seen; median of {args.repeat})",
         f"{chunking[0]:.2f} s; {chunk_median:.2f} s (target < {CHUNKING_TARGET:.0f} s)",
         "ok" if chunking[0] < CHUNKING_TARGET else "MISSED"),
    ]
    load = os.getloadavg()
    lines = [
        "# Tokenizer and chunking",
        "",
        f"`python bench/bench_tokenize.py --repeat {args.repeat}` on {platform.machine()}, "
        f"Python {platform.python_version()}, load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f}; source text: "
        + ("the shared tool-heavy Claude transcript" if TRANSCRIPT.exists() else
           "the synthetic tool log (shared fixtures absent)") + ".",
        "",
        "| measure | result | target |",
        "|---|---|---|",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows),
        "",
    ]
    report = "\n".join(lines)
    args.out.write_text(report, "utf-8")
    print(report)
    if any(c != "ok" for _, _, c in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
