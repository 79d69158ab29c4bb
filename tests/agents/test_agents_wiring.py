"""`funes add` / `funes remove` on a temporary HOME seeded with realistic configurations.

For every agent: add, add again (nothing changes), remove → the user's files are byte for byte
what they were; the command funes registered really starts the MCP server. When the user (or
the agent) changes a file between add and remove, remove takes out only funes' entries.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit
import yaml

from tests.agents.conftest import mcp_session

CLAUDE_JSON = {
    "numStartups": 41,
    "theme": "dark",
    "hasCompletedOnboarding": True,
    "mcpServers": {
        "github": {"type": "stdio", "command": "npx",
                   "args": ["-y", "@modelcontextprotocol/server-github"],
                   "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"}},
    },
    "projects": {"/home/ada/src/app": {"allowedTools": [], "mcpServers": {},
                                       "hasTrustDialogAccepted": True}},
}
CLAUDE_SETTINGS = {
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run test:*)"], "deny": ["Read(./.env)"]},
    "hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send 'Claude is done'"}]}],
        "PreToolUse": [{"matcher": "Bash",
                        "hooks": [{"type": "command", "command": "~/bin/guard.sh", "timeout": 5}]}],
    },
}
CODEX_TOML = """\
# Codex configuration (hand-written)
model = "gpt-5-codex"            # the default model
approval_policy = "on-request"
notify = ["notify-send", "Codex"]   # desktop notification after each turn

[mcp_servers.docs]
command = "npx"
args = ["-y", "mcp-docs"]   # documentation server
startup_timeout_sec = 20

# profiles for quick switching
[profiles.fast]
model = "gpt-5-mini"
"""
HERMES_YAML = """\
# Hermes Agent configuration
model:
  default: anthropic/claude-sonnet-4.6   # main model
  provider: openrouter

mcp_servers:
  # local filesystem access
  filesystem:
    command: "npx"
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/home/ada/projects"]

hooks:
  post_llm_call:
  - command: "~/.hermes/agent-hooks/log-turn.sh"
    timeout: 5
  pre_tool_call:
    - matcher: "terminal"
      command: "~/.hermes/agent-hooks/block-rm-rf.sh"

hooks_auto_accept: false
"""
PI_SETTINGS = '{\n  "theme": "dark",\n  "defaultProvider": "anthropic"\n}\n'
PI_OTHER_EXTENSION = 'export default function (pi) {\n  pi.on("agent_end", async () => {});\n}\n'


def _seed(home: Path) -> None:
    (home / ".claude").mkdir()
    (home / ".claude.json").write_text(json.dumps(CLAUDE_JSON, indent=2))
    os.chmod(home / ".claude.json", 0o600)
    (home / ".claude" / "settings.json").write_text(json.dumps(CLAUDE_SETTINGS, indent=2) + "\n")
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(CODEX_TOML)
    (home / ".hermes").mkdir()
    (home / ".hermes" / "config.yaml").write_text(HERMES_YAML)
    (home / ".pi" / "agent" / "extensions").mkdir(parents=True)
    (home / ".pi" / "agent" / "settings.json").write_text(PI_SETTINGS)
    (home / ".pi" / "agent" / "extensions" / "other.ts").write_text(PI_OTHER_EXTENSION)


def _snapshot(home: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and directory outside $FUNES_HOME, with its bytes and mode."""
    out = {}
    for path in sorted(home.rglob("*")):
        rel = path.relative_to(home)
        if rel.parts[0] == ".funes":
            continue
        data = path.read_bytes() if path.is_file() else b"<dir>"
        out[str(rel)] = (data, stat.S_IMODE(path.stat().st_mode))
    return out


