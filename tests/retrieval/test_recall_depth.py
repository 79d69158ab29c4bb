"""Candidate depth: each signal returns depth × candidates passages; the first `candidates` of
each set the fusion's scale, the rest only join the pool. Real Lance repositories; the
deterministic fake embedder stands in for the model, which is not what these tests are about."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from funes.api.search import RecallRequest
from funes.inference.fake import FakeEmbedder
from funes.ingest import backlog
from funes.model.chunk import Chunk
from funes.retrieval import recall as core
from funes.storage.repo import Repository

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)

LEXICAL = [{"id": "a", "_score": 9.0}, {"id": "b", "_score": 7.0},
           {"id": "deep", "_score": 3.0}, {"id": "tail", "_score": 2.0}]
SEMANTIC = [("v1", 0.80), ("a", 0.70), ("v2", 0.30), ("v3", 0.20)]


def test_the_head_is_scored_as_without_depth() -> None:
    shallow = core.fuse(LEXICAL[:2], SEMANTIC[:2], {"b": 0.40}, head=2)
    deep = core.fuse(LEXICAL, SEMANTIC, {"b": 0.40, "deep": 0.95, "tail": 0.10}, head=2)
    head = ["a", "b", "v1"]
    # Same z-scores for the head: min-max rescaling keeps their order and their ratios of gaps.
    assert sorted(head, key=lambda c: -shallow[c]) == sorted(head, key=lambda c: -deep[c])
    gap = (shallow["a"] - shallow["b"]) / (shallow["a"] - shallow["v1"])
    assert (deep["a"] - deep["b"]) / (deep["a"] - deep["v1"]) == pytest.approx(gap)
    # A passage past BM25's first `candidates` with the best cosine now takes part, and beats
    # the head's weaker passages; one weak on both stays below them.
    assert deep["deep"] > deep["b"] and deep["tail"] < min(deep[c] for c in head)


def test_without_a_head_every_candidate_sets_the_scale() -> None:
    cos = {"b": 0.40, "deep": 0.95, "tail": 0.10}
    assert core.fuse(LEXICAL, SEMANTIC, cos) == core.fuse(LEXICAL, SEMANTIC, cos, head=4)


def chunk(session: str, seq: int, text: str) -> Chunk:
    return Chunk(text=text, harness="claude", session_id=session, turn_id=f"{session}-t{seq}",
                 seq=seq, ts=f"2026-11-{10 + seq:02d}T10:00:00Z", role="user",
                 block_type="text", block_idx=0, split_idx=0)


@pytest.fixture
def memory(tmp_path: Path, settings: Any) -> tuple[Repository, FakeEmbedder]:
    repo = Repository.init(tmp_path / "mem" / ".funes", settings)
    texts = [
        "the cache keeps embeddings on disk",
        "cache eviction runs every hour",
        "embeddings are computed in batches",
        "the disk filled up during the nightly build",
        "restarts are fast with a warm cache on disk",
        "the login page redirects to the dashboard",
        "a flaky test in the parser suite",
        "we pinned the model revision and its hashes",
    ]
    repo.commit_chunks([chunk("s", i, t) for i, t in enumerate(texts)], "seed")
    fake = FakeEmbedder()
    backlog.drain(repo, fake)
    return repo, fake


def test_depth_widens_the_pool_through_real_searches(
    memory: tuple[Repository, FakeEmbedder]
) -> None:
    repo, fake = memory
    opts = core.Options(k=20, candidates=2, neighbors=0, now=NOW, half_life_days=0)
    query = "cache embeddings on disk"
    one = core.retrieve(repo, query, core.with_options(opts, depth=1), embedder=fake)
    two = core.retrieve(repo, query, core.with_options(opts, depth=2), embedder=fake)
    assert {"bm25", "vector"} <= set(one.signals)
    assert one.candidates <= 4 < two.candidates <= 8  # two signals × depth × candidates
    assert {h.id for h in one.hits} < {h.id for h in two.hits}
    assert two.hits[0].row["text"] == "the cache keeps embeddings on disk"


@pytest.mark.parametrize("depth", [0, core.MAX_DEPTH + 1])
def test_depth_out_of_bounds_is_refused(depth: int) -> None:
    with pytest.raises(core.InvalidQueryError, match="depth"):
        core.Options(depth=depth).check()


def test_the_library_request_and_the_pipeline_share_the_default() -> None:
    assert RecallRequest("q").depth == core.Options.depth == 2


def test_fused_scores_are_the_same_bits_in_every_process() -> None:
    """The warm server and the CLI must print the same scores: nothing in the fusion may
    depend on the process's string-hash seed (a set's order once decided a sum's order)."""
    import os
    import subprocess
    import sys

    script = (
        "import random\n"
        "from funes.retrieval.recall import fuse\n"
        "r = random.Random(7)\n"
        "lex = [{'id': f'c{i:03d}', '_score': r.uniform(1, 20)} for i in range(120)]\n"
        "sem = sorted(((f'c{i:03d}', r.uniform(0, 1)) for i in range(60, 200)),\n"
        "             key=lambda x: -x[1])\n"
        "cos = {f'c{i:03d}': r.uniform(0, 1) for i in range(0, 60)}\n"
        "print(repr(sorted(fuse(lex, sem, cos, head=50).items())))\n"
    )
    outs = {
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(outs) == 1
