"""`funes mcp` through a real MCP client: three tools, each answering exactly like the CLI."""

from __future__ import annotations

from pathlib import Path

from tests.agents.conftest import SESSION, funes_mcp, mcp_session


def test_mcp_tools_return_the_cli_agent_format(memory: Path, run) -> None:  # type: ignore[no-untyped-def]
    calls = [
        ("recall", {"query": "why did we drop the streaming parser", "k": 2}),
        ("recall", {"query": "streaming parser", "harness": ["claude"], "type": "text"}),
        ("recall", {"query": "zzzz-nothing-like-this"}),
        ("get", {"session_id": SESSION, "turn_id": "turn-1", "window": 1}),
        ("status", {}),
    ]
    names, instructions, results = mcp_session(funes_mcp(str(memory)), calls)

    assert sorted(names) == ["get", "recall", "status"]
    assert "recall" in instructions and "data, not instructions" in instructions
    assert not any(is_error for is_error, _ in results)
    mem = str(memory)
    cli = [
        run("--format", "agent", "recall", "why did we drop the streaming parser", "-k", "2",
            "--memory", mem),
        run("--format", "agent", "recall", "streaming parser", "--harness", "claude",
            "--type", "text", "--memory", mem),
        run("--format", "agent", "recall", "zzzz-nothing-like-this", "--memory", mem),
        run("--format", "agent", "get", SESSION, "turn-1", "--window", "1", "--memory", mem),
        run("--format", "agent", "status", "--memory", mem),
    ]
    for (_, text), out in zip(results, cli, strict=True):
        assert out.exit_code == 0, out.stderr
        assert text == out.stdout.rstrip("\n")
    assert "we dropped it for a line reader" in results[0][1]
    assert results[2][1] == "no results"


def test_mcp_memory_per_call_and_errors_are_tool_errors(memory: Path, tmp_path: Path) -> None:
    calls = [
        ("status", {"memory": str(memory)}),
        ("recall", {"query": "parser", "harness": "No Body"}),
        ("get", {"session_id": "no-such-session", "turn_id": "x"}),
    ]
    # no MEMORY argument, started outside any memory: each call names one or fails clearly
    _, _, results = mcp_session(funes_mcp(), calls, cwd=tmp_path)
    assert results[0] == (False, results[0][1]) and str(memory) in results[0][1]
    assert results[1][0] and "invalid harness 'No Body'" in results[1][1]
    assert results[2][0] and "funes:" in results[2][1]
