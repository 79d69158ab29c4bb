"""`--memory X` through the warm server reads X or fails, as the CLI does (issue #29, case 1).

An agent's `funes mcp` is a relay into the per-user warm server, so the server, not the
relay's process, picks the memory a tool call reads. A remote memory at a tag it does not
have, or a remote that is not there, must fail the call (a tool error naming the fix), never
answer from the memory of the directory the agent runs in, whose private passages would then
be presented as the answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.api import warm
from funes.storage.repo import Repository
from tests.agents.conftest import funes_mcp, mcp_session
from tests.builders import make_chunk
from tests.conftest import REPO_ROOT

QUERY = "why did we drop the streaming parser"


def _published(memory: Repository, tmp_path: Path) -> str:
    """`memory` pushed to a directory remote; then a PRIVATE passage only the local one has."""
    url = f"file://{tmp_path / 'team'}"
    api.remote_add(memory, "origin", url)
    api.push(memory)
    memory.commit_chunks([make_chunk(1, session="mine", text="streaming parser: my PRIVATE "
                                     "note, never on the team's memory")], "index")
    return url


def test_mcp_through_the_warm_server_reads_the_memory_asked_or_fails(
        memory: Repository, tmp_path: Path, settings: Any, start_server: Any,
        run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _published(memory, tmp_path)
    nowhere = f"file://{tmp_path / 'nowhere'}"
    start_server(memory)
    env = {"FUNES_SERVE": "use", "PYTHONPATH": str(REPO_ROOT)}
    calls = [("recall", {"query": QUERY, "memory": f"{url}@no-such-tag"}),
             ("get", {"session_id": "mine", "turn_id": "mine-t1", "memory": nowhere}),
             ("status", {"memory": f"{url}@no-such-tag"}),
             ("recall", {"query": QUERY, "memory": url}),
             ("recall", {"query": QUERY})]
    # the agent runs in the directory of the local memory: discovery would find it
    _, _, results = mcp_session(funes_mcp(), calls, cwd=memory.path.parent, env=env)
    status = warm.server_status(settings)
    assert status is not None and status.requests.get("mcp recall") == 3  # the server answered
    assert [error for error, _ in results] == [True, True, True, False, False], results
    assert "no tag 'no-such-tag'" in results[0][1] and "no funes memory there" in results[1][1]
    assert "no tag" in results[2][1]
    assert all("PRIVATE" not in text for _, text in results[:4]), results
    assert "sess-parser" in results[3][1]  # the team memory answered
    assert "PRIVATE" in results[4][1]  # the memory of the directory, when none is named

    # the server's own MEMORY (`funes mcp URL@TAG`, what `funes add` may register) likewise
    _, _, results = mcp_session(funes_mcp(f"{url}@no-such-tag"), [("recall", {"query": QUERY})],
                                cwd=memory.path.parent, env=env)
    assert results[0][0] and "no tag" in results[0][1] and "PRIVATE" not in results[0][1]

    # and the CLI with the server running: exit 5, the fix, nothing of the local memory
    monkeypatch.setenv("FUNES_SERVE", "use")
    monkeypatch.chdir(memory.path.parent)
    for args in (("recall", QUERY, "--memory", f"{url}@no-such-tag"),
                 ("recall", QUERY, "--memory", nowhere),
                 ("get", "mine", "mine-t1", "--memory", f"{url}@no-such-tag")):
        out = run("--format", "agent", *args)
        assert out.exit_code == 5 and "PRIVATE" not in out.stdout, (args, out.stdout)
        assert "no tag" in out.stderr or "no funes memory there" in out.stderr, out.stderr
