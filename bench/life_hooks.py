"""`bench_life.py hooks`: what a hook pays for each finished turn, over months of turns.

Each agent turn ends with one `index` call into the memory (the hook worker's
`funes.api.hookworker`; here the porcelain `funes.api.index` it shares the work with): the
transcript that grew by one turn is read from its saved position, its chunks are committed,
and the automatic upkeep runs (`funes.retrieval.indexes.maintain`: packing, folding appended
rows into the search indexes), together with the id-index catch-up and the read-position
state. This times that whole call, per call, and beside it the part the `months` mode times
(`Repository.commit_chunks` alone, "commit") and the upkeep (`maintain`).

The verdict is a ratio within one run: the mean and p95 of the last 100 calls against the
first 100, in wall time and, because wall time on a shared machine follows its load, in CPU
time (`time.process_time`: every thread of this process, Lance's included) and in bytes read
and written (`/proc/self/io`), which do not depend on the load. A paired figure is given too:
a copy of the memory taken at call 100 and the final memory take calls in alternation at the
end, the same moment weighing on both. cProfile windows (`--profile-calls` calls right after
call 100 and after the last call, excluded from the figures) show where the time goes.

After the calls, recall on the per-turn memory is compared with the same transcripts
indexed by one call into a fresh memory, in alternation, before and after `funes gc`.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: The windows compared: the first and the last this many calls (half the run when shorter).
WINDOW = 100


class Timers:
    """Time spent inside wrapped functions during one call (bench instrumentation)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.wrapped: list[tuple[Any, str, Any]] = []

    def unwrap(self) -> None:
        for owner, name, inner in reversed(self.wrapped):
            setattr(owner, name, inner)
        self.wrapped.clear()

    def wrap(self, owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)
        self.wrapped.append((owner, name, inner))
        timers = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                timers.spent[label] = timers.spent.get(label, 0.0) + time.perf_counter() - t0

        setattr(owner, name, timed)

    def take(self) -> dict[str, float]:
        spent, self.spent = self.spent, {}
        return spent


class Transcripts:
    """Claude Code transcripts that grow by one turn (a user and an assistant record) a call."""

    def __init__(self, root: Path, session_turns: int, prefix: str, seed: int) -> None:
        self.root = root
        self.session_turns = session_turns
        self.prefix = prefix
        self.rng = random.Random(seed)
        self.parents: dict[str, str | None] = {}

    def turn(self, i: int) -> Path:
        from bench_life import _text

        s = i // self.session_turns
        sid = f"{self.prefix}-0000-4000-8000-{s:012d}"
        path = self.root / "projects" / "-work-project" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            for k, (role, words) in enumerate((("user", 25), ("assistant", 90))):
                uid = f"{self.prefix}-{s:04d}-4000-8000-{i * 2 + k:012d}"
                text = f"turn {i}: " + _text(self.rng, words)
                content: object = text if role == "user" else [{"type": "text", "text": text}]
                rec = {"type": role, "uuid": uid, "parentUuid": self.parents.get(sid),
                       "sessionId": sid,
                       "timestamp": f"2026-{1 + i // 1500 % 12:02d}-{1 + i // 60 % 28:02d}T"
                                    f"{i // 3 % 24:02d}:{i % 60:02d}:{k:02d}.000Z",
                       "cwd": "/work/project", "message": {"role": role, "content": content}}
                fh.write(json.dumps(rec) + "\n")
                self.parents[sid] = uid
        return path


IO = Path("/proc/self/io")


def _io_bytes() -> int:
    """Bytes this process read and wrote so far (rchar + wchar; 0 where /proc is absent)."""
    try:
        fields = dict(line.split(": ") for line in IO.read_text().splitlines())
    except OSError:
        return 0
    return int(fields["rchar"]) + int(fields["wchar"])


