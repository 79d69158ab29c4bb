"""`funes mcp` through a real MCP client: every tool answering exactly like the CLI."""

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
        ("recall", {"query": "importer large files", "role": "user", "until": "2026-10-04"}),
        ("sessions", {"limit": 5}),
        ("get", {"session_id": SESSION, "from_seq": 1, "to_seq": 2}),
        ("scan", {"needle": "LINE READER"}),
        ("sketch", {"session_id": SESSION}),
    ]
    names, instructions, results = mcp_session(funes_mcp(str(memory)), calls)

    assert sorted(names) == ["get", "recall", "scan", "sessions", "sketch", "status"]
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
        run("--format", "agent", "recall", "importer large files", "--role", "user", "--until",
            "2026-10-04", "--memory", mem),
        run("--format", "agent", "sessions", "--limit", "5", "--memory", mem),
        run("--format", "agent", "get", SESSION, "--from", "1", "--to", "2", "--memory", mem),
        run("--format", "agent", "scan", "LINE READER", "--memory", mem),
        run("--format", "agent", "sketch", SESSION, "--memory", mem),
    ]
    for (_, text), out in zip(results, cli, strict=True):
        assert out.exit_code == 0, out.stderr
        assert text == out.stdout.rstrip("\n")
    assert "we dropped it for a line reader" in results[0][1]
    assert results[2][1] == "no results"
    # --role user --until: only the user's turn before Oct 4 (seq 3, also the user's, is on it)
    assert "choke on large files" in results[5][1]
    assert "fixed the large-file import" not in results[5][1]
    assert SESSION in results[6][1] and "4 turns" in results[6][1]
    assert "turns seq 1–2 of 0–3" in results[7][1]
    assert 'scan "LINE READER": 2 blocks in 1 session' in results[8][1]
    assert results[9][1].startswith(f"# sketch of {SESSION}")
    for name in ("sessions", "sketch", "scan"):
        assert f"`{name}`" in instructions


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


def test_mcp_answers_through_the_warm_server_and_survives_its_restart(
        memory: Path, run, settings) -> None:  # type: ignore[no-untyped-def]
    """Every agent's `funes mcp` is a relay: the session runs in the per-user server."""
    from funes.api import warm
    from tests.conftest import REPO_ROOT

    calls = [("recall", {"query": "why did we drop the streaming parser", "k": 2}),
             ("sessions", {}),
             ("scan", {"needle": "line reader"}),
             ("recall", {"query": "why did we drop the streaming parser", "k": 2})]
    seen: list[object] = []

    def between(i: int) -> None:
        if i == 2:  # the server goes away mid-session (an upgrade, `funes serve --stop`)
            status = warm.server_status(settings)
            seen.append(status)
            assert warm.stop_server(settings, wait=10)

    env = {"FUNES_SERVE": "auto", "PYTHONPATH": str(REPO_ROOT)}
    try:
        _, _, results = mcp_session(funes_mcp(str(memory)), calls, env=env, between=between)
        after = warm.server_status(settings)
    finally:
        warm.stop_server(settings, wait=10)
    assert not any(is_error for is_error, _ in results), results
    cli = run("--format", "agent", "recall", "why did we drop the streaming parser", "-k", "2",
              "--memory", str(memory))
    assert results[0][1] == results[3][1] == cli.stdout.rstrip("\n")
    status = seen[0]
    assert status is not None
    assert status.requests.get("mcp recall") == 1 and status.requests.get("mcp sessions") == 1
    # After the stop the relay opened the session again on a new server and carried on.
    assert after is not None and after.pid != status.pid
    assert after.requests.get("mcp scan") == 1 and after.requests.get("mcp recall") == 1


def test_concurrent_mcp_sessions_on_one_server_each_answer_for_their_own_memory(
        memory: Path, tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    """The warm server runs every agent's session on one MCP server object; each call must
    still work on its own session's memory, also while another session's call is running."""
    import threading

    from funes.api import warm
    from funes.storage.repo import Repository
    from tests.agents.conftest import _c
    from tests.conftest import REPO_ROOT

    other = Repository.init(tmp_path / "other" / ".funes", settings)
    other.commit_chunks([_c(0, "The other project settled on tabs, not spaces.", "user")],
                        "seed")
    env = {"FUNES_SERVE": "auto", "PYTHONPATH": str(REPO_ROOT)}
    both_open = threading.Barrier(2, timeout=120)
    out: dict[str, list[tuple[bool, str]]] = {}

    def agent(name: str, path: Path) -> None:
        calls = [("status", {}), ("scan", {"needle": "tabs"}), ("status", {})]
        out[name] = mcp_session(funes_mcp(str(path)), calls, env=env,
                                between=lambda i: both_open.wait() if i == 1 else None)[2]

    try:
        agents = [threading.Thread(target=agent, args=("app", memory)),
                  threading.Thread(target=agent, args=("other", other.path))]
        for thread in agents:
            thread.start()
        for thread in agents:
            thread.join(180)
        status = warm.server_status(settings)
    finally:
        warm.stop_server(settings, wait=10)
    assert status is not None and status.requests.get("mcp") == 2  # both on one server
    for name, path in (("app", memory), ("other", other.path)):
        results = out[name]
        assert not any(is_error for is_error, _ in results), results
        assert str(path) in results[0][1] and str(path) in results[2][1]
    assert 'scan "tabs": 1 block' in out["other"][1][1]
    assert "no matches" in out["app"][1][1]


#: Everything of funes (and the heavier standard modules) a relay to a running server imports.
RELAY_PATH = ["funes", "funes._env", "funes.cli", "funes.cli.main", "funes.cli.mcprelay",
              "funes.protocol"]


def test_the_relay_to_a_running_server_imports_only_the_protocol(tmp_path: Path) -> None:
    """Eight agents run eight relays: each loads no library, no `typing`, no `dataclasses`."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT, one_answer_server

    home = tmp_path / "home"
    home.mkdir()
    with one_answer_server(home, {"mcp": True}, wait_for_close=True) as opened:
        probe = (
            "import sys\n"
            "before = set(sys.modules)  # what the interpreter's site (.pth files) loaded\n"
            "from funes.cli.main import main\n"
            "main(['mcp', sys.argv[1]])\n"
            "mods = sorted(m for m in sys.modules if m == 'funes' or m.startswith('funes.'))\n"
            "print('FUNES', mods, file=sys.stderr)\n"
            "print('OTHER', [m for m in ('typing', 'dataclasses', 'inspect', 'hashlib', 'mcp')"
            " if m in sys.modules and m not in before], file=sys.stderr)\n"
        )
        env = {**os.environ, "FUNES_HOME": str(home), "FUNES_SERVE": "use",
               "PYTHONPATH": str(REPO_ROOT)}
        out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], input="",
                             capture_output=True, text=True, check=True, env=env, timeout=60)
    assert opened and opened[0]["op"] == "mcp", out.stderr
    assert f"FUNES {RELAY_PATH!r}" in out.stderr, out.stderr
    assert "OTHER []" in out.stderr, out.stderr
