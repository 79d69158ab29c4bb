"""Claude Code: MCP server in `~/.claude.json`, hooks in `~/.claude/settings.json`.

Written for Claude Code 2.1 (checked against the hooks and MCP documentation of 2.1.x):

- **MCP**: user-scope servers live in the top-level `mcpServers` of `~/.claude.json`
  (`$CLAUDE_CONFIG_DIR/.claude.json` when that variable is set); `mcpServers` in settings.json
  is no longer read. With `claude` on PATH, funes registers through
  `claude mcp add --scope user funes -- <python> -m funes mcp [MEMORY]` (and removes with
  `claude mcp remove --scope user funes`); without it, funes edits the JSON itself.
- **Hooks** (settings.json `hooks`): `Stop` and `SubagentStop` index the finished turn,
  `SessionEnd` also syncs a memory that has a remote, `SessionStart` brings it up to date.
  Claude Code passes `session_id`, `transcript_path` and `cwd` as JSON on stdin; a Stop hook
  that exits 2 would keep Claude going, ours always exits 0.
- **ask**: `claude -p` with `--tools ""` (no built-in tools), `--strict-mcp-config` and an
  empty `--mcp-config` (no MCP servers), `--no-session-persistence` (the question does not
  become a session funes would index) and hooks off; the prompt goes on stdin.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.agents.wiring import (
    SERVER_NAME,
    AgentConfigError,
    Edits,
    json_dump,
    json_load,
    mcp_command,
    read_bytes,
    run_cli,
    sha256,
    which,
    with_grouped_hooks,
    without_grouped_hooks,
)

CLI = "claude"
#: Hook events and what they mean to funes.
HOOK_EVENTS = {"Stop": "turn-end", "SubagentStop": "turn-end", "SessionEnd": "session-end",
               "SessionStart": "session-start"}
HOOK_TIMEOUT = 10


def claude_json(settings: Settings) -> Path:
    """The user-level state file that holds user-scope MCP servers."""
    if settings.claude_config_dir != settings.user_home / ".claude":
        return settings.claude_config_dir / ".claude.json"
    return settings.user_home / ".claude.json"


def settings_json(settings: Settings) -> Path:
    """User settings: where hooks are configured."""
    return settings.claude_config_dir / "settings.json"


def config_files(settings: Settings) -> list[Path]:
    """Every file `funes add claude` may change."""
    return [claude_json(settings), settings_json(settings)]


def _server_entry(memory: str | None) -> dict[str, Any]:
    cmd = mcp_command(memory)
    return {"type": "stdio", "command": cmd[0], "args": cmd[1:], "env": {}}


def _servers(path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """The `mcpServers` object of a config (empty when absent)."""
    servers = doc.get("mcpServers", {})
    if not isinstance(servers, dict):
        raise AgentConfigError(path, "`mcpServers` is not an object")
    return servers


def add(edits: Edits, memory: str | None) -> list[str]:
    """Register the MCP server and the hooks; notes for the user."""
    settings = edits.settings
    notes: list[str] = []
    state = claude_json(settings)
    entry = _server_entry(memory)
    current = _servers(state, json_load(state, read_bytes(state))).get(SERVER_NAME)
    if current != entry:
        exe = which(CLI)
        if exe:
            edits.touch(state)
            if current is not None:
                run_cli([exe, "mcp", "remove", "--scope", "user", SERVER_NAME])
            run_cli([exe, "mcp", "add", "--scope", "user", SERVER_NAME, "--", *mcp_command(memory)])
            edits.record.via_cli = True
            edits.wrote(state, f"registered MCP server `{SERVER_NAME}` with `claude mcp add`")
        else:
            def put(data: bytes | None) -> bytes:
                doc = json_load(state, data)
                doc["mcpServers"] = {**_servers(state, doc), SERVER_NAME: entry}
                return json_dump(doc, data)

            edits.edit(state, put, f"registered MCP server `{SERVER_NAME}` in {state}")
    path = settings_json(settings)
    edits.edit(path, lambda data: json_dump(with_grouped_hooks(
        path, json_load(path, data), settings, "claude", HOOK_EVENTS, timeout=HOOK_TIMEOUT), data),
               f"installed Stop, SubagentStop, SessionEnd and SessionStart hooks in {path}")
    notes.append("restart Claude Code (or run /mcp) to load the funes MCP server")
    return notes


def remove(edits: Edits) -> None:
    """Undo `add`: the MCP server entry and funes' hooks, nothing else."""
    settings = edits.settings
    state = claude_json(settings)

    def strip_server(data: bytes) -> bytes | None:
        doc = json_load(state, data)
        servers = doc.get("mcpServers")
        if not isinstance(servers, dict) or SERVER_NAME not in servers:
            return data
        del servers[SERVER_NAME]
        return json_dump(doc, data)

    exe = which(CLI) if edits.record.via_cli else None
    data = read_bytes(state)
    if exe and data is not None and SERVER_NAME in _servers(state, json_load(state, data)):
        rec = edits.record.files.get(str(state))
        if rec is None or rec.written != sha256(data):
            edits.touch(state)
            run_cli([exe, "mcp", "remove", "--scope", "user", SERVER_NAME])
            edits.record.files.pop(str(state), None)
            edits.changed.append(f"removed MCP server `{SERVER_NAME}` with `claude mcp remove`")
    edits.undo(state, strip_server, f"removed MCP server `{SERVER_NAME}` from {state}")
    path = settings_json(settings)
    edits.undo(path, lambda data: json_dump(without_grouped_hooks(
        json_load(path, data), settings, HOOK_EVENTS), data),
               f"removed funes hooks from {path}")


def transcripts(settings: Settings, payload: dict[str, Any]) -> list[Path]:
    """The transcript a Stop/SubagentStop/SessionEnd event names, with its subagents."""
    out: list[Path] = []
    for key in ("transcript_path", "agent_transcript_path"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            path = Path(value).expanduser()
            if path.is_file() and path not in out:
                out.append(path)
    for main in list(out):
        subagents = main.with_suffix("") / "subagents"
        if subagents.is_dir():
            out += [p for p in sorted(subagents.glob("agent-*.jsonl")) if p not in out]
    return out


def ask_command(exe: str) -> list[str]:
    """`claude -p` with every tool, MCP server and hook off; the prompt comes on stdin."""
    return [
        exe, "-p",
        "--output-format", "text",
        "--tools", "",
        "--strict-mcp-config", "--mcp-config", json.dumps({"mcpServers": {}}),
        "--no-session-persistence",
        "--settings", json.dumps({"disableAllHooks": True}),
    ]
