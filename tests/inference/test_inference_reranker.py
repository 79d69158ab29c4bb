"""The rank-pooling path against a numpy cross-encoder, segment ids included."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from funes.inference.reranker import Reranker, load_reranker

PAIRS = [
    (
        "How many people live in Berlin?",
        "Berlin has a population of 3,520,031 registered "
        "inhabitants in an area of 891.82 square kilometers.",
    ),
    ("How many people live in Berlin?", "New York City is famous for the Metropolitan Museum."),
    (
        "why did we drop the streaming parser",
        "We dropped the streaming parser because partial "
        "JSON lines made the byte offsets unreliable; the buffered reader is simpler.",
    ),
    ("fix flaky test", "def test_retry():\n    assert retry(lambda: 1, attempts=3) == 1"),
    ("数据库迁移", "我们决定使用 SQLite 作为索引，因为它不需要服务器。"),
    ("emoji handling 😀", "The tokenizer maps 😀 to [UNK]; café → cafe."),
    ("", "an empty query still scores"),
    ("empty passage", ""),
]


def _reference_ids(
    tok: Any, query: str, passage: str, max_tokens: int
) -> tuple[list[int], list[int]]:
    q = tok.encode(query, add_special_tokens=False).ids
    p = tok.encode(passage, add_special_tokens=False).ids
    budget = max_tokens - 3
    q = q[: budget - min(len(p), budget // 2)]
    p = p[: budget - len(q)]
    ids = [101, *q, 102, *p, 102]
    types = [0] * (len(q) + 2) + [1] * (len(p) + 1)
    return ids, types


def test_scores_match_the_reference(
    reranker: Reranker, cross_reference: Any, hf_tokenizer: Any
) -> None:
    scores = reranker.score_pairs(PAIRS)
    worst = 0.0
    for (query, passage), got in zip(PAIRS, scores, strict=True):
        ids, types = _reference_ids(hf_tokenizer, query, passage, reranker.max_tokens)
        # the reference tokenizer's own pair encoding agrees with the ids we rebuilt
        if query and passage:
            enc = hf_tokenizer.encode(query, passage)
            assert enc.ids == ids and enc.type_ids == types
        want = cross_reference.rank_score(ids, types)
        worst = max(worst, abs(got - want))
    spread = float(np.std(scores))
    # 1e-3 absolute, and small against how much the scores differ between pairs: llama.cpp's
    # CPU GELU (an f16 table) and f16 flash attention cost ~0.2% of the score scale.
    assert worst <= 1e-3, worst
    assert worst <= 0.01 * spread, (worst, spread)


def test_passage_segment_ids_are_honoured(
    reranker: Reranker, cross_reference: Any, hf_tokenizer: Any
) -> None:
    assert reranker.segment_offset == 30522
    for query, passage in PAIRS[:4]:
        ids, types = _reference_ids(hf_tokenizer, query, passage, reranker.max_tokens)
        right = cross_reference.rank_score(ids, types)
        as_segment_zero = cross_reference.rank_score(ids, [0] * len(ids))
        faithful = reranker.score_ids(reranker.pair_ids(query, passage))
        ignored = reranker.score_ids(reranker.pair_ids(query, passage, segments=False))
        # ignoring segment ids is what plain llama.cpp computes: the reference with all zeros
        assert abs(ignored - as_segment_zero) <= 1e-3
        error = abs(faithful - right)
        assert error <= 1e-3
        # without the remedy the score is off by more than the tolerance, and by far more
        # than the remedied path's own numeric error
        assert abs(ignored - right) > max(1e-3, 10 * error), (query, ignored, right, error)


def test_the_passage_is_truncated_not_the_query(
    reranker: Reranker, cross_reference: Any, hf_tokenizer: Any
) -> None:
    query = "what did we decide about the retry policy for uploads"
    passage = "the upload retry policy was discussed at length " * 80
    ids = reranker.pair_ids(query, passage)
    q_ids = hf_tokenizer.encode(query, add_special_tokens=False).ids
    assert len(ids) == reranker.max_tokens
    assert ids[1 : 1 + len(q_ids)] == q_ids
    assert ids[len(q_ids) + 1] == 102  # [SEP] after the whole query
    assert ids[-1] == 102 + 30522  # the closing [SEP] is last, in segment 1
    ref_ids, types = _reference_ids(hf_tokenizer, query, passage, reranker.max_tokens)
    got = reranker.score(query, [passage])[0]
    assert abs(got - cross_reference.rank_score(ref_ids, types)) <= 1e-3


def test_a_runaway_query_cannot_crowd_out_the_passage(reranker: Reranker) -> None:
    ids = reranker.pair_ids("query words " * 600, "passage words " * 600)
    assert len(ids) == reranker.max_tokens
    sep = ids.index(102)
    budget = reranker.max_tokens - 3
    assert sep - 1 == budget - budget // 2  # the query keeps at most half the room


def test_load_reranker_is_none_without_one(settings: Any) -> None:
    assert load_reranker(settings) is None


def test_load_reranker_finds_an_imported_one(
    settings: Any, rerank_gguf: Path, tmp_path: Path
) -> None:
    from funes.inference.models import import_model

    s = dataclasses.replace(settings, home=tmp_path / "home")
    info = import_model(rerank_gguf, s, name="test-reranker")
    assert info.kind == "rerank" and info.pooling == "rank"
    loaded = load_reranker(s)
    assert loaded is not None
    assert loaded.score("q", ["p"])[0] == pytest.approx(
        Reranker(rerank_gguf).score("q", ["p"])[0], abs=1e-6
    )


def test_an_embedding_model_is_not_a_reranker(embed_gguf: Path) -> None:
    from funes.inference.errors import ModelLoadError

    with pytest.raises(ModelLoadError):
        Reranker(embed_gguf)


def test_recall_reranks_exactly_the_pool_it_is_given(
    settings: Any, repo: Any, rerank_gguf: Path, tmp_path: Path
) -> None:
    """`rerank_pool` bounds the cross-encoder's work; 0 turns it off; nonsense is refused."""
    from funes import api
    from funes.inference.models import import_model
    from funes.retrieval.recall import InvalidQueryError
    from tests.builders import make_batch

    repo.commit_chunks(make_batch(0, 12, text=None), "seed")
    repo.config.set("recall.budget", "0")  # the whole pool, however loaded the machine
    s = dataclasses.replace(settings, home=tmp_path / "home")
    import_model(rerank_gguf, s, name="test-reranker")

    def reranked(**kw: Any) -> list[float | None]:
        result = api.recall(s, repo, "passage topic", k=8, neighbors=0, **kw)
        assert ("rerank" in result.signals) == any(h.rerank is not None for h in result.hits)
        return [h.rerank for h in result.hits]

    assert sum(r is not None for r in reranked(rerank_pool=3)) == 3
    assert sum(r is not None for r in reranked()) == 4  # the default pool
    repo.config.set("recall.rerankPool", "2")
    assert sum(r is not None for r in reranked()) == 2
    assert all(r is None for r in reranked(rerank_pool=0))
    with pytest.raises(InvalidQueryError, match="--rerank-pool"):
        reranked(rerank_pool=-1)


