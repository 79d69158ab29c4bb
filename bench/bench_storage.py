"""Storage benchmark: 100k chunk rows in 100 commits; commit latency vs repository size.

Run: python bench/bench_storage.py [--commits 100] [--rows 1000]
Writes bench/results/storage.md. The claim under test: commit latency does not grow with the
repository (commit #1 vs #100), and opening a repository to read HEAD's chunk count is fast.
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from funes._env import settings
from funes.storage.repo import Repository
from tests.builders import make_batch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Repository.init(Path(tmp) / ".funes", settings())
        latencies = []
        for i in range(args.commits):
            batch = make_batch(i * args.rows, args.rows, session=f"s{i}",
                               text=None)
            t0 = time.perf_counter()
            repo.commit_chunks(batch, f"index: batch {i}")
            latencies.append(time.perf_counter() - t0)
        total_rows = args.commits * args.rows

        # open + HEAD chunk count in a fresh process (what `funes status` pays before scanning)
        probe = (
            "import time; t=time.perf_counter();"
            "from funes._env import settings; from funes.storage.repo import Repository;"
            f"r=Repository.open(__import__('pathlib').Path({str(repo.path)!r}), settings());"
            "n=r.head_commit().chunk_count; print(n, time.perf_counter()-t)"
        )
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             check=True).stdout.split()
        count, open_s = int(out[0]), float(out[1])
        assert count == total_rows, (count, total_rows)
        t0 = time.perf_counter()
        stats = repo.stats()
        stats_s = time.perf_counter() - t0
        assert stats.chunks == total_rows
        t0 = time.perf_counter()
        again = repo.commit_chunks(make_batch(0, args.rows, session="s0"), "noop")
        noop_s = time.perf_counter() - t0
        assert again.commit is None

    first10 = statistics.median(latencies[:10])
    last10 = statistics.median(latencies[-10:])
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = [
        ("rows x commits", f"{args.rows} x {args.commits} = {total_rows}"),
        ("commit #1 latency", f"{latencies[0] * 1000:.1f} ms"),
        (f"commit #{args.commits} latency", f"{latencies[-1] * 1000:.1f} ms"),
        ("median commit latency, first 10", f"{first10 * 1000:.1f} ms"),
        ("median commit latency, last 10", f"{last10 * 1000:.1f} ms"),
        ("ingest rate (rows/s, whole run)", f"{total_rows / sum(latencies):.0f}"),
        ("re-commit of 1000 known rows (dedup, no commit)", f"{noop_s * 1000:.1f} ms"),
        ("fresh process: open + HEAD chunk count", f"{open_s * 1000:.1f} ms"),
        ("status scan (chunks/sessions by agent)", f"{stats_s * 1000:.1f} ms"),
        ("peak RSS", f"{rss_mb:.0f} MB"),
    ]
    table = "| measure | value |\n|---|---|\n" + "\n".join(f"| {a} | {b} |" for a, b in rows)
    header = (f"# Storage benchmark\n\n`python bench/bench_storage.py --commits {args.commits} "
              f"--rows {args.rows}` on {platform.machine()}, {platform.python_version()}, "
              f"{time.strftime('%Y-%m-%d')}\n\n")
    print(table)
    out_path = Path(__file__).parent / "results" / "storage.md"
    out_path.parent.mkdir(exist_ok=True)
    out_path.write_text(header + table + "\n")


if __name__ == "__main__":
    main()
