"""Helpers for the agent tests: an MCP client on the real SDK, a small memory, waiting on hooks."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from funes.model.chunk import Chunk

SESSION = "0badc0de-1111-2222-3333-444455556666"


def _c(seq: int, text: str, role: str, block_type: str = "text", tool: str | None = None) -> Chunk:
    return Chunk(text=text, harness="claude", session_id=SESSION, turn_id=f"turn-{seq}", seq=seq,
                 ts=f"2026-10-0{seq + 1}T12:00:00Z", role=role, block_type=block_type,
                 block_idx=0, split_idx=0, tool_name=tool, workdir="/home/ada/src/app",
                 project="github.com/acme/app")


@pytest.fixture
def memory(tmp_path: Path, settings: Any) -> Path:
    """A project memory with one short session (recency off, so scores do not drift)."""
    from funes.storage.repo import Repository

    repo = Repository.init(tmp_path / "app" / ".funes", settings)
    repo.config.set("recall.halfLife", "0")
    repo.commit_chunks([
        _c(0, "Why does the importer choke on large files?", "user"),
        _c(1, "The streaming parser buffers every record; we dropped it for a line reader.",
           "assistant"),
        _c(2, '[tool_use Bash] {"command": "pytest tests/test_importer.py"}', "assistant",
           "tool_use", "Bash"),
        _c(3, "Great, the line reader fixed the large-file import.", "user"),
    ], "seed")
    return repo.path


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment (HOME, FUNES_HOME, agent dirs) for a child process."""
    # PYTHONPATH too: a checkout run with it set (a worktree) must run its own code in the child
    keep = ("HOME", "FUNES_HOME", "PATH", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "HERMES_HOME",
            "PI_CODING_AGENT_DIR", "FUNES_AUTHOR_NAME", "FUNES_AUTHOR_EMAIL", "PYTHONPATH")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["FUNES_SERVE"] = "off"
    env.update(extra or {})
    return env


def mcp_session(command: list[str], calls: list[tuple[str, dict[str, Any]]],
                cwd: Path | None = None, env: dict[str, str] | None = None,
                between: Callable[[int], None] | None = None,
                ) -> tuple[dict[str, set[str]], str, list[tuple[bool, str]]]:
    """Start `command` as an MCP server over stdio.

    Returns (tool name → its parameter names, the server's instructions, each call's
    (is_error, text)). `env` adds to the child's environment (FUNES_SERVE is off by default);
    `between(i)` runs before call i, the session open.
    """
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=child_env(env),
                                   cwd=str(cwd) if cwd else None)

    async def main() -> tuple[dict[str, set[str]], str, list[tuple[bool, str]]]:
        with open(os.devnull, "w") as quiet:
            async with (stdio_client(params, errlog=quiet) as (read, write),
                        ClientSession(read, write) as session):
                init = await session.initialize()
                tools = await session.list_tools()
                results = []
                for i, (name, arguments) in enumerate(calls):
                    if between is not None:
                        await anyio.to_thread.run_sync(between, i)
                    res = await session.call_tool(name, arguments)
                    text = "\n".join(c.text for c in res.content if c.type == "text")
                    results.append((bool(res.is_error), text))
                listed = {t.name: set(t.input_schema.get("properties", {}))
                          for t in tools.tools}
                return listed, init.instructions or "", results

    return anyio.run(main)


def funes_mcp(*args: str) -> list[str]:
    """The command `funes add` registers (this interpreter)."""
    return [sys.executable, "-m", "funes", "mcp", *args]


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "it") -> None:
    """Poll until `predicate()` (detached hook work), failing after `timeout` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
