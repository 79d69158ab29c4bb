"""Ingest benchmark: lexical ingest throughput and the cost of one new turn.

Run: python bench/bench_ingest.py [--target 100000]
The real fixtures (../shared/fixtures/traces) are copied K times with every UUID rewritten per
copy, so each copy is a distinct set of sessions that still goes through the real parsers,
redaction, chunking and commit. Then one turn is appended to one session and indexed the way a
hook does (that file only), at the full size and at a small size, to show the cost is flat.
Writes bench/results/ingest.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from funes import api  # noqa: E402
from funes._env import settings as load_settings  # noqa: E402
from funes.storage.repo import Repository  # noqa: E402

TRACES = ROOT.parent / "shared" / "fixtures" / "traces"
UUID = re.compile(rb"[0-9a-f]{8}(-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


def make_copies(out: Path, copies: int) -> None:
    files = sorted(p for p in TRACES.rglob("*.jsonl"))
    for k in range(copies):
        for f in files:
            data = UUID.sub(lambda m, k=k: b"%08x" % k + m.group(1), f.read_bytes())
            dest = out / f"copy{k:04d}" / f.parent.name / f.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)


def append_turn(path: Path, n: int) -> None:
    lines = path.read_bytes().splitlines()
    last = json.loads(lines[-1])
    session = last.get("sessionId", "bench-session")
    for role, text in (("user", f"new question number {n} about the flaky retry test"),
                       ("assistant", f"answer {n}: the retry loop hid a race in the fixture")):
        record = {"type": role, "sessionId": session, "uuid": f"bench-{n}-{role}",
                  "timestamp": "2026-11-29T12:00:00.000Z", "cwd": "/work/bench",
                  "message": {"role": role, "content": text}}
        with open(path, "ab") as fh:
            fh.write(json.dumps(record).encode() + b"\n")


def one_turn_cost(settings, repo: Repository, session: Path, n: int) -> float:  # type: ignore[no-untyped-def]
    append_turn(session, n)
    t0 = time.perf_counter()
    summary = api.index(settings, memory=str(repo.path), paths=[str(session)], agents=["claude"])
    elapsed = time.perf_counter() - t0
    assert summary.added >= 2, summary
    return elapsed


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the reading workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", type=int, default=100_000, help="chunks to reach")
    args = parser.parse_args()
    settings = load_settings()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        probe = Repository.init(tmp / "probe" / ".funes", settings)
        per_copy = api.index(settings, memory=str(probe.path), paths=[str(TRACES)]).added
        copies = -(-args.target // max(1, per_copy))
        make_copies(tmp / "src", copies)

        repo = Repository.init(tmp / "mem" / ".funes", settings)
        t0, c0 = time.perf_counter(), _cpu()
        full = api.index(settings, memory=str(repo.path), paths=[str(tmp / "src")])
        ingest_s, ingest_cpu = time.perf_counter() - t0, _cpu() - c0
        rate = full.added / ingest_s
        cpu_rate = full.added / ingest_cpu  # steadier than wall time on a shared machine

        t0 = time.perf_counter()
        noop = api.index(settings, memory=str(repo.path), paths=[str(tmp / "src")])
        noop_s = time.perf_counter() - t0
        assert noop.added == 0

        session = next((tmp / "src" / "copy0000" / "claude").glob("marot__spotter__short.jsonl"))
        big = [one_turn_cost(settings, repo, session, n) for n in range(5)]

        small = Repository.init(tmp / "small" / ".funes", settings)
        small_session = tmp / "small-src" / session.name
        small_session.parent.mkdir()
        small_session.write_bytes((TRACES / "claude" / session.name).read_bytes())
        api.index(settings, memory=str(small.path), paths=[str(small_session)])
        little = [one_turn_cost(settings, small, small_session, n) for n in range(5)]

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [
        ("fixture copies (UUIDs rewritten per copy)", str(copies)),
        ("files / sessions / turns", f"{full.files} / {full.sessions} / {full.turns}"),
        ("chunks stored", str(full.added)),
        ("first index, wall", f"{ingest_s:.1f} s"),
        ("lexical ingest throughput", f"{rate:.0f} chunks/s wall (target ≥ 2,000)"),
        ("lexical ingest throughput, per CPU second (all threads and workers)",
         f"{cpu_rate:.0f} chunks/s"),
        ("load average at the end (1 min)", f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"),
        ("re-index, nothing changed", f"{noop_s:.2f} s for {noop.files} files"),
        (f"one appended turn into {full.added} chunks (median of 5)",
         f"{sorted(big)[2] * 1000:.0f} ms (target ≤ 2,000 ms)"),
        ("one appended turn into a one-session memory (median of 5)",
         f"{sorted(little)[2] * 1000:.0f} ms"),
        ("redactions", str(sum(full.redactions.values()))),
        ("peak RSS", f"{rss:.0f} MB"),
    ]
    table = "| measure | value |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)
    print(table)
    header = (f"# Ingest benchmark\n\n`python bench/bench_ingest.py --target {args.target}` on "
              f"{platform.machine()}, Python {platform.python_version()}, "
              f"{time.strftime('%Y-%m-%d')}. Lexical only: no embeddings.\n\n")
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "ingest.md").write_text(header + table + "\n")


if __name__ == "__main__":
    main()
