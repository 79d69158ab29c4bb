"""Day zero: `funes add claude` on a machine that already has a long history.

Run:  python bench/bench_day0.py                      # sized down: the 40-question S sample
      python bench/bench_day0.py --data S.json.gz     # full size: ~19k sessions, 100 questions
      python bench/bench_day0.py --data S.json.gz --sessions 1000 --backfill   # embedded

The public scoreboard for this moment is deja-vu's day0bench (vshulcz/deja-vu,
scripts/day0bench, MIT): every distinct LongMemEval-S haystack session laid down as agent
transcripts, single-session questions scored by the rank of their answer session. This bench
builds the same history (bench/day0_layout.py) and measures what a user gets from funes:

1. `funes add claude` (the real CLI, in a fresh HOME with the default embedding model
   installed) indexes the history: build time, peak RSS, the seconds until its first batch
   was searchable;
2. while it runs, a second process asks `funes recall` (the CLI, as an agent would) one
   question after another: the time of the first answer with passages, and of the first
   right one (the question's answer session among its 8 hits);
3. at `--first-minute` seconds the indexer is paused (SIGSTOP; the pause is not counted in
   the build time) and every question is asked of what is in: hit@1/@5/found@50 at the first
   minute;
4. after `add` returns: the same scores on the whole lexical memory, the same through plain
   Okapi BM25 (rank-bm25's, bench/day0_bm25.py) over the same stored chunks, and the CLI's
   latency (p50/p95 of `funes recall "<question>"`, the warm server starting as it would);
5. with `--backfill`: the detached backfill `add` started embeds everything (newest first);
   then the scores of the embedded memory (vectors and words).

Scores: the answer session's rank among the distinct sessions of a recall's hits (k=200, no
neighbours, the question's date as "now", as day0bench does, the pipeline's defaults
otherwise; the rows "supersession off" show the same recalls without funes.retrieval.supersede,
which acts on every session here since they share one project), counting a session whose
passage funes folded into an identical one it shows (`Hit.copies`: LongMemEval-S holds many
sessions twice, once with the answer's evidence and once as a plain distractor); the same
without copies is reported too. The layout is cached under `--work`; every run starts from
an empty memory and removes it (and stops the processes it started) at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from day0_bm25 import OkapiIndex, check_against_rank_bm25  # noqa: E402
from day0_layout import draw, lay_out, load_any, pile  # noqa: E402
from longmemeval import S_FILE, parse_date  # noqa: E402

#: Hits asked for when scoring (funes's MAX_K): enough to cover 50 distinct sessions.
K = 200
DEPTH = 50
#: Chunks on which the baseline is checked against rank-bm25 itself in every run.
CHECK_CHUNKS = 5000


@dataclass
class Score:
    """Ranks of the answer session, one per question (None: not in the first DEPTH)."""

    ranks: dict[str, int | None] = field(default_factory=dict)

    def row(self) -> str:
        """`hit@1 / hit@5 / found@50 / MRR` over the questions."""
        n = len(self.ranks) or 1
        got = [r for r in self.ranks.values() if r is not None]
        hit1 = sum(1 for r in got if r == 1)
        hit5 = sum(1 for r in got if r <= 5)
        mrr = sum(1 / r for r in got) / n
        pct = 100 / n
        return (f"{hit1 * pct:.0f} / {hit5 * pct:.0f} / {len(got) * pct:.0f} / {mrr:.3f}")


def peak_note(samples: Sequence[tuple[float, float]], end: float) -> str:
    """Where in the run the resident set peaked (the readers' processes are apart)."""
    if not samples:
        return "no sample"
    at, mb = max(samples, key=lambda s: s[1])
    return f"{mb:.0f} MB at {at:.0f} s of {end:.0f} s"


def session_rank(sessions: Sequence[str], gold: set[str]) -> int | None:
    """1-based rank of the first gold session among the distinct `sessions`, within DEPTH."""
    seen: list[str] = []
    for s in sessions:
        if s in seen:
            continue
        seen.append(s)
        if s in gold:
            return len(seen)
        if len(seen) >= DEPTH:
            return None
    return None


def funes_env(home: Path, layout: Path) -> dict[str, str]:
    """The environment of a fresh user whose agents' history is `layout`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FUNES_", "CLAUDE_", "CODEX_", "HF_"))}
    env.update(HOME=str(home), FUNES_HOME=str(home / ".funes"),
               CLAUDE_CONFIG_DIR=str(layout / ".claude"), CODEX_HOME=str(layout / ".codex"),
               FUNES_AUTHOR_NAME="bench", FUNES_AUTHOR_EMAIL="bench@example.invalid")
    return env


def cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`funes ARGS` as a user types it."""
    return subprocess.run([sys.executable, "-m", "funes", *args], env=env, text=True,
                          capture_output=True, timeout=timeout, check=False)


def recalled_sessions(hits: Sequence[dict[str, Any]], copies: bool = True) -> list[str]:
    """Sessions in hit order, each hit's copies right after it (the same rank)."""
    out: list[str] = []
    for h in hits:
        out.append(str(h["session_id"]))
        if copies:
            out += [str(c["session_id"]) for c in h.get("copies") or ()]
    return out


#: Seconds between two recalls of the poller: an agent asks now and then, and a poller asking
#: back to back would take the indexer's CPU on two cores.
POLL_EVERY = 3.0


class Poller(threading.Thread):
    """Asks `funes recall` question after question while `add` runs (an agent on day zero)."""

    def __init__(self, env: dict[str, str], questions: Sequence[dict[str, Any]], t0: float):
        super().__init__(daemon=True)
        self.env, self.questions, self.t0 = env, questions, t0
        self.first_answer: float | None = None
        self.first_right: tuple[float, str] | None = None
        self.asked = 0
        self.stop = threading.Event()
        self.paused = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set() and self.first_right is None:
            if self.paused.is_set():
                time.sleep(0.2)
                continue
            q = self.questions[i % len(self.questions)]
            i += 1
            done = cli(self.env, "recall", q["question"], "--format", "json")
            self.asked += 1
            now = time.monotonic() - self.t0
            try:
                hits = json.loads(done.stdout)["hits"] if done.returncode == 0 else []
            except (ValueError, KeyError):
                hits = []
            if hits and self.first_answer is None:
                self.first_answer = now
            if set(recalled_sessions(hits)) & set(q["answer_session_ids"]):
                self.first_right = (now, str(q["question_id"]))
            self.stop.wait(POLL_EVERY)


def evaluate(home: Path, questions: Sequence[dict[str, Any]], *, vector: bool,
             supersede: bool = True, bm25: bool = True) -> tuple[Score, Score, float]:
    """Every question through `funes.api.recall` in this process: (with copies, without,
    seconds)."""
    from dataclasses import replace

    from funes import api
    from funes._env import settings as load_settings
    from funes.storage.repo import Repository

    settings = replace(load_settings(), home=home / ".funes")
    repo = Repository.open(home / ".funes", settings)
    with_copies, plain = Score(), Score()
    t0 = time.perf_counter()
    for q in questions:
        result = api.recall(settings, repo, q["question"], k=K, neighbors=0, vector=vector,
                            now=parse_date(q["question_date"]), supersede=supersede,
                            bm25=bm25)
        hits = [{"session_id": h.row["session_id"], "copies": h.copies} for h in result.hits]
        gold = set(q["answer_session_ids"])
        with_copies.ranks[q["question_id"]] = session_rank(recalled_sessions(hits), gold)
        plain.ranks[q["question_id"]] = session_rank(recalled_sessions(hits, False), gold)
    return with_copies, plain, time.perf_counter() - t0


def baseline(home: Path, questions: Sequence[dict[str, Any]]) -> tuple[Score, float, float]:
    """rank-bm25's Okapi BM25 over every stored chunk: (score, build seconds, check error)."""
    import lance

    table = lance.dataset(str(home / ".funes" / "chunks.lance")).to_table(
        columns=["text", "session_id"])
    texts = table.column("text").to_pylist()
    sessions = table.column("session_id").to_pylist()
    del table
    error = check_against_rank_bm25(texts[:CHECK_CHUNKS], [q["question"] for q in questions])
    t0 = time.perf_counter()
    index = OkapiIndex(texts)
    built = time.perf_counter() - t0
    score = Score()
    for q in questions:
        ranked = [sessions[i] for i in index.top(q["question"], 20 * DEPTH)]
        score.ranks[q["question_id"]] = session_rank(ranked, set(q["answer_session_ids"]))
    return score, built, error


def lance_alone(home: Path, questions: Sequence[dict[str, Any]]) -> Score:
    """The full-text index alone: Lance's top chunks, no funes pipeline (where reach is lost)."""
    import re

    import lance

    ds = lance.dataset(str(home / ".funes" / "chunks.lance"))
    score = Score()
    for q in questions:
        terms = " ".join(re.sub(r"[^\w\s]", " ", q["question"]).split())
        table = ds.to_table(full_text_query=terms, columns=["session_id", "_score"], limit=K)
        ranked = [str(s) for s in table.column("session_id").to_pylist()]
        score.ranks[q["question_id"]] = session_rank(ranked, set(q["answer_session_ids"]))
    return score


def pause_and_score(proc: subprocess.Popen[str], home: Path, questions: Sequence[Any],
                    poller: Poller) -> tuple[Score | None, float, int]:
    """At the first minute: stop the indexer, score what is in, let it go on.

    Returns (scores, seconds paused, chunks in). Waits for the full-text index to exist
    first (a recall would otherwise build it, under the lock the stopped indexer holds).
    """
    import lance

    chunks = home / ".funes" / "chunks.lance"
    if proc.returncode is not None:
        return None, 0.0, 0
    poller.paused.set()
    t0 = time.monotonic()
    try:
        os.kill(proc.pid, signal.SIGSTOP)
    except ProcessLookupError:  # it ended just now
        poller.paused.clear()
        return None, 0.0, 0
    try:
        tries = 0
        while True:
            names = set()
            if chunks.exists():
                names = {ix.name for ix in lance.dataset(str(chunks)).describe_indices()}
            if {"text_idx", "id_idx"} <= names or tries > 50:
                break
            os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.2)
            os.kill(proc.pid, signal.SIGSTOP)
            tries += 1
        rows = lance.dataset(str(chunks)).count_rows() if chunks.exists() else 0
        scored, _, _ = evaluate(home, questions, vector=False)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        poller.paused.clear()
    return scored, time.monotonic() - t0, rows


