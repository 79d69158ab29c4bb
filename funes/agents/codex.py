"""Codex CLI: `[mcp_servers.funes]` and `notify` in `$CODEX_HOME/config.toml`.

Written for Codex CLI 0.1xx (`codex mcp add`, `notify`, `codex exec --ephemeral`, checked
against the config documentation and `codex exec` of 0.113–0.147):

- **MCP**: with `codex` on PATH, `codex mcp add funes -- <python> -m funes mcp [MEMORY]`
  (removed with `codex mcp remove funes`); otherwise funes appends the table at the end of the
  file between `# funes:begin` and `# funes:end` comments, and edits `notify` in place with
  tomlkit, so every other line, comment included, stays as it was.
- **Hook**: Codex runs one `notify` program after every turn with a JSON event as the last
  argument (`type: agent-turn-complete`, `thread-id`, `cwd`, …). funes sets
  `notify = [hook, "codex", "turn-end", <the user's previous notify…>]`; the hook runs the
  previous program with the same event, so nothing the user had stops working, and `remove`
  puts the previous value back. Codex has no session-end event: the hook syncs a memory with
  a remote after a turn at most every `sync.interval` seconds instead (funes.api.hookworker).
- **ask**: `codex exec` in a read-only sandbox, ephemeral (no rollout file to index), with the
  shell tool, web search, every MCP server and `notify` switched off through `-c` overrides;
  the prompt goes on stdin (`-`).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.agents.wiring import (
    END,
    SERVER_NAME,
    AgentConfigError,
    Edits,
    begin,
    hook_command,
    hook_path,
    mcp_command,
    read_bytes,
    run_cli,
    sha256,
    strip_marked,
    which,
)

CLI = "codex"


def config_toml(settings: Settings) -> Path:
    """Codex's user configuration."""
    return settings.codex_home / "config.toml"


def config_files(settings: Settings) -> list[Path]:
    """Every file `funes add codex` may change."""
    return [config_toml(settings)]


def _load(path: Path, data: bytes | None) -> Any:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        return tomlkit.parse((data or b"").decode("utf-8"))
    except (TOMLKitError, UnicodeDecodeError) as exc:
        raise AgentConfigError(path, f"not valid TOML ({exc})") from None


def _dump(doc: Any) -> bytes:
    import tomlkit

    return tomlkit.dumps(doc).encode("utf-8")


def _server(doc: Any) -> dict[str, Any] | None:
    servers = doc.get("mcp_servers")
    entry = servers.get(SERVER_NAME) if servers is not None else None
    return {"command": entry.get("command"), "args": list(entry.get("args", []))} if entry else None


def _notify_ours(value: Any, settings: Settings) -> bool:
    return isinstance(value, list) and bool(value) and str(value[0]) == str(hook_path(settings))


def _with_server(path: Path, text: str, doc: Any, wanted: dict[str, Any]) -> Any:
    """The document with `[mcp_servers.funes]`: a marked block at the end when possible.

    A block of its own at the end leaves every other line where it was (tomlkit would put a
    new table after whatever comment ends the last `mcp_servers` table) and comes out whole.
    """
    import json

    import tomlkit

    if _server(doc) is None:
        block = [begin("codex"), f"[mcp_servers.{SERVER_NAME}]",
                 f"command = {json.dumps(wanted['command'])}",
                 f"args = {json.dumps(wanted['args'])}", END]
        base = strip_marked(text)
        sep = "" if not base or base.endswith("\n") else "\n"
        candidate = base + sep + "\n".join(block) + "\n"
        with contextlib.suppress(AgentConfigError):
            parsed = _load(path, candidate.encode("utf-8"))
            if _server(parsed) == wanted:
                return parsed
    servers = doc.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    table = tomlkit.table()
    table["command"] = wanted["command"]
    table["args"] = wanted["args"]
    servers[SERVER_NAME] = table
    return doc


