"""docs/design.md §1 flow 2 end to end, with chunks from the real ingest path and recall by BM25.

Two repositories stand for two machines; both kinds of remote.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from funes import api
from funes.remotes.base import NonFastForwardError
from funes.storage.repo import Repository
from tests.conftest import FIXTURES, needs_shared
from tests.remotes.conftest import World, visible

TRACES = FIXTURES / "traces"
A_SESSION = TRACES / "claude" / "marot__spotter__tool_heavy.jsonl"
A_LATER = TRACES / "claude" / "huggingface__funes__claude_session.jsonl"
B_SESSION = TRACES / "codex" / "huggingface__funes__codex_session.jsonl"

pytestmark = needs_shared


def _index(world: World, repo: Repository, path: object) -> None:
    summary = api.index(world.settings, memory=str(repo.path), paths=[str(path)])
    assert summary.errors == [] and summary.added > 0


def _rare_word(repo: Repository, sessions: set[str], others: Repository) -> tuple[str, str]:
    """A word that occurs in `sessions` of `repo` and nowhere in `others` (a BM25 probe)."""
    theirs = " ".join(
        r["text"] for r in visible(others).values() if r["session_id"] not in sessions
    )
    counts: Counter[tuple[str, str]] = Counter()
    for row in visible(repo).values():
        if row["session_id"] in sessions:
            for word in set(re.findall(r"[A-Za-z]{9,}", row["text"])):
                if word.lower() not in theirs.lower():
                    counts[(word, row["session_id"])] += 1
    assert counts, "no distinctive word in the fixture"
    (word, session), _ = min(counts.items(), key=lambda item: (item[1], item[0]))
    return word, session


def _recall_sessions(world: World, repo: Repository, query: str) -> set[str]:
    result = api.recall(world.settings, repo, query, vector=False, rerank=False, k=5)
    return {hit.row["session_id"] for hit in result.hits}


def test_flow_2_across_machines(world: World) -> None:
    # Machine A: remote add, index, push.
    a = world.machine("a")
    _index(world, a, A_SESSION)
    api.push(a)

    # Machine B: clone; A's passages are there without re-embedding; B indexes its own.
    b = world.clone("b")
    assert visible(b) == visible(a)
    a_sessions = {r["session_id"] for r in visible(a).values()}
    word, session = _rare_word(a, a_sessions, b)
    assert session in _recall_sessions(world, b, word)
    row = next(r for r in visible(b).values() if word in r["text"])
    turns = api.get(b, row["session_id"], row["turn_id"])
    assert turns and any(word in str(t) for t in turns)
    _index(world, b, B_SESSION)

    # A indexes more and pushes first; B's push is refused ("fetch first", exit 4).
    _index(world, a, A_LATER)
    api.push(a)
    with pytest.raises(NonFastForwardError) as refused:
        api.push(b)
    assert refused.value.exit_code == 4

    # B pulls (a merge commit: the union), pushes; A pulls and finds B's passages.
    merged = api.pull(b).merge
    assert merged.kind == "merge" and merged.chunk_count == len(visible(b))
    api.push(b)
    assert api.pull(a).merge.kind == "fast-forward"
    assert set(visible(a)) == set(visible(b))
    b_sessions = {r["session_id"] for r in visible(b).values() if r["harness"] == "codex"}
    word_b, session_b = _rare_word(a, b_sessions, a)
    assert session_b in _recall_sessions(world, a, word_b)

    assert api.fsck(a).ok and api.fsck(b).ok