def _registered(agent: str, home: Path) -> list[str]:
    """The MCP server command as the agent's own configuration holds it."""
    if agent == "claude":
        entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["funes"]
        return [entry["command"], *entry["args"]]
    if agent == "codex":
        entry = tomlkit.parse((home / ".codex" / "config.toml").read_text())["mcp_servers"]["funes"]
        return [str(entry["command"]), *map(str, entry["args"])]
    if agent == "hermes":
        config = yaml.safe_load((home / ".hermes" / "config.yaml").read_text())
        entry = config["mcp_servers"]["funes"]
        return [entry["command"], *entry["args"]]
    text = (home / ".pi" / "agent" / "extensions" / "funes.ts").read_text()
    match = re.search(r"^const FUNES_MCP = (.*);$", text, re.M)
    assert match
    return list(json.loads(match.group(1)))


@pytest.fixture
def home(isolated_env: Path) -> Path:
    _seed(isolated_env)
    (isolated_env / "bin").mkdir()
    return isolated_env


@pytest.fixture
def no_agent_clis(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH without claude or codex (whatever this machine has), so funes edits files."""
    monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{Path(sys.executable).parent}")


# Each agent starts its own MCP server process; the quick suite keeps two of the four.
@pytest.mark.parametrize("agent", ["claude", "codex", *(pytest.param(a, marks=pytest.mark.slow)
                                                        for a in ("pi", "hermes"))])
def test_add_twice_then_remove_restores_every_byte(agent: str, home: Path, no_agent_clis: None,
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
    assert not (home / ".funes" / "agents" / "agent-turn-end").exists()


def test_each_agent_gets_the_hook_and_keeps_its_settings(home: Path, no_agent_clis: None,
                                                         run) -> None:  # type: ignore[no-untyped-def]
    for agent in ("claude", "codex", "pi", "hermes"):
        assert run("add", agent).exit_code == 0
    hook = home / ".funes" / "agents" / "agent-turn-end"
    assert os.access(hook, os.X_OK)
    assert shlex.quote(sys.executable) in hook.read_text()

    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == CLAUDE_SETTINGS["permissions"]
    stop = [h["command"] for g in settings["hooks"]["Stop"] for h in g["hooks"]]
    assert stop == ["notify-send 'Claude is done'", f"{hook} claude turn-end"]
    assert settings["hooks"]["SessionEnd"][0]["hooks"][0]["command"].endswith("session-end")
    assert settings["hooks"]["PreToolUse"] == CLAUDE_SETTINGS["hooks"]["PreToolUse"]
    state = json.loads((home / ".claude.json").read_text())
    assert state["mcpServers"]["github"] == CLAUDE_JSON["mcpServers"]["github"]
    assert stat.S_IMODE((home / ".claude.json").stat().st_mode) == 0o600

    codex = (home / ".codex" / "config.toml").read_text()
    assert "# the default model" in codex and "# documentation server" in codex
    doc = tomlkit.parse(codex)
    assert list(doc["notify"]) == [str(hook), "codex", "turn-end", "notify-send", "Codex"]
    assert doc["mcp_servers"]["docs"]["startup_timeout_sec"] == 20

    hermes_text = (home / ".hermes" / "config.yaml").read_text()
    assert "# local filesystem access" in hermes_text and "# main model" in hermes_text
    hermes = yaml.safe_load(hermes_text)
    assert set(hermes["mcp_servers"]) == {"filesystem", "funes"}
    commands = [h["command"] for h in hermes["hooks"]["post_llm_call"]]
    assert commands == [f"{hook} hermes turn-end", "~/.hermes/agent-hooks/log-turn.sh"]
    assert hermes["hooks"]["on_session_finalize"][0]["command"] == f"{hook} hermes session-end"
    assert hermes["hooks"]["pre_tool_call"][0]["matcher"] == "terminal"

    assert (home / ".pi" / "agent" / "extensions" / "other.ts").read_text() == PI_OTHER_EXTENSION
    assert (home / ".pi" / "agent" / "extensions" / "funes.ts").is_file()


def test_remove_after_the_user_edited_keeps_their_edits(home: Path, no_agent_clis: None,
                                                        run) -> None:  # type: ignore[no-untyped-def]
    for agent in ("claude", "codex", "hermes"):
        assert run("add", agent).exit_code == 0
    # Claude rewrites its state file all the time; the user edits the others by hand
    state = json.loads((home / ".claude.json").read_text())
    state["numStartups"] = 42
    (home / ".claude.json").write_text(json.dumps(state, indent=2))
    codex = home / ".codex" / "config.toml"
    codex.write_text(codex.read_text() + "\n[profiles.deep]\nmodel = \"gpt-5\"  # slow\n")
    hermes = home / ".hermes" / "config.yaml"
    hermes.write_text(hermes.read_text().replace("provider: openrouter", "provider: anthropic"))

    for agent in ("claude", "codex", "hermes"):
        result = run("remove", agent)
        assert result.exit_code == 0, result.stderr

    # semantically identical for JSON (re-serialised), byte-identical where funes edits text
    assert json.loads((home / ".claude.json").read_text()) == {**CLAUDE_JSON, "numStartups": 42}
    assert json.loads((home / ".claude" / "settings.json").read_text()) == CLAUDE_SETTINGS
    assert codex.read_text() == CODEX_TOML + "\n[profiles.deep]\nmodel = \"gpt-5\"  # slow\n"
    assert hermes.read_text() == HERMES_YAML.replace("provider: openrouter", "provider: anthropic")
    backups = list((home / ".funes" / "agents" / "backups").rglob("*.claude.json"))
    assert any(json.loads(b.read_text()).get("numStartups") == 42 for b in backups)


def _stand_in_claude(bindir: Path, log: Path) -> None:
    """A `claude` that records its argv and edits ~/.claude.json like `claude mcp` does."""
    script = bindir / "claude"
    script.write_text(f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
with open({str(log)!r}, "a") as fh:
    fh.write(json.dumps(args) + "\\n")
path = os.path.join(os.environ["HOME"], ".claude.json")
data = json.load(open(path))
if args[:2] == ["mcp", "add"]:
    cmd = args[args.index("--") + 1:]
    data.setdefault("mcpServers", {{}})[args[4]] = {{"type": "stdio", "command": cmd[0],
                                                   "args": cmd[1:], "env": {{}}}}
elif args[:2] == ["mcp", "remove"]:
    data["mcpServers"].pop(args[4])
json.dump(data, open(path, "w"), indent=2)
""")
    script.chmod(0o755)


