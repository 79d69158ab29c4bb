"""A real memory for `funes ui`'s tests: the Claude fixtures plus one planted session.

The planted session is a Claude Code transcript written here (the same format the fixtures
have): a user question, an answer that holds the planted passage, a tool call and its output,
and a credential that redaction replaces by its placeholder. All of it is indexed by the real
`funes index` path (api.index), so the pages read what a user's memory holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import OWN_FIXTURES

PLANTED = "the heliotrope cache evicts entries after ninety seconds"
PLANTED_SESSION = "planted-session-0001"
#: Shaped like an AWS access key id: redaction replaces it before it is stored.
SECRET = "AKIA" + "Q7ZK3V9P2M4X8N6B"


def claude_lines(session: str, cwd: str, texts: list[tuple[str, Any]], day: str) -> str:
    """A Claude Code transcript: (role, content) pairs, one minute apart."""
    lines = []
    for i, (role, content) in enumerate(texts):
        lines.append(json.dumps({
            "type": role, "timestamp": f"{day}T10:{i:02d}:00.000Z", "sessionId": session,
            "cwd": cwd, "uuid": f"{session}-m{i}",
            "message": {"role": role, "content": content}}))
    return "\n".join(lines) + "\n"


def planted_transcript(directory: Path, session: str = PLANTED_SESSION,
                       passage: str = PLANTED, day: str = "2026-03-04",
                       cwd: str = "/src/heliotrope") -> Path:
    path = directory / f"{session}.jsonl"
    path.write_text(claude_lines(session, cwd, [
        ("user", "How long does the cache keep entries? Look at the config."),
        ("assistant", [
            {"type": "text", "text": f"I read the settings: {passage}. "
                                     f"The deploy key {SECRET} is in the config too."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash",
             "input": {"command": "grep -n ttl config/cache.toml"}}]),
        ("user", [{"type": "tool_result", "tool_use_id": "toolu_1",
                   "content": "12: ttl_seconds = 90"}]),
        ("assistant", "So the TTL is ninety seconds, set on line 12."),
    ], day), "utf-8")
    return path


@pytest.fixture
def ui_memory(tmp_path: Path, settings: Any) -> Path:
    from funes import api

    repo = api.init(settings, tmp_path / "app").repo
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir()
    planted = planted_transcript(transcripts)
    fixtures = sorted((OWN_FIXTURES / "traces" / "claude").glob("*.jsonl"))
    api.index(settings, memory=str(repo.path), paths=[str(p) for p in [*fixtures, planted]])
    return repo.path


@pytest.fixture
def ui_server(ui_memory: Path, settings: Any) -> Iterator[Any]:
    from funes.ui.server import UiServer

    server = UiServer.make(settings, [str(ui_memory)]).start()
    try:
        yield server
    finally:
        server.stop()
