"""Rendering results in the three output formats.

`agent` is compact and stable (documented in docs/agents.md), `human` is readable and coloured
on a terminal, `json` is for programs.

stdout carries data; stderr carries progress, warnings and errors.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

FORMATS = ("agent", "human", "json")


def default_format() -> str:
    """Human output on a terminal, the agent contract otherwise (pipes, agents, hooks)."""
    return "human" if sys.stdout.isatty() else "agent"


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def to_dict(value: Any) -> Any:
    """A result as plain JSON-able data (dataclasses, paths and collections converted)."""
    return _jsonable(value)


def to_json(value: Any) -> str:
    """Serialise a result (dataclasses included) as indented JSON."""
    return json.dumps(_jsonable(value), indent=2, ensure_ascii=False, sort_keys=False)


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