def add(edits: Edits, memory: str | None) -> list[str]:
    """Register the MCP server and the notify hook."""
    settings = edits.settings
    path = config_toml(settings)
    cmd = mcp_command(memory)
    wanted = {"command": cmd[0], "args": cmd[1:]}
    current = _server(_load(path, read_bytes(path)))
    exe = which(CLI)
    if current != wanted and exe:
        edits.touch(path)
        if current is not None:
            run_cli([exe, "mcp", "remove", SERVER_NAME])
        run_cli([exe, "mcp", "add", SERVER_NAME, "--", *cmd])
        edits.record.via_cli = True
        edits.wrote(path, f"registered MCP server `{SERVER_NAME}` with `codex mcp add`")

    def change(data: bytes | None) -> bytes | None:
        text = (data or b"").decode("utf-8")
        doc = _load(path, data)
        if _server(doc) != wanted:
            doc = _with_server(path, text, doc, wanted)
        notify = doc.get("notify")
        if notify is not None and not isinstance(notify, list):
            raise AgentConfigError(path, "`notify` is not a list of strings")
        previous = list(notify or [])
        if _notify_ours(notify, settings):
            previous = previous[3:]
        ours = [*hook_command(settings, "codex", "turn-end"), *[str(v) for v in previous]]
        if notify is None or list(notify) != ours:
            doc["notify"] = ours
        out = _dump(doc)
        return data if data is not None and out == data else out

    edits.edit(path, change, f"registered MCP server `{SERVER_NAME}` and `notify` in {path}")
    return ["restart Codex to load the funes MCP server"]


def remove(edits: Edits) -> None:
    """Undo `add`: the MCP table, and `notify` back to what the user had."""
    settings = edits.settings
    path = config_toml(settings)
    data = read_bytes(path)
    exe = which(CLI) if edits.record.via_cli else None
    rec = edits.record.files.get(str(path))
    if exe and data is not None and _server(_load(path, data)) is not None and (
        rec is None or rec.written != sha256(data)
    ):
        edits.touch(path)
        run_cli([exe, "mcp", "remove", SERVER_NAME])
        edits.changed.append(f"removed MCP server `{SERVER_NAME}` with `codex mcp remove`")

    def strip(data: bytes) -> bytes | None:
        doc = _load(path, strip_marked(data.decode("utf-8")).encode("utf-8"))
        servers = doc.get("mcp_servers")
        if servers is not None and SERVER_NAME in servers:
            del servers[SERVER_NAME]
            if not servers:
                del doc["mcp_servers"]
        notify = doc.get("notify")
        if _notify_ours(notify, settings):
            previous = list(notify)[3:]
            if previous:
                doc["notify"] = previous
            else:
                del doc["notify"]
        return _dump(doc)

    edits.undo(path, strip, f"removed MCP server `{SERVER_NAME}` and funes' `notify` from {path}")


def transcripts(settings: Settings, payload: dict[str, Any]) -> list[Path]:
    """The rollout of the thread that just finished a turn (newest rollout if unnamed)."""
    sessions = settings.codex_home / "sessions"
    thread = payload.get("thread-id") or payload.get("thread_id")
    if isinstance(thread, str) and thread and "/" not in thread:
        found = sorted(sessions.glob(f"*/*/*/rollout-*{thread}.jsonl"))
        if found:
            return found[-1:]
    rollouts = [p for p in sessions.glob("*/*/*/rollout-*.jsonl") if p.is_file()]
    return [max(rollouts, key=lambda p: p.stat().st_mtime)] if rollouts else []


def ask_command(exe: str) -> list[str]:
    """`codex exec` read-only and ephemeral, with tools, MCP servers and notify off."""
    return [
        exe, "exec",
        "--sandbox", "read-only",
        "--skip-git-repo-check",
        "--ephemeral",
        "--color", "never",
        "-c", "features.shell_tool=false",
        "-c", "features.web_search_request=false",
        "-c", "mcp_servers={}",
        "-c", "notify=[]",
        "-",
    ]