def test_claude_cli_on_path_registers_the_server(home: Path, no_agent_clis: None,
                                                 run) -> None:  # type: ignore[no-untyped-def]
    log = home / "claude-calls.jsonl"
    _stand_in_claude(home / "bin", log)
    assert run("add", "claude").exit_code == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [["mcp", "add", "--scope", "user", "funes", "--", sys.executable, "-m",
                      "funes", "mcp"]]
    assert run("add", "claude").exit_code == 0  # already registered: the CLI is not called
    assert len(log.read_text().splitlines()) == 1

    state = json.loads((home / ".claude.json").read_text())
    state["numStartups"] += 1  # Claude Code touched its state since
    (home / ".claude.json").write_text(json.dumps(state, indent=2))
    assert run("remove", "claude").exit_code == 0
    assert json.loads(log.read_text().splitlines()[-1]) == ["mcp", "remove", "--scope", "user",
                                                            "funes"]
    assert json.loads((home / ".claude.json").read_text()) == {**CLAUDE_JSON, "numStartups": 42}


def test_claude_config_dir_and_codex_home_are_honoured(home: Path, no_agent_clis: None,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       run) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home / "work-claude"))
    monkeypatch.setenv("CODEX_HOME", str(home / "work-codex"))
    before = _snapshot(home)
    assert run("add", "claude").exit_code == 0
    assert run("add", "codex").exit_code == 0
    assert "funes" in json.loads((home / "work-claude" / ".claude.json").read_text())["mcpServers"]
    assert (home / "work-claude" / "settings.json").is_file()
    codex = tomlkit.parse((home / "work-codex" / "config.toml").read_text())
    assert "funes" in codex["mcp_servers"]
    assert (home / ".claude.json").read_text() == json.dumps(CLAUDE_JSON, indent=2)
    assert run("remove", "claude").exit_code == 0
    assert run("remove", "codex").exit_code == 0
    assert _snapshot(home) == before  # files funes created are gone, directories too


