"""Hermes Agent: `mcp_servers.funes` and shell hooks in `$HERMES_HOME/config.yaml`.

Written for Hermes Agent with shell hooks (the `hooks:` block of config.yaml, 2026 releases;
checked against its "Event Hooks" and "MCP" documentation):

- **MCP**: `mcp_servers: {funes: {command, args}}` (stdio). `hermes mcp add` is an interactive
  wizard, so funes edits the file itself.
- **Hooks**: `post_llm_call` (once per finished turn) indexes; `on_session_finalize` (session
  teardown) also pushes. Hermes runs each `command` with `shlex.split` and the event as JSON on
  stdin. Hermes asks the user once per (event, command) before running a new shell hook, or
  runs it when `hooks_auto_accept: true` / `--accept-hooks` / `HERMES_ACCEPT_HOOKS=1`; funes
  does not approve hooks on the user's behalf.

PyYAML would drop the user's comments, so funes edits config.yaml as text: each insertion is
a block between `# funes:begin` and `# funes:end` comment lines, placed at the start of the
mapping or list it belongs to, and checked by parsing the result. `remove` deletes those
blocks, which gives the original text back. A layout funes cannot edit as text (a flow-style
`mcp_servers: {…}`, an existing non-funes `funes` entry) falls back to a PyYAML rewrite, which
keeps every setting but not the comments; `add` says so when it happens.
"""

from __future__ import annotations

import json
import re
import shlex
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
    mcp_command,
    strip_marked,
)

#: Hermes hook event → funes hook event.
HOOK_EVENTS = {"post_llm_call": ("turn-end", 10), "on_session_finalize": ("session-end", 30)}
BEGIN = begin("hermes")


def config_yaml(settings: Settings) -> Path:
    """Hermes' user configuration."""
    return settings.hermes_home / "config.yaml"


def config_files(settings: Settings) -> list[Path]:
    """Every file `funes add hermes` may change."""
    return [config_yaml(settings)]


def _parse(path: Path, text: str) -> dict[str, Any]:
    import yaml

    try:
        value = yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise AgentConfigError(path, f"not valid YAML ({str(exc).splitlines()[0]})") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AgentConfigError(path, "expected a mapping at the top")
    return value


def _wanted(settings: Settings, memory: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    cmd = mcp_command(memory)
    server = {"command": cmd[0], "args": cmd[1:]}
    hooks = {event: {"command": shlex.join(hook_command(settings, "hermes", kind)),
                     "timeout": timeout}
             for event, (kind, timeout) in HOOK_EVENTS.items()}
    return server, hooks


def _is_ours(data: dict[str, Any], settings: Settings, memory: str | None) -> bool:
    server, hooks = _wanted(settings, memory)
    servers, all_hooks = data.get("mcp_servers") or {}, data.get("hooks") or {}
    if not isinstance(servers, dict) or not isinstance(all_hooks, dict):
        return False
    if servers.get(SERVER_NAME) != server:
        return False
    return all(item in (all_hooks.get(event) or []) for event, item in hooks.items())


# -- text editing ------------------------------------------------------------------------------

_KEY = r"^{indent}{key}\s*:\s*(#.*)?$"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """Index after the block of the key at `start` (lines indented deeper than `indent`)."""
    i = start + 1
    while i < len(lines) and (not _content(lines[i]) or _indent(lines[i]) > indent):
        i += 1
    return i


def _find(lines: list[str], lo: int, hi: int, indent: int, key: str) -> int | None:
    pattern = re.compile(_KEY.format(indent=" " * indent, key=re.escape(key)))
    inline = re.compile(rf"^{' ' * indent}{re.escape(key)}\s*:\s*[^#\s]")
    for i in range(lo, hi):
        if pattern.match(lines[i]):
            return i
        if inline.match(lines[i]):
            raise _NotText
    return None


def _child_indent(lines: list[str], start: int, end: int, default: int) -> int:
    for i in range(start + 1, end):
        if _content(lines[i]):
            return _indent(lines[i])
    return default


class _NotText(Exception):
    """The layout is not one funes edits as text."""


def _insert(lines: list[str], top: str, child: str, body: list[str], *, item: bool) -> None:
    """Insert `child` (a mapping entry, or one list `item` under `child`) below `top`."""
    t = _find(lines, 0, len(lines), 0, top)
    if t is None:
        lines += [BEGIN, f"{top}:", f"  {child}:",
                  *[("    - " if item and n == 0 else "      " if item else "    ") + b
                    for n, b in enumerate(body)], END]
        return
    end = _block_end(lines, t, 0)
    ci = _child_indent(lines, t, end, 2)
    c = _find(lines, t + 1, end, ci, child)
    if c is not None and not item:
        raise _NotText  # an existing `funes` server that funes did not mark
    if c is None:
        block = [f"{' ' * ci}{child}:"]
        block += [" " * (ci + 2) + ("- " if item and n == 0 else "  " if item else "") + b
                  for n, b in enumerate(body)]
        lines[t + 1:t + 1] = [" " * ci + BEGIN, *block, " " * ci + END]
        return
    cend = _block_end(lines, c, ci)
    first = next((i for i in range(c + 1, cend) if _content(lines[i])), None)
    if first is None:
        # `child:` with nothing under it, or items at the key's own indent (`- …`)
        after = next((i for i in range(c + 1, len(lines)) if _content(lines[i])), None)
        ii = _indent(lines[after]) if after is not None and \
            lines[after].lstrip().startswith("-") and _indent(lines[after]) == ci else ci + 2
    else:
        ii = _indent(lines[first])
        if not lines[first].lstrip().startswith("-"):
            raise _NotText
    items = [" " * ii + ("- " if n == 0 else "  ") + b for n, b in enumerate(body)]
    lines[c + 1:c + 1] = [" " * ii + BEGIN, *items, " " * ii + END]


def _text_add(text: str, settings: Settings, memory: str | None) -> str:
    server, hooks = _wanted(settings, memory)
    lines = strip_marked(text).splitlines()
    _insert(lines, "mcp_servers", SERVER_NAME,
            [f"command: {json.dumps(server['command'])}",
             f"args: {json.dumps(server['args'])}"], item=False)
    for event, entry in hooks.items():
        _insert(lines, "hooks", event,
                [f"command: {json.dumps(entry['command'])}", f"timeout: {entry['timeout']}"],
                item=True)
    return "\n".join(lines) + ("\n" if text.endswith("\n") or not text else "")


def _yaml_rewrite(data: dict[str, Any]) -> str:
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False))


