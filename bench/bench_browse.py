"""Browsing benchmark (issue #31): sessions, get by range, scan, sketch, pooled recall, and the
resident memory of many agents' `funes mcp` sharing one warm server.

Run:  python bench/bench_browse.py                 # the 113k-chunk memory; bench/results/browse.md
      python bench/bench_browse.py --size 10000    # smaller, quicker

Memories are bench/bench_recall.py's scale memories (real LongMemEval text, synthetic vectors,
cached under ~/.cache/funes-bench or $FUNES_BENCH_CACHE); the reranker is its synthetic
cross-encoder of ms-marco-MiniLM's shape (real cost, meaningless scores). Every figure is
printed with the load average beside it and, where a process's own CPU time says more than
its wall time on a shared machine, with that CPU time too.

Measures, on one memory:

* the library as the warm server runs it (a fresh snapshot per call, this process warm):
  `sessions` (catalogue cached, and built whole), `get --from/--to`, `scan` (its text cache
  built, then several needles), `sketch` cold (no cache at all), from its disk cache, and from
  the process's; `sessions` and `scan` right after a one-turn commit (an agent's hook);
* the same verbs as an agent runs them: `funes <verb>` in a fresh process answered by a
  running `funes serve` (the thin client; an empty interpreter's start beside it, the floor of
  any fresh process), and as MCP tool calls through `funes mcp` (the relay to the same server);
* pooled recall over three memories (this one, a team clone: a copy marked not the user's, and
  a public remote: a directory remote read with `--memory file://…`) against a single-memory
  recall, both warm, reranked, in one run (a ratio robust to load);
* 8 `funes mcp` processes connected at once, each after a recall and a listing: the resident
  memory of all funes processes (relays and the server), against 8 `funes mcp` working alone
  (FUNES_SERVE=off, each loading its own models), as before the relay.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_fast as bf  # noqa: E402
import bench_recall as br  # noqa: E402
import longmemeval as lme  # noqa: E402

from funes import api, protocol  # noqa: E402
from funes.api import warm  # noqa: E402

Row = tuple[str, str, str]
NEEDLES = ["streaming parser", "I apologize", "xyzzy-never-said", "Python"]


def p50(xs: Sequence[float]) -> float:
    return br.pct(xs, 50)


def timed(fn: Callable[[], Any], reps: int) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds of this process) per call."""
    walls, cpus = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return walls, cpus


def fig(walls: Sequence[float], cpus: Sequence[float] | None = None) -> str:
    text = f"p50 {p50(walls):.0f} ms, p95 {br.pct(walls, 95):.0f} ms"
    return text + (f" (CPU p50 {p50(cpus):.0f} ms)" if cpus else "")


