"""Cursor: `mcpServers.funes` in `~/.cursor/mcp.json`, hooks in `~/.cursor/hooks.json`.

Written for Cursor 1.7 and later and the `cursor-agent` CLI (checked against Cursor's MCP and
hooks documentation): both read the user's `~/.cursor/mcp.json` and `~/.cursor/hooks.json`.

- **MCP**: `mcpServers: {funes: {command, args}}`.
- **Hooks**: `hooks.json` is `{version: 1, hooks: {<event>: [{command}]}}`; `stop` (the agent
  loop ended) indexes, `sessionEnd` also pushes. Cursor passes the event as JSON on stdin
  (`conversation_id`, `transcript_path` where the version has it, `workspace_roots`).
- **Where Cursor has no hook** (its editor's older chat, which is not a transcript file) funes
  indexes nothing; agent transcripts are picked up by the hooks, by `funes index` or by any
  other agent's hook run.
- **ask**: not offered: `cursor-agent -p` has no mode verified to keep every tool off.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.agents.wiring import (
    SERVER_NAME,
    AgentConfigError,
    Edits,
    hook_command,
    is_our_hook,
    json_dump,
    json_entry_add,
    json_entry_remove,
    json_load,
    mcp_command,
)

#: Cursor hook event → funes hook event.
HOOK_EVENTS = {"stop": "turn-end", "sessionEnd": "session-end"}


def mcp_json(settings: Settings) -> Path:
    """Cursor's user-level MCP servers."""
    return settings.cursor_dir / "mcp.json"


def hooks_json(settings: Settings) -> Path:
    """Cursor's user-level hooks."""
    return settings.cursor_dir / "hooks.json"


def config_files(settings: Settings) -> list[Path]:
    """Every file `funes add cursor` may change."""
    return [mcp_json(settings), hooks_json(settings)]


def _with_hooks(path: Path, data: dict[str, Any], settings: Settings) -> dict[str, Any]:
    data.setdefault("version", 1)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise AgentConfigError(path, "`hooks` is not an object")
    for event, kind in HOOK_EVENTS.items():
        entries = hooks.setdefault(event, [])
        if not isinstance(entries, list):
            raise AgentConfigError(path, f"`hooks.{event}` is not a list")
        wanted = {"command": shlex.join(hook_command(settings, "cursor", kind))}
        kept = [e for e in entries if not is_our_hook(e, settings)]
        hooks[event] = [*kept, wanted]
    return data


def _without_hooks(data: dict[str, Any], settings: Settings) -> dict[str, Any]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data
    for event in HOOK_EVENTS:
        entries = hooks.get(event)
        if isinstance(entries, list):
            kept = [e for e in entries if not is_our_hook(e, settings)]
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    return data


def add(edits: Edits, memory: str | None) -> list[str]:
    """Register the MCP server and the hooks; notes for the user."""
    settings = edits.settings
    cmd = mcp_command(memory)
    path = mcp_json(settings)
    json_entry_add(edits, path, ("mcpServers", SERVER_NAME), {"command": cmd[0], "args": cmd[1:]},
                   f"registered MCP server `{SERVER_NAME}` in {path}")
    hooks = hooks_json(settings)
    edits.edit(hooks, lambda data: json_dump(_with_hooks(hooks, json_load(hooks, data), settings),
                                             data),
               f"installed stop and sessionEnd hooks in {hooks}")
    return ["restart Cursor (and cursor-agent) to load the funes MCP server and hooks"]


def remove(edits: Edits) -> None:
    """Undo `add`: the MCP server entry and funes' hooks, nothing else."""
    settings = edits.settings
    path = mcp_json(settings)
    json_entry_remove(edits, path, ("mcpServers", SERVER_NAME),
                      f"removed MCP server `{SERVER_NAME}` from {path}")
    hooks = hooks_json(settings)
    edits.undo(hooks, lambda data: json_dump(_without_hooks(json_load(hooks, data), settings),
                                             data),
               f"removed funes hooks from {hooks}")


def transcripts(settings: Settings, payload: dict[str, Any]) -> list[Path]:
    """The transcript a hook event names, else the conversation's, else every transcript."""
    from funes.ingest.sources import agent_files

    value = payload.get("transcript_path")
    if isinstance(value, str) and value:
        path = Path(value).expanduser()
        if path.is_file():
            return [path]
    every = agent_files(settings, "cursor")
    conversation = payload.get("conversation_id")
    if isinstance(conversation, str) and conversation:
        mine = [p for p in every if conversation in (p.stem, p.parent.name, p.parent.parent.name)]
        if mine:
            return mine
    return every
