"""The life of a memory: months of per-turn commits, and a heavy first day.

Run:
    python bench/bench_life.py hooks [--calls 3000] [--session-turns 2] [--step 250]
    python bench/bench_life.py months [--commits 3000] [--step 300] [--pack auto|off]
    python bench/bench_life.py firstday [--chunks 300000] [--batch-chunks N]

`hooks` (bench/life_hooks.py): what a hook pays per finished turn, the whole porcelain `index`
call with its automatic upkeep, over `--calls` calls: median, p95, max, the first 100 against
the last 100 (the verdict, a ratio within one run), a paired figure at the end, the `months`
figure (commit alone) beside it, profiles at call 100 and at the last call, and recall
against the same transcripts indexed at once, before and after `funes gc`.

`months`: one memory, one small commit per finished turn (a user and an assistant chunk, as
the agent hook writes them), BM25 only. Every `--step` commits it reports the mean commit time
over the step, the warm `api.recall` p50 and `api.get` p50, and the fragment count; with
`--pack auto` each commit is followed by the hook worker's maintenance call
(`funes.storage.pack.auto`) and its time is reported apart (it runs in the background, never
in the agent's path). At the end it commits the same rows at once into a second memory and
measures its recall p50 (the target: the per-turn memory within 1.5x of it), then pushes to a
directory remote, commits one more step, packs, and reports the bytes the second push sends.

`firstday`: a synthetic history of `--chunks` chunks as transcript files, indexed by one
`funes index` run in a child process: wall time, peak RSS of the child, disk, and the time
from the start of the run to the first recall that finds a passage of the history.

Results go to stdout as a Markdown table; bench/results/life.md keeps the recorded runs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

WORDS = [
    "parser", "stream", "buffer", "token", "lexer", "schema", "migration", "index",
    "commit", "branch", "merge", "rebase", "cache", "eviction", "latency", "throughput",
    "socket", "retry", "backoff", "timeout", "deadlock", "mutex", "thread", "async",
    "await", "future", "promise", "callback", "handler", "router", "middleware", "session",
    "cookie", "header", "payload", "json", "yaml", "toml", "config", "loader", "plugin",
    "registry", "fixture", "mock", "assert", "coverage", "benchmark", "profile",
    "flamegraph", "allocation", "garbage", "collector", "heap", "stack", "frame", "closure",
    "decorator", "generator", "iterator", "protocol", "interface", "adapter", "facade",
    "gateway", "queue", "topic", "partition", "replica", "leader", "follower", "quorum",
    "snapshot", "compaction", "tombstone", "fragment", "manifest", "version", "tag",
    "release", "changelog", "semver", "wheel", "sdist", "vendored", "patch", "hotfix",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def turn_chunks(i: int, rng: random.Random) -> list:  # type: ignore[type-arg]
    """The two chunks one finished turn adds (the user's message and the answer)."""
    from funes.model.chunk import Chunk

    session = f"sess-{i // 40:05d}"
    ts = f"2026-{1 + (i // 4000) % 12:02d}-{1 + (i // 150) % 28:02d}T{(i // 7) % 24:02d}:" \
         f"{i % 60:02d}:00Z"
    out = []
    for block, (role, words) in enumerate((("user", 25), ("assistant", 90))):
        out.append(Chunk(
            text=f"turn {i}: " + _text(rng, words), harness="claude", session_id=session,
            turn_id=f"{session}-t{i}", seq=i % 40 * 2 + block, ts=ts, role=role,
            block_type="text", block_idx=0, split_idx=0, workdir="/work/project",
            project="github.com/acme/project", source=f"/tmp/{session}.jsonl:{i}",
        ))
    return out


def _p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def _recall_p50(settings: object, repo: object, rng: random.Random, n: int = 15) -> float:
    api = importlib.import_module("funes.api.search")

    opts = {"k": 8, "rerank": False, "vector": False}
    api.recall(settings, repo, "parser stream", **opts)  # type: ignore[arg-type]  # warm-up
    times = []
    for _ in range(n):
        query = f"{rng.choice(WORDS)} {rng.choice(WORDS)}"
        t0 = time.perf_counter()
        api.recall(settings, repo, query, **opts)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t0)
    return _p50(times)


def _get_p50(repo: object, done: int, rng: random.Random, n: int = 15) -> float:
    api = importlib.import_module("funes.api.search")

    times = []
    for _ in range(n):
        i = rng.randrange(done)
        session = f"sess-{i // 40:05d}"
        t0 = time.perf_counter()
        api.get(repo, session, f"{session}-t{i}", window=1)  # type: ignore[arg-type]
        times.append(time.perf_counter() - t0)
    return _p50(times)


