"""Wiring funes into coding agents: MCP registration, per-turn hooks, `ask`, the MCP server.

One module per agent (`claude`, `codex`, `pi`, `hermes`, `opencode`, `gemini`, `cursor`,
`copilot`) knows where that agent keeps its
configuration and how to register `funes mcp` and the hook there; `wiring` holds what they
share (backups, reversible edits, the record of what funes changed); `turnhook` is the tiny
foreground half of every agent hook (`hook` forwards to it, for scripts installed by earlier
versions); `mcp_server` builds the stdio MCP server on the official
SDK; `ask` builds the grounding prompt and runs an agent's CLI with its tools disabled.

Nothing here imports `mcp` at module level except `mcp_server`, which only `funes mcp` loads.
"""

from __future__ import annotations

#: The agents `funes add` knows how to wire.
AGENTS: tuple[str, ...] = (
    "claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor", "copilot"
)
