"""Worst-case time of redaction and the gate's rules on adversarial text (regex denial of service).

Every rule and detector meets every family of tests/support/adversarial.py: each keyword alone,
its text `--size` characters long, then the same at half the size, so the ratio says whether the
time is linear in the text (about 2) or quadratic (about 4). The linear-time test
(tests/ingest/test_linear_time.py) runs a quick subset; this runs all of it.

    python bench/bench_redos.py --size 65536 [--top 20] [--engine redact|rules|gate]
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

from funes.ingest import gitleaks  # noqa: E402
from funes.ingest.redact import redact  # noqa: E402
from tests.support.adversarial import FAMILIES, every_keyword  # noqa: E402


def _best(fn: object, text: str, repeat: int = 2) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()  # CPU time of this thread: the load of the machine drops out
        fn(text)  # type: ignore[operator]
        best = min(best, time.thread_time() - t0)
    return best


def _rules_scan(text: str) -> object:
    lowered = gitleaks.lower_in_place(text)
    return gitleaks.rules().scan(text, lowered)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--engine", choices=("redact", "rules"), default="redact")
    ap.add_argument("--keywords", nargs="*", help="only these keywords")
    args = ap.parse_args()
    fn = redact if args.engine == "redact" else _rules_scan
    words = args.keywords or every_keyword()
    rows: list[tuple[float, float, str, str]] = []
    t_all = time.perf_counter()
    cpu_all = time.process_time()
    for kw in words:
        for name, make in FAMILIES.items():
            half = _best(fn, make(kw, args.size // 2), 1)
            if half < 0.002:
                rows.append((half * 2, 2.0, kw, name))  # too fast to matter: not re-timed
                continue
            full = _best(fn, make(kw, args.size))
            rows.append((full, full / max(half, 1e-9), kw, name))
    rows.sort(reverse=True)
    load = os.getloadavg()
    print(f"# bench_redos --engine {args.engine} --size {args.size}: {len(rows)} texts "
          f"({len(words)} keywords x {len(FAMILIES)} families), Python "
          f"{platform.python_version()}, wall {time.perf_counter() - t_all:.1f} s, "
          f"CPU {time.process_time() - cpu_all:.1f} s, load {load[0]:.1f} {load[1]:.1f}")
    print("| seconds | ratio to half size | keyword | family |")
    print("|---|---|---|---|")
    for full, ratio, kw, name in rows[: args.top]:
        print(f"| {full:.3f} | {ratio:.1f} | `{kw!r}` | {name} |")


if __name__ == "__main__":
    main()
