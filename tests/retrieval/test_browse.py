"""The browsing verbs on real Lance tables: sessions, get by range, scan, sketch."""

from __future__ import annotations

from typing import Any

import pytest

from funes import api
from funes.api import browse
from funes.api.security import forget
from funes.errors import UsageError
from funes.ingest.chunking import split_text, stitch_texts
from funes.model.chunk import Chunk
from funes.retrieval import browse as rbrowse
from funes.retrieval import sketch as rsketch
from funes.storage.repo import Repository


def _chunk(session: str, seq: int, text: str, *, role: str = "user", day: int = 1,
           block_type: str = "text", harness: str = "claude", noise: str | None = None,
           split: int = 0, block: int = 0, project: str = "github.com/acme/app",
           tool: str | None = None) -> Chunk:
    return Chunk(text=text, harness=harness, session_id=session, turn_id=f"{session}-t{seq}",
                 seq=seq, ts=f"2026-03-{day:02d}T10:{seq % 60:02d}:00Z", role=role,
                 block_type=block_type, block_idx=block, split_idx=split, tool_name=tool,
                 workdir="/src/app", project=project, noise=noise)


@pytest.fixture
def memory(repo: Repository) -> Repository:
    """Three sessions on three days, one of another project, one with scaffolding first."""
    repo.commit_chunks([
        _chunk("old", 0, "Set up the CI pipeline for the parser, please.", day=1),
        _chunk("old", 1, "Done: the workflow runs pytest on every push.", role="assistant",
               day=1),
        _chunk("mid", 0, "<system-reminder>be brief</system-reminder>", day=2, noise="meta"),
        _chunk("mid", 1, "Why does the Parser drop the last line?", day=2),
        _chunk("mid", 2, "It never flushes its buffer at EOF; fixed with a final flush.",
               role="assistant", day=2),
        _chunk("mid", 3, "[tool_result Bash] 3 passed", day=2, role="tool",
               block_type="tool_result", tool="Bash"),
        _chunk("new", 0, "Rename the project to Quill.", day=3, harness="codex",
               project="github.com/acme/other"),
    ], "seed")
    return repo


def test_sessions_are_listed_newest_first_with_what_happened(memory: Repository) -> None:
    page = browse.sessions(memory)
    assert [s.session_id for s in page.sessions] == ["new", "mid", "old"]
    mid = page.sessions[1]
    assert (mid.harness, mid.turns, mid.first_seq, mid.last_seq) == ("claude", 4, 0, 3)
    # The opening request is the user's first own words, not the injected reminder.
    assert mid.opening == "Why does the Parser drop the last line?"
    assert mid.start == "2026-03-02T10:00:00Z" and mid.end == "2026-03-02T10:03:00Z"
    assert page.total == 3 and page.next_offset is None and page.trusted


def test_sessions_filter_and_page(memory: Repository) -> None:
    assert [s.session_id for s in browse.sessions(memory, harness=["codex"]).sessions] == ["new"]
    assert [s.session_id for s in browse.sessions(
        memory, project=["github.com/acme/app"]).sessions] == ["mid", "old"]
    assert [s.session_id for s in browse.sessions(memory, project=["/src"]).sessions] == \
        ["new", "mid", "old"]  # a directory above the working directory
    window = browse.sessions(memory, since="2026-03-02", until="2026-03-03")
    assert [s.session_id for s in window.sessions] == ["mid"]
    first = browse.sessions(memory, limit=2)
    assert [s.session_id for s in first.sessions] == ["new", "mid"] and first.next_offset == 2
    rest = browse.sessions(memory, limit=2, offset=first.next_offset)
    assert [s.session_id for s in rest.sessions] == ["old"] and rest.next_offset is None
    with pytest.raises(UsageError):
        browse.sessions(memory, limit=0)


def test_a_forgotten_session_is_not_listed_and_counts_drop(memory: Repository) -> None:
    forget(memory, session="old")
    assert [s.session_id for s in browse.sessions(memory).sessions] == ["new", "mid"]
    gone = [c for c in memory.chunks.dataset().to_table().to_pylist()
            if c["session_id"] == "mid" and c["seq"] == 3]
    forget(memory, chunk=gone[0]["id"])
    assert browse.sessions(memory).sessions[1].turns == 3


