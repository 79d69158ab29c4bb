"""The recall benchmark's code path on three tiny LongMemEval questions, so it cannot rot.

Real pieces throughout: the generic import, `api.index`, `api.embed` with the default model,
every system of the quality table, a scale memory with synthetic vectors, the synthetic
cross-encoder, cold `funes recall` / `funes get` subprocesses and the markdown report. Only the
sizes are tiny (a few sessions per question, short turns, a 300-chunk scale memory).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_recall as br  # noqa: E402
import longmemeval as lme  # noqa: E402

from tests.conftest import SHARED_MISSING  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not lme.S_FILE.is_file(), reason=SHARED_MISSING)]


def _tiny(entry: dict[str, Any], distractors: int = 2, chars: int = 300) -> dict[str, Any]:
    """The gold sessions plus a few distractors, each turn cut short; labels kept."""
    e = copy.deepcopy(entry)
    keep = [i for i, sid in enumerate(e["haystack_session_ids"]) if "answer" in sid]
    keep += [i for i, sid in enumerate(e["haystack_session_ids"]) if "answer" not in sid][
        :distractors]
    keep.sort()
    for key in ("haystack_session_ids", "haystack_dates", "haystack_sessions"):
        e[key] = [e[key][i] for i in keep]
    for session in e["haystack_sessions"]:
        for turn in session:
            if turn["role"] == "user" and turn.get("has_answer"):
                continue  # the evidence stays whole
            turn["content"] = turn["content"][:chars]
    return e


@pytest.fixture
def bench_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_models: Path) -> Any:
    monkeypatch.setenv("FUNES_BENCH_CACHE", str(tmp_path / "cache"))
    # The embedding model converted once per test session; the synthetic reranker gets a
    # home of its own (bench_recall.rerank_settings), so the shared cache stays clean.
    (tmp_path / "cache" / "home").mkdir(parents=True)
    (tmp_path / "cache" / "home" / "models").symlink_to(shared_models, target_is_directory=True)
    return lme.bench_settings()


def test_bench_code_path_on_tiny_questions(bench_env: Any, tmp_path: Path) -> None:
    settings = bench_env
    entries = [_tiny(e) for e in lme.quick_s(lme.load(lme.S_FILE))[:3]]
    oracle_like = [_tiny(e, distractors=0) for e in entries]

    with br.build_cpus(1):
        s_built, pooled = lme.build_all(settings, entries, oracle_like,
                                        pooled_subset=oracle_like, log=lambda _m: None)
    assert all(b.embedded == b.chunks > 0 for b in s_built.values())
    again, _ = lme.build_all(settings, entries, oracle_like, pooled_subset=oracle_like,
                             log=lambda _m: None)
    assert all(b.cached for b in again.values())

    plan = [(e, br.api.open_memory(settings, s_built[e["question_id"]].path)) for e in entries]
    s_quality = br.evaluate(settings, "S tiny", plan, official=True, sweep=False,
                            log=lambda _m: None)
    orepo = br.api.open_memory(settings, pooled.path)
    o_quality = br.evaluate(settings, "pooled tiny", [(e, orepo) for e in entries],
                            official=False, sweep=False, log=lambda _m: None)
    assert {"bm25", "vector", "recency"} <= s_quality.signals
    for q in (s_quality, o_quality):
        assert br.FULL in q.scores and br.REF_SAME in q.scores and br.VECTOR_ONLY in q.scores
        for scores in q.scores.values():
            s = scores.summary()
            assert s["n"] == 3
            for metric in ("r1", "r5", "r10", "mrr"):
                assert 0.0 <= s[metric] <= 1.0
    # A haystack of 3-4 sessions: every system finds a gold session within 5.
    assert s_quality.scores[br.FULL].summary()["r5"] == 1.0

    texts = br._text_sessions(entries, [])
    scale = br.build_scale_memory(settings, 150, texts, log=lambda _m: None)
    assert scale.chunks >= 150
    repo = br.api.open_memory(settings, str(scale.path))
    assert repo.vectors.dataset().count_rows() == scale.chunks
    lat = br.latency_suite(settings, [("tiny", scale.path, scale.chunks)],
                           [e["question"] for e in entries], reps=2, cold_reps=1,
                           rerank_pools=[0, 2], warmup=1, log=lambda _m: None)
    lat.scale = [scale]
    whats = [r.what for r in lat.rows]
    assert any("reranker on" in w for w in whats) and any("cold `funes get" in w for w in whats)
    assert all(r.p50_ms > 0 for r in lat.rows)

    args = argparse.Namespace(quick=True)
    text = br.render(args, {}, [s_quality, o_quality], lat, "0/0/0", 1.0)
    assert "## Targets" in text and "| funes full pipeline" in text
    assert "synthetic vectors" in text and "within 300 ms" in text
