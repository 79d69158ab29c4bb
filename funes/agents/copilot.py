"""GitHub Copilot CLI: `mcpServers.funes` in `mcp-config.json`, and a hook file of its own.

Written for Copilot CLI 1.0 (checked against GitHub's "Copilot CLI configuration directory"
and "hooks reference" documentation):

- **MCP**: user-level servers live in `~/.copilot/mcp-config.json` (`COPILOT_HOME` moves
  `~/.copilot`): `mcpServers: {funes: {type: local, command, args, tools: ["*"]}}`.
- **Hooks**: every `*.json` in `~/.copilot/hooks/` is loaded and combined with the others,
  so funes writes a file of its own, `hooks/funes.json` (`{version: 1, hooks: {<event>:
  [{type: command, bash, timeoutSec}]}}`) and `remove` deletes it: no shared file is edited.
  Copilot has no per-turn event, so `userPromptSubmitted` indexes what the previous turns
  wrote and `sessionEnd` indexes the rest and pushes. The event arrives as JSON on stdin.
- **ask**: not offered: `copilot -p` has no switch verified to turn every tool off.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.agents.wiring import (
    SERVER_NAME,
    Edits,
    hook_command,
    json_entry_add,
    json_entry_remove,
    mcp_command,
)

#: Copilot hook event → funes hook event.
HOOK_EVENTS = {"userPromptSubmitted": "turn-end", "sessionEnd": "session-end"}
HOOK_TIMEOUT = 10


def mcp_config(settings: Settings) -> Path:
    """Copilot CLI's user-level MCP servers."""
    return settings.copilot_dir / "mcp-config.json"


def hook_file(settings: Settings) -> Path:
    """Funes' own hook file in Copilot's user-level hooks directory."""
    return settings.copilot_dir / "hooks" / "funes.json"


def config_files(settings: Settings) -> list[Path]:
    """Every file `funes add copilot` may change."""
    return [mcp_config(settings), hook_file(settings)]


def render_hooks(settings: Settings) -> bytes:
    """The hook file funes installs."""
    hooks = {
        event: [{"type": "command", "bash": shlex.join(hook_command(settings, "copilot", kind)),
                 "timeoutSec": HOOK_TIMEOUT}]
        for event, kind in HOOK_EVENTS.items()
    }
    return (json.dumps({"version": 1, "hooks": hooks}, indent=2) + "\n").encode("utf-8")


def add(edits: Edits, memory: str | None) -> list[str]:
    """Register the MCP server and write the hook file; notes for the user."""
    settings = edits.settings
    cmd = mcp_command(memory)
    path = mcp_config(settings)
    json_entry_add(edits, path, ("mcpServers", SERVER_NAME),
                   {"type": "local", "command": cmd[0], "args": cmd[1:], "tools": ["*"]},
                   f"registered MCP server `{SERVER_NAME}` in {path}")
    hooks = hook_file(settings)
    edits.write(hooks, render_hooks(settings), f"installed funes hooks {hooks}")
    return ["restart Copilot CLI to load the funes MCP server and hooks"]


def remove(edits: Edits) -> None:
    """Undo `add`: the MCP server entry and funes' hook file."""
    settings = edits.settings
    path = mcp_config(settings)
    json_entry_remove(edits, path, ("mcpServers", SERVER_NAME),
                      f"removed MCP server `{SERVER_NAME}` from {path}")
    hooks = hook_file(settings)
    edits.undo(hooks, lambda _data: None, f"removed funes hooks {hooks}")


def transcripts(settings: Settings, payload: dict[str, Any]) -> list[Path]:
    """The session's events file when the event names it, else every session file."""
    from funes.ingest.sources import agent_files

    every = agent_files(settings, "copilot")
    session = payload.get("sessionId") or payload.get("session_id")
    if isinstance(session, str) and session:
        mine = [p for p in every if session in (p.parent.name, p.stem)]
        if mine:
            return mine
    return every