def test_get_by_range_pages_through_a_session(memory: Repository) -> None:
    page = browse.get_range(memory, "mid", 1, 2)
    assert [t.seq for t in page.turns] == [1, 2] and page.next_seq is None
    tail = browse.get_range(memory, "mid", -2)
    assert [t.seq for t in tail.turns] == [2, 3]
    memory.commit_chunks([_chunk("five", i, f"{i}" * 100) for i in range(5)], "more")
    small = browse.get_range(memory, "five", max_chars=250)
    assert [t.seq for t in small.turns] == [0, 1] and small.next_seq == 2
    again = browse.get_range(memory, "five", small.next_seq, 3, max_chars=250)
    assert [t.seq for t in again.turns] == [2, 3] and again.next_seq is None
    with pytest.raises(browse.SessionNotFoundError):
        browse.get_range(memory, "nope")
    with pytest.raises(UsageError):
        browse.get_range(memory, "mid", 3, 1)


def test_a_turn_over_the_budget_is_cut_and_says_where_the_rest_is(repo: Repository) -> None:
    repo.commit_chunks([_chunk("big", 0, "x" * 900), _chunk("big", 1, "next turn")], "seed")
    page = browse.get_range(repo, "big", max_chars=300)
    assert page.cut and [t.seq for t in page.turns] == [0] and page.next_seq == 1
    text = page.turns[0].blocks[0].text
    assert text.startswith("x" * 300) and "600 more characters: `funes get big big-t0`" in text


def test_scan_is_literal_case_insensitive_and_counts_everything(memory: Repository) -> None:
    found = browse.scan(memory, "PARSER")
    assert found.total == 2 and found.sessions == 2
    assert [h.row["session_id"] for h in found.hits] == ["old", "mid"]  # oldest first
    hit = found.hits[1]
    assert hit.found == "Parser" and hit.before == "Why does the " and hit.row["seq"] == 1
    assert browse.scan(memory, "xyzzy").total == 0
    assert browse.scan(memory, "50%_off'").total == 0  # SQL wildcards and quotes are literal
    one = browse.scan(memory, "the", limit=1)
    assert one.total > 1 and len(one.hits) == 1 and one.next_offset == 1
    rest = browse.scan(memory, "the", limit=10, offset=1)
    assert len(rest.hits) == one.total - 1
    assert browse.scan(memory, "parser", sessions=["mid"]).total == 1
    forget(memory, session="old")
    assert browse.scan(memory, "parser").total == 1
    with pytest.raises(UsageError):
        browse.scan(memory, "  ")


def test_scan_finds_a_needle_that_straddles_two_chunks(repo: Repository) -> None:
    text = " ".join(f"Sentence number {i} talks about the retry budget of worker {i}."
                    for i in range(60))
    windows = split_text(text, max_tokens=80)
    assert len(windows) > 3 and stitch_texts(windows) == text
    second = text.find(windows[2], len(windows[0]) // 2)
    end_of_second = text.find(windows[1]) + len(windows[1])
    needle = text[second - 4 : end_of_second + 4]  # across the seam of windows 1 and 2
    assert needle not in windows[1] and needle not in windows[2]
    repo.commit_chunks([_chunk("long", 0, w, role="tool", block_type="tool_result", split=i,
                               tool="Bash") for i, w in enumerate(windows)], "seed")
    found = browse.scan(repo, needle.upper())
    assert found.total == 1, needle
    assert found.hits[0].found.lower() == needle.lower()
    assert browse.scan(repo, needle + "not there").total == 0


def _session_chunks(session: str, n: int) -> list[Chunk]:
    topics = ["parser buffers and flushing", "CI pipeline and pytest runs",
              "renaming the project", "the retry budget of workers"]
    out = [_chunk(session, 0, "Please make the importer handle huge CSV files.", day=5)]
    for i in range(1, n):
        topic = topics[i % len(topics)]
        role = "assistant" if i % 2 else "user"
        out.append(_chunk(session, i, f"Turn {i}: about {topic}. " + "detail " * (i % 7 * 20),
                          role=role, day=5))
    out.append(_chunk(session, n, "Summary: huge CSV files now stream in chunks.",
                      role="assistant", day=5))
    return out


def test_sketch_is_deterministic_bounded_ordered_and_cached(repo: Repository) -> None:
    repo.commit_chunks(_session_chunks("long", 60), "seed")
    first = browse.sketch(repo, "long", max_chars=1500)
    k = first.sketch
    assert k.basis == "words" and not first.cached  # no vectors in this memory
    assert 0 < k.chars <= 1500 and len(k.passages) < k.units
    seqs = [p.seq for p in k.passages]
    assert seqs == sorted(seqs)
    assert k.passages[0].why[0] == "opening" and "closing" in k.passages[-1].why
    again = browse.sketch(repo, "long", max_chars=1500)
    assert again.cached and again.sketch == k
    # A new process: read back from index/sketches/, the same sketch.
    browse._sketches.clear()
    from_disk = browse.sketch(repo, "long", max_chars=1500)
    assert from_disk.cached and from_disk.sketch == k
    assert list((repo.path / "index" / "sketches").glob("*.json"))
    # Computed afresh (no cache at all), it is the same sketch too.
    assert rsketch.sketch(repo, "long", 1500, version=k.version) == k
    # A session that grows is another version: a new sketch.
    repo.commit_chunks([_chunk("long", 61, "One more turn about flushing.", day=5)], "more")
    grown = browse.sketch(repo, "long", max_chars=1500)
    assert not grown.cached and grown.sketch.version != k.version


def test_sketch_of_a_short_session_is_the_whole_session(memory: Repository) -> None:
    k = browse.sketch(memory, "mid").sketch
    assert k.basis == "all"
    # scaffolding is never shown; the tool result of a short session is
    assert [p.seq for p in k.passages] == [1, 2, 3]
    with pytest.raises(browse.SessionNotFoundError):
        browse.sketch(memory, "nope")


def test_sketch_uses_stored_vectors_when_every_passage_has_one(repo: Repository) -> None:
    import numpy as np

    from funes.model.objects import ModelStamp
    from tests.builders import vector_table

    chunks = _session_chunks("vec", 40)
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(len(chunks), 8))
    repo.commit_chunks(chunks, "seed", model=ModelStamp("m", "0" * 64, 8),
                       vectors=vector_table(chunks, vectors.tolist()))
    k = browse.sketch(repo, "vec", max_chars=1200).sketch
    assert k.basis == "vectors" and k.chars <= 1200
    assert browse.sketch(repo, "vec", max_chars=1200).sketch == k


