"""Day zero: `funes add` indexes the history already on the machine, and embeds it behind.

The two-machine flow (each machine's pre-`add` history reaching the other through the hooks)
is tests/remotes/test_travel_history.py; the figures at scale are bench/bench_day0.py's.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.api.agent_format import PARTLY_EMBEDDED
from funes.ingest import backlog
from funes.storage.repo import Repository
from tests.agents.conftest import mcp_session


def claude_session(settings: Any, session: str, texts: list[str], *,
                   day: str = "2026-03-01", project: str = "-home-ada-app") -> Path:
    """A Claude Code transcript of alternating user/assistant turns, as Claude writes it."""
    path = settings.claude_config_dir / "projects" / project / f"{session}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines, parent = [], None
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        uuid = f"{session[:8]}-0000-4000-8000-{i:012d}"
        content: Any = text if role == "user" else [{"type": "text", "text": text}]
        lines.append(json.dumps({
            "type": role, "uuid": uuid, "parentUuid": parent, "sessionId": session,
            "timestamp": f"{day}T10:{i:02d}:00.000Z", "cwd": "/home/ada/app",
            "message": {"role": role, "content": content}}))
        parent = uuid
    path.write_text("\n".join(lines) + "\n")
    return path


def codex_session(settings: Any, thread: str, text: str) -> Path:
    """A Codex rollout with one exchange."""
    path = settings.codex_home / "sessions" / "2026" / "02" / "01" / f"rollout-{thread}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [
        {"type": "session_meta", "timestamp": "2026-02-01T09:00:00.000Z",
         "payload": {"id": thread, "timestamp": "2026-02-01T09:00:00.000Z",
                     "cwd": "/home/ada/app", "cli_version": "0.40.0"}},
        {"type": "response_item", "timestamp": "2026-02-01T09:00:01.000Z", "payload": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def history(settings: Any) -> Any:
    """Months of history before funes: two Claude Code sessions and a Codex one."""
    claude_session(settings, "11111111-aaaa-4aaa-8aaa-111111111111",
                   ["Why did the nightly export stall?",
                    "The export held a cursor open across the vacuum; we batch it now."],
                   day="2025-11-03")
    claude_session(settings, "22222222-bbbb-4bbb-8bbb-222222222222",
                   ["Which colour did we pick for the warning banner?",
                    "Burnt sienna, because amber failed the contrast check."])
    codex_session(settings, "019e0000-0000-7000-8000-0000000000c0",
                  "codex only: rename the quarterly ledger job")
    return settings


def test_add_indexes_the_agents_existing_sessions(history: Any, run) -> None:  # type: ignore[no-untyped-def]
    out = run("add", "claude")
    assert out.exit_code == 0, out.stderr
    assert "indexed 2 sessions, 4 turns" in out.stdout, out.stdout
    assert "searchable by their words now" in out.stdout
    repo = Repository.open(history.home, history)
    assert {r["harness"] for r in repo.chunks.dataset().to_table().to_pylist()} == {"claude"}
    found = run("--format", "agent", "recall", "nightly export stalled")
    assert "cursor open across the vacuum" in found.stdout, found.stdout


@pytest.mark.slow
def test_after_add_the_agents_mcp_recall_finds_an_old_session(history: Any, run,  # type: ignore[no-untyped-def]
                                                              tmp_path: Path) -> None:
    """The whole first step as the agent meets it: `funes add claude`, then its MCP tool."""
    assert run("add", "claude").exit_code == 0
    _, _, results = mcp_session([sys.executable, "-m", "funes", "mcp"],
                                [("recall", {"query": "nightly export stalled"})],
                                cwd=tmp_path)
    error, text = results[0]
    assert not error and "cursor open across the vacuum" in text, text


def test_add_on_an_indexed_memory_adds_nothing(history: Any, run) -> None:  # type: ignore[no-untyped-def]
    assert run("add", "claude").exit_code == 0
    repo = Repository.open(history.home, history)
    head = repo.head()
    again = run("--format", "json", "add", "claude")
    assert again.exit_code == 0, again.stderr
    data = json.loads(again.stdout)
    assert data["changed"] == [] and data["indexed"]["added"] == 0
    assert data["indexed"]["files_unchanged"] == 2
    assert Repository.open(history.home, history).head() == head  # no commit at all


def test_no_index_wires_only_and_says_how_to_index(history: Any, run) -> None:  # type: ignore[no-untyped-def]
    out = run("add", "claude", "--no-index")
    assert out.exit_code == 0, out.stderr
    assert "index the sessions claude already has with: funes index --agent claude" \
        in out.stdout
    assert Repository.open(history.home, history).head() is None
    assert run("add", "claude", "--index", "--no-index").exit_code == 2


def test_a_first_run_is_newest_first_and_searchable_from_its_first_batch(
        history: Any, run) -> None:  # type: ignore[no-untyped-def]
    """Each batch can be recalled before the next is read; the newest session comes first."""
    from funes.ingest.run import index_sources, newest_first
    from funes.ingest.sources import default_sources
    from funes.ingest.state import SourceStates
    from funes.retrieval.indexes import make_searchable

    old = history.claude_config_dir / "projects" / "-home-ada-app" / \
        "11111111-aaaa-4aaa-8aaa-111111111111.jsonl"
    os.utime(old, (time.time() - 86400 * 90, time.time() - 86400 * 90))
    repo = api.init(history, is_global=True).repo
    seen: list[tuple[str, str]] = []

    def progress(done: int, total: int, path: str) -> None:
        if done == 1:  # the second file is about to be read: the first is in, and found
            from funes.retrieval.indexes import state

            indexed = state(repo)  # by the run itself: no recall has to build or scan flat
            assert indexed.fts and indexed.id_index and indexed.unindexed_rows == 0
            hits = api.recall(history, repo, "warning banner colour", vector=False).hits
            seen.append((Path(path).stem, hits[0].row["session_id"] if hits else ""))

    sources = newest_first(default_sources(history, harnesses=["claude"]))
    summary = index_sources(sources, lambda _t: repo,
                            SourceStates(history.home / "state" / "sources.sqlite"),
                            first_batch=1, progress=progress, searchable=make_searchable)
    assert seen == [("11111111-aaaa-4aaa-8aaa-111111111111",
                     "22222222-bbbb-4bbb-8bbb-222222222222")]
    assert summary.batches == 2 and summary.first_searchable_s is not None


def test_a_deduplicated_passage_still_names_its_other_sessions(settings: Any) -> None:
    """The same words in two sessions take one place; the other session is in `copies`."""
    from tests.builders import make_chunk

    repo = api.init(settings, is_global=True).repo
    words = "the flaky fixture leaked a tempdir between runs"
    repo.commit_chunks([make_chunk(0, session="first", text=words),
                        make_chunk(0, session="second", text=words),
                        make_chunk(1, session="third", text="something else entirely")],
                       "seed")
    hits = api.recall(settings, repo, "flaky fixture tempdir", vector=False, neighbors=0).hits
    assert len(hits) == 1
    assert {hits[0].row["session_id"], *(c["session_id"] for c in hits[0].copies)} == \
        {"first", "second"}
    shown = json.loads(api.recall_output("json", api.RecallResult("q", hits, ["bm25"]),
                                         "m", True))
    assert shown["hits"][0]["copies"][0]["session_id"] in {"first", "second"}


def _memory_with_history(settings: Any, n: int = 6) -> Repository:
    from tests.builders import make_chunk

    repo = api.init(settings, is_global=True).repo
    repo.commit_chunks([make_chunk(i, text=f"gravel pit survey note {i}",
                                   ts=f"2026-01-0{i + 1}T00:00:00Z") for i in range(n)], "seed")
    return repo


def test_the_backfill_embeds_everything_newest_first_and_reports_it(
        settings: Any, with_models: Path) -> None:
    repo = _memory_with_history(settings)
    lines: list[str] = []
    assert api.backfill_run(settings, repo, lines.append) == 6
    status = api.search_status(settings, repo)
    assert status.backlog == 0 and status.embedded == 6
    assert status.backfill is not None and status.backfill.state == "done"
    assert status.backfill.embedded == 6 and not status.backfill.running
    text = api.status_text(api.status(repo), status)
    assert "backfill done" in text and "(6 embedded)" in text
    assert any("backfill done: 6 chunks embedded" in line for line in lines)


def test_a_killed_backfill_shows_as_stopped_and_resumes(settings: Any, with_models: Path) -> None:
    repo = _memory_with_history(settings)
    api.embed(settings, repo, limit=2)
    # what a backfill killed mid-run leaves: its progress says running, nobody holds the lock
    backlog.BackfillProgress(999_999, "m", time.time() - 60, time.time() - 30, embedded=2,
                             waiting=4).save(repo)
    status = api.search_status(settings, repo)
    assert status.backfill is not None and status.backfill.state == "stopped"
    text = api.status_text(api.status(repo), status)
    assert "with 4 waiting: `funes embed --background` resumes it" in text, text
    # resuming embeds only what waits: the two done before are not embedded again
    assert api.backfill_run(settings, repo, lambda _line: None) == 4
    assert api.search_status(settings, repo).embedded == 6


def test_the_running_backfill_is_shown_with_its_pace(settings: Any, with_models: Path) -> None:
    repo = _memory_with_history(settings)
    backlog.BackfillProgress(os.getpid(), "m", time.time() - 100, time.time(), embedded=200,
                             waiting=6, rate=2.0).save(repo)
    with backlog.embedding(repo):
        text = api.status_text(api.status(repo), api.search_status(settings, repo))
    assert f"backfill running (pid {os.getpid()})" in text and "2.0 chunks/s" in text, text
    assert "the backfill is embedding them" in text and "done in about 3 s" in text


def test_one_embedder_per_memory(settings: Any, with_models: Path) -> None:
    repo = _memory_with_history(settings)
    with backlog.embedding(repo):
        with pytest.raises(backlog.EmbeddingBusyError, match="already embedding"):
            api.embed(settings, repo)
        # the backfill stands aside too (and embeds nothing twice)
        assert api.backfill_run(settings, repo, lambda _line: None) == 0
        assert api.start_backfill(settings, repo).action == "running"
    assert api.search_status(settings, repo).embedded == 0


def test_start_backfill_needs_a_model_and_never_installs_one(settings: Any) -> None:
    repo = _memory_with_history(settings)
    started = api.start_backfill(settings, repo)
    assert started.action == "no-model" and started.waiting == 6
    assert "funes models install" in started.detail


def test_recall_on_a_partly_embedded_memory_says_so(settings: Any, with_models: Path) -> None:
    repo = _memory_with_history(settings)
    api.embed(settings, repo, limit=2)
    result = api.recall(settings, repo, "gravel pit survey")
    assert "vector" in result.signals and result.backlog == 4
    text = api.recall_text(result, "m", True)
    assert text.splitlines()[0] == PARTLY_EMBEDDED.format(waiting=4)
    api.embed(settings, repo)
    done = api.recall(settings, repo, "gravel pit survey")
    assert "# note: partly" not in api.recall_text(done, "m", True)


def _many_sessions(settings: Any, n: int) -> None:
    for i in range(n):
        claude_session(settings, f"{i:08d}-cccc-4ccc-8ccc-cccccccccccc",
                       [f"question {i} about the heron count", f"answer {i}: {i * 7} herons"],
                       day=f"2026-01-{1 + i % 28:02d}")


def _index_with(settings: Any, workers: int) -> tuple[list[str], Any]:
    from funes.ingest.run import index_sources, newest_first
    from funes.ingest.sources import default_sources
    from funes.ingest.state import SourceStates

    repo = Repository.init(settings.home.parent / f"mem-{workers}" / ".funes", settings)
    summary = index_sources(newest_first(default_sources(settings, harnesses=["claude"])),
                            lambda _t: repo, SourceStates(repo.path / "index" / "s.sqlite"),
                            workers=workers, first_batch=5)
    ids = sorted(repo.chunks.dataset().to_table(columns=["id"]).column("id").to_pylist())
    return ids, summary


def test_reading_in_worker_processes_stores_exactly_what_one_process_does(settings: Any) -> None:
    _many_sessions(settings, 12)
    alone, one = _index_with(settings, 1)
    shared, two = _index_with(settings, 2)
    assert alone == shared and len(alone) == 24
    assert (one.turns, one.chunks, one.batches) == (two.turns, two.chunks, two.batches)


def test_files_a_dead_worker_had_are_read_here(settings: Any,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from funes.ingest import reader

    _many_sessions(settings, 6)
    answers = {"n": 0}
    real = reader._receive

    def flaky(stream: Any) -> Any:
        answers["n"] += 1
        if answers["n"] == 2:
            raise EOFError("the reader process ended")  # as if a worker had been killed
        return real(stream)

    monkeypatch.setattr(reader, "_receive", flaky)
    ids, summary = _index_with(settings, 2)
    assert answers["n"] >= 3  # the workers answered before and after the one that "died"
    assert len(ids) == 12 and summary.turns == 12 and not summary.errors
