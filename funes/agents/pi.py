"""pi: one extension file, `<pi agent dir>/extensions/funes.ts`.

Written for pi (`@mariozechner/pi-coding-agent`, now `@earendil-works/pi-coding-agent`) with
the extension API of 0.48 and later: extensions in `~/.pi/agent/extensions/*.ts` load
automatically (`PI_CODING_AGENT_DIR` moves `~/.pi/agent`), `pi.registerTool`,
`pi.on("agent_end")` and `pi.on("session_shutdown")`, `ctx.sessionManager.getSessionFile()`.

pi deliberately has no MCP client and no CLI command that registers one, so the extension
(package file `funes/hooks/agent-pi-extension.ts`) is the registration: it speaks MCP to
`funes mcp` over stdio and offers `funes_recall`, `funes_get` and `funes_status`, and it runs
the hook after every agent run and at session shutdown. `funes add pi` writes it with the
MCP command and hook path filled in; `funes remove pi` deletes it (and the `extensions`
directory if funes created it and it is empty). No other pi file is touched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.agents.wiring import Edits, hook_path, mcp_command, package_text

TEMPLATE = "agent-pi-extension.ts"


def extension_path(settings: Settings) -> Path:
    """Where pi auto-discovers global extensions."""
    return settings.pi_home / "extensions" / "funes.ts"


def config_files(settings: Settings) -> list[Path]:
    """Every file `funes add pi` may change."""
    return [extension_path(settings)]


def render(settings: Settings, memory: str | None) -> bytes:
    """The extension with this installation's MCP command and hook filled in."""
    text = package_text(TEMPLATE)
    text = text.replace("@MCP_COMMAND@", json.dumps(mcp_command(memory)))
    text = text.replace("@HOOK@", json.dumps([str(hook_path(settings)), "pi"]))
    return text.encode("utf-8")


def add(edits: Edits, memory: str | None) -> list[str]:
    """Write the extension (unchanged when it is already there)."""
    path = extension_path(edits.settings)
    edits.write(path, render(edits.settings, memory), f"installed the funes extension {path}")
    return ["restart pi (or run /reload) to load the funes extension"]


def remove(edits: Edits) -> None:
    """Delete the extension, whatever was edited in it (a backup is kept when it was)."""
    path = extension_path(edits.settings)
    edits.undo(path, lambda _data: None, f"removed the funes extension {path}")


def transcripts(settings: Settings, payload: dict[str, Any]) -> list[Path]:
    """The session file the extension reported."""
    value = payload.get("session_file")
    if isinstance(value, str) and value:
        path = Path(value).expanduser()
        if path.is_file():
            return [path]
    return []