def test_browsing_a_memory_that_is_not_yours_marks_everything(memory: Repository) -> None:
    memory.config.set("core.owned", "false")
    # rows this machine wrote are the user's own turns, trusted anywhere (funes.api.trust):
    # another owner's memory holds none
    (memory.path / "written-here").unlink(missing_ok=True)
    page = browse.sessions(memory)
    assert not page.trusted and all(s.untrusted for s in page.sessions)
    assert all(h.untrusted for h in browse.scan(memory, "parser").hits)
    assert browse.sketch(memory, "mid").untrusted_turns
    text = api.browse_output("agent", page)
    assert text.startswith(f"# untrusted memory {memory.path}: not yours.")


def test_run_browse_refuses_an_unknown_command(memory: Repository) -> None:
    with pytest.raises(UsageError):
        api.run_browse(memory, "explode", {})


def test_the_catalogue_is_kept_per_memory_version(memory: Repository, monkeypatch: Any) -> None:
    rbrowse.catalogue(memory)
    calls: list[int] = []
    real = rbrowse._build
    monkeypatch.setattr(rbrowse, "_build", lambda repo: calls.append(1) or real(repo))
    rbrowse.catalogue(memory)
    assert calls == []  # same HEAD and table version: no scan
    memory.commit_chunks([_chunk("newer", 0, "another session", day=9)], "more")
    assert rbrowse.catalogue(memory)[0].session_id == "newer" and calls == [1]


def test_the_catalogue_updated_after_a_commit_is_the_one_built_whole(
        memory: Repository, monkeypatch: Any) -> None:
    def whole() -> list[rbrowse.SessionRow]:
        return rbrowse._rows(memory, memory.chunks.dataset().to_table(
            columns=rbrowse._CATALOGUE_COLUMNS, with_row_address=True))

    rbrowse.catalogue(memory)
    full: list[int] = []
    real = rbrowse._rows
    monkeypatch.setattr(rbrowse, "_rows", lambda repo, table: full.append(table.num_rows)
                        or real(repo, table))
    memory.commit_chunks([_chunk("mid", 4, "One more turn in mid, days later.", day=8),
                          _chunk("newest", 0, "A new session.", day=9)], "more")
    updated = rbrowse.catalogue(memory)
    assert full == [6]  # mid's five rows and newest's one: not the memory's eight
    assert updated == whole()
    assert [r.session_id for r in updated] == ["newest", "new", "mid", "old"]
    assert next(r for r in updated if r.session_id == "mid").turns == 5
    forget(memory, session="new")  # tombstones changed: built whole
    full.clear()
    assert rbrowse.catalogue(memory) == whole() and full[0] == 9  # every row read again
