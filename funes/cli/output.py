"""Rendering results in the three output formats.

`agent` is compact and stable (documented in docs/agents.md), `human` is readable and coloured
on a terminal, `json` is for programs.

stdout carries data; stderr carries progress, warnings and errors.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from funes.api import BackfillStart

FORMATS = ("agent", "human", "json")


def default_format() -> str:
    """Human output on a terminal, the agent contract otherwise (pipes, agents, hooks)."""
    return "human" if sys.stdout.isatty() else "agent"


def to_dict(value: Any) -> Any:
    """A result as plain JSON-able data (funes.api.render.to_dict)."""
    from funes.api.render import to_dict as convert

    return convert(value)


def to_json(value: Any) -> str:
    """Serialise a result (dataclasses included) as indented JSON (funes.api.render)."""
    from funes.api.render import to_json as serialise

    return serialise(value)


def render(
    fmt: str,
    value: Any,
    *,
    human: Callable[[Any], str],
    agent: Callable[[Any], str] | None = None,
) -> None:
    """Print `value` in the chosen format (agent falls back to the uncoloured human form)."""
    if fmt == "json":
        click.echo(to_json(value))
        return
    if fmt == "agent":
        text = (agent or human)(value)
        click.echo(click.unstyle(text) if text else text, nl=bool(text))
        return
    text = human(value)
    if text:
        click.echo(text, color=None)


def short(oid: str | None) -> str:
    """An abbreviated id for display."""
    return oid[:12] if oid else "(none)"


def backfill_text(s: BackfillStart) -> str:
    """One line on what starting the backfill did."""
    if s.action == "started":
        return (f"embedding {s.waiting} chunks in the background (pid {s.pid}); "
                "`funes status` shows how far it is")
    if s.action == "running":
        return f"the background backfill is already embedding (pid {s.pid})"
    if s.action == "nothing":
        return "nothing waits for an embedding"
    if s.action == "no-model":
        return f"{s.waiting} chunks wait for an embedding, but no model is installed: {s.detail}"
    return s.detail
