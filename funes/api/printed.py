"""What the browsing verbs print in the agent and json formats, whoever runs them.

The CLI, the warm server answering a thin client (funes.cli.thin) and the MCP tools all print
`sessions`, `get --from/--to`, `scan` and `sketch` through `browse_output`, so the bytes are the
same whichever process made them (as funes.api.render does for recall and get).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from funes.api import browse
from funes.api.browse_format import scan_text, sessions_text, sketch_text, turn_page_text
from funes.api.render import to_dict
from funes.errors import UsageError
from funes.storage.repo import Repository

__all__ = ["BROWSE_COMMANDS", "browse_json", "browse_output", "run_browse"]

#: The commands `run_browse` answers (`get` only in its range form).
BROWSE_COMMANDS = ("sessions", "scan", "sketch", "get-range")

Page = browse.SessionPage | browse.TurnPage | browse.ScanPage | browse.SketchPage


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path | set | frozenset):
        return sorted(value) if not isinstance(value, Path) else str(value)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


def browse_json(page: Page) -> dict[str, Any]:
    """A page as JSON-able data: its fields, plus where to continue (`next`)."""
    data: dict[str, Any] = to_dict(page)
    if isinstance(page, browse.SessionPage | browse.ScanPage):
        data["next_offset"] = page.next_offset
    # The command that continues is the agent format's `# next:` line (one place says it).
    lines = browse_output("agent", page).splitlines()
    found = [line.removeprefix("# next: ") for line in lines if line.startswith("# next: ")]
    data["next"] = found[0].split(" (", 1)[0] if found else None
    return data


def browse_output(fmt: str, page: Page) -> str:
    """The text a browsing command prints on stdout in `fmt` (agent or json)."""
    if fmt == "json":
        return json.dumps(browse_json(page), indent=2, ensure_ascii=False, default=_default)
    if isinstance(page, browse.SessionPage):
        return sessions_text(page)
    if isinstance(page, browse.TurnPage):
        return turn_page_text(page)
    if isinstance(page, browse.ScanPage):
        return scan_text(page)
    return sketch_text(page)


def run_browse(repo: Repository, command: str, fields: Mapping[str, Any]) -> Page:
    """Run one browsing command on `repo` with its options (as the CLI names them).

    `fields` are the keyword arguments of the porcelain function (funes.api.browse):
    `sessions(project, harness, since, until, limit, offset)`, `get-range(session_id,
    first, last, max_chars)`, `scan(needle, sessions, limit, offset, context)`,
    `sketch(session_id, max_chars)`.

    Raises:
        UsageError: an unknown command.
    """
    f = dict(fields)
    if command == "sessions":
        return browse.sessions(repo, **f)
    if command == "get-range":
        return browse.get_range(repo, f.pop("session_id"), f.pop("first", None),
                                f.pop("last", None), **f)
    if command == "scan":
        return browse.scan(repo, f.pop("needle"), **f)
    if command == "sketch":
        return browse.sketch(repo, f.pop("session_id"), **f)
    raise UsageError(f"unknown browsing command {command!r}")
