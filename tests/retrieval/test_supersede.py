"""Supersession at read time (funes.retrieval.supersede) on real Lance memories.

A decision, then weeks later its amendment, among other passages of the same project: the
decision carries `revisited later` pointing at the amendment, the amendment ranks above it,
`--as-of` before the amendment reads the memory as it stood then, and the line is part of the
agent format.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.model.chunk import Chunk
from funes.retrieval import supersede as sup
from funes.storage.repo import Repository

NOW = datetime(2026, 11, 1, tzinfo=UTC)
PROJECT = "github.com/acme/crm"


def chunk(session: str, seq: int, text: str, ts: str, *, project: str = PROJECT,
          role: str = "assistant") -> Chunk:
    return Chunk(text=text, harness="claude", session_id=session, turn_id=f"{session}-t{seq}",
                 seq=seq, ts=ts, role=role, block_type="text", block_idx=0, split_idx=0,
                 workdir="/src/crm", project=project)


#: The decision matches the question's words best; the amendment revisits it a month later.
DECISION = chunk("s-decide", 3, "Settled: merge_records keys duplicate contacts on the lowercased "
                 "email and calendar day, and on a collision keeps the latest updated record.",
                 "2026-09-01T10:00:00Z")
AMENDMENT = chunk("s-amend", 5, "Amended merge_records rule, superseding keep-latest: the "
                  "lowercased email and calendar day stay the key; on a collision the most "
                  "filled record wins, ties keep the CRM side.", "2026-10-02T10:00:00Z")
OTHERS = [
    chunk("s-other", 1, "The nightly export now writes CSV with CRLF line endings.",
          "2026-09-10T10:00:00Z"),
    chunk("s-other", 2, "Retry the upstream call on 429 with exponential backoff.",
          "2026-09-11T10:00:00Z"),
    chunk("s-elsewhere", 1, "In the billing project merge_records keeps duplicate invoices "
          "by invoice number, latest updated first.", "2026-10-20T10:00:00Z",
          project="github.com/acme/billing"),
]
QUERY = "merge_records duplicate contacts collision latest updated"


@pytest.fixture
def crm(tmp_path: Path, settings: Any) -> Repository:
    repo = Repository.init(tmp_path / "crm" / ".funes", settings)
    repo.commit_chunks([DECISION, AMENDMENT, *OTHERS], "seed")
    return repo


def texts(result: api.RecallResult) -> list[str]:
    return [h.row["text"] for h in result.hits]


def test_the_amendment_ranks_above_the_decision_it_revisits(settings: Any,
                                                             crm: Repository) -> None:
    off = api.recall(settings, crm, QUERY, k=4, now=NOW, supersede=False)
    assert texts(off).index(DECISION.text) < texts(off).index(AMENDMENT.text)
    assert all(h.revisited is None for h in off.hits)
    on = api.recall(settings, crm, QUERY, k=4, now=NOW)
    order = texts(on)
    assert order.index(AMENDMENT.text) == order.index(DECISION.text) - 1  # just above it
    decision = on.hits[order.index(DECISION.text)]
    assert decision.revisited is not None
    assert (decision.revisited["session_id"], decision.revisited["turn_id"]) == (
        AMENDMENT.session_id, AMENDMENT.turn_id)
    assert "supersede" in on.signals
    # another project's later passage on the same words is not a revisit of this one
    assert on.hits[order.index(OTHERS[2].text)].revisited is None


def test_as_of_reads_the_memory_as_it_stood_then(settings: Any, crm: Repository) -> None:
    then = api.recall(settings, crm, QUERY, k=4, as_of="2026-09-20")
    assert AMENDMENT.text not in texts(then) and OTHERS[2].text not in texts(then)
    assert texts(then)[0] == DECISION.text and then.hits[0].revisited is None
    later = api.recall(settings, crm, QUERY, k=4, as_of="2026-10-05")
    assert texts(later)[0] == AMENDMENT.text


def test_as_of_narrows_until_never_widens_it(settings: Any, crm: Repository) -> None:
    both = api.recall(settings, crm, QUERY, k=4, as_of="2026-10-25", until="2026-09-05")
    assert texts(both) == [DECISION.text]


def test_revisited_later_in_the_agent_and_json_formats(settings: Any, crm: Repository) -> None:
    result = api.recall(settings, crm, QUERY, k=4, now=NOW, neighbors=0)
    text = api.recall_text(result, "crm", True)
    expected = f"  revisited later: funes get {AMENDMENT.session_id} {AMENDMENT.turn_id} " \
               "--memory crm"
    block = text.split("---")[texts(result).index(DECISION.text)].strip("\n").splitlines()
    assert block[1].startswith("  → funes get s-decide") and block[2] == expected
    assert text.count("revisited later") == 1
    out = json.loads(api.recall_output("json", result, "crm", True))
    marked = [h for h in out["hits"] if h["revisited_later"]]
    assert [h["session_id"] for h in marked] == ["s-decide"]
    assert marked[0]["revisited_later"] == {
        "session_id": "s-amend", "turn_id": "s-amend-t5", "ts": AMENDMENT.ts,
        "get": "funes get s-amend s-amend-t5 --memory crm"}


def test_cli_as_of_and_a_bad_value(run: Any, crm: Repository) -> None:
    memory = str(crm.path)
    ok = run("--format", "json", "recall", QUERY, "--as-of", "2026-09-20", "--memory", memory)
    assert ok.exit_code == 0, ok.stderr
    assert AMENDMENT.text not in ok.stdout and DECISION.text in ok.stdout
    bad = run("recall", QUERY, "--as-of", "last tuesday", "--memory", memory)
    assert bad.exit_code == 2 and "--as-of" in bad.stderr


class _Hit:
    def __init__(self, cid: str, score: float, day: int, text: str, place: str = "p",
                 session: str | None = None) -> None:
        self.row = {"id": cid, "text": text, "project": place, "session_id": session or cid,
                    "time": datetime(2026, 1, day, tzinfo=UTC), "turn_id": cid}
        self.score = score
        self.revisited: dict[str, Any] | None = None


def _no_vectors(ids: Any) -> Any:
    return lambda a, b: None


WORDS = "parser streaming buffer records memory leak line reader"


def test_a_later_passage_outside_the_head_lifts_nothing() -> None:
    filler = [_Hit(f"f{i}", 0.99 - i / 100, 3, f"unrelated filler {i}") for i in range(11)]
    hits = [_Hit("old", 1.0, 1, WORDS), *filler, _Hit("new", 0.85, 9, WORDS)]
    assert sup.supersede(hits, "parser", _no_vectors) == 0  # 13th: outside the head
    assert hits[0].row["id"] == "old" and hits[-1].row["id"] == "new"
    del hits[5]
    assert sup.supersede(hits, "parser", _no_vectors) == 1
    assert [h.row["id"] for h in hits[:2]] == ["new", "old"]


def test_a_revisit_that_answers_clearly_worse_is_pointed_at_not_lifted() -> None:
    hits = [_Hit("old", 1.0, 1, WORDS), _Hit("mid", 0.7, 3, "unrelated"),
            _Hit("new", 0.5, 9, WORDS)]
    assert sup.LIFT > 0.5
    assert sup.supersede(hits, "parser", _no_vectors) == 1
    assert [h.row["id"] for h in hits] == ["old", "mid", "new"]
    assert hits[0].revisited is not None and hits[0].revisited["id"] == "new"


def test_an_unrelated_or_earlier_passage_is_no_revisit() -> None:
    hits = [_Hit("a", 1.0, 5, "streaming parser buffers records leak"),
            _Hit("b", 0.9, 9, "weather widget celsius fahrenheit setting"),
            _Hit("c", 0.8, 2, "streaming parser buffers records leak"),
            _Hit("d", 0.7, 3, "release notes mention nothing relevant at all")]
    assert sup.supersede(hits, "parser", _no_vectors) == 1
    marks = {h.row["id"]: h.revisited and h.revisited["id"] for h in hits}
    assert marks == {"a": None, "b": None, "c": "a", "d": None}  # only the earlier is marked
    assert [h.row["id"] for h in hits] == ["a", "b", "c", "d"]  # already above it: no move


def test_another_place_is_no_revisit() -> None:
    hits = [_Hit("a", 1.0, 5, "streaming parser buffers records leak"),
            _Hit("b", 0.9, 9, "streaming parser buffers records leak", place="elsewhere")]
    assert sup.supersede(hits, "parser", lambda ids: lambda x, y: 0.99) == 0


def test_with_vectors_both_the_cosine_and_the_words_must_agree() -> None:
    def run(text_b: str, cos: float) -> int:
        hits = [_Hit("a", 1.0, 5, WORDS), _Hit("b", 0.9, 9, text_b)]
        return sup.supersede(hits, "q", lambda ids: lambda x, y: cos)
    assert run(WORDS, 0.9) == 1
    assert run(WORDS, 0.3) == 0  # the same words about something else
    assert run("weather widget celsius fahrenheit", 0.9) == 0  # close vectors, no shared word


def test_sessions_are_linked_by_any_close_pair_and_the_newest_wins() -> None:
    # the hit (a question) shares nothing with the amendments; the decision summary of its
    # session does: the sessions are about the same thing
    near = {frozenset(("summary", "amend")): 0.8, frozenset(("summary", "amend2")): 0.7}
    rule = "merge_records keeps the fullest record on collision"
    hits = [_Hit("ask", 1.0, 1, "why do contacts repeat", session="A"),
            _Hit("amend", 0.9, 9, rule + " amended", session="B"),
            _Hit("summary", 0.85, 1, rule, session="A"),
            _Hit("amend2", 0.8, 20, rule + " again", session="C"),
            # the rest of the candidates: what makes the rule's words rare among them
            *(_Hit(f"f{i}", 0.1, 2, f"filler number {i}", session=f"F{i}") for i in range(12))]
    cos = lambda ids: lambda x, y: near.get(frozenset((x, y)), 0.1)  # noqa: E731
    assert sup.supersede(hits, "q", cos) == 2
    order = [h.row["id"] for h in hits[:4]]
    assert order == ["amend2", "amend", "ask", "summary"]  # newest first, then B, then A
    # B and C share no close pair of vectors: C does not revisit B
    marks = {h.row["id"]: h.revisited and h.revisited["id"] for h in hits[:4]}
    assert marks == {"ask": "amend2", "summary": "amend2", "amend": None, "amend2": None}


def test_nothing_said_after_now_revisits_anything() -> None:
    hits = [_Hit("old", 1.0, 1, WORDS), _Hit("new", 0.9, 9, WORDS)]
    assert sup.supersede(hits, "parser", _no_vectors, datetime(2026, 1, 5, tzinfo=UTC)) == 0
    assert hits[0].row["id"] == "old" and hits[0].revisited is None
    assert sup.supersede(hits, "parser", _no_vectors, datetime(2026, 1, 9, tzinfo=UTC)) == 1


# Day zero: no vector yet. Several sessions of one person's history talk about the same topic
# (the words the question found them by, and the topic's own: collection, shelf, lens); only
# a later session sharing words no other candidate session uses revisits the first.
TOPIC = "collection shelf lens film collectors"


def _topic_history(later: str) -> list[_Hit]:
    return [
        _Hit("gold", 1.0, 1, f"three months into my {TOPIC}: silica gel packets in a humidity "
             "cabinet keep the bellows from cracking", session="G"),
        _Hit("later", 0.95, 9, later, session="L"),
        *(_Hit(f"t{i}", 0.9 - i / 100, 2 + i, f"{TOPIC} {brand}", session=f"T{i}")
          for i, brand in enumerate(("nikon", "pentax", "canon"))),
        *(_Hit(f"f{i}", 0.5, 2, f"filler number {i}", session=f"F{i}") for i in range(30)),
    ]


def test_without_vectors_a_later_session_on_the_same_topic_is_no_revisit() -> None:
    hits = _topic_history(f"the history of Leica: {TOPIC} prize the early models")
    assert sup.supersede(hits, "vintage cameras", _no_vectors) == 0
    assert hits[0].row["id"] == "gold" and hits[0].revisited is None


def test_without_vectors_words_only_the_two_sessions_use_link_them() -> None:
    hits = _topic_history(f"the humidity cabinet and silica gel packets did not save the "
                          f"bellows: cracked after all, {TOPIC}")
    assert sup.supersede(hits, "vintage cameras", _no_vectors) == 1
    assert [h.row["id"] for h in hits[:2]] == ["later", "gold"]
    assert hits[1].revisited is not None and hits[1].revisited["id"] == "later"
    # the same words used by more sessions than the two and one more are the topic's
    crowd = [_Hit(f"c{i}", 0.6, 3, "silica gel packets in a humidity cabinet", session=f"C{i}")
             for i in range(2)]
    hits = _topic_history(f"the humidity cabinet and silica gel packets did not save the "
                          f"bellows: cracked after all, {TOPIC}") + crowd
    assert sup.PRIVATE == 3
    assert sup.supersede(hits, "vintage cameras", _no_vectors) == 0


def test_an_unembedded_memory_lifts_the_amendment_not_a_later_chat_on_the_topic(
        settings: Any, tmp_path: Path) -> None:
    chat = [chunk(f"s-topic{i}", 1, "Duplicate contacts again after the sync: the contact "
                  f"list shows people twice, cleanup script number {i} for the CRM sync.",
                  f"2026-10-{10 + i:02d}T10:00:00Z") for i in range(4)]
    repo = Repository.init(tmp_path / "crm" / ".funes", settings)
    repo.commit_chunks([DECISION, AMENDMENT, *OTHERS, *chat], "seed")
    assert not repo.vectors.exists()  # the backlog: words only
    on = api.recall(settings, repo, QUERY + " contact list sync", k=8, now=NOW)
    order = texts(on)
    assert order.index(AMENDMENT.text) < order.index(DECISION.text)
    decision = on.hits[order.index(DECISION.text)]
    assert decision.revisited is not None and decision.revisited["session_id"] == "s-amend"
    assert all(on.hits[order.index(c.text)].revisited is None for c in chat if c.text in order)