def library_rows(settings: Any, mem: Path, label: str, reps: int,
                 log: Callable[[str], None]) -> tuple[list[Row], str]:
    """The verbs in this process, as the warm server runs them; returns a session to use."""
    from funes.api import browse
    from funes.retrieval import browse as rbrowse
    from funes.storage.snapshot import snapshot

    live = api.open_memory(settings, str(mem))
    rows: list[Row] = []

    def view() -> Any:
        return snapshot(live)

    browse.sessions(view())  # warm: imports, Arrow kernels, the catalogue
    load = bf.load_now()
    rows.append((f"library `sessions` (catalogue cached), {label}",
                 fig(*timed(lambda: browse.sessions(view()), reps)), load))
    rows.append((f"library `sessions`, catalogue built whole (a cold process, or after a "
                 f"pack or a forget), {label}",
                 fig(*timed(lambda: (rbrowse._catalogues.clear(), rbrowse._latest.clear(),
                                     browse.sessions(view())), max(3, reps // 4))), load))
    big = max(rbrowse.catalogue(view()), key=lambda r: r.chunks)
    rows.append((f"library `get --from/--to` (a page of {big.turns} turns), {label}",
                 fig(*timed(lambda: browse.get_range(view(), big.session_id), reps)), load))
    scans = live.path / "index" / "scan"
    load = bf.load_now()
    rows.append((f"library `scan`, its text cache built (the first scan after a pack; once "
                 f"per fragment), {label}",
                 fig(*timed(lambda: (shutil.rmtree(scans, ignore_errors=True),
                                     browse.scan(view(), NEEDLES[0])), 2)), load))
    for needle in NEEDLES:
        walls, cpus = timed(lambda n=needle: browse.scan(view(), n), max(3, reps // 2))
        found = browse.scan(view(), needle)
        rows.append((f"library `scan \"{needle}\"` ({found.total} blocks), {label}",
                     fig(walls, cpus), bf.load_now()))
    sketches = live.path / "index" / "sketches"

    def cold() -> None:
        browse._sketches.clear()
        shutil.rmtree(sketches, ignore_errors=True)
        browse.sketch(view(), big.session_id)

    def disk() -> None:
        browse._sketches.clear()
        browse.sketch(view(), big.session_id)

    load = bf.load_now()
    rows.append((f"library `sketch` cold (nothing cached; {big.chunks} chunks), {label}",
                 fig(*timed(cold, max(3, reps // 2))), load))
    rows.append((f"library `sketch` from its disk cache (another process), {label}",
                 fig(*timed(disk, reps)), load))
    rows.append((f"library `sketch` cached in the process, {label}",
                 fig(*timed(lambda: browse.sketch(view(), big.session_id), reps)), load))
    log("\n".join(f"  {r}" for r in rows))
    return rows, big.session_id


def agent_rows(rs: Any, mem: Path, label: str, session: str, reps: int,
               log: Callable[[str], None]) -> list[Row]:
    """The verbs through a running server: fresh CLI processes, and MCP tool calls."""
    env = bf.env_for(rs, "use")
    commands = {
        "sessions": ["sessions"],
        "get --from/--to": ["get", session, "--from", "0"],
        "scan": ["scan", "streaming parser"],
        "sketch": ["sketch", session],
    }
    rows: list[Row] = []
    ep = protocol.endpoint(rs.home)
    load = bf.load_now()
    walls, cpus = [], []
    for _ in range(reps):
        t, _done = bf.wall([sys.executable, "-c", "pass"], env)
        walls.append(t)
        cpus.append(bf.CPU[-1])
    rows.append(("an empty interpreter (`python -c pass`, this venv), the floor of every "
                 "fresh-process figure below", f"p50 {p50(walls):.0f} ms, p95 "
                 f"{br.pct(walls, 95):.0f} ms (CPU p50 {p50(cpus):.0f} ms)", load))
    with bf.server(rs, mem):
        for what, argv in commands.items():
            full = ["--format", "agent", *argv, "--memory", str(mem)]
            for _ in range(2):
                bf.wall([*br.funes_cmd(), *full], env)
            load = bf.load_now()
            walls, cpus = [], []
            for _ in range(reps):
                t, done = bf.wall([*br.funes_cmd(), *full], env)
                assert done.returncode == 0, done.stderr
                walls.append(t)
                cpus.append(bf.CPU[-1])
            own = []
            args = _run_args(argv, mem)
            for _ in range(reps):
                t0 = time.perf_counter()
                answer = protocol.exchange(ep, protocol.message("run", rs.home, None, args), 60)
                own.append(time.perf_counter() - t0)
                assert answer["ok"], answer
            rows.append((f"`funes {what}` answered by the server (fresh process), {label}",
                         f"p50 {p50(walls):.0f} ms, p95 {br.pct(walls, 95):.0f} ms "
                         f"(client CPU p50 {p50(cpus):.0f} ms; the server's own time p50 "
                         f"{p50(own):.0f} ms)", f"{load} → {bf.load_now()}"))
            log(f"  {rows[-1]}")
        rows += mcp_rows(rs, mem, label, session, reps, log)
    return rows


def _run_args(argv: list[str], mem: Path) -> dict[str, Any]:
    """The thin client's `run` request for one of the bench's command lines."""
    base = bf.run_args(argv[0], mem)
    if argv[0] == "sessions":
        base["fields"] = {}
    elif argv[0] == "get":
        base.update(command="get-range", fields={"session_id": argv[1], "first": 0})
    elif argv[0] == "scan":
        base["fields"] = {"needle": argv[1], "sessions": []}
    else:
        base["fields"] = {"session_id": argv[1]}
    return base


def _mcp_calls(params: Any, calls: list[tuple[str, dict[str, Any]]],
               reps: int) -> dict[str, list[float]]:
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    async def main() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        with open(os.devnull, "w") as quiet:
            async with (stdio_client(params, errlog=quiet) as (read, write),
                        ClientSession(read, write) as session):
                await session.initialize()
                for name, arguments in calls:  # warm-up
                    await session.call_tool(name, arguments)
                for _ in range(reps):
                    for name, arguments in calls:
                        t0 = time.perf_counter()
                        res = await session.call_tool(name, arguments)
                        assert not res.is_error, res
                        out.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    return anyio.run(main)


def mcp_rows(rs: Any, mem: Path, label: str, session: str, reps: int,
             log: Callable[[str], None]) -> list[Row]:
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "funes", "mcp", str(mem)],
                                   env=bf.env_for(rs, "use"))
    calls = [("sessions", {}), ("get", {"session_id": session, "from_seq": 0}),
             ("scan", {"needle": "streaming parser"}), ("sketch", {"session_id": session})]
    load = bf.load_now()
    times = _mcp_calls(params, calls, reps)
    rows = [(f"MCP tool `{name}` through `funes mcp` and the server, {label}",
             fig(times[name]), f"{load} → {bf.load_now()}") for name, _ in calls]
    log("\n".join(f"  {r}" for r in rows))
    return rows


# -- a long session ----------------------------------------------------------------------------


def long_session_rows(rs: Any, mem: Path, turns: int, reps: int,
                      log: Callable[[str], None]) -> list[Row]:
    """Sketch and pages of one long session (real text, embedded) added to a copy of `mem`.

    The scale memories' sessions are short (LongMemEval chats, ≤ 66 turns); a sketch is for
    the long ones, so `turns` chunks of the memory's own text are committed again as one
    session, with vectors derived from the memory's (as the scale memory's are).
    """
    import numpy as np

    from funes.api import browse
    from funes.model.chunk import Chunk
    from funes.storage.snapshot import snapshot
    from tests.builders import vector_table

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=lme.cache_root()) as tmp:
        copy = Path(tmp) / "long" / ".funes"
        shutil.copytree(mem, copy, symlinks=True)
        live = api.open_memory(rs, str(copy))
        texts = live.chunks.dataset().to_table(columns=["text"], limit=turns) \
            .column("text").to_pylist()
        chunks = [Chunk(text=t, harness="claude", session_id="bench-long", turn_id=f"t{i}",
                        seq=i, ts=f"2026-05-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:"
                        f"{i % 60:02d}Z", role="user" if i % 2 == 0 else "assistant",
                        block_type="text", block_idx=0, split_idx=0, workdir="/src/app",
                        project="github.com/acme/app") for i, t in enumerate(texts)]
        stamp = live.model_stamp()
        assert stamp is not None
        seeds = np.asarray(live.vectors.dataset().to_table(columns=["vector"], limit=turns)
                           .column("vector").to_pylist(), dtype=np.float32)
        rng = np.random.default_rng(11)
        vectors = seeds[rng.integers(0, len(seeds), len(chunks))] + \
            rng.normal(0, 0.02, (len(chunks), stamp.dim))
        table = vector_table(chunks, vectors.tolist(), model=stamp.name)
        live.commit_chunks(chunks, "bench: one long session", model=stamp, vectors=table)
        sketches = copy / "index" / "sketches"

        def cold() -> None:
            browse._sketches.clear()
            shutil.rmtree(sketches, ignore_errors=True)
            browse.sketch(snapshot(live), "bench-long")

        def disk() -> None:
            browse._sketches.clear()
            browse.sketch(snapshot(live), "bench-long")

        cold()
        made = browse.sketch(snapshot(live), "bench-long").sketch
        total = live.chunks.dataset().count_rows()
        label = f"one session of {len(chunks)} turns in a memory of {total} chunks"
        load = bf.load_now()
        rows.append((f"library `sketch` cold, {label} ({made.basis}, {len(made.passages)} "
                     f"passages)", fig(*timed(cold, max(3, reps // 2))), load))
        rows.append((f"library `sketch` from its disk cache, {label}", fig(*timed(disk, reps)),
                     load))
        rows.append((f"library `sketch` cached in the process, {label}",
                     fig(*timed(lambda: browse.sketch(snapshot(live), "bench-long"), reps)),
                     load))
        rows.append((f"library `get --from N` (one 16,000-character page), {label}",
                     fig(*timed(lambda: browse.get_range(snapshot(live), "bench-long",
                                                         turns // 2), reps)), load))
        rows += after_commit_rows(live, texts, reps)
        log("\n".join(f"  {r}" for r in rows))
    return rows


def after_commit_rows(live: Any, texts: Sequence[str], reps: int) -> list[Row]:
    """`sessions` and `scan` right after a commit of one turn, as an agent's hook makes one.

    The commit (not timed) appends a fragment; the listing then updates the catalogue for
    the session it touched, and the scan caches the new fragment's text.
    """
    from funes.api import browse
    from funes.model.chunk import Chunk
    from funes.storage.snapshot import snapshot

    browse.sessions(snapshot(live))
    browse.scan(snapshot(live), NEEDLES[0])
    listing: tuple[list[float], list[float]] = ([], [])
    scanning: tuple[list[float], list[float]] = ([], [])
    load = bf.load_now()
    for i in range(reps):
        chunk = Chunk(text=texts[i % len(texts)], harness="claude", session_id="bench-live",
                      turn_id=f"live{i}", seq=i, ts=f"2026-06-01T10:00:{i % 60:02d}Z",
                      role="assistant", block_type="text", block_idx=0, split_idx=0,
                      workdir="/src/app", project="github.com/acme/app")
        live.commit_chunks([chunk], f"bench: turn {i}")
        for (walls, cpus), fn in ((listing, lambda: browse.sessions(snapshot(live))),
                                  (scanning, lambda: browse.scan(snapshot(live),
                                                                 NEEDLES[0]))):
            w, c = timed(fn, 1)
            walls += w
            cpus += c
    total = live.chunks.dataset().count_rows()
    return [(f"library `sessions`, the first listing after a commit of one turn ({total} "
             "chunks)", fig(*listing), load),
            (f"library `scan \"{NEEDLES[0]}\"`, the first scan after a commit of one turn "
             f"({total} chunks)", fig(*scanning), load)]


# -- pooled recall ---------------------------------------------------------------------------


def pooled_rows(rs: Any, own: Path, other: Path, queries: Sequence[str], reps: int,
                log: Callable[[str], None]) -> list[Row]:
    """Three memories (own, team clone, public remote) against one, warm, in one run."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=lme.cache_root()) as tmp:
        team = Path(tmp) / "team" / ".funes"
        shutil.copytree(other, team, symlinks=True)
        api.open_memory(rs, str(team)).config.set("core.owned", "false")
        remote = Path(tmp) / "public-remote"
        pub_src = Path(tmp) / "pub" / ".funes"
        shutil.copytree(other, pub_src, symlinks=True)
        pub_repo = api.open_memory(rs, str(pub_src))
        api.remote_add(pub_repo, "origin", str(remote))
        api.push(pub_repo, "origin")
        public = f"file://{remote}"
        choices = [api.choose_memory(rs, str(own)), api.choose_memory(rs, str(team)),
                   api.choose_memory(rs, public)]
        single = choices[0]
        for budget, name in ((None, "default rerank budget (300 ms)"), (0.0, "no budget")):
            req = [api.RecallRequest(q, budget_ms=budget) for q in queries]
            for r in req[:3]:
                api.recall_pooled(rs, choices, r)
                api.recall(rs, single.repo, r)
            one, pool = [], []
            scored = [0, 0]
            load = bf.load_now()
            for i in range(reps):  # interleaved: both see the same load
                r = req[i % len(req)]
                t0 = time.perf_counter()
                alone = api.recall(rs, single.repo, r)
                one.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                result = api.recall_pooled(rs, choices, r)
                pool.append(time.perf_counter() - t0)
                scored[0] += sum(h.rerank is not None for h in alone.hits)
                scored[1] += sum(h.rerank is not None for h in result.hits)
            labels = {h.row["memory"] for h in result.hits}
            rows.append((f"recall, one memory ({name}); reranked passages per recall "
                         f"{scored[0] / reps:.1f}", fig(one), load))
            rows.append((f"pooled recall over own + team clone + public remote ({name}); "
                         f"reranked passages per recall {scored[1] / reps:.1f}; memories in "
                         f"the last result: {len(labels)}",
                         f"{fig(pool)}; ratio of p50s {p50(pool) / p50(one):.2f}",
                         f"{load} → {bf.load_now()}"))
            log(f"  {rows[-2]}\n  {rows[-1]}")
    return rows


# -- resident memory of many agents ----------------------------------------------------------


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _pss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@contextlib.contextmanager
def mcp_clients(rs: Any, mem: Path, n: int, serve: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`n` raw `funes mcp` processes, each initialised and after a recall and a listing."""
    env = bf.env_for(rs, serve)
    procs = [subprocess.Popen([sys.executable, "-m", "funes", "mcp", str(mem)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL) for _ in range(n)]
    try:
        for proc in procs:
            _talk(proc, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "bench", "version": "1"}}, 1)
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method":
                                         "notifications/initialized"}).encode() + b"\n")
            proc.stdin.flush()
            _talk(proc, "tools/call", {"name": "recall", "arguments": {
                "query": "why did the build fail"}}, 2)
            _talk(proc, "tools/call", {"name": "sessions", "arguments": {}}, 3)
        yield procs
    finally:
        for proc in procs:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _talk(proc: subprocess.Popen[bytes], method: str, params: dict[str, Any], rid: int) -> Any:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                 "params": params}).encode() + b"\n")
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("funes mcp exited")
        message = json.loads(line)
        if message.get("id") == rid:
            assert "error" not in message, message
            return message["result"]


def rss_rows(rs: Any, mem: Path, n: int, label: str, log: Callable[[str], None]) -> list[Row]:
    rows: list[Row] = []
    load = bf.load_now()
    with bf.server(rs, mem) as pid, mcp_clients(rs, mem, n, "use") as procs:
        time.sleep(1.0)  # steady state: the server gives freed memory back once idle
        relays = [_rss_mb(p.pid) for p in procs]
        server = _rss_mb(pid)
        pss = sum(_pss_mb(p.pid) for p in procs) + _pss_mb(pid)
        status = warm.server_status(rs)
        sessions = status.requests.get("mcp") if status else None
        rows.append((f"{n} `funes mcp` at once through one warm server ({label}): total RSS of "
                     f"funes processes ({sessions} MCP sessions served)",
                     f"{sum(relays) + server:.0f} MB = server {server:.0f} MB + relays "
                     f"{statistics.mean(relays):.0f} MB each (PSS total {pss:.0f} MB)",
                     f"{load} → {bf.load_now()}"))
        log(f"  {rows[-1]}")
    load = bf.load_now()
    with mcp_clients(rs, mem, n, "off") as procs:
        time.sleep(1.0)
        alone = [_rss_mb(p.pid) for p in procs]
        pss = sum(_pss_mb(p.pid) for p in procs)
        rows.append((f"{n} `funes mcp` at once, each working alone (FUNES_SERVE=off, as before "
                     f"the relay) ({label}): total RSS",
                     f"{sum(alone):.0f} MB = {statistics.mean(alone):.0f} MB each "
                     f"(PSS total {pss:.0f} MB)", f"{load} → {bf.load_now()}"))
        log(f"  {rows[-1]}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100000)
    parser.add_argument("--other-size", type=int, default=10000,
                        help="chunks of the team and public memories of the pooled recall")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--long-turns", type=int, default=3000,
                        help="turns of the long session the sketch is measured on")
    parser.add_argument("--only", default="", help="comma list: library,agent,long,pool,rss")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "browse.md")
    args = parser.parse_args(argv)
    only = set(filter(None, args.only.split(",")))

    def want(part: str) -> bool:
        return not only or part in only

    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    import compileall

    compileall.compile_dir(str(ROOT / "funes"), quiet=1)
    started = bf.load_now()
    settings = lme.bench_settings()
    rs = br.rerank_settings(settings)
    oracle = lme.load(lme.ORACLE_FILE)
    texts = br._text_sessions(lme.load(lme.S_FILE), oracle)
    queries = [e["question"] for e in oracle if not lme.is_abstention(e)][::7][: args.reps]
    big = br.build_scale_memory(settings, args.size, texts, log=log)
    label = f"{big.chunks} chunks"
    rows: list[Row] = []
    session = ""
    if want("library") or want("agent"):
        lib, session = library_rows(rs, big.path, label, args.reps, log)
        rows += lib if want("library") else []
    if want("agent"):
        rows += agent_rows(rs, big.path, label, session, args.reps, log)
    if want("long"):
        rows += long_session_rows(rs, big.path, args.long_turns, args.reps, log)
    if want("pool"):
        small = br.build_scale_memory(settings, args.other_size, texts, log=log)
        rows += pooled_rows(rs, big.path, small.path, queries, args.reps, log)
    if want("rss"):
        rows += rss_rows(rs, big.path, args.clients, label, log)
    text = "\n".join([
        "# Browsing benchmark (issue #31)",
        "",
        f"`python bench/bench_browse.py {' '.join(argv or sys.argv[1:])}` on a 2-core machine "
        f"shared with other work; load average (1/5/15 min) at start {started}, at end "
        f"{bf.load_now()}. Wall times on a loaded machine are mostly waiting for a core; CPU "
        "times, where given, are what the work itself costs.",
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
