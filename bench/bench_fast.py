"""Fast-path benchmark (issue #19): what an agent waits for when it calls funes.

Run:  python bench/bench_fast.py                  # 10k and 100k chunks; bench/results/fast-path.md
      python bench/bench_fast.py --sizes 10000    # smaller, quicker

Measures, each figure with the machine's load average beside it:

* `funes --version` and `python -c pass` (the interpreter's own start) in fresh processes;
* `funes recall` and `funes get` answered by a running `funes serve` (the thin client,
  funes.cli.thin), against the same request sent from this process over the socket: the
  difference is what the client costs above the server's own time;
* warm in-process `api.recall` with the reranker (pool 4) and the default time budget, with the
  machine's other core kept busy by a CPU-bound process (`--busy`), and which signals ran;
* cold `funes recall` with the reranker in a new process (FUNES_SERVE=off), and where a cold
  process spends its time (imports, opening the memory, loading each model, the first recall);
* one server holding five memories of ~10k chunks: its resident memory;
* storage per chunk (text + BM25 index, vectors, ANN index);
* float16 vectors: a copy of the 100k memory's vectors stored as float16, same ANN index:
  storage, ANN recall@50 against exact search on the float32 vectors, latency (the study
  behind format 2, which stores every new memory's vectors at float16).

funes's own modules are compiled first (`compileall`), as an installed package's are: with
PYTHONDONTWRITEBYTECODE set, a process would otherwise compile every module edited since.

Memories are those of bench/bench_recall.py (real LongMemEval text, synthetic vectors, cached
under ~/.cache/funes-bench); the reranker is its synthetic cross-encoder of ms-marco-MiniLM's
shape (real cost, meaningless scores).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_recall as br  # noqa: E402
import longmemeval as lme  # noqa: E402

from funes import api, protocol  # noqa: E402
from funes.api import warm  # noqa: E402

Row = tuple[str, str, str]  # what, figure, load


def load_now() -> str:
    return br.load_now()


def p50(xs: Sequence[float]) -> float:
    return br.pct(xs, 50)


def p95(xs: Sequence[float]) -> float:
    return br.pct(xs, 95)


def env_for(settings: Any, serve: str) -> dict[str, str]:
    env = {**os.environ, "FUNES_HOME": str(settings.home), "FUNES_SERVE": serve}
    env.pop("FUNES_DEBUG", None)
    return env


CPU: list[float] = []  # CPU seconds (user + system) of each `wall` process, in order


def wall(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall seconds of a fresh process; its CPU seconds are appended to `CPU`.

    On a machine others load (load averages of 15-20 on 2 cores here), wall time is mostly
    waiting for a core; the process's own CPU time is what it costs, whatever the load.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return took, done


@contextmanager
def busy_core(on: bool) -> Iterator[None]:
    """A CPU-bound process for the whole block (the "other core busy" of the issue)."""
    if not on:
        yield
        return
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        yield
    finally:
        burner.terminate()
        burner.wait(10)


@contextmanager
def server(settings: Any, mem: Path, budget_mb: float | None = None) -> Iterator[int]:
    """A `funes serve` for this bench's home, warmed up on `mem`; yields its pid."""
    env = env_for(settings, "use")
    extra = ["--memory-budget", str(budget_mb)] if budget_mb else []
    proc = subprocess.Popen([*br.funes_cmd(), "--memory", str(mem), "serve", "--idle", "600",
                             *extra], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = warm.server_status(settings)
            if found is not None and found.memories:
                break
            if proc.poll() is not None:
                raise RuntimeError("funes serve exited")
            time.sleep(0.2)
        yield proc.pid
    finally:
        warm.stop_server(settings, wait=10)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(15)


def run_args(command: str, mem: Path, **extra: Any) -> dict[str, Any]:
    """The `run` request the thin client sends for a command line (see funes.cli.thin)."""
    return {"command": command, "cwd": os.getcwd(), "memory": str(mem), "fmt": "agent",
            "strip": ["stdout", "stderr"], **extra}


def thin_rows(settings: Any, label: str, mem: Path, queries: Sequence[str],
              hits: Sequence[dict[str, Any]], reps: int, log: Callable[[str], None]) -> list[Row]:
    """CLI answered by the server vs the same request from this process: the client's cost."""
    rows: list[Row] = []
    env = env_for(settings, "use")
    ep = protocol.endpoint(settings.home)
    with server(settings, mem):
        for what, argv_of, args_of in (
            # No rerank deadline: the same request must give the same bytes both ways.
            ("recall", lambda i: ["--format", "agent", "recall", queries[i % len(queries)],
                                  "--memory", str(mem), "--budget", "0"],
             lambda i: run_args("recall", mem, request={"query": queries[i % len(queries)],
                                                        "budget_ms": 0.0})),
            ("get --window 1", lambda i: ["get", hits[i % len(hits)]["session_id"],
                                          hits[i % len(hits)]["turn_id"], "--window", "1",
                                          "--memory", str(mem)],
             lambda i: run_args("get", mem, session_id=hits[i % len(hits)]["session_id"],
                                turn_id=hits[i % len(hits)]["turn_id"], window=1)),
        ):
            for i in range(2):  # warm the server's caches for these requests
                wall([*br.funes_cmd(), *argv_of(i)], env)
            load = load_now()
            cli, own, cpu = [], [], []
            for i in range(reps):
                t, done = wall([*br.funes_cmd(), *argv_of(i)], env)
                if done.returncode != 0:
                    raise RuntimeError(done.stderr)
                cli.append(t)
                cpu.append(CPU[-1])
                t0 = time.perf_counter()
                answer = protocol.exchange(ep, protocol.message("run", settings.home, None,
                                                                args_of(i)), 60)
                own.append(time.perf_counter() - t0)
                assert answer["ok"] and answer["result"]["stdout"] == done.stdout
            over = [c - o for c, o in zip(cli, own, strict=True)]
            rows.append((f"`funes {what}` answered by the server, wall ({label})",
                         f"p50 {p50(cli):.0f} ms, p95 {p95(cli):.0f} ms", f"{load}"))
            rows.append(("  the server's own time for it (same request from a warm client)",
                         f"p50 {p50(own):.0f} ms", ""))
            rows.append(("  client cost above the server's time (per call)",
                         f"p50 {p50(over):.0f} ms, p95 {p95(over):.0f} ms",
                         f"{load} → {load_now()}"))
            rows.append(("  the client process's own CPU time (user + system)",
                         f"p50 {p50(cpu):.0f} ms, p95 {p95(cpu):.0f} ms", ""))
            log(f"  {rows[-3]} / {rows[-1]}")
    return rows


def warm_rows(rs: Any, label: str, mem: Path, queries: Sequence[str], busy: bool,
              log: Callable[[str], None]) -> list[Row]:
    """Warm in-process recall with the reranker, default budget, and without a budget."""
    repo = api.open_memory(rs, str(mem))
    rows: list[Row] = []
    for q in queries[:3]:
        api.recall(rs, repo, q)
    with busy_core(busy):
        for what, kw in (("default budget (300 ms)", {}), ("no budget (--budget 0)",
                                                             {"budget_ms": 0}),
                         ("reranker off", {"rerank": False})):
            load = load_now()
            times: list[float] = []
            cpu: list[float] = []
            signals: dict[str, int] = {}
            for q in queries:
                t0, c0 = time.perf_counter(), time.process_time()
                result = api.recall(rs, repo, q, **kw)
                times.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
                key = ", ".join(s for s in result.signals if s.startswith("rerank")) or "-"
                signals[key] = signals.get(key, 0) + 1
            side = "other core busy" if busy else "machine as it is"
            rows.append((f"warm api.recall, pool 4, {what}, {side} ({label})",
                         f"wall p50 {p50(times):.0f} ms, p95 {p95(times):.0f} ms, CPU (all "
                         f"threads) p50 {p50(cpu):.0f} ms (n={len(times)}); rerank signals: "
                         f"{signals}", f"{load} → {load_now()}"))
            log(f"  {rows[-1]}")
    return rows


COLD_PROBE = r"""
import json, sys, time
t = {}
t0 = time.perf_counter()
from funes import api
t['import funes.api'] = time.perf_counter() - t0
s = api.load_settings()
t1 = time.perf_counter()
repo = api.open_memory(s, sys.argv[1])
t['open the memory'] = time.perf_counter() - t1
from funes.api import search as r
t1 = time.perf_counter()
import lance, numpy, pyarrow
t['import lance, pyarrow, numpy'] = time.perf_counter() - t1
t1 = time.perf_counter()
emb = r._embedder_for(repo, s)
t['load the embedding model (imports llama_cpp)'] = time.perf_counter() - t1
t1 = time.perf_counter()
rr = r._reranker(s, repo)
t['load the reranker'] = time.perf_counter() - t1
t1 = time.perf_counter()
res = api.recall(s, repo, sys.argv[2])
t['the recall (indexes read cold)'] = time.perf_counter() - t1
t1 = time.perf_counter()
api.recall(s, repo, sys.argv[2] + ' again')
t['a second recall, for comparison'] = time.perf_counter() - t1
t['signals'] = res.signals
print(json.dumps(t))
"""


def cold_rows(rs: Any, label: str, mem: Path, queries: Sequence[str], reps: int,
              log: Callable[[str], None]) -> list[Row]:
    env = env_for(rs, "off")
    rows: list[Row] = []
    for what, extra in (("default budget", []), ("--budget 0 (no deadline)", ["--budget", "0"])):
        load = load_now()
        times = []
        for i in range(reps):
            t, done = wall([*br.funes_cmd(), "--format", "json", "recall", queries[i],
                            "--memory", str(mem), *extra], env)
            if done.returncode != 0:
                raise RuntimeError(done.stderr)
            times.append(t)
            signals = ", ".join(json.loads(done.stdout)["signals"])
        cpu = CPU[-reps:]
        rows.append((f"cold `funes recall`, reranker on (pool 4), {what}, new process ({label})",
                     f"wall p50 {p50(times) / 1000:.2f} s, max {max(times):.2f} s; CPU p50 "
                     f"{p50(cpu) / 1000:.2f} s (n={reps}); last signals: {signals}",
                     f"{load} → {load_now()}"))
        log(f"  {rows[-1]}")
    parts: dict[str, list[float]] = {}
    signals = ""
    for i in range(3):
        done = subprocess.run([sys.executable, "-c", COLD_PROBE, str(mem), queries[i]], env=env,
                              capture_output=True, text=True, check=True)
        for key, value in json.loads(done.stdout).items():
            if key == "signals":
                signals = ", ".join(value)
            else:
                parts.setdefault(key, []).append(value)
    for key, values in parts.items():
        rows.append((f"  cold process: {key}", f"median {statistics.median(values) * 1000:.0f} ms",
                     ""))
    rows.append(("  cold process: signals of its recall", signals, load_now()))
    return rows


def version_rows(settings: Any, reps: int) -> list[Row]:
    env = env_for(settings, "off")
    rows: list[Row] = []
    for what, cmd in (("`funes --version`", [*br.funes_cmd(), "--version"]),
                      ("`funes --help`", [*br.funes_cmd(), "--help"]),
                      ("`python -c pass` (the interpreter alone)", [sys.executable, "-c", "pass"])):
        load = load_now()
        times = [wall(cmd, env)[0] for _ in range(reps)]
        cpu = CPU[-reps:]
        rows.append((what, f"wall p50 {p50(times):.0f} ms, p95 {p95(times):.0f} ms; CPU p50 "
                     f"{p50(cpu):.0f} ms (n={reps})", f"{load} → {load_now()}"))
    return rows


def rss_rows(settings: Any, mem10k: Path, copies: int, log: Callable[[str], None]) -> list[Row]:
    """One server, `copies` memories of ~10k chunks each, one recall each: resident memory."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=lme.cache_root()) as tmp:
        mems = []
        for i in range(copies):
            target = Path(tmp) / f"m{i}" / ".funes"
            shutil.copytree(mem10k, target, symlinks=True)
            mems.append(target)
        env = env_for(settings, "use")
        load = load_now()
        with server(settings, mems[0]) as pid:
            first = warm.server_status(settings)
            for m in mems:
                for q in ("why did the build fail", "what did we decide about caching"):
                    done = subprocess.run([*br.funes_cmd(), "--format", "agent", "recall", q,
                                           "--memory", str(m)], env=env, capture_output=True,
                                          text=True, check=False)
                    assert done.returncode == 0, done.stderr
            status = warm.server_status(settings)
            assert status is not None and first is not None and status.pid == pid
            ps = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True,
                                text=True, check=False).stdout.strip()
            rows.append(("server RSS, one memory of ~10k chunks, warmed up",
                         f"{first.rss_mb:.0f} MB", load))
            rows.append((f"server RSS, {len(status.memories)} memories of ~10k chunks open, "
                         f"one server (pid {pid}), after a recall in each",
                         f"{status.rss_mb:.0f} MB (ps: {int(ps) / 1024:.0f} MB)",
                         f"{load} → {load_now()}"))
            log(f"  {rows[-1]}")
    return rows


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def storage_rows(mem: Path, label: str) -> list[Row]:
    chunks = mem / "chunks.lance"
    # the memory's home embedding table: float16 since format 2, float32 in older memories
    half = (mem / "vectors16.lance").is_dir()
    vectors = mem / ("vectors16.lance" if half else "vectors.lance")
    width = "float16" if half else "float32"
    import lance

    n = lance.dataset(str(chunks)).count_rows()
    rows = []
    for what, size in (
        ("chunks: text and columns", _du(chunks) - _du(chunks / "_indices")),
        ("chunks: BM25 and id indexes", _du(chunks / "_indices")),
        (f"vectors: {width} vectors and columns", _du(vectors) - _du(vectors / "_indices")),
        ("vectors: ANN index (IVF_HNSW_SQ)", _du(vectors / "_indices")),
        ("whole memory directory", _du(mem)),
    ):
        rows.append((f"storage per chunk, {what} ({label})",
                     f"{size / n:.0f} B", ""))
    return rows


def float16_rows(mem: Path, queries_vecs: Any, limit: int,
                 log: Callable[[str], None]) -> list[Row]:
    """float32 vs float16 copies of the vectors, the same index: size, recall@50, latency.

    `limit` vectors of the memory (the first ones) when building two ANN indexes of all of
    them would take too long on a shared machine.
    """
    import lance
    import numpy as np
    import pyarrow as pa

    # The study that decided format 2 ran on float32 vectors; a memory built since holds
    # float16 ones (vectors16.lance), so there the exact reference is already rounded.
    found = mem / "vectors.lance"
    table = lance.dataset(str(found if found.is_dir() else mem / "vectors16.lance")).to_table(
        columns=["id", "vector"], limit=limit or None)
    ids = table.column("id").to_pylist()
    full = np.asarray(table.column("vector").to_pylist(), dtype=np.float32)
    n, dim = full.shape
    qs = np.asarray(queries_vecs, dtype=np.float32)
    norms = np.linalg.norm(full, axis=1, keepdims=True)
    exact = []
    for q in qs:
        sims = (full / norms) @ (q / np.linalg.norm(q))
        exact.append(set(np.array(ids)[np.argsort(-sims)[:50]].tolist()))
    rows: list[Row] = []
    partitions = max(1, min(256, int(n**0.5) // 4))
    with tempfile.TemporaryDirectory(dir=lme.cache_root()) as tmp:
        for name, dtype in (("float32", pa.float32()), ("float16", pa.float16())):
            values = pa.array(full.astype(np.float16 if name == "float16" else np.float32)
                              .reshape(-1), type=dtype)
            data = pa.table({"id": pa.array(ids),
                             "vector": pa.FixedSizeListArray.from_arrays(values, dim)})
            path = Path(tmp) / f"{name}.lance"
            ds = lance.write_dataset(data, str(path))
            t0 = time.perf_counter()
            ds.create_index("vector", index_type="IVF_HNSW_SQ", metric="cosine",
                            num_partitions=partitions, name="vector_idx")
            build = time.perf_counter() - t0
            ds = lance.dataset(str(path))
            for refine in (None, 2):
                got, times = [], []
                for q in qs:
                    nearest: dict[str, Any] = {"column": "vector", "q": q.astype(np.float16
                                               if name == "float16" else np.float32),
                                               "k": 50, "metric": "cosine"}
                    if refine:
                        nearest["refine_factor"] = refine
                    t0 = time.perf_counter()
                    res = ds.to_table(nearest=nearest, columns=["id"])
                    times.append(time.perf_counter() - t0)
                    got.append(set(res.column("id").to_pylist()))
                recall = statistics.mean(len(g & e) / 50 for g, e in zip(got, exact, strict=True))
                rows.append((f"{name} vectors, ANN top-50, refine {refine or 'off'} "
                             f"({n} vectors)",
                             f"recall@50 vs exact {recall:.3f}; p50 {p50(times):.0f} ms",
                             load_now()))
            rows.append((f"{name} vectors: storage per vector (data / ANN index); index build",
                         f"{(_du(path) - _du(path / '_indices')) / n:.0f} B / "
                         f"{_du(path / '_indices') / n:.0f} B; {build:.0f} s", ""))
            log(f"  {rows[-1]}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--cold-reps", type=int, default=5)
    parser.add_argument("--no-busy", action="store_true", help="do not keep the other core busy")
    parser.add_argument("--float16-vectors", type=int, default=0,
                        help="vectors of the largest memory in the float16 study (0: all)")
    parser.add_argument("--only", default="", help="comma list: version,thin,warm,cold,rss,"
                        "storage,float16")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fast-path.md")
    args = parser.parse_args(argv)
    only = set(filter(None, args.only.split(",")))

    def want(part: str) -> bool:
        return not only or part in only

    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    # Time what an installed funes runs: compiled modules. With PYTHONDONTWRITEBYTECODE set
    # (it is on the shared machine) every process compiled the modules changed since the last
    # compile again: ≈ 0.45 s CPU of a cold recall in the first runs of this bench.
    compileall.compile_dir(str(ROOT / "funes"), quiet=1)
    started = load_now()
    settings = lme.bench_settings()
    rs = br.rerank_settings(settings)
    oracle = lme.load(lme.ORACLE_FILE)
    texts = br._text_sessions(lme.load(lme.S_FILE), oracle)
    queries = [e["question"] for e in oracle if not lme.is_abstention(e)][::7][: args.reps]
    sizes = [int(s) for s in args.sizes.split(",")]
    scale = [br.build_scale_memory(settings, n, texts, log=log) for n in sizes]
    rows: list[Row] = []
    if want("version"):
        rows += version_rows(settings, 10)
    for sm in scale:
        label = f"{sm.chunks} chunks"
        repo = api.open_memory(settings, str(sm.path))
        hits = [h.row for q in queries[:10]
                for h in api.recall(settings, repo, q, k=2, rerank=False, neighbors=0).hits]
        if want("thin"):
            rows += thin_rows(rs, label, sm.path, queries, hits, args.reps, log)
        if want("warm"):
            rows += warm_rows(rs, label, sm.path, queries, not args.no_busy, log)
        if want("cold"):
            rows += cold_rows(rs, label, sm.path, queries, args.cold_reps, log)
        if want("storage"):
            rows += storage_rows(sm.path, label)
    small = min(scale, key=lambda s: s.chunks)
    if want("rss"):
        rows += rss_rows(rs, small.path, 5, log)
    big = max(scale, key=lambda s: s.chunks)
    if want("float16"):
        from funes.inference.embedder import load_embedder

        embedder = load_embedder(settings)
        rows += float16_rows(big.path, [embedder.embed_query(q) for q in queries],
                             args.float16_vectors, log)
    text = "\n".join([
        "# Fast-path benchmark (issue #19)",
        "",
        f"`python bench/bench_fast.py {' '.join(argv or sys.argv[1:])}` on a 2-core machine "
        f"shared with other work; load average (1/5/15 min) at start {started}, "
        f"at end {load_now()}.",
        "",
        "| measure | figure | load (1/5/15 min) |",
        "|---|---|---|",
        *[f"| {what} | {figure} | {load} |" for what, figure, load in rows],
        "",
    ])
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