def test_the_rerank_budget_scores_what_fits_in_order_and_says_so(
    settings: Any, repo: Any, rerank_gguf: Path, tmp_path: Path
) -> None:
    """A recall past its deadline keeps fused order for what the cross-encoder did not reach."""
    import time

    from funes import api
    from funes.api.search import Budgeted
    from funes.inference.models import import_model
    from tests.builders import make_batch

    reranker = Reranker(rerank_gguf)
    texts = ["alpha passage", "beta passage", "gamma passage"]
    late = Budgeted(reranker, time.monotonic() - 1)
    assert late.score("q", texts) == [] and (late.asked, late.scored) == (3, 0)
    roomy = Budgeted(reranker, time.monotonic() + 600)
    assert roomy.score("q", texts) == pytest.approx(reranker.score("q", texts), abs=1e-6)
    signals = ["bm25", "rerank"]
    roomy.report(signals)
    assert signals == ["bm25", "rerank"]  # the whole pool: nothing to say

    repo.commit_chunks(make_batch(0, 12, text=None), "seed")
    s = dataclasses.replace(settings, home=tmp_path / "home")
    import_model(rerank_gguf, s, name="test-reranker")
    cut = api.recall(s, repo, "passage topic", k=8, neighbors=0, rerank_pool=3,
                     budget_ms=1e-6)  # over before the first passage starts
    assert "rerank budget: 0/3" in cut.signals and "rerank" not in cut.signals
    assert all(h.rerank is None for h in cut.hits)
    plain = api.recall(s, repo, "passage topic", k=8, neighbors=0, rerank=False)
    assert [h.id for h in cut.hits] == [h.id for h in plain.hits]  # the fused order stands
    whole = api.recall(s, repo, "passage topic", k=8, neighbors=0, rerank_pool=3, budget_ms=0)
    assert "rerank" in whole.signals and not any(x.startswith("rerank budget")
                                                  for x in whole.signals)
    assert sum(h.rerank is not None for h in whole.hits) == 3
