"""Supersession bench: does the newer decision win, and does the stale one say it was revisited?

Two parts, each with recall's supersession on (the default) and off, paired:

* **sde-bench's amended decisions** (bench/data/sde-amended.json.gz, generated from
  vectorize-io/sde-bench at a pinned commit by scripts/sde_amended.py; MIT). Six tasks: a
  project decision settled in one developer chat (chat A) and amended in a later one (chat B),
  among the benchmark's 140 decoy chats about the same code base. One memory per task, as a
  user's would be: every chat a session of the same project (`cwd` the code base), the decoys
  spread over 90 days, chat A on day 20 and chat B on day 50; the question is the task's bug
  report, asked on day 90. Must hold (issue #34): chat B's best passage ranks above chat A's in
  ≥ 5 of 6 tasks, and every chat-A hit carries `revisited later` pointing into chat B.
* **LongMemEval knowledge updates** (the pooled oracle memory of bench/bench_recall.py, 72
  questions whose two evidence sessions hold an old and a new value): the newer evidence
  session ranks above the older one ("newer first"), and session R@1 / R@5, each question asked
  as of its own date (`as_of`) and, for reference, of the whole memory. The other types' R@1 is
  reported too, so a supersession rule that costs first hits elsewhere shows.

Both parts are also asked of the same memories **not embedded yet** (indexed, no vector: what
`funes add` leaves on day zero, before the backfill), where supersession decides on words alone.

    python bench/bench_supersede.py                 # both parts; results/supersede.md
    python bench/bench_supersede.py --no-lme        # sde only (builds 7 small memories, twice)
    python bench/bench_supersede.py --lexical-only  # not embedded only: no embedding run

Memories are built through the generic import (`api.index`, `api.embed`) and cached under the
bench cache (bench/longmemeval.py) like the recall bench's; the decoys are embedded once, in a
base memory each task's memory is copied from.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import longmemeval as lme

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "sde-amended.json.gz"
#: Where the chats happened: one project, so every chat can revisit every other.
WORKDIR = "/home/dev/boltons"
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
SPAN_DAYS = 90
DAY_A, DAY_B = 20, 50
K = 10


def load_sde(path: Path = DATA) -> dict[str, Any]:
    """The generated bench data (tasks and decoys)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def chat_lines(session_id: str, when: datetime, turns: Sequence[dict[str, Any]]) -> list[str]:
    """One chat as generic-import lines, a minute per turn, in the project's directory."""
    out = []
    for i, turn in enumerate(turns):
        out.append(json.dumps({
            "session_id": session_id, "id": f"{session_id}_{i + 1}", "role": turn["role"],
            "content": turn["text"], "cwd": WORKDIR,
            "timestamp": (when + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }, ensure_ascii=False))
    return out


def decoy_time(i: int, n: int) -> datetime:
    """Decoy i of n, spread evenly over the span, at varying hours."""
    return START + timedelta(days=SPAN_DAYS * i / n, hours=(i * 7) % 10)


def chat_ids(task: dict[str, Any]) -> tuple[str, str]:
    """Session ids of a task's chat A (the decision) and chat B (the amendment)."""
    short = task["task_id"].replace("boltons-", "").replace("-amended-001", "")
    return f"{short}-decision", f"{short}-amendment"


def _index(settings: Any, mem: Path, src: Path, lines: Sequence[str], embed: bool) -> None:
    from funes import api

    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    api.index(settings, memory=str(mem), paths=[str(src)], agents=["import"])
    repo = api.open_memory(settings, str(mem))
    if embed:
        api.embed(settings, repo, model=lme.embed_model())
    from funes.retrieval import indexes

    indexes.ensure(repo)


def build(settings: Any, data: dict[str, Any], log: Callable[[str], None],
          embed: bool = True) -> dict[str, Path]:
    """Per-task memories (cached): the base of decoys, copied, plus the task's two chats.

    `embed=False` builds them as `funes add` leaves a memory on day zero: words indexed, no
    vector yet (the backlog the detached backfill embeds later).
    """
    from funes import api

    key = hashlib.sha256(DATA.read_bytes() + lme.model_sha(settings).encode()
                         + f"|{lme.BUILD_FORMAT}|{START}|{DAY_A}|{DAY_B}".encode()).hexdigest()[:16]
    root = lme.cache_root() / (f"sde-amended-{key}" if embed else f"sde-amended-lexical-{key}")
    base = root / "base"
    if not (base / "bench-build.json").is_file():
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        api.init(settings, base)
        decoys = data["decoys"]
        lines = [line for i, d in enumerate(decoys)
                 for line in chat_lines(f"decoy-{d['id']}", decoy_time(i, len(decoys)),
                                        d["turns"])]
        t0 = time.perf_counter()
        _index(settings, base / ".funes", base / "import" / "decoys.jsonl", lines, embed)
        (base / "bench-build.json").write_text(json.dumps({"decoys": len(decoys)}))
        log(f"base memory: {len(decoys)} decoy chats in {time.perf_counter() - t0:.0f} s")
    out = {}
    for task in data["tasks"]:
        mem = root / task["task_id"]
        if not (mem / "bench-build.json").is_file():
            shutil.rmtree(mem, ignore_errors=True)
            shutil.copytree(base, mem, ignore=shutil.ignore_patterns("import", "bench-build.json"))
            a, b = chat_ids(task)
            chat_a, chat_b = task["chats"]
            lines = [*chat_lines(a, START + timedelta(days=DAY_A, hours=3), chat_a),
                     *chat_lines(b, START + timedelta(days=DAY_B, hours=3), chat_b)]
            _index(settings, mem / ".funes", mem / "import" / "chats.jsonl", lines, embed)
            (mem / "bench-build.json").write_text("{}")
            log(f"{task['task_id']}: built")
        out[task["task_id"]] = mem / ".funes"
    return out


@dataclass
class TaskResult:
    """Where a task's two chats landed in one recall."""

    task_id: str
    rank_a: int | None  # 1-based rank of chat A's best hit in the top K, None if absent
    rank_b: int | None
    a_hits: int
    a_marked: int  # chat-A hits whose `revisited` points into chat B
    pointers: list[str] = field(default_factory=list)
    other_marked: int = 0  # decoy or chat-B hits marked revisited (by anything)
    other_hits: int = 0

    @property
    def newer_first(self) -> bool:
        """Chat B's best passage above chat A's (or chat A absent, chat B present)."""
        return self.rank_b is not None and (self.rank_a is None or self.rank_b < self.rank_a)


def run_sde(settings: Any, data: dict[str, Any], memories: dict[str, Path],
            supersede: bool, vector: bool = True) -> list[TaskResult]:
    """Ask every task's bug report of its memory."""
    from funes import api

    out = []
    now = START + timedelta(days=SPAN_DAYS)
    for task in data["tasks"]:
        repo = api.open_memory(settings, str(memories[task["task_id"]]))
        result = api.recall(settings, repo, task["bug_report"], k=K, rerank=False, now=now,
                            supersede=supersede, vector=vector, budget_ms=0)
        a, b = chat_ids(task)
        rank_a = rank_b = None
        a_hits = a_marked = other_hits = other_marked = 0
        pointers = []
        for rank, hit in enumerate(result.hits, 1):
            sid = hit.row["session_id"]
            if sid == a:
                rank_a = rank_a or rank
                a_hits += 1
                later = hit.revisited
                if later is not None and later["session_id"] == b:
                    a_marked += 1
                pointers.append(f"{hit.row['turn_id']}→"
                                f"{later['turn_id'] if later is not None else '-'}")
            else:
                if sid == b:
                    rank_b = rank_b or rank
                other_hits += 1
                other_marked += hit.revisited is not None
        out.append(TaskResult(task["task_id"], rank_a, rank_b, a_hits, a_marked, pointers,
                              other_marked, other_hits))
    return out


def sde_table(runs: dict[str, list[TaskResult]]) -> list[str]:
    """One row per task and variant."""
    lines = ["| variant | task | chat A rank | chat B rank | newer first | chat-A hits marked "
             "→ chat B | other hits marked | marks (A turn → revisit) |",
             "|---|---|---:|---:|---|---:|---:|---|"]
    for name, results in runs.items():
        for r in results:
            lines.append(f"| {name} | {r.task_id} | {r.rank_a or '–'} | {r.rank_b or '–'} | "
                         f"{'yes' if r.newer_first else 'no'} | {r.a_marked}/{r.a_hits} | "
                         f"{r.other_marked}/{r.other_hits} | {', '.join(r.pointers) or '–'} |")
    for name, results in runs.items():
        wins = sum(r.newer_first for r in results)
        marked = sum(r.a_marked for r in results)
        hits = sum(r.a_hits for r in results)
        others = sum(r.other_marked for r in results)
        other_hits = sum(r.other_hits for r in results)
        lines.append(f"| **{name}** | **all** | | | **{wins}/{len(results)}** | "
                     f"**{marked}/{hits}** | **{others}/{other_hits}** | |")
    return lines


# ------------------------------------------------------------------------------------------
# LongMemEval
# ------------------------------------------------------------------------------------------


def lme_questions() -> list[lme.Entry]:
    """The pooled oracle's non-abstention questions."""
    return [e for e in lme.load(lme.ORACLE_FILE) if not lme.is_abstention(e)]


def session_ranking(settings: Any, repo: Any, entry: lme.Entry, *, supersede: bool,
                    as_of: bool, vector: bool = True) -> list[str]:
    """Distinct session ids of one recall of 50 chunks, best first."""
    from funes import api

    when = lme.parse_date(entry["question_date"])
    result = api.recall(settings, repo, entry["question"], k=50, rerank=False,
                        supersede=supersede, budget_ms=0, now=when, vector=vector,
                        as_of=when.isoformat() if as_of else None)
    return lme.dedup(h.row["session_id"] for h in result.hits)


def newer_first(entry: lme.Entry, ranked: Sequence[str]) -> float:
    """1 when the latest evidence session ranks above every earlier one (it must be found)."""
    dated = sorted(zip(entry["haystack_dates"], entry["haystack_session_ids"], strict=True),
                   key=lambda p: lme.parse_date(p[0]))
    gold = [sid for _, sid in dated if sid in set(entry["answer_session_ids"])]
    latest = gold[-1]
    if latest not in ranked:
        return 0.0
    at = ranked.index(latest)
    return float(all(s not in ranked[:at] for s in gold[:-1]))


def lexical_oracle(settings: Any, entries: Sequence[lme.Entry], log: Callable[[str], None]) -> Path:
    """The pooled oracle memory as `funes add` leaves it on day zero: indexed, not embedded."""
    mem = lme.cache_root() / f"{lme.oracle_dir(settings).name}-lexical"
    info = lme.build_memory(settings, mem, lme.oracle_sessions(entries), embed=False)
    log(f"lexical oracle: {info.sessions} sessions, {info.chunks} chunks, index "
        f"{info.index_s:.1f} s{' (cached)' if info.cached else ''}")
    return mem


def run_lme(settings: Any, log: Callable[[str], None], embedded: bool = True) -> list[str]:
    """Knowledge-update "newer first" and R@1/R@5 per type, supersession off vs on.

    `embedded=False` asks the same questions of the oracle memory before any vector exists,
    through BM25 (supersession decides on words alone there).
    """
    sys.path.insert(0, str(ROOT / "bench"))
    import recall_levers as rl

    from funes import api

    entries = lme_questions()
    if embedded:
        mem = lme.oracle_dir(settings)
        if not (mem / "bench-build.json").is_file():
            raise SystemExit(f"the pooled oracle memory is not built yet ({mem}): run "
                             "python bench/bench_recall.py --levers --build-only first")
    else:
        mem = lexical_oracle(settings, lme.load(lme.ORACLE_FILE), log)
    repo = api.open_memory(settings, str(mem / ".funes"))
    lines = []
    for as_of in (True, False):
        scores: dict[str, dict[str, dict[str, float]]] = {}
        for on in (False, True):
            name = "supersession on" if on else "supersession off"
            per: dict[str, dict[str, float]] = {}
            t0 = time.perf_counter()
            for entry in entries:
                ranked = session_ranking(settings, repo, entry, supersede=on, as_of=as_of,
                                         vector=embedded)
                gold = set(entry["answer_session_ids"])
                per[entry["question_id"]] = {
                    "r1": float(bool(set(ranked[:1]) & gold)),
                    "r5": float(bool(set(ranked[:5]) & gold)),
                    "newer_first": newer_first(entry, ranked)
                    if entry["question_type"] == "knowledge-update" else float("nan"),
                }
            scores[name] = per
            log(f"LongMemEval as_of={as_of} {name}: {time.perf_counter() - t0:.0f} s")
        types = {e["question_id"]: e["question_type"] for e in entries}
        title = ("each question as of its date" if as_of else "the whole memory (no as_of)")
        state = "" if embedded else ", not embedded yet (BM25)"
        lines += [f"### Pooled oracle{state}, {len(entries)} q, {title}", ""]
        for metric in ("newer_first", "r1", "r5"):
            lines += [f"**{metric}**", ""]
            lines += _table(rl, scores, types, metric)
            lines.append("")
    return lines


def _table(rl: Any, runs: dict[str, dict[str, dict[str, float]]], types: dict[str, str],
           metric: str) -> list[str]:
    """Value per type (questions that have the metric), and the second run's paired bootstrap
    against the first."""
    names = list(runs)
    base = runs[names[0]]
    kept = [q for q in types if base[q][metric] == base[q][metric]]  # not NaN
    groups = [("all", kept)] + [(t, [q for q in kept if types[q] == t])
                                for t in sorted({types[q] for q in kept})]
    lines = ["| variant | " + " | ".join(f"{g} (n={len(qs)})" for g, qs in groups) + " |",
             "|---|" + "---:|" * len(groups)]
    for name in names:
        cells = []
        for _, qs in groups:
            new = [runs[name][q][metric] for q in qs]
            value = sum(new) / len(new)
            if name == names[0]:
                cells.append(f"{value:.3f}")
                continue
            d, lo, hi, p = rl.bootstrap([base[q][metric] for q in qs], new)
            cells.append(f"{value:.3f} ({d:+.3f} [{lo:+.3f}, {hi:+.3f}] p={p:.2f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Build, ask, write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-lme", action="store_true", help="skip the LongMemEval part")
    parser.add_argument("--no-sde", action="store_true", help="skip the sde-bench part")
    parser.add_argument("--lexical-only", action="store_true",
                        help="only the memories not embedded yet (sde-bench and the oracle; "
                        "no embedding run)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "supersede.md")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    import os

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    settings = lme.bench_settings()
    data = load_sde()
    out = ["# Supersession: the newer decision first (`python bench/bench_supersede.py`)", "",
           f"Started {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load}.", ""]
    if not args.no_sde:
        src = data["source"]
        from bench_recall import build_cpus

        runs = {}
        if not args.lexical_only:
            with build_cpus(1):  # one llama.cpp thread embeds faster on a shared 2-core machine
                memories = build(settings, data, log)
            runs = {name: run_sde(settings, data, memories, on, vector)
                    for name, on, vector in (
                        ("supersession off", False, True), ("supersession on", True, True),
                        ("BM25 only, supersession off", False, False),
                        ("BM25 only, supersession on", True, False))}
        # day zero: the words are indexed, the vectors not yet (supersession decides on words)
        lexical = build(settings, data, log, embed=False)
        runs |= {name: run_sde(settings, data, lexical, on, False)
                 for name, on in (("not embedded yet, supersession off", False),
                                  ("not embedded yet, supersession on", True))}
        out += [f"## sde-bench amended tasks ({src['repository']} @ {src['commit'][:12]}, "
                f"{len(data['decoys'])} decoy chats, one memory per task, k = {K})", ""]
        out += [*sde_table(runs), ""]
    if not args.no_lme:
        out += ["## LongMemEval, pooled oracle", ""]
        if not args.lexical_only:
            out += run_lme(settings, log)
        out += run_lme(settings, log, embedded=False)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    out += [f"Load at the end {load}.", ""]
    text = "\n".join(out)
    print(text)
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
