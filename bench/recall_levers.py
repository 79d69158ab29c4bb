"""Recall levers on LongMemEval: each change against the previous defaults, per question type.

Run:  nice -n 10 python bench/bench_recall.py --levers [--lexical] [--per-type N] [--rep2] [--no-s]
      (writes bench/results/recall-levers.md; the raw per-question scores go to the bench cache)

Every variant is `api.recall` on the same memories (bench/longmemeval.py builds and caches
them), asked for 50 chunks and scored as bench_recall.py scores (session R@1/R@5, turn R@10).
The baseline is the previous round's defaults: the same code with this round's lever off
(round four: `depth=1`, each signal fetching only the candidates the fusion is scaled on), so
a difference is the lever's and nothing else's. Earlier rounds' levers stay measurable by
passing their keywords (context, time_hints, speaker) in VARIANTS.

Noise is not progress: each difference comes with a paired bootstrap over questions (2,000
resamples of the question set, the same resample for both systems, seed 0): the 95% interval
of the difference and the share of resamples in which the variant does not beat the baseline
(a one-sided p). A type with few questions (preference: 30) gets a wide interval; read it.

Representation 2 (a context header embedded with each chunk, funes.ingest.represent) needs
its own vectors: `--rep2` builds a second oracle memory with `index.representation = 2` (the
same import, index and backlog; only what is embedded differs). The upgrade path of an
existing memory is exercised by tests/retrieval/test_recall_context.py.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import longmemeval as lme

from funes import api

#: `r1_copies`/`r5_copies` also count a hit whose identical copy (`Hit.copies`) is in a gold
#: session (lme.Scores.add): the pooled oracle repeats evidence turns under other ids.
METRICS = ("r1", "r5", "turn_r10", "r1_copies", "r5_copies")
BASELINE = "previous defaults (round four: an advice request's BM25 share 0.4)"
#: (label, api.recall keyword arguments; `_constants` sets funes.retrieval.recall's module
#: constants for the run, for a lever that is a constant rather than an option)
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    (BASELINE, {"_constants": {"ADVICE_BM25_WEIGHT": 0.4}}),
    ("advice request's BM25 share 0.1 (the default now)", {}),
    ("BM25 alone", {"bm25": True, "vector": False}),
    ("vectors alone", {"bm25": False, "vector": True}),
]

@dataclass
class Run:
    """Per-question scores of one variant on one dataset."""

    label: str
    rows: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: float = 0.0


def run_variant(settings: Any, label: str, kwargs: dict[str, Any],
                plan: Sequence[tuple[lme.Entry, Any]]) -> Run:
    """Score `api.recall(**kwargs)` on every (question, memory) pair."""
    from funes.retrieval import recall as pipeline

    kwargs = dict(kwargs)
    constants = kwargs.pop("_constants", {})
    saved = {name: getattr(pipeline, name) for name in constants}
    for name, value in constants.items():
        setattr(pipeline, name, value)
    try:
        return _run(settings, label, kwargs, plan)
    finally:
        for name, value in saved.items():
            setattr(pipeline, name, value)


def _run(settings: Any, label: str, kwargs: dict[str, Any],
         plan: Sequence[tuple[lme.Entry, Any]]) -> Run:
    scores = lme.Scores()
    t0 = time.perf_counter()
    for entry, repo in plan:
        now = lme.parse_date(entry["question_date"])
        # no time budget: a quality figure must not depend on the machine's load
        result = api.recall(settings, repo, entry["question"], k=50, neighbors=0, now=now,
                            budget_ms=0, **kwargs)
        ranked = [(h.row["session_id"], h.row["turn_id"]) for h in result.hits]
        scores.add(entry["question_id"], [s for s, _ in ranked], [t for _, t in ranked if t],
                   lme.gold_of(entry),
                   copies=[[str(c["session_id"]) for c in h.copies] for h in result.hits])
    return Run(label, scores.per_question, time.perf_counter() - t0)


def bootstrap(base: Sequence[float], new: Sequence[float], *, n: int = 2000,
              seed: int = 0) -> tuple[float, float, float, float]:
    """Mean difference new − base, its 95% paired-bootstrap interval, and P(diff ≤ 0)."""
    diffs = [b - a for a, b in zip(base, new, strict=True)]
    if not diffs:
        return float("nan"), float("nan"), float("nan"), float("nan")
    rng = random.Random(seed)
    m = len(diffs)
    means = sorted(sum(diffs[rng.randrange(m)] for _ in range(m)) / m for _ in range(n))
    not_better = sum(1 for x in means if x <= 0) / n
    return sum(diffs) / m, means[int(0.025 * n)], means[int(0.975 * n) - 1], not_better


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def table(name: str, runs: Sequence[Run], types: dict[str, str], base_label: str) -> list[str]:
    """Markdown: every variant × (all, each type) × metric, with the bootstrap vs the baseline."""
    base = next(r for r in runs if r.label == base_label)
    groups = ["all", *sorted(set(types.values()))]
    out = [f"### {name}", "",
           "Each cell: value, then Δ vs the baseline with its 95% paired-bootstrap interval "
           "and P(Δ ≤ 0). Turn R@10 only over questions with turn labels.", ""]
    for metric in METRICS:
        out += [f"**{metric}**", "", "| variant | " + " | ".join(
            f"{g} (n={sum(1 for q in base.rows if g == 'all' or types.get(q) == g)})"
            for g in groups) + " |", "|---|" + "---:|" * len(groups)]
        for run in runs:
            cells = []
            for g in groups:
                qs = [q for q in base.rows if (g == "all" or types.get(q) == g)
                      and metric in base.rows[q] and metric in run.rows.get(q, {})]
                a = [base.rows[q][metric] for q in qs]
                b = [run.rows[q][metric] for q in qs]
                if run.label == base_label:
                    cells.append(f"{_mean(b):.3f}")
                    continue
                d, lo, hi, p = bootstrap(a, b)
                cells.append(f"{_mean(b):.3f} ({d:+.3f} [{lo:+.3f}, {hi:+.3f}] p={p:.2f})")
            out.append(f"| {run.label} | " + " | ".join(cells) + " |")
        out.append("")
    return out


def _niced() -> str:
    """The `nice -n N ` prefix this run had (empty at the default priority)."""
    import os

    level = os.nice(0)
    return f"nice -n {level} " if level else ""


def _variants(lexical: bool) -> list[tuple[str, dict[str, Any]]]:
    """Every lever on the signals the memories have (`--lexical`: BM25 alone)."""
    if lexical:
        return [(label, {**kwargs, "vector": False}) for label, kwargs in VARIANTS
                if kwargs.get("vector", True) and kwargs.get("bm25", True)]
    return list(VARIANTS)


def main(args: Any, settings: Any, build_cpus: Callable[[int], Any], load_now: Callable[[], str],
         out: Path, log: Callable[[str], None]) -> int:
    """The `--levers` mode of bench_recall.py (see the module docstring)."""
    started = load_now()
    t_start = time.perf_counter()
    oracle = lme.load(lme.ORACLE_FILE)
    subset = lme.stratified(oracle, args.per_type) if args.per_type else None
    pooled_q = subset or [e for e in oracle if not lme.is_abstention(e)]
    s_entries = [] if args.no_s else [e for e in lme.load(lme.S_FILE) if not lme.is_abstention(e)]
    embed = not args.lexical
    suffix = "-lexical" if args.lexical else ""

    def where(path: Path) -> Path:
        return path.with_name(path.name + suffix)

    with build_cpus(args.build_cpus):
        o_built = lme.build_memory(settings, where(lme.oracle_dir(settings, subset)),
                                   lme.oracle_sessions(subset or oracle), embed=embed)
        log(f"oracle: {o_built.chunks} chunks (cached: {o_built.cached})")
        s_built = {}
        for n, e in enumerate(s_entries, 1):
            s_built[e["question_id"]] = lme.build_memory(
                settings, where(lme.s_memory_dir(settings, e)), list(lme.sessions_of(e)),
                embed=embed)
            log(f"S {n}/{len(s_entries)} built")
        rep2 = None
        if args.rep2 and embed:
            r2 = lme.build_memory(settings, lme.oracle_dir(settings, subset, representation=2),
                                  lme.oracle_sessions(subset or oracle),
                                  config={"index.representation": "2"})
            log(f"oracle, representation 2: {r2.chunks} chunks (cached: {r2.cached})")
            rep2 = api.open_memory(settings, r2.path)
    if args.build_only:
        return 0
    orepo = api.open_memory(settings, o_built.path)
    what = (f"pooled oracle subset ({args.per_type} per type, their {o_built.sessions} "
            f"sessions), {len(pooled_q)} q" if subset else f"pooled oracle, {len(pooled_q)} q")
    datasets: list[tuple[str, list[tuple[lme.Entry, Any]]]] = [
        (what + (", BM25 only" if args.lexical else ""), [(e, orepo) for e in pooled_q])]
    if s_entries:
        datasets.append((f"S sample, {len(s_entries)} q" + (", BM25 only" if args.lexical
                                                            else ""),
                         [(e, api.open_memory(settings, s_built[e["question_id"]].path))
                          for e in s_entries]))
    argv = " ".join(a for a in __import__("sys").argv[1:])
    lines = [f"## {datasets[0][0]}", "",
             f"`{_niced()}python bench/bench_recall.py {argv}` on 2 shared CPUs; started "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load at start {started}.",
             ""]
    raw: dict[str, Any] = {}
    for name, plan in datasets:
        types = {e["question_id"]: e["question_type"] for e, _ in plan}
        runs = []
        for label, kwargs in _variants(args.lexical):
            run = run_variant(settings, label, kwargs, plan)
            log(f"{name}: {label}: {run.seconds:.0f} s (load {load_now()})")
            runs.append(run)
        if rep2 is not None and name == datasets[0][0]:
            for label, kwargs in [("representation 2, + context + time hints",
                                   {"context": True, "time_hints": True, "speaker": False}),
                                  ("representation 2, previous defaults",
                                   {"context": False, "time_hints": False, "speaker": False})]:
                run = run_variant(settings, label, kwargs, [(e, rep2) for e, _ in plan])
                log(f"{name}: {label}: {run.seconds:.0f} s (load {load_now()})")
                runs.append(run)
        lines += table(name, runs, types, BASELINE)
        raw[name] = {r.label: r.rows for r in runs}
    lines += [f"Wall time {time.perf_counter() - t_start:.0f} s; load at the end {load_now()}.",
              ""]
    text = "\n".join(lines)
    with out.open("a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    tag = "lexical" if args.lexical else f"sub{args.per_type}" if subset else "full"
    (lme.cache_root() / f"last-levers-{tag}.json").write_text(json.dumps(raw))
    print(text)
    return 0