def wait_backfill(env: dict[str, str], limit_s: float) -> tuple[float, dict[str, Any], float]:
    """Wait until nothing waits for a vector (or `limit_s`); (seconds, last status, the
    backfill's peak RSS in MB as last seen)."""
    t0 = time.monotonic()
    status: dict[str, Any] = {}
    peak = 0.0
    while time.monotonic() - t0 < limit_s:
        done = cli(env, "status", "--format", "json")
        status = json.loads(done.stdout) if done.returncode == 0 else {}
        search = status.get("search") or {}
        fill = search.get("backfill") or {}
        if fill.get("pid"):
            peak = max(peak, hwm_mb(int(fill["pid"])))
        if search and search.get("backlog") == 0:
            break
        if fill and not fill.get("running") and fill.get("state") != "running":
            break
        time.sleep(15)
    return time.monotonic() - t0, status, peak


def stop_detached(env: dict[str, str], home: Path) -> None:
    """Stop the backfill and the warm server this run started."""
    cli(env, "serve", "--stop", timeout=30)
    progress = home / ".funes" / "index" / "backfill.json"
    try:
        pid = int(json.loads(progress.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


def rss_mb_now(pid: int) -> float:
    """A running process's resident set now (VmRSS) in MB, 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def hwm_mb(pid: int) -> float:
    """A running process's peak RSS (VmHWM) in MB, 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=S_FILE,
                        help="a LongMemEval-S JSON list (.json or .json.gz); default: the "
                        "40-question sample in ../shared/fixtures")
    parser.add_argument("--questions", type=int, default=100,
                        help="single-session questions to score (spread over the ids)")
    parser.add_argument("--sessions", type=int, default=0,
                        help="lay down this many sessions (answer sessions always in); 0: all")
    parser.add_argument("--harness", choices=("claude", "codex"), default="claude")
    parser.add_argument("--first-minute", type=float, default=60.0,
                        help="seconds after `add` starts at which to score what is in")
    parser.add_argument("--backfill", action="store_true",
                        help="wait for the background embedding, then score the embedded memory")
    parser.add_argument("--backfill-limit", type=float, default=4 * 3600,
                        help="most seconds to wait for the backfill")
    parser.add_argument("--latency-questions", type=int, default=30,
                        help="questions timed through the CLI after the build")
    parser.add_argument("--work", type=Path,
                        default=Path(os.environ.get("FUNES_BENCH_CACHE")
                                     or Path.home() / ".cache" / "funes-bench") / "day0")
    parser.add_argument("--out", type=Path, help="also write the markdown block here")
    parser.add_argument("--keep", action="store_true",
                        help="keep the built memory (its path is printed) for analysis")
    args = parser.parse_args()

    entries = load_any(args.data)
    questions = draw(entries, args.questions)
    sessions = pile(entries, questions, args.sessions)
    key = hashlib.sha256(f"{args.data.resolve()}|{args.data.stat().st_size}|{args.sessions}|"
                         f"{args.harness}|1".encode()).hexdigest()[:12]
    layout = args.work / f"layout-{key}"
    if not (layout / "DONE").is_file():
        shutil.rmtree(layout, ignore_errors=True)
        lay_out(sessions, layout, args.harness)
        (layout / "DONE").write_text(str(len(sessions)))
    del entries
    run_dir = args.work / f"run-{os.getpid()}"
    home = run_dir / "home"
    home.mkdir(parents=True)
    env = funes_env(home, layout)
    try:
        report = run(args, env, home, questions, len(sessions))
    finally:
        stop_detached(env, home)
        if args.keep:
            print(f"kept the memory: {home / '.funes'}", file=sys.stderr)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")


def run(args: argparse.Namespace, env: dict[str, str], home: Path,
        questions: Sequence[dict[str, Any]], n_sessions: int) -> str:
    """One day zero, start to end; the markdown block."""
    from dataclasses import replace

    from funes._env import settings as load_settings
    from funes.inference import models

    models.install(models.DEFAULT_EMBED_MODEL, replace(load_settings(), home=home / ".funes"),
                   offline=True)
    load0 = os.getloadavg()
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "funes", "--format", "json", "add",
                             args.harness], env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    poller = Poller(env, questions, t0)
    poller.start()
    first_minute: tuple[Score | None, float, int] = (None, 0.0, 0)
    ended = threading.Event()
    out: dict[str, Any] = {}

    def read(name: str, stream: Any) -> None:
        out[name] = stream.read()

    def reap() -> None:
        # wait4, not Popen.wait: its rusage is this one process's (the recalls the poller
        # starts are children too, and RUSAGE_CHILDREN would report the largest of all)
        _, status, usage = os.wait4(proc.pid, 0)
        out["code"], out["rss_mb"] = os.waitstatus_to_exitcode(status), usage.ru_maxrss / 1024
        out["cpu_s"] = usage.ru_utime + usage.ru_stime
        out["end"] = time.monotonic() - t0
        ended.set()

    samples: list[tuple[float, float]] = []  # (seconds since start, RSS MB) of `add` itself

    def sample() -> None:
        while not ended.is_set():
            rss = rss_mb_now(proc.pid)
            if rss:
                samples.append((time.monotonic() - t0, rss))
            ended.wait(0.5)

    readers = [threading.Thread(target=read, args=(n, st), daemon=True)
               for n, st in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    threading.Thread(target=sample, daemon=True).start()
    for thread in [*readers, threading.Thread(target=reap, daemon=True)]:
        thread.start()
    if not ended.wait(args.first_minute):
        first_minute = pause_and_score(proc, home, questions, poller)
    ended.wait()
    for thread in readers:
        thread.join()
    proc.returncode = out["code"]
    wall = time.monotonic() - t0 - first_minute[1]
    rss_mb = out["rss_mb"]
    if proc.returncode != 0:
        raise SystemExit(f"funes add failed ({proc.returncode}): {out['stderr'][-2000:]}")
    added = json.loads(out["stdout"])
    poller.stop.set()
    poller.join(timeout=120)
    indexed = added["indexed"]
    load1 = os.getloadavg()

    lexical, lexical_plain, eval_s = evaluate(home, questions, vector=False)
    # every session of this history is in one project, where supersession (a later session
    # revisiting a hit's subject outranks it) acts on all of them: shown apart
    unsuperseded, _, _ = evaluate(home, questions, vector=False, supersede=False)
    okapi, okapi_build, okapi_error = baseline(home, questions)
    alone = lance_alone(home, questions)
    lat = []
    for q in questions[: args.latency_questions]:
        t = time.perf_counter()
        cli(env, "recall", q["question"])
        lat.append(time.perf_counter() - t)
    lat.sort()
    again_t = time.perf_counter()
    again = cli(env, "--format", "json", "add", args.harness)
    again_s = time.perf_counter() - again_t
    again_added = json.loads(again.stdout)["indexed"]["added"] if again.returncode == 0 else -1
    status = json.loads(cli(env, "status", "--format", "json").stdout)
    fill = status["search"].get("backfill") or {}
    backfill_pid = fill.get("pid") or 0
    embedded: tuple[Score, Score, float] | None = None
    waited = backfill_rss = 0.0
    if args.backfill:
        waited, status, backfill_rss = wait_backfill(env, args.backfill_limit)
        embedded = evaluate(home, questions, vector=True)
        embedded_unsuperseded, _, _ = evaluate(home, questions, vector=True, supersede=False)
        vectors_alone, _, _ = evaluate(home, questions, vector=True, bm25=False)
        words_alone, _, _ = evaluate(home, questions, vector=False)
    backfill_rss = max(backfill_rss, hwm_mb(int(backfill_pid)) if backfill_pid else 0.0)

    first = poller.first_answer
    right = poller.first_right
    lines = [
        f"### `{' '.join(sys.argv[1:]) or '(defaults)'}`",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M')}; load average {load0[0]:.1f} at the start, "
        f"{load1[0]:.1f} when `add` returned ({os.cpu_count()} cores, shared).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| history | {n_sessions} sessions as {args.harness} transcripts; "
        f"{indexed['turns']} turns, {indexed['added']} chunks stored |",
        f"| questions | {len(questions)} single-session |",
        f"| `funes add {args.harness}`: lexical build (wall, pause excluded) | {wall:.1f} s "
        f"({indexed['added'] / max(wall, 1e-9):.0f} chunks/s), {indexed['batches']} batches |",
        f"| its CPU time (user + system) | {out['cpu_s']:.1f} s "
        f"({indexed['added'] / max(out['cpu_s'], 1e-9):.0f} chunks per CPU second) |",
        f"| first batch searchable | {indexed['first_searchable_s'] or 0:.1f} s after start |",
        f"| peak RSS of `funes add` | {rss_mb:.0f} MB (its own process, sampled: "
        f"{peak_note(samples, out['end'])}) |",
        "| first recall with passages (CLI, while indexing) | "
        + (f"{first:.1f} s" if first is not None else "none") + " |",
        "| first right answer (answer session in the top 8, CLI) | "
        + (f"{right[0]:.1f} s ({right[1]})" if right else "none")
        + f"; {poller.asked} recalls asked |",
    ]
    scored, _, rows = first_minute
    if scored is not None:
        lines.append(f"| hit@1 / hit@5 / found@50 / MRR at {args.first_minute:.0f} s "
                     f"({rows} chunks in) | {scored.row()} |")
    lines += [
        f"| hit@1 / hit@5 / found@50 / MRR, lexical memory | {lexical.row()} |",
        f"| the same, copies not counted | {lexical_plain.row()} |",
        f"| the same, supersession off | {unsuperseded.row()} |",
        f"| rank-bm25 Okapi over the same chunks | {okapi.row()} (index {okapi_build:.0f} s; "
        f"matches rank-bm25 to {okapi_error:.1e}) |",
        f"| Lance full-text alone (top {K} chunks, no funes pipeline) | {alone.row()} |",
        f"| in-process recall, mean per question (k={K}) | "
        f"{eval_s / max(1, len(questions)) * 1000:.0f} ms |",
        f"| `funes recall` through the CLI, p50 / p95 ({len(lat)} questions) | "
        f"{lat[len(lat) // 2]:.2f} s / {lat[int(0.95 * (len(lat) - 1))]:.2f} s |",
        f"| `funes add {args.harness}` again | {again_s:.2f} s, {again_added} chunks added |",
    ]
    if embedded is not None:
        search = status.get("search") or {}
        lines += [
            f"| backfill waited | {waited / 60:.1f} min; {search.get('embedded')} embedded, "
            f"{search.get('backlog')} waiting; backfill peak RSS {backfill_rss:.0f} MB (as last "
            "seen by `funes status` polls) |",
            f"| hit@1 / hit@5 / found@50 / MRR, embedded | {embedded[0].row()} |",
            f"| the same, copies not counted | {embedded[1].row()} |",
            f"| the same, supersession off | {embedded_unsuperseded.row()} |",
            f"| vectors alone (no BM25), embedded | {vectors_alone.row()} |",
        ]
        lines += ["", *per_type(questions, [("default (embedded)", embedded[0]),
                                            ("BM25 alone", words_alone),
                                            ("vectors alone", vectors_alone)])]
    return "\n".join(lines)


def per_type(questions: Sequence[dict[str, Any]], scores: Sequence[tuple[str, Score]]) -> list[str]:
    """hit@1 and hit@5 per question type, one row per ranking (issue #34: the default's hit@1
    must not fall below either signal's alone on any type)."""
    types = sorted({str(q["question_type"]) for q in questions})
    of = {str(q["question_id"]): str(q["question_type"]) for q in questions}
    head = ["ranking", *(f"{t} (n={sum(1 for v in of.values() if v == t)})" for t in types)]
    out = ["hit@1 / hit@5 per question type (counts):", "",
           "| " + " | ".join(head) + " |", "|---|" + "---:|" * len(types)]
    for label, score in scores:
        cells = []
        for t in types:
            ranks = [r for q, r in score.ranks.items() if of.get(q) == t]
            cells.append(f"{sum(1 for r in ranks if r == 1)} / "
                         f"{sum(1 for r in ranks if r is not None and r <= 5)}")
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return out


if __name__ == "__main__":
    main()
