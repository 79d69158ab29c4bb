"""`funes sync`: fetch, merge, push as one round, a lost race retried, the outcome recorded."""

from __future__ import annotations

import time
from typing import Any

import pytest

from funes import api
from funes.remotes.base import NonFastForwardError
from funes.storage.transfer import ancestors
from tests.builders import make_batch, make_chunk
from tests.remotes.conftest import World, visible


def test_a_lost_race_is_retried_and_nothing_is_lost(world: World) -> None:
    a, b = world.machine("a"), world.machine("b")
    b.commit_chunks(make_batch(0, 2), "index: b1")
    api.sync(b)
    a.commit_chunks(make_batch(10, 2), "index: a1")
    raced: list[str] = []

    def meanwhile(done: int, total: int, label: str) -> None:
        # b pushes while a is between its fetch and its push: a's compare-and-swap loses
        if not raced:
            b.commit_chunks([make_chunk(20, text="pushed during the race")], "index: b2")
            raced.append(api.push(b).new)

    result = api.sync(a, progress=meanwhile)
    assert raced and result.attempts == 2
    assert result.pushed is not None and not result.pushed.up_to_date
    tip = world.remote_head()
    assert tip is not None and raced[0] in ancestors(a, tip)  # b's commit was not lost
    api.sync(b)
    assert a.head() == b.head() and set(visible(a)) == set(visible(b))
    assert len(visible(a)) == 5
    last = api.last_sync(a, "origin")
    assert last is not None and last.ok and last.fix is None


def test_a_race_lost_every_time_fails_loudly(world: World) -> None:
    a, b = world.machine("a"), world.machine("b")
    b.commit_chunks(make_batch(0, 1), "index")
    api.sync(b)
    a.commit_chunks(make_batch(10, 1), "index")
    n = [0]

    def always(done: int, total: int, label: str) -> None:
        if label == "objects":
            n[0] += 1
            b.commit_chunks([make_chunk(100 + n[0])], "index: again")
            api.push(b)

    with pytest.raises(NonFastForwardError):
        api.sync(a, attempts=2, progress=always)
    last = api.last_sync(a, "origin")
    assert last is not None and not last.ok and last.fix == "funes sync origin"
    assert len(visible(a)) >= 2  # what was fetched and merged stays; nothing local lost


def test_status_shows_ahead_behind_and_the_last_sync(world: World, run: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = world.machine("a"), world.machine("b")
    a.commit_chunks(make_batch(0, 2), "index")
    api.sync(a)
    status = api.status(a)
    [origin] = status.remotes
    assert (origin.ahead, origin.behind) == (0, 0) and origin.last and origin.last.ok
    a.commit_chunks(make_batch(5, 1), "index")
    b.commit_chunks(make_batch(9, 1), "index")
    api.sync(b)
    api.fetch(a)
    [origin] = api.status(a).remotes
    assert (origin.ahead, origin.behind) == (1, 2)  # b's commit and b's merge
    monkeypatch.chdir(a.path.parent)
    out = run("status").stdout
    assert "remote   origin" in out and "1 ahead, 2 behind" in out and " ok (" in out


def test_the_stale_note_comes_only_after_a_long_failure(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks([make_chunk(1, text="a note to recall")], "index")
    assert api.sync_note(a) is None  # never synced: nothing to say yet
    api.sync(a)
    assert api.sync_note(a) is None
    api.record_sync(a, "origin", False, "cannot reach it", "funes sync origin")
    assert api.sync_note(a) is None  # failed, but the last success is recent
    later = time.time() + 2 * 86400
    note = api.sync_note(a, now=later)
    assert note is not None and note.startswith("# note: this memory has not synced with origin")
    assert "(cannot reach it)" in note and note.endswith("run `funes sync origin`")
    result = api.recall(a.settings, a, "recall", vector=False, rerank=False)
    assert api.recall_text(result, "a", True, note).splitlines()[0] == note


def test_add_agent_remote_in_a_project_and_idempotent(world: World, run: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    a = world.machine("a")
    a.commit_chunks([make_chunk(1, text="shared project knowledge")], "index")
    api.push(a)
    project = world.tmp / "checkout"
    project.mkdir()
    monkeypatch.chdir(project)
    # a directory laid out as a remote is a remote, not a memory; a Hub name is one too
    target = world.url  # `org/name` style, or a plain path to a directory remote
    out = run("add", "codex", target, "--project")
    assert out.exit_code == 0, out.stderr
    assert "cloned" in out.stdout and (project / ".funes" / "FORMAT").is_file()
    assert not (world.settings.home / "FORMAT").exists()  # the global memory was not used
    codex = (world.settings.user_home / ".codex" / "config.toml").read_text()
    # bound to the project only: the MCP server finds the project memory from the agent's
    # directory, and the hooks route only this project's sessions to it (funes.api.routing)
    assert 'args = ["-m", "funes", "mcp"]' in codex
    from funes.agents.wiring import bound_projects

    assert bound_projects(world.settings, "codex") == [str(project / ".funes")]
    again = run("add", "codex", target, "--project")
    assert again.exit_code == 0 and "already wired" in again.stdout
    found = run("--format", "agent", "recall", "shared project").stdout
    assert "shared project knowledge" in found


def test_add_agent_creates_a_missing_remote_from_the_memory(
    world: World, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = world.machine("a")  # its origin does not exist yet
    a.commit_chunks([make_chunk(1, text="made here first")], "index")
    monkeypatch.chdir(a.path.parent)
    url = world.url if world.kind == "hf" else f"file://{world.url}"
    out = run("add", "claude", url)
    assert out.exit_code == 0, out.stderr
    assert "created the remote" in out.stdout and "pushed 1 commit" in out.stdout
    assert world.remote_head() == a.head()
    assert api.owned(a)  # made here: the user's
