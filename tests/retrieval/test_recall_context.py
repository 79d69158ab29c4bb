"""Recall judged by where a passage sits: neighbours, sessions, the question's time, and the
embedding representation (with its upgrade). Real Lance repositories; the deterministic fake
embedder stands in for the model, which is not what these tests are about."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from funes.inference.fake import FakeEmbedder
from funes.ingest import backlog, represent
from funes.model.chunk import Chunk
from funes.retrieval import recall as core
from funes.retrieval import timeexpr
from funes.retrieval.speaker import speaker_of
from funes.storage.repo import Repository

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def chunk(session: str, seq: int, text: str, *, role: str, ts: str) -> Chunk:
    return Chunk(text=text, harness="claude", session_id=session, turn_id=f"{session}-t{seq}",
                 seq=seq, ts=ts, role=role, block_type="text", block_idx=0, split_idx=0)


@pytest.fixture
def memory(tmp_path: Path, settings: Any) -> Repository:
    repo = Repository.init(tmp_path / "mem" / ".funes", settings)
    chunks = [
        # An old session and a recent one both talk about the cache; only the recent one
        # decided something "last week".
        chunk("old", 0, "Should we cache the embeddings on disk?", role="user",
              ts="2026-06-02T10:00:00Z"),
        chunk("old", 1, "Caching embeddings on disk makes restarts fast.", role="assistant",
              ts="2026-06-02T10:01:00Z"),
        chunk("new", 0, "Should we cache the embeddings on disk?", role="user",
              ts="2026-11-14T10:00:00Z"),
        chunk("new", 1, "Yes: we keep them in a sqlite file next to the memory.",
              role="assistant", ts="2026-11-14T10:01:00Z"),
        chunk("other", 0, "The login page redirects to the dashboard.", role="user",
              ts="2026-11-18T09:00:00Z"),
        chunk("other", 1, "Fixed the redirect loop in the login page.", role="assistant",
              ts="2026-11-18T09:01:00Z"),
    ]
    repo.commit_chunks(chunks, "seed")
    return repo


def texts(result: core.RecallResult) -> list[str]:
    return [h.row["text"] for h in result.hits]


# -- time expressions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("what did we fix yesterday?", "2026-11-19", "2026-11-20"),
        ("the bug from three days ago", "2026-11-16", "2026-11-19"),
        ("what did I buy last saturday", "2026-11-14", "2026-11-15"),
        ("anything about the parser in the past two weeks", "2026-11-06", "2026-11-20"),
        ("the trip in March", "2026-03-01", "2026-04-01"),
        ("the trip in december", "2025-12-01", "2026-01-01"),
        ("what did we decide last month", "2026-10-21", "2026-11-20"),
    ],
)
def test_time_expressions_become_windows(question: str, start: str, end: str) -> None:
    window = timeexpr.parse(question, NOW)
    assert window is not None
    assert window.start.date().isoformat() == start
    assert window.end.date().isoformat() == end


def test_no_time_expression_no_window() -> None:
    assert timeexpr.parse("which database did we pick for the cache", NOW) is None
    assert timeexpr.parse("it may help to cache the embeddings", NOW) is None


def test_closeness_fades_outside_the_window() -> None:
    window = timeexpr.parse("last saturday", NOW)
    assert window is not None
    assert window.closeness(datetime(2026, 11, 14, 15, tzinfo=UTC)) == 1.0
    assert 0.0 < window.closeness(datetime(2026, 11, 15, 12, tzinfo=UTC)) < 1.0
    assert window.closeness(datetime(2026, 6, 1, tzinfo=UTC)) == 0.0


def test_time_in_the_question_boosts_passages_from_then(memory: Repository) -> None:
    query = "what did we decide about caching the embeddings last saturday"
    plain = core.retrieve(memory, query, core.Options(k=6, neighbors=0, now=NOW, time_hints=False,
                                                    half_life_days=0))
    timed = core.retrieve(memory, query, core.Options(k=6, neighbors=0, now=NOW, time_hints=True,
                                                    half_life_days=0))
    assert "time" in timed.signals and "time" not in plain.signals
    assert timed.hits[0].row["session_id"] == "new"
    # A boost, not a filter: the old session is still recalled.
    assert "old" in {h.row["session_id"] for h in timed.hits}


# -- neighbours and sessions ----------------------------------------------------------------


def rows_of(spec: dict[str, tuple[str, int]]) -> dict[str, dict[str, Any]]:
    return {cid: {"session_id": s, "seq": seq, "text": cid} for cid, (s, seq) in spec.items()}


def test_a_session_with_several_good_passages_beats_a_lone_match() -> None:
    rows = rows_of({"a1": ("A", 1), "a2": ("A", 5), "a3": ("A", 9), "b1": ("B", 1)})
    base = {"b1": 1.0, "a1": 0.9, "a2": 0.8, "a3": 0.8}
    out = core.with_context(base, rows)
    assert out["a1"] > out["b1"]
    assert max(out.values()) == pytest.approx(1.0)


def test_an_answer_borrows_from_the_question_before_it() -> None:
    rows = rows_of({"q": ("A", 1), "ans": ("A", 2), "far": ("B", 7), "x": ("C", 3)})
    base = {"q": 1.0, "far": 0.5, "ans": 0.5, "x": 0.2}
    out = core.with_context(base, rows)
    assert out["ans"] > out["far"]


def hit(cid: str, session: str, score: float) -> core.Hit:
    return core.Hit({"id": cid, "session_id": session, "text": cid}, score)


def test_one_long_session_does_not_crowd_out_the_rest() -> None:
    hits = [hit(f"a{i}", "A", 1.0 - i * 0.01) for i in range(5)] + [hit("b", "B", 0.9)]
    plain = core._select(hits, 3, 1.0)
    diverse = core._select(hits, 3, core.SESSION_REPEAT)
    assert [h.id for h in plain] == ["a0", "a1", "a2"]
    assert "b" in [h.id for h in diverse] and diverse[0].id == "a0"


def test_context_is_off_unless_asked_for(memory: Repository) -> None:
    off = core.retrieve(memory, "login redirect", core.Options(k=3, neighbors=0, now=NOW))
    on = core.retrieve(memory, "login redirect", core.Options(k=3, neighbors=0, now=NOW,
                                                            context=True))
    assert "context" in on.signals and "context" not in off.signals


# -- representation and its upgrade ---------------------------------------------------------


def test_representation_two_embeds_a_header(memory: Repository) -> None:
    ids = {h.row["turn_id"]: h.id for h in core.retrieve(
        memory, "sqlite file", core.Options(k=6, neighbors=0, now=NOW)).hits}
    got = represent.embed_texts(memory, [ids["new-t1"]], 2)[ids["new-t1"]]
    header, _, text = got.partition("\n")
    assert text == "Yes: we keep them in a sqlite file next to the memory."
    assert header.startswith("2026-11-14")
    assert "answering: Should we cache the embeddings on disk?" in header
    assert represent.embed_texts(memory, [ids["new-t1"]], 1)[ids["new-t1"]] == text


def test_upgrade_keeps_answering_and_never_mixes_vectors(memory: Repository) -> None:
    fake = FakeEmbedder()
    first = backlog.drain(memory, fake)
    assert first.embedded == 6 and backlog.backlog(memory).waiting == 0
    opts = core.Options(k=3, neighbors=0, now=NOW)
    before = core.retrieve(memory, "login page redirect", opts, embedder=fake)
    assert "vector" in before.signals

    memory.config.set("index.representation", "2")
    assert backlog.backlog(memory).waiting == 6  # every chunk waits for its new vector
    during = core.retrieve(memory, "login page redirect", opts, embedder=fake)
    assert during.hits and "bm25" in during.signals  # still answers, through BM25
    qvec = fake.embed_query("login page redirect")
    assert core.vector_search(memory, qvec, opts, None) == []  # old vectors are not used

    step = backlog.drain(memory, fake, limit=2)
    assert step.embedded == 2 and step.remaining == 4
    found = {cid for cid, _ in core.vector_search(memory, qvec, opts, None)}
    assert len(found) == 2  # only the upgraded chunks take part through vectors
    backlog.drain(memory, fake)
    assert backlog.backlog(memory).waiting == 0
    labels = set(memory.vectors.dataset().to_table(columns=["model"]).column("model").to_pylist())
    assert labels == {fake.info.name, f"{fake.info.name}+ctx2"}  # type: ignore[union-attr]
    after = core.retrieve(memory, "login page redirect", opts, embedder=fake)
    assert after.hits[0].row["session_id"] == "other"


# -- whose words the question is about --------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "who"),
    [
        ("what did I decide about the cache?", "user"),
        ("How long is my daily commute?", "user"),
        ("I'm sure I said which port the server uses", "user"),
        ("which flag did you suggest for the build?", "assistant"),
        ("what was your advice on the parser", "assistant"),
        ("can you recommend a hotel for my trip?", None),
        ("how did we fix the flaky test", None),
        ("redis cache eviction", None),
    ],
)
def test_the_question_names_whose_words_answer_it(question: str, who: str | None) -> None:
    assert speaker_of(question) == who


@pytest.fixture
def chatty(tmp_path: Path, settings: Any) -> Repository:
    """A user states a fact once; a long assistant reply repeats the topic's words."""
    repo = Repository.init(tmp_path / "chatty" / ".funes", settings)
    reply = ("A long daily commute passes faster with a podcast, and a commute log shows how "
             "long it takes.")
    fact = "My daily commute is long: 45 minutes each way, so I listen to audiobooks."
    repo.commit_chunks([
        chunk("s1", 0, fact, role="user", ts="2026-11-10T08:00:00Z"),
        chunk("s2", 1, reply, role="assistant", ts="2026-11-10T08:01:00Z"),
        chunk("s3", 0, "Which language should the build scripts use?", role="user",
              ts="2026-11-11T08:00:00Z"),
    ], "seed")
    return repo


def test_a_question_about_oneself_prefers_ones_own_words(chatty: Repository) -> None:
    query = "how long is my daily commute"
    opts = core.Options(k=3, neighbors=0, now=NOW, half_life_days=0, vector=False)
    plain = core.retrieve(chatty, query, core.with_options(opts, speaker=False))
    # Without the prior the reply's repeated words win (the premise of the test) ...
    assert plain.hits[0].row["role"] == "assistant"
    mine = core.retrieve(chatty, query, opts)
    # ... with it, the user's own sentence holding the fact leads, and the reply stays recalled.
    assert "speaker" in mine.signals and "speaker" not in plain.signals
    assert mine.hits[0].row["session_id"] == "s1"
    assert "s2" in {h.row["session_id"] for h in mine.hits}


def test_a_question_to_the_assistant_prefers_its_words(chatty: Repository) -> None:
    query = "what did you say about my daily commute"  # both persons: nobody is favoured
    opts = core.Options(k=3, neighbors=0, now=NOW, half_life_days=0, vector=False)
    assert "speaker" not in core.retrieve(chatty, query, opts).signals
    asked = core.retrieve(chatty, "what did you say about the daily commute", opts)
    assert "speaker" in asked.signals
    assert asked.hits[0].row["role"] == "assistant"
