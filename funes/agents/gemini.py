"""Gemini CLI: `mcpServers.funes` and hooks in `~/.gemini/settings.json`.

Written for Gemini CLI 0.26 and later (checked against its MCP and hooks documentation,
docs/tools/mcp-server.md and docs/hooks/reference.md):

- **MCP**: `mcpServers: {funes: {command, args}}` in the user settings (`gemini mcp add` would
  write the same entry; funes edits the JSON itself, so `remove` can restore it exactly).
- **Hooks**: `hooks.<Event>` holds matcher groups `{matcher, hooks: [{type: command, command,
  timeout}]}`, the layout Claude Code uses. `AfterAgent` (the agent loop finished a turn)
  indexes, `SessionEnd` also pushes. Gemini passes `session_id`, `transcript_path` and `cwd`
  as JSON on stdin and parses stdout as JSON: the hook prints nothing and exits 0.
- **ask**: not offered. Gemini's non-interactive mode (`gemini -p`) has no switch that turns
  every tool off, and funes only hands recalled passages to an agent that cannot act on them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.agents.wiring import (
    SERVER_NAME,
    Edits,
    json_dump,
    json_entry_add,
    json_entry_remove,
    json_load,
    mcp_command,
    with_grouped_hooks,
    without_grouped_hooks,
)

#: Gemini hook event → funes hook event.
HOOK_EVENTS = {"AfterAgent": "turn-end", "SessionEnd": "session-end"}
#: Milliseconds: Gemini's hook timeouts are in ms (the hook returns in well under one second).
HOOK_TIMEOUT = 10_000


def settings_json(settings: Settings) -> Path:
    """Gemini CLI's user settings."""
    return settings.gemini_dir / "settings.json"


def config_files(settings: Settings) -> list[Path]:
    """Every file `funes add gemini` may change."""
    return [settings_json(settings)]


def add(edits: Edits, memory: str | None) -> list[str]:
    """Register the MCP server and the hooks; notes for the user."""
    path = settings_json(edits.settings)
    cmd = mcp_command(memory)
    json_entry_add(edits, path, ("mcpServers", SERVER_NAME),
                   {"command": cmd[0], "args": cmd[1:]},
                   f"registered MCP server `{SERVER_NAME}` in {path}")
    edits.edit(path, lambda data: json_dump(with_grouped_hooks(
        path, json_load(path, data), edits.settings, "gemini", HOOK_EVENTS,
        timeout=HOOK_TIMEOUT, extra={"name": "funes"}), data),
        f"installed AfterAgent and SessionEnd hooks in {path}")
    return ["restart Gemini CLI to load the funes MCP server and hooks"]


def remove(edits: Edits) -> None:
    """Undo `add`: the MCP server entry and funes' hooks, nothing else."""
    path = settings_json(edits.settings)
    json_entry_remove(edits, path, ("mcpServers", SERVER_NAME),
                      f"removed MCP server `{SERVER_NAME}` from {path}")
    edits.undo(path, lambda data: json_dump(without_grouped_hooks(
        json_load(path, data), edits.settings, HOOK_EVENTS), data),
        f"removed funes hooks from {path}")


def transcripts(settings: Settings, payload: dict[str, Any]) -> list[Path]:
    """The chat log a hook event names, else every Gemini chat log (unchanged ones are skipped)."""
    value = payload.get("transcript_path")
    if isinstance(value, str) and value:
        path = Path(value).expanduser()
        if path.is_file():
            return [path]
    from funes.ingest.sources import agent_files

    return agent_files(settings, "gemini")
