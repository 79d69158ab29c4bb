"""OpenCode: `mcp.funes` in `opencode.json` and a plugin file that runs the hook.

Written for OpenCode 1.x (anomalyco/opencode; checked against its config, MCP and plugin
documentation): the user's configuration is `~/.config/opencode/opencode.json`
(`XDG_CONFIG_HOME` moves `~/.config`), and every `*.js`/`*.ts` file in
`~/.config/opencode/plugin/` is loaded as a plugin.

- **MCP**: `mcp: {funes: {type: local, command: [<python>, -m, funes, mcp, …], enabled:
  true}}` in `opencode.json`. A configuration kept only as `opencode.jsonc` (JSON with
  comments) is not edited: `add` says which entry to paste.
- **Hooks**: OpenCode has no hook command, but plugins receive its events; funes installs
  `plugin/funes.js` (package file `funes/hooks/agent-opencode-plugin.js`), which runs the hook
  on `session.idle` (a turn finished). A plugin sees no dependable session end, so a memory
  with a remote is synced after a turn at most every `sync.interval` seconds, as for Codex.
- **ask**: not offered: `opencode run` has no mode verified to keep every tool off.
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
    hook_path,
    json_entry_add,
    json_entry_remove,
    mcp_command,
    package_text,
)

TEMPLATE = "agent-opencode-plugin.js"


def config_json(settings: Settings) -> Path:
    """OpenCode's user configuration."""
    return settings.opencode_config_dir / "opencode.json"


def plugin_path(settings: Settings) -> Path:
    """Where OpenCode loads global plugins from."""
    return settings.opencode_config_dir / "plugin" / "funes.js"


def config_files(settings: Settings) -> list[Path]:
    """Every file `funes add opencode` may change."""
    return [config_json(settings), plugin_path(settings)]


def render_plugin(settings: Settings) -> bytes:
    """The plugin with this installation's hook filled in."""
    text = package_text(TEMPLATE).replace("@HOOK@", json.dumps(str(hook_path(settings))))
    return text.encode("utf-8")


def add(edits: Edits, memory: str | None) -> list[str]:
    """Register the MCP server and install the plugin; notes for the user."""
    settings = edits.settings
    path = config_json(settings)
    jsonc = path.with_suffix(".jsonc")
    if jsonc.is_file() and not path.is_file():
        raise AgentConfigError(
            jsonc, "funes edits opencode.json, not JSON with comments; add "
            f'"mcp": {{"{SERVER_NAME}": {{"type": "local", "command": '
            f'{json.dumps(mcp_command(memory))}}}}} by hand or rename it to opencode.json')
    json_entry_add(edits, path, ("mcp", SERVER_NAME),
                   {"type": "local", "command": mcp_command(memory), "enabled": True},
                   f"registered MCP server `{SERVER_NAME}` in {path}")
    plugin = plugin_path(settings)
    edits.write(plugin, render_plugin(settings), f"installed the funes plugin {plugin}")
    return ["restart OpenCode to load the funes MCP server and plugin"]


def remove(edits: Edits) -> None:
    """Undo `add`: the MCP server entry and the plugin file."""
    settings = edits.settings
    path = config_json(settings)
    json_entry_remove(edits, path, ("mcp", SERVER_NAME),
                      f"removed MCP server `{SERVER_NAME}` from {path}")
    plugin = plugin_path(settings)
    edits.undo(plugin, lambda _data: None, f"removed the funes plugin {plugin}")


def transcripts(settings: Settings, payload: dict[str, Any]) -> list[Path]:
    """OpenCode's database (and older JSON sessions): unchanged rows cost nothing to skip."""
    from funes.ingest.sources import agent_files

    return agent_files(settings, "opencode")