def test_add_binds_a_memory_and_creates_the_global_one(home: Path, no_agent_clis: None,
                                                       memory: Path, run) -> None:  # type: ignore[no-untyped-def]
    assert not (home / ".funes" / "FORMAT").exists()
    other = home / "elsewhere" / ".funes"
    assert run("init", str(other.parent)).exit_code == 0
    result = run("--format", "json", "add", "codex", str(other))
    assert result.exit_code == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    assert out["memory"] is None and out["created_memory"] is None
    # A project memory is bound to its project only (funes.api.routing): the MCP server reads
    # it (reading is not publishing), the first index covers only that project.
    assert _registered("codex", home)[-2:] == ["mcp", str(other)]
    assert out["index_command"] == f"funes index --agent codex --workdir {other.parent}"
    record = json.loads((home / ".funes" / "agents" / "codex.json").read_text())
    assert record["memory"] is None and record["projects"] == [str(other)]

    # A memory that is not a project's (a directory of its own) is bound user-wide.
    (home / "mem").mkdir()
    from funes import api
    from funes.storage.repo import Repository

    Repository.init(home / "mem", api.load_settings())
    result = run("--format", "json", "add", "codex", str(home / "mem"))
    out = json.loads(result.stdout)
    assert out["memory"] == str(home / "mem") and "--memory" in out["index_command"]
    assert _registered("codex", home)[-2:] == ["mcp", str(home / "mem")]

    result = run("--format", "json", "add", "pi")
    assert json.loads(result.stdout)["created_memory"] == str(home / ".funes")
    assert (home / ".funes" / "FORMAT").is_file()
    bad = run("add", "claude", str(home / "nowhere"))
    assert bad.exit_code == 3 and "not a funes repository" in bad.stderr


def test_unreadable_config_is_left_alone(home: Path, no_agent_clis: None, run) -> None:  # type: ignore[no-untyped-def]
    broken = '{"numStartups": 3,'  # a half-written file
    (home / ".claude.json").write_text(broken)
    result = run("add", "claude")
    assert result.exit_code == 1 and "cannot edit" in result.stderr
    assert (home / ".claude.json").read_text() == broken


def test_codex_cli_on_path_registers_the_server(home: Path, no_agent_clis: None,
                                                run) -> None:  # type: ignore[no-untyped-def]
    log = home / "codex-calls.jsonl"
    script = home / "bin" / "codex"
    script.write_text(f"""#!{sys.executable}
import json, os, sys, tomlkit
args = sys.argv[1:]
with open({str(log)!r}, "a") as fh:
    fh.write(json.dumps(args) + "\\n")
path = os.path.join(os.environ["HOME"], ".codex", "config.toml")
doc = tomlkit.parse(open(path).read())
if args[:2] == ["mcp", "add"]:
    cmd = args[args.index("--") + 1:]
    doc.setdefault("mcp_servers", tomlkit.table(True))[args[2]] = {{"command": cmd[0],
                                                                  "args": cmd[1:]}}
elif args[:2] == ["mcp", "remove"]:
    del doc["mcp_servers"][args[2]]
open(path, "w").write(tomlkit.dumps(doc))
""")
    script.chmod(0o755)
    config = home / ".codex" / "config.toml"
    assert run("add", "codex").exit_code == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls == [["mcp", "add", "funes", "--", sys.executable, "-m", "funes", "mcp"]]
    assert _registered("codex", home) == [sys.executable, "-m", "funes", "mcp"]
    assert "agent-turn-end" in str(tomlkit.parse(config.read_text())["notify"][0])
    assert run("add", "codex").exit_code == 0 and len(log.read_text().splitlines()) == 1

    config.write_text(config.read_text().replace('"on-request"', '"never"'))  # a user edit
    assert run("remove", "codex").exit_code == 0
    assert json.loads(log.read_text().splitlines()[-1]) == ["mcp", "remove", "funes"]
    doc = tomlkit.parse(config.read_text())
    assert list(doc["notify"]) == ["notify-send", "Codex"]
    assert "funes" not in doc["mcp_servers"] and doc["approval_policy"] == "never"
