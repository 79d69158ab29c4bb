"""Reranking is skipped when the fused head is already decided (funes.retrieval.margin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from funes.inference.fake import FakeEmbedder, FakeReranker
from funes.model.chunk import Chunk
from funes.retrieval import margin
from funes.retrieval import recall as rr
from funes.storage.repo import Repository


def _chunk(i: int, text: str) -> Chunk:
    return Chunk(text=text, harness="claude", session_id=f"s{i}", turn_id=f"s{i}-t0", seq=0,
                 ts=f"2026-10-{i + 1:02d}T10:00:00Z", role="assistant", block_type="text",
                 block_idx=0, split_idx=0, workdir="/src/app", project="github.com/acme/app")


#: Passages about the scheduler, one of which names the deadlock (a rare word), and the same
#: note about a flaky upload in two sessions (a head two passages share).
TEXTS = [
    "The scheduler deadlock came from holding the queue lock while waiting on the pool.",
    *(f"Note {i}: the scheduler loop ran job {i} and the scheduler logged it." for i in range(11)),
    "Retried the flaky upload twice before it passed.",
    "Retried the flaky upload twice before it passed.",
]


@pytest.fixture
def memory(tmp_path: Path, settings) -> Repository:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / "mem" / ".funes", settings)
    repo.commit_chunks([_chunk(i, t) for i, t in enumerate(TEXTS)], "seed")
    return repo


def _recall(repo: Repository, query: str, reranker: FakeReranker) -> rr.RecallResult:
    return rr.retrieve(repo, query, rr.Options(k=5, neighbors=0, half_life_days=0),
                     reranker=reranker)


def test_a_clear_margin_skips_the_reranker_and_says_so(memory: Repository) -> None:
    fake = FakeReranker()
    result = _recall(memory, "scheduler deadlock", fake)
    assert fake.calls == 0
    assert margin.RERANK_SKIPPED in result.signals and "rerank" not in result.signals
    assert result.hits[0].row["text"] == TEXTS[0]  # the fused head stands
    assert result.hits[0].rerank is None


def test_a_close_head_is_reranked(memory: Repository) -> None:
    fake = FakeReranker()
    result = _recall(memory, "scheduler loop", fake)
    assert fake.calls == rr.Options().rerank_pool
    assert "rerank" in result.signals and margin.RERANK_SKIPPED not in result.signals
    assert sum(h.rerank is not None for h in result.hits) == rr.Options().rerank_pool


def test_the_margin_is_a_share_of_the_pools_spread() -> None:
    pool = [f"c{i}" for i in range(margin.MARGIN_MIN_POOL)]
    spread = {c: 1.0 - 0.05 * i for i, c in enumerate(pool)}  # best 1.0, worst 0.55
    assert margin.head_margin(pool, spread) == pytest.approx(0.05 / 0.45)
    assert not margin.head_decided(pool, spread)
    lead = {**spread, "c0": 1.0 + margin.RERANK_MARGIN * 0.45 / (1 - margin.RERANK_MARGIN)}
    assert margin.head_decided(pool, lead)
    # Scaling every score alike (one signal's or two's scale) does not change the decision.
    assert margin.head_decided(pool, {c: 3 * s for c, s in lead.items()})
    # Too few candidates, or all equal: nothing is measured and the reranker runs.
    assert margin.head_margin(pool[:-1], lead) is None
    assert margin.head_margin(pool, dict.fromkeys(pool, 0.7)) is None


def test_with_both_signals_the_same_margin_decides(memory: Repository) -> None:
    from funes.ingest import backlog

    embedder = FakeEmbedder()
    backlog.drain(memory, embedder)
    calls = {}
    for query in ("scheduler deadlock", "flaky upload retried"):
        fake = FakeReranker()
        result = rr.retrieve(memory, query, rr.Options(k=5, neighbors=0), embedder=embedder,
                           reranker=fake)
        assert "vector" in result.signals
        calls[query] = fake.calls
    assert calls == {"scheduler deadlock": 0, "flaky upload retried": rr.Options().rerank_pool}


class _Loader:
    """Counts loads of a fake reranker, each taking `delay` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.loads = 0
        self.reranker = FakeReranker()

    def __call__(self) -> FakeReranker:
        import time

        time.sleep(self.delay)
        self.loads += 1
        return self.reranker


def test_a_decided_head_never_loads_the_reranker(memory: Repository) -> None:
    from funes.api.search import Deferred

    loader = _Loader()
    clear = _recall(memory, "scheduler deadlock", Deferred(loader))  # type: ignore[arg-type]
    assert loader.loads == 0 and margin.RERANK_SKIPPED in clear.signals
    close = _recall(memory, "scheduler loop", Deferred(loader))  # type: ignore[arg-type]
    assert loader.loads == 1 and "rerank" in close.signals
    assert loader.reranker.calls == rr.Options().rerank_pool


def test_loading_the_reranker_does_not_count_against_the_budget() -> None:
    import time

    from funes.api.search import Budgeted, Deferred

    texts = ["alpha passage", "beta passage", "gamma passage"]
    late = _Loader()
    spent = Budgeted(Deferred(late), time.monotonic() - 1)  # type: ignore[arg-type]
    assert spent.score("passage", texts) == [] and late.loads == 0  # over: nothing loaded
    slow = _Loader(delay=1.5)
    timed = Budgeted(Deferred(slow), time.monotonic() + 1.0)  # type: ignore[arg-type]
    assert len(timed.score("passage", texts)) == 3 and slow.loads == 1


def test_the_first_passage_starts_only_if_the_last_ones_cost_fits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from funes.api.search import Budgeted

    texts = ["alpha passage", "beta passage"]
    monkeypatch.setattr(Budgeted, "passage_cost", 5.0)  # the last passage took 5 s
    fake = FakeReranker()
    tight = Budgeted(fake, time.monotonic() + 1.0)  # type: ignore[arg-type]
    assert tight.score("passage", texts) == [] and fake.calls == 0
    assert Budgeted.passage_cost == 2.5  # halved: the estimate alone said no
    roomy = Budgeted(fake, time.monotonic() + 60.0)  # type: ignore[arg-type]
    assert len(roomy.score("passage", texts)) == 2
    assert Budgeted.passage_cost < 1.0  # what a fake passage really takes


def test_reranking_leaves_room_for_what_the_recall_does_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    from funes.api.search import MAX_TAIL_S, Budgeted

    monkeypatch.setattr(Budgeted, "passage_cost", 0.0)
    monkeypatch.setattr(Budgeted, "tail_cost", 0.0)
    fake = FakeReranker()
    first = Budgeted(fake, time.monotonic() + 60.0)  # type: ignore[arg-type]
    assert len(first.score("passage", ["alpha passage"])) == 1
    time.sleep(0.05)  # the recall's work after reranking
    first.finish()
    assert 0.05 <= Budgeted.tail_cost <= MAX_TAIL_S
    # A deadline that one passage fits but not passage + tail: nothing is started.
    tight = Budgeted(fake, time.monotonic() + 0.03)  # type: ignore[arg-type]
    assert tight.score("passage", ["alpha passage"]) == []
    monkeypatch.setattr(Budgeted, "tail_cost", 5.0)
    later = Budgeted(fake, time.monotonic() - 1)  # type: ignore[arg-type]
    later.score("passage", [])
    later.finish()
    assert Budgeted.tail_cost <= MAX_TAIL_S  # one slow tail cannot block reranking for good
