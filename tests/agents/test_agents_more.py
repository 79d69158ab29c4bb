"""OpenCode, Gemini CLI, Cursor and Copilot CLI wired and indexed like the first four agents.

`funes add`/`remove` on seeded configurations (byte-exact round trip, the MCP command really
serves), `funes index` finding each agent's files in their default places (counts, a second
run adds nothing), and one memory recalling across all eight agents.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from tests.agents.conftest import mcp_session
from tests.ingest.test_more_agents import FIXTURES, build_opencode_db

GEMINI_SETTINGS = {
    "theme": "GitHub",
    "mcpServers": {"docs": {"command": "npx", "args": ["-y", "mcp-docs"]}},
    "hooks": {"AfterAgent": [{"matcher": "*", "hooks": [
        {"name": "notify", "type": "command", "command": "notify-send gemini"}]}]},
}
CURSOR_MCP = {"mcpServers": {"github": {"command": "npx", "args": ["-y", "gh-mcp"]}}}
CURSOR_HOOKS = {"version": 1, "hooks": {"stop": [{"command": "./audit.sh"}],
                                        "beforeShellExecution": [{"command": "./guard.sh"}]}}
COPILOT_MCP = {"mcpServers": {"playwright": {"type": "local", "command": "npx",
                                             "args": ["@playwright/mcp"], "tools": ["*"]}}}
OPENCODE_JSON = {"$schema": "https://opencode.ai/config.json", "theme": "opencode",
                 "mcp": {"context7": {"type": "remote", "url": "https://example.org/mcp"}}}


def _seed(home: Path) -> None:
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_SETTINGS, indent=2) + "\n")
    (home / ".cursor").mkdir()
    (home / ".cursor" / "mcp.json").write_text(json.dumps(CURSOR_MCP, indent=4))
    (home / ".cursor" / "hooks.json").write_text(json.dumps(CURSOR_HOOKS, indent=2) + "\n")
    os.chmod(home / ".cursor" / "hooks.json", 0o600)
    (home / ".copilot" / "hooks").mkdir(parents=True)
    (home / ".copilot" / "mcp-config.json").write_text(json.dumps(COPILOT_MCP, indent=2))
    (home / ".copilot" / "hooks" / "mine.json").write_text('{"version": 1, "hooks": {}}\n')
    (home / ".config" / "opencode").mkdir(parents=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(
        json.dumps(OPENCODE_JSON, indent=2) + "\n")


def _snapshot(home: Path) -> dict[str, tuple[bytes, int]]:
    out = {}
    for path in sorted(home.rglob("*")):
        rel = path.relative_to(home)
        if rel.parts[0] in (".funes", "bin"):
            continue
        data = path.read_bytes() if path.is_file() else b"<dir>"
        out[str(rel)] = (data, stat.S_IMODE(path.stat().st_mode))
    return out


def _registered(agent: str, home: Path) -> list[str]:
    if agent == "gemini":
        entry = json.loads((home / ".gemini" / "settings.json").read_text())["mcpServers"]["funes"]
    elif agent == "cursor":
        entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["funes"]
    elif agent == "copilot":
        entry = json.loads((home / ".copilot" / "mcp-config.json").read_text())[
            "mcpServers"]["funes"]
    else:
        doc = json.loads((home / ".config" / "opencode" / "opencode.json").read_text())
        return list(doc["mcp"]["funes"]["command"])
    return [entry["command"], *entry["args"]]


@pytest.fixture
def home(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _seed(isolated_env)
    (isolated_env / "bin").mkdir()
    monkeypatch.setenv("PATH", f"{isolated_env / 'bin'}{os.pathsep}{Path(sys.executable).parent}")
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "COPILOT_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(var, raising=False)
    return isolated_env


# Each agent starts its own MCP server process; the quick suite keeps one of the four.
@pytest.mark.parametrize("agent", ["opencode", *(pytest.param(a, marks=pytest.mark.slow)
                                                 for a in ("gemini", "cursor", "copilot"))])
def test_add_twice_then_remove_restores_every_byte(agent: str, home: Path,
                                                  run) -> None:  # type: ignore[no-untyped-def]
    before = _snapshot(home)
    first = run("--format", "json", "add", agent)
    assert first.exit_code == 0, first.stderr
    assert json.loads(first.stdout)["changed"]
    after_add = _snapshot(home)
    assert after_add != before
    again = run("--format", "json", "add", agent)
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["changed"] == []
    assert _snapshot(home) == after_add

    names, _, _ = mcp_session(_registered(agent, home), [])
    assert sorted(names) == ["get", "recall", "scan", "sessions", "sketch", "status"]

    gone = run("remove", agent)
    assert gone.exit_code == 0, gone.stderr
    assert _snapshot(home) == before
    assert not (home / ".funes" / "agents" / f"{agent}.json").exists()


def test_hooks_sit_beside_the_users_own(home: Path, run) -> None:  # type: ignore[no-untyped-def]
    for agent in ("opencode", "gemini", "cursor", "copilot"):
        assert run("add", agent).exit_code == 0
    hook = home / ".funes" / "agents" / "agent-turn-end"
    gemini = json.loads((home / ".gemini" / "settings.json").read_text())
    assert gemini["mcpServers"]["docs"] == GEMINI_SETTINGS["mcpServers"]["docs"]
    after = [h["command"] for g in gemini["hooks"]["AfterAgent"] for h in g["hooks"]]
    assert after == ["notify-send gemini", f"{hook} gemini turn-end"]
    assert gemini["hooks"]["SessionEnd"][0]["hooks"][0]["command"] == f"{hook} gemini session-end"

    cursor = json.loads((home / ".cursor" / "hooks.json").read_text())
    assert [h["command"] for h in cursor["hooks"]["stop"]] == ["./audit.sh",
                                                               f"{hook} cursor turn-end"]
    assert cursor["hooks"]["beforeShellExecution"] == CURSOR_HOOKS["hooks"]["beforeShellExecution"]
    assert stat.S_IMODE((home / ".cursor" / "hooks.json").stat().st_mode) == 0o600

    copilot = json.loads((home / ".copilot" / "hooks" / "funes.json").read_text())
    assert copilot["version"] == 1
    assert copilot["hooks"]["sessionEnd"][0]["bash"] == f"{hook} copilot session-end"
    assert (home / ".copilot" / "hooks" / "mine.json").read_text() == \
        '{"version": 1, "hooks": {}}\n'

    plugin = (home / ".config" / "opencode" / "plugin" / "funes.js").read_text()
    assert json.dumps(str(hook)) in plugin and "session.idle" in plugin
    opencode = json.loads((home / ".config" / "opencode" / "opencode.json").read_text())
    assert opencode["mcp"]["context7"] == OPENCODE_JSON["mcp"]["context7"]
    assert opencode["mcp"]["funes"]["type"] == "local"


def test_opencode_jsonc_only_is_left_alone(home: Path, run) -> None:  # type: ignore[no-untyped-def]
    config = home / ".config" / "opencode"
    (config / "opencode.json").rename(config / "opencode.jsonc")
    before = _snapshot(home)
    result = run("add", "opencode")
    assert result.exit_code == 1
    assert "opencode.jsonc" in result.stderr and "by hand" in result.stderr
    assert _snapshot(home) == before


# -- every agent's files in their default places ------------------------------------------------


def _claude_line(**kw: object) -> str:
    return json.dumps(kw) + "\n"


def _seed_sessions(home: Path, project: Path) -> None:
    """One session per agent, each mentioning the streaming parser, where each agent keeps it."""
    cwd = str(project)
    # Claude Code
    claude = home / ".claude" / "projects" / "-work-app" / \
        "c1a0de00-0000-4000-8000-000000000001.jsonl"
    claude.parent.mkdir(parents=True)
    claude.write_text(
        _claude_line(type="user", uuid="u1", parentUuid=None, sessionId="c1a0de00", cwd=cwd,
                     timestamp="2026-10-01T10:00:00Z",
                     message={"role": "user", "content": "claude: why drop the streaming parser?"})
        + _claude_line(type="assistant", uuid="a1", parentUuid="u1", sessionId="c1a0de00",
                       cwd=cwd, timestamp="2026-10-01T10:00:05Z",
                       message={"role": "assistant", "content": [
                           {"type": "text", "text": "claude: the streaming parser lost data"}]}))
    # Codex
    codex = home / ".codex" / "sessions" / "2026" / "10" / "01" / \
        "rollout-2026-10-01T10-00-00-0c0dec00-0000-4000-8000-000000000002.jsonl"
    codex.parent.mkdir(parents=True)
    codex.write_text(
        json.dumps({"timestamp": "2026-10-01T10:00:00Z", "type": "session_meta",
                    "payload": {"id": "0c0dec00-0000-4000-8000-000000000002", "cwd": cwd}}) + "\n"
        + json.dumps({"timestamp": "2026-10-01T10:00:01Z", "type": "response_item",
                      "payload": {"type": "message", "role": "user", "content": [
                          {"type": "input_text", "text": "codex: the streaming parser again"}]}})
        + "\n")
    # pi
    pi = home / ".pi" / "agent" / "sessions" / "--work-app--" / "2026-10-01_9a000000.jsonl"
    pi.parent.mkdir(parents=True)
    pi.write_text(
        json.dumps({"type": "session", "version": 3, "id": "9a000000", "cwd": cwd,
                    "timestamp": "2026-10-01T10:00:00Z"}) + "\n"
        + json.dumps({"type": "message", "id": "p1", "parentId": None,
                      "timestamp": "2026-10-01T10:00:01Z",
                      "message": {"role": "user", "content": [
                          {"type": "text", "text": "pi: about the streaming parser"}]}}) + "\n")
    # Hermes (a gateway transcript)
    hermes = home / ".hermes" / "sessions" / "20261001_100000_abcdef.jsonl"
    hermes.parent.mkdir(parents=True)
    hermes.write_text(
        json.dumps({"role": "session_meta", "model": "x"}) + "\n"
        + json.dumps({"role": "user", "content": "hermes: the streaming parser question",
                      "timestamp": "2026-10-01T10:00:01Z"}) + "\n")
    # OpenCode (database), Gemini CLI, Cursor, Copilot CLI: the real fixtures
    data = home / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    build_opencode_db(data / "opencode.db", FIXTURES / "opencode" / "storage_v2")
    chats = home / ".gemini" / "tmp" / "app" / "chats"
    chats.mkdir(parents=True)
    (chats.parent / ".project_root").write_text(cwd)
    shutil.copy(FIXTURES / "gemini" / "jsonl_v040.jsonl",
                chats / "session-2026-04-29T21-39-gemini00.jsonl")
    cursor = home / ".cursor" / "projects" / str(project).strip("/").replace("/", "-") / \
        "agent-transcripts" / "c0c0c0c0" / "c0c0c0c0.jsonl"
    cursor.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "cursor" / "large.jsonl", cursor)
    copilot = home / ".copilot" / "session-state" / "aaaabbbb-1111-2222-3333-ccccddddeeee"
    copilot.mkdir(parents=True)
    shutil.copy(FIXTURES / "copilot" / "subdir_v1" / "aaaabbbb-1111-2222-3333-ccccddddeeee" /
                "events.jsonl", copilot / "events.jsonl")
    # the four fixtures get one line each about the streaming parser too (appended, as a live
    # session would)
    line = {"id": "g-user-2", "timestamp": "2026-04-29T21:40:00.000Z", "type": "user",
            "content": [{"text": "gemini: and the streaming parser?"}]}
    with open(chats / "session-2026-04-29T21-39-gemini00.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")
    with open(cursor, "a") as fh:
        fh.write(json.dumps({"role": "user", "message": {"content": [
            {"type": "text", "text": "cursor: the streaming parser is gone"}]}}) + "\n")
    with open(copilot / "events.jsonl", "a") as fh:
        fh.write(json.dumps({"type": "user.message", "id": "e9", "parentId": "e8",
                             "timestamp": "2026-03-26T17:51:00.000Z",
                             "data": {"content": "copilot: the streaming parser"}}) + "\n")
    import sqlite3

    conn = sqlite3.connect(data / "opencode.db")
    info = {"role": "user", "time": {"created": 1730000009000}}
    conn.execute("INSERT INTO message VALUES ('m_more', 's_stage0_small', 1730000009000, "
                 "1730000009000, ?)", (json.dumps(info),))
    conn.execute("INSERT INTO part VALUES ('p_more', 'm_more', 's_stage0_small', 0, 0, ?)",
                 (json.dumps({"type": "text", "text": "opencode: the streaming parser"}),))
    conn.commit()
    conn.close()


def test_index_finds_all_eight_agents_and_recall_names_each(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run  # type: ignore[no-untyped-def]
) -> None:
    project = tmp_path / "work" / "app"
    project.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)  # outside any project memory: recall reads the global one
    _seed_sessions(home, project)
    assert run("init", "--global").exit_code == 0
    first = run("--format", "json", "index")
    assert first.exit_code == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["errors"] == []
    by_agent = summary["by_harness"]
    assert set(by_agent) == {"claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor",
                             "copilot"}
    # sessions: OpenCode's database holds two, every other agent one
    assert by_agent == {"claude": 1, "codex": 1, "pi": 1, "hermes": 1, "opencode": 2,
                        "gemini": 1, "cursor": 1, "copilot": 1}
    again = json.loads(run("--format", "json", "index").stdout)
    assert again["added"] == 0 and again["turns"] == 0

    found = run("--format", "json", "recall", "streaming parser", "-k", "20")
    assert found.exit_code == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    harnesses = {h["harness"] for h in hits}
    assert harnesses == {"claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor",
                         "copilot"}, [(h["harness"], h["text"][:60]) for h in hits]
    for hit in hits:
        assert hit["text"].startswith(hit["harness"]) or "streaming parser" not in hit["text"]
    status = json.loads(run("--format", "json", "status").stdout)
    assert json.dumps(status).count("copilot") >= 1