def _fragments(repo: object) -> int:
    return len(repo.chunks.dataset().get_fragments())  # type: ignore[attr-defined]


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def months(args: argparse.Namespace) -> None:
    from funes._env import settings as load_settings
    from funes.storage.repo import Repository

    if args.pack == "auto":
        from funes.retrieval.indexes import maintain

    settings = load_settings()
    rng = random.Random(7)
    qrng = random.Random(11)
    lines = ["| commits | rows | fragments | commit mean (step) | pack (step total) | "
             "recall p50 | get p50 |", "|---:|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        repo = Repository.init(Path(tmp) / "life" / ".funes", settings)
        all_chunks = []
        step_times: list[float] = []
        pack_time = 0.0
        first_step_mean = last_step_mean = 0.0
        for i in range(args.commits):
            chunks = turn_chunks(i, rng)
            all_chunks.extend(chunks)
            t0 = time.perf_counter()
            repo.commit_chunks(chunks, f"turn {i}")
            step_times.append(time.perf_counter() - t0)
            if args.pack == "auto":
                t0 = time.perf_counter()
                maintain(repo)
                pack_time += time.perf_counter() - t0
            if i == 99:
                first_step_mean = statistics.mean(step_times[-10:]) * 1000
                shutil.copytree(repo.path, Path(tmp) / "at100" / ".funes")
            if (i + 1) % args.step == 0:
                mean = statistics.mean(step_times) * 1000
                last_step_mean = statistics.mean(step_times[-10:]) * 1000
                recall_ms = _recall_p50(settings, repo, qrng)
                get_ms = _get_p50(repo, i + 1, qrng)
                lines.append(f"| {i + 1} | {len(all_chunks)} | {_fragments(repo)} | "
                             f"{mean:.1f} ms | {pack_time * 1000:.0f} ms | {recall_ms:.1f} ms | "
                             f"{get_ms:.1f} ms |")
                print(lines[-1], flush=True)
                step_times, pack_time = [], 0.0
        per_turn_recall = _recall_p50(settings, repo, qrng, n=25)
        paired = _paired_commits(settings, Path(tmp) / "at100" / ".funes", repo, rng, args)

        once = Repository.init(Path(tmp) / "once" / ".funes", settings)
        once.commit_chunks(all_chunks, "all at once")
        once_recall = _recall_p50(settings, once, qrng, n=25)

        push_line = ""
        if args.pack == "auto":
            push_line = _push_after_pack(settings, repo, Path(tmp), rng, args)
    print("\n".join(lines))
    print()
    print(f"commits 91-100 mean: {first_step_mean:.1f} ms; last 10 commits mean: "
          f"{last_step_mean:.1f} ms (ratio {last_step_mean / max(first_step_mean, 1e-9):.2f})")
    print(f"recall p50: per-turn memory {per_turn_recall:.1f} ms, same rows committed at once "
          f"{once_recall:.1f} ms (ratio {per_turn_recall / max(once_recall, 1e-9):.2f})")
    print(paired)
    if push_line:
        print(push_line)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


def _paired_commits(settings: object, small_path: Path, big: object, rng: random.Random,
                    args: argparse.Namespace) -> str:
    """Commit latency of the memory at 100 commits and at the end, alternating.

    Taken side by side, so that the load of a shared machine (which drifts over a long run)
    weighs on both alike.
    """
    from funes.storage.repo import Repository

    small = Repository.open(small_path, settings)  # type: ignore[arg-type]
    times: dict[str, list[float]] = {"small": [], "big": []}
    for n in range(21):
        for name, repo in (("small", small), ("big", big)):
            chunks = turn_chunks(10_000_000 + n * 2 + (name == "big"), rng)
            t0 = time.perf_counter()
            repo.commit_chunks(chunks, f"paired {n}")  # type: ignore[attr-defined]
            times[name].append(time.perf_counter() - t0)
            if args.pack == "auto":
                from funes.retrieval.indexes import maintain

                maintain(repo)  # type: ignore[arg-type]
    a, b = _p50(times["small"]), _p50(times["big"])
    return (f"paired commits (21 each, alternating): memory at 100 commits p50 {a:.1f} ms, "
            f"at {args.commits} commits p50 {b:.1f} ms (ratio {b / max(a, 1e-9):.2f})")


def _push_after_pack(settings: object, repo: object, tmp: Path, rng: random.Random,
                     args: argparse.Namespace) -> str:
    """Push, add a step of turns (packed as the hook worker would), push again: bytes sent."""
    remotes = importlib.import_module("funes.api.remotes")
    from funes.retrieval.indexes import maintain
    from funes.storage import pack

    remote = tmp / "remote"
    remotes.remote_add(repo, "origin", str(remote))  # type: ignore[arg-type]
    t0 = time.perf_counter()
    remotes.push(repo)  # type: ignore[arg-type]
    first = time.perf_counter() - t0
    size0 = _tree_bytes(remote)
    start = args.commits
    added = 0
    for i in range(start, start + args.step):
        chunks = turn_chunks(i, rng)
        added += sum(len(c.text) for c in chunks)
        repo.commit_chunks(chunks, f"turn {i}")  # type: ignore[attr-defined]
        maintain(repo)  # type: ignore[arg-type]
    pack.pack(repo, force=True)  # type: ignore[arg-type]  # even the newest turns are packed
    t0 = time.perf_counter()
    remotes.push(repo)  # type: ignore[arg-type]
    second = time.perf_counter() - t0
    sent = _tree_bytes(remote) - size0
    import lance

    rows = lance.dataset(str(remote / "chunks.lance")).count_rows()
    return (f"push: first {size0 / 1e6:.1f} MB in {first:.1f} s; after {args.step} more turns "
            f"and a forced pack, the second push sent {sent / 1e3:.0f} kB in {second:.1f} s "
            f"({added / 1e3:.0f} kB of new chunk text); the remote opens with plain "
            f"lance.dataset(): {rows} rows")


def _write_history(root: Path, chunks: int) -> int:
    """Claude Code transcripts holding about `chunks` chunks; returns the file count."""
    rng = random.Random(3)
    per_session = 400  # turns per session file; one text block each, one chunk each
    sessions = max(1, chunks // per_session)
    for s in range(sessions):
        sid = f"00000000-0000-4000-8000-{s:012d}"
        path = root / "projects" / "-work-project" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            parent = None
            for t in range(per_session):
                uid = f"{s:08d}-0000-4000-8000-{t:012d}"
                role = "user" if t % 2 == 0 else "assistant"
                text = f"session {s} turn {t}: " + _text(rng, 60)
                content: object = text if role == "user" else [{"type": "text", "text": text}]
                rec = {"type": role, "uuid": uid, "parentUuid": parent, "sessionId": sid,
                       "timestamp": f"2026-03-{1 + s % 28:02d}T{t // 60 % 24:02d}:"
                                    f"{t % 60:02d}:00.000Z",
                       "cwd": "/work/project", "message": {"role": role, "content": content}}
                fh.write(json.dumps(rec) + "\n")
                parent = uid
    return sessions


def firstday(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        files = _write_history(root / "claude", args.chunks)
        env = {**os.environ, "FUNES_HOME": str(home), "CLAUDE_CONFIG_DIR": str(root / "claude"),
               "HF_HUB_OFFLINE": "1"}
        funes = [sys.executable, "-m", "funes"]
        subprocess.run([*funes, "init", "--global"], env=env, check=True, capture_output=True)
        if args.batch_chunks:
            subprocess.run([*funes, "config", "set", "index.batchChunks", str(args.batch_chunks)],
                           env=env, check=True, capture_output=True, cwd=home)
        t0 = time.perf_counter()
        proc = subprocess.Popen([*funes, "index"], env=env, cwd=root,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        first_hit = None
        status = rusage = None
        while status is None:
            time.sleep(2.0)
            pid, code, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:  # reaped here (not by Popen) so that its own peak RSS is known
                status, rusage = code, usage
                break
            if first_hit is None:
                probe = subprocess.run([*funes, "--format", "json", "recall", "session turn",
                                        "-k", "1"], env=env, cwd=root, capture_output=True,
                                       text=True)
                if probe.returncode == 0 and '"session_id"' in probe.stdout:
                    first_hit = time.perf_counter() - t0
        wall = time.perf_counter() - t0
        err = proc.stderr.read().decode() if proc.stderr else ""
        if status:
            raise SystemExit(f"index failed ({status}): {err[-2000:]}")
        peak = rusage.ru_maxrss / 1024 if rusage else 0.0
        disk = _tree_bytes(home)
        print(f"| chunks | files | index wall | peak RSS (largest child) | disk | "
              f"first useful recall |\n|---:|---:|---:|---:|---:|---:|\n"
              f"| {args.chunks} | {files} | {wall:.0f} s | {peak:.0f} MB | {disk / 1e6:.0f} MB "
              f"| {first_hit if first_hit is None else f'{first_hit:.0f} s'} |")
        print(f"load: {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    m = sub.add_parser("months")
    m.add_argument("--commits", type=int, default=3000)
    m.add_argument("--step", type=int, default=300)
    m.add_argument("--pack", choices=("auto", "off"), default="auto")
    f = sub.add_parser("firstday")
    f.add_argument("--chunks", type=int, default=300_000)
    f.add_argument("--batch-chunks", type=int, default=0)
    from life_hooks import add_parser

    add_parser(sub, lambda a: __import__("life_hooks").hooks(a))
    args = parser.parse_args()
    if args.mode == "hooks":
        args.run(args)
    else:
        months(args) if args.mode == "months" else firstday(args)


if __name__ == "__main__":
    main()