def _without_funes(data: dict[str, Any], settings: Settings) -> dict[str, Any]:
    servers = data.get("mcp_servers")
    if isinstance(servers, dict):
        servers.pop(SERVER_NAME, None)
        if not servers:
            del data["mcp_servers"]
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        script = str(hook_command(settings, "hermes", "turn-end")[0])
        for event in HOOK_EVENTS:
            items = hooks.get(event)
            if isinstance(items, list):
                kept = [i for i in items
                        if not (isinstance(i, dict) and script in str(i.get("command", "")))]
                if kept:
                    hooks[event] = kept
                else:
                    del hooks[event]
        if not hooks:
            del data["hooks"]
    return data


def add(edits: Edits, memory: str | None) -> list[str]:
    """Register the MCP server and the two shell hooks."""
    settings = edits.settings
    path = config_yaml(settings)
    notes: list[str] = []

    def change(data: bytes | None) -> bytes:
        text = (data or b"").decode("utf-8")
        current = _parse(path, text)
        for key in ("mcp_servers", "hooks"):
            if current.get(key) is not None and not isinstance(current[key], dict):
                raise AgentConfigError(path, f"`{key}` is not a mapping")
        if _is_ours(current, settings, memory):
            return data or b""
        try:
            new = _text_add(text, settings, memory)
            if _is_ours(_parse(path, new), settings, memory):
                return new.encode("utf-8")
        except _NotText:
            pass
        parsed = _without_funes(_parse(path, strip_marked(text)), settings)
        server, hooks = _wanted(settings, memory)
        parsed.setdefault("mcp_servers", {})[SERVER_NAME] = server
        for event, entry in hooks.items():
            parsed.setdefault("hooks", {}).setdefault(event, []).append(entry)
        notes.append(f"{path} was rewritten as plain YAML: its settings are kept, its comments "
                     "are not (the backup has them)")
        return _yaml_rewrite(parsed).encode("utf-8")

    edits.edit(path, change, f"registered MCP server `{SERVER_NAME}` and shell hooks in {path}")
    notes.append("Hermes asks once before it runs a new shell hook (or set hooks_auto_accept); "
                 "restart Hermes to load the funes MCP server")
    return notes


def remove(edits: Edits) -> None:
    """Undo `add`: the marked blocks (or, after a rewrite, funes' entries)."""
    settings = edits.settings
    path = config_yaml(settings)

    def strip(data: bytes) -> bytes | None:
        text = strip_marked(data.decode("utf-8"))
        parsed = _parse(path, text)
        if _without_funes(dict(_parse(path, text)), settings) == parsed:
            return text.encode("utf-8")
        return _yaml_rewrite(_without_funes(parsed, settings)).encode("utf-8")

    edits.undo(path, strip, f"removed MCP server `{SERVER_NAME}` and funes' hooks from {path}")


def transcripts(settings: Settings, payload: dict[str, Any]) -> list[Path]:
    """Hermes' state.db (every session), or the session's JSONL transcript without one."""
    db = settings.hermes_home / "state.db"
    if db.is_file():
        return [db]
    session = payload.get("session_id")
    if isinstance(session, str) and session and "/" not in session:
        path = settings.hermes_home / "sessions" / f"{session}.jsonl"
        if path.is_file():
            return [path]
    return []