def _ms(values: list[float]) -> str:
    return f"{statistics.mean(values) * 1000:.0f}"


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _profile_text(prof: cProfile.Profile, calls: int, top: int = 22) -> str:
    """The functions of funes and Lance that took the most time, cumulative, per call."""
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    rows = []
    for (file, line, func), (_cc, nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        short = file.split("/site-packages/")[-1].split("/funes/")[-1]
        if "/funes/" in file or "lance" in short or func.startswith("<built-in method"):
            rows.append((ct, nc, f"{short}:{line}({func})"))
    rows.sort(reverse=True)
    lines = [f"    {ct / calls * 1000:8.1f} ms/call {nc / calls:8.1f}x  {name}"
             for ct, nc, name in rows[:top]]
    return "\n".join(lines)


@contextlib.contextmanager
def _env(home: Path) -> Iterator[None]:
    keep = dict(os.environ)
    os.environ.update({"FUNES_HOME": str(home), "FUNES_SERVE": "off", "HF_HUB_OFFLINE": "1",
                       "FUNES_AUTHOR_NAME": "bench", "FUNES_AUTHOR_EMAIL": "bench@localhost"})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(keep)


def _recall_pair(settings: Any, a: Any, b: Any, n: int, seed: int) -> tuple[float, float, float]:
    """Recall p50 (ms) on two memories, each query run on both back to back; and the median
    of the per-query ratios, which a load that drifts during the run weighs on least."""
    from bench_life import WORDS

    from funes.api import search

    opts: dict[str, Any] = {"k": 8, "rerank": False, "vector": False}
    rng = random.Random(seed)
    times: dict[int, list[float]] = {0: [], 1: []}
    for repo in (a, b):
        search.recall(settings, repo, "parser stream", **opts)  # warm-up, indexes built
    for j in range(n):
        query = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
        for side in ((0, 1) if j % 2 else (1, 0)):
            t0 = time.perf_counter()
            search.recall(settings, (a, b)[side], query, **opts)
            times[side].append(time.perf_counter() - t0)
    ratios = [x / y for x, y in zip(times[0], times[1], strict=True)]
    return (statistics.median(times[0]) * 1000, statistics.median(times[1]) * 1000,
            statistics.median(ratios))


def hooks(args: argparse.Namespace) -> bool:
    """The `hooks` mode (see the module docstring); prints Markdown, returns the verdict."""
    base = Path(args.scratch) if args.scratch else Path(tempfile.mkdtemp(prefix="funes-life-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        with _env(base / "home"):
            return _hooks(args, base)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def _hooks(args: argparse.Namespace, base: Path) -> bool:
    from funes._env import settings as load_settings
    from funes.api import ingest
    from funes.storage.repo import Repository

    settings = load_settings()
    timers = Timers()
    timers.wrap(Repository, "commit_chunks", "commit")
    timers.wrap(ingest, "maintain", "maintain")
    try:
        return _run(args, base, settings, timers)
    finally:
        timers.unwrap()


def _run(args: argparse.Namespace, base: Path, settings: Any, timers: Timers) -> bool:
    from funes import api
    from funes.api import security
    from funes.storage.repo import Repository

    repo = Repository.init(settings.home, settings, is_global=True)
    source = Transcripts(base / "claude", args.session_turns, "00000000", 3)
    n = args.calls
    window = min(WINDOW, max(1, n // 2))
    total: list[float] = []
    parts: list[dict[str, float]] = []
    profiles: dict[str, cProfile.Profile] = {}
    early_copy = base / "at100"
    load_seen: list[float] = []

    def call(target: Any, transcripts: Transcripts, i: int,
             prof: cProfile.Profile | None = None) -> tuple[float, dict[str, float]]:
        path = transcripts.turn(i)
        timers.take()
        io0, c0, t0 = _io_bytes(), time.process_time(), time.perf_counter()
        if prof:
            prof.enable()
        api.index(settings, memory=str(target.path), paths=[str(path)])
        if prof:
            prof.disable()
        took = time.perf_counter() - t0
        spent = timers.take()
        spent["cpu"], spent["io"] = time.process_time() - c0, float(_io_bytes() - io0)
        return took, spent

    lines = ["| calls | rows | fragments | index call mean | p95 | max | CPU mean | I/O mean | "
             "commit mean | maintain mean | load |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    step_start = 0
    i = 0
    while i < n:
        took, spent = call(repo, source, i)
        total.append(took)
        parts.append(spent)
        i += 1
        if i == window:
            shutil.copytree(repo.path, early_copy, symlinks=True)
            prof = profiles.setdefault("early", cProfile.Profile())
            for j in range(args.profile_calls):
                call(repo, source, n + args.paired * 2 + j, prof)  # not counted
        if i % args.step == 0 or i == n:
            took_w, spent_w = total[step_start:i], parts[step_start:i]
            load_seen.append(os.getloadavg()[0])
            rows = repo.chunks.dataset().count_rows()
            frags = len(repo.chunks.dataset().get_fragments())
            lines.append(
                f"| {i} | {rows} | {frags} | {_ms(took_w)} ms | {_p95(took_w) * 1000:.0f} ms | "
                f"{max(took_w) * 1000:.0f} ms | "
                f"{_ms([p['cpu'] for p in spent_w])} ms | "
                f"{statistics.mean(p['io'] for p in spent_w) / 1000:.0f} kB | "
                f"{_ms([p.get('commit', 0.0) for p in spent_w])} ms | "
                f"{_ms([p.get('maintain', 0.0) for p in spent_w])} ms | {load_seen[-1]:.1f} |")
            print(lines[-1], flush=True)
            step_start = i
    prof = profiles.setdefault("late", cProfile.Profile())
    for j in range(args.profile_calls):
        call(repo, source, n + args.paired * 2 + args.profile_calls + j, prof)

    # Paired: the memory as it was at call 100 and the memory now, alternating.
    early = Repository.open(early_copy, settings)
    paired: dict[str, list[float]] = {"early": [], "late": []}
    side_sources = {"early": Transcripts(base / "claude-early", args.session_turns, "11111111", 5),
                    "late": Transcripts(base / "claude-late", args.session_turns, "22222222", 5)}
    for j in range(args.paired):
        for name, target in (("early", early), ("late", repo)):
            paired[name].append(call(target, side_sources[name], j)[0])

    # Recall: the per-turn memory against the same transcripts indexed by one call.
    once = Repository.init(base / "once" / ".funes", settings)
    api.index(settings, memory=str(once.path),
              paths=[str(base / "claude"), str(base / "claude-late")])
    before_gc = _recall_pair(settings, repo, once, args.queries, 11)
    t0 = time.perf_counter()
    security.gc(repo)
    gc_s = time.perf_counter() - t0
    after_gc = _recall_pair(settings, repo, once, args.queries, 13)

    first, last = total[:window], total[-window:]
    commit_first = [p.get("commit", 0.0) for p in parts[:window]]
    commit_last = [p.get("commit", 0.0) for p in parts[-window:]]
    mean_ratio = statistics.mean(last) / statistics.mean(first)
    p95_ratio = _p95(last) / _p95(first)
    cpu_first, cpu_last = [p["cpu"] for p in parts[:window]], [p["cpu"] for p in parts[-window:]]
    io_first, io_last = [p["io"] for p in parts[:window]], [p["io"] for p in parts[-window:]]
    cpu_mean_ratio = statistics.mean(cpu_last) / statistics.mean(cpu_first)
    cpu_p95_ratio = _p95(cpu_last) / _p95(cpu_first)
    io_mean_ratio = statistics.mean(io_last) / max(statistics.mean(io_first), 1.0)
    print("\n".join(lines))
    print()
    print(f"whole `index` call, {n} calls: median {statistics.median(total) * 1000:.0f} ms, "
          f"p95 {_p95(total) * 1000:.0f} ms, max {max(total) * 1000:.0f} ms")
    print(f"first {window}: mean {_ms(first)} ms, p95 {_p95(first) * 1000:.0f} ms; last {window}: "
          f"mean {_ms(last)} ms, p95 {_p95(last) * 1000:.0f} ms -> mean ratio {mean_ratio:.2f} "
          f"(must be <= 1.3), p95 ratio {p95_ratio:.2f} (must be <= 2)")
    cpu_all = [p["cpu"] for p in parts]
    print(f"CPU time per call (load-independent): median {statistics.median(cpu_all) * 1000:.0f} "
          f"ms, p95 {_p95(cpu_all) * 1000:.0f} ms, max {max(cpu_all) * 1000:.0f} ms; first "
          f"{window}: mean {_ms(cpu_first)} ms, p95 {_p95(cpu_first) * 1000:.0f} ms; last "
          f"{window}: mean {_ms(cpu_last)} ms, p95 {_p95(cpu_last) * 1000:.0f} ms -> mean ratio "
          f"{cpu_mean_ratio:.2f}, p95 ratio {cpu_p95_ratio:.2f}")
    print(f"bytes read and written per call: first {window} mean "
          f"{statistics.mean(io_first) / 1000:.0f} kB, last {window} mean "
          f"{statistics.mean(io_last) / 1000:.0f} kB (ratio {io_mean_ratio:.2f})")
    print(f"the `months` figure (commit_chunks alone): first {window} mean {_ms(commit_first)} ms, "
          f"last {window} mean {_ms(commit_last)} ms "
          f"(ratio {statistics.mean(commit_last) / statistics.mean(commit_first):.2f})")
    pe, pl = paired["early"], paired["late"]
    print(f"paired ({args.paired} calls each, alternating): memory at call {window} mean {_ms(pe)} "
          f"ms / p95 {_p95(pe) * 1000:.0f} ms, at call {n} mean {_ms(pl)} ms / p95 "
          f"{_p95(pl) * 1000:.0f} ms (mean ratio {statistics.mean(pl) / statistics.mean(pe):.2f})")
    print(f"recall p50 ({args.queries} queries, each on both memories in turn): per-turn "
          f"{before_gc[0]:.1f} ms vs at once {before_gc[1]:.1f} ms (ratio "
          f"{before_gc[0] / before_gc[1]:.2f}, per-query median {before_gc[2]:.2f}); after gc "
          f"({gc_s:.1f} s): {after_gc[0]:.1f} ms vs {after_gc[1]:.1f} ms (ratio "
          f"{after_gc[0] / after_gc[1]:.2f}, per-query median {after_gc[2]:.2f}; must be <= 1.5)")
    for name in ("early", "late"):
        at = window if name == "early" else n
        print(f"\nprofile of {args.profile_calls} calls at call {at} "
              f"(cumulative, per call):\n{_profile_text(profiles[name], args.profile_calls)}")
    la = os.getloadavg()
    print(f"\nload (1 min) at each step: {' '.join(f'{x:.1f}' for x in load_seen)}; "
          f"now {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}")
    recall_ok = after_gc[0] / after_gc[1] <= 1.5
    ok = mean_ratio <= 1.3 and p95_ratio <= 2.0 and recall_ok
    print(f"verdict: {'holds' if ok else 'does not hold'}")
    cpu_ok = cpu_mean_ratio <= 1.3 and cpu_p95_ratio <= 2.0 and recall_ok
    print(f"verdict on CPU time (load-independent): {'holds' if cpu_ok else 'does not hold'}")
    return ok


def add_parser(sub: Any, run: Callable[[argparse.Namespace], None]) -> None:
    """The `hooks` subcommand of bench_life.py."""
    h = sub.add_parser("hooks", help="the whole hook-style index call, per call")
    h.add_argument("--calls", type=int, default=3000)
    h.add_argument("--session-turns", type=int, default=2,
                   help="turns per session transcript (a new file every N calls)")
    h.add_argument("--step", type=int, default=250)
    h.add_argument("--profile-calls", type=int, default=20)
    h.add_argument("--paired", type=int, default=40)
    h.add_argument("--queries", type=int, default=60)
    h.add_argument("--scratch", default="", help="work directory (default: a temp dir)")
    h.add_argument("--keep", action="store_true", help="keep the work directory")
    h.set_defaults(run=run)
