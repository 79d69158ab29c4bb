"""Golden tests: the agent output format is a contract (docs/agents.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from funes import api
from funes.cli.commands.recall import render_agent, render_turns
from funes.model.chunk import Chunk
from funes.storage.repo import Repository

GOLDEN = Path(__file__).parent / "golden"
NOW = datetime(2026, 11, 1, tzinfo=UTC)


def _c(seq: int, text: str, role: str, block_type: str = "text", tool: str | None = None) -> Chunk:
    return Chunk(text=text, harness="claude", session_id="0badc0de-1111-2222-3333-444455556666",
                 turn_id=f"turn-{seq}", seq=seq, ts=f"2026-10-0{seq + 1}T12:00:00Z", role=role,
                 block_type=block_type, block_idx=0, split_idx=0, tool_name=tool,
                 workdir="/home/ada/src/app", project="github.com/acme/app")


@pytest.fixture
def repo(tmp_path: Path, settings) -> Repository:  # type: ignore[no-untyped-def]
    r = Repository.init(tmp_path / "golden" / ".funes", settings)
    r.commit_chunks([
        _c(0, "Why does the importer choke on large files?", "user"),
        _c(1, "The streaming parser buffers every record; we dropped it for a line reader.",
           "assistant"),
        _c(2, "[tool_use Bash] {\"command\": \"pytest tests/test_importer.py\"}", "assistant",
           "tool_use", "Bash"),
        _c(3, "Great, the line reader fixed the large-file import.", "user"),
    ], "seed")
    return r


def _golden(name: str, text: str, label: str) -> None:
    path = GOLDEN / name
    normal = text.replace(label, "<MEMORY>")
    assert normal == path.read_text("utf-8"), f"agent format changed: compare with {path}"


def test_recall_agent_format(settings, repo: Repository) -> None:  # type: ignore[no-untyped-def]
    result = api.recall(settings, repo, "streaming parser large files", k=2, now=NOW)
    _golden("recall_agent.txt", render_agent(result, str(repo.path), True) + "\n", str(repo.path))


def _not_mine(repo: Repository) -> None:
    """Make `repo` another owner's memory whose rows came from elsewhere (like a clone's)."""
    repo.config.set("core.owned", "false")
    (repo.path / "written-here").unlink()  # no turn of it was written on this machine
    assert not api.owned(repo)


def test_recall_agent_format_untrusted(settings, repo: Repository) -> None:  # type: ignore[no-untyped-def]
    _not_mine(repo)
    result = api.recall(settings, repo, "streaming parser", k=1, neighbors=0, now=NOW)
    _golden("recall_agent_untrusted.txt",
            render_agent(result, str(repo.path), api.owned(repo)) + "\n", str(repo.path))


def test_get_agent_format(settings, repo: Repository) -> None:  # type: ignore[no-untyped-def]
    choice = api.choose_memory(settings, str(repo.path))
    turns = api.get(repo, "0badc0de-1111-2222-3333-444455556666", "turn-1", window=1)
    _golden("get_agent.txt", render_turns(turns, "agent", choice) + "\n", str(repo.path))


def test_get_agent_format_untrusted(settings, repo: Repository) -> None:  # type: ignore[no-untyped-def]
    _not_mine(repo)
    choice = api.choose_memory(settings, str(repo.path))
    turns = api.get(repo, "0badc0de-1111-2222-3333-444455556666", "turn-1", window=1)
    _golden("get_agent_untrusted.txt", render_turns(turns, "agent", choice) + "\n",
            str(repo.path))


def test_empty_is_no_results(settings, repo: Repository) -> None:  # type: ignore[no-untyped-def]
    result = api.recall(settings, repo, "kubernetes", now=NOW)
    assert render_agent(result, "x", True) == "no results"


def test_recall_agent_format_revisited_later(settings, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A hit a later session revisits carries one `revisited later:` line after its `→` line."""
    r = Repository.init(tmp_path / "amended" / ".funes", settings)

    def said(session: str, day: int, text: str) -> Chunk:
        return Chunk(text=text, harness="claude", session_id=session, turn_id=f"{session}-t1",
                     seq=1, ts=f"2026-10-{day:02d}T12:00:00Z", role="assistant",
                     block_type="text", block_idx=0, split_idx=0, workdir="/home/ada/src/app",
                     project="github.com/acme/app")

    r.commit_chunks([
        said("5e771ed0-aaaa", 2, "Settled: the importer keeps the streaming parser for large "
             "files, with read_batch buffering 500 records."),
        said("a3e4d3d0-bbbb", 20, "Amended: read_batch buffering 500 records leaked memory, so "
             "the importer swaps the streaming parser for a line reader on large files."),
        said("0ther000-cccc", 25, "The weather widget shows Celsius by default."),
    ], "seed")
    result = api.recall(settings, r, "importer streaming parser large files", k=2,
                        neighbors=0, now=NOW)
    _golden("recall_agent_revisited.txt", render_agent(result, str(r.path), True) + "\n",
            str(r.path))
