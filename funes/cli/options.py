"""Options shared by many commands.

`--memory` is a root option, but the agent contract prints commands such as
`funes get <session> <turn> --memory <label>` with the option last, so every command that
opens a memory accepts it too; either place sets the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def _set_memory(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        root = ctx.find_root()
        if root.obj is not None:
            from funes.cli.main import _names_remote

            remote = _names_remote(value)
            root.obj.memory = value if remote else str(Path(value).expanduser().resolve())


def memory_option(func: F) -> F:
    """Add `--memory/-m PATH` to a command (same meaning as the root option)."""
    return click.option(
        "--memory",
        "-m",
        metavar="PATH",
        default=None,
        expose_value=False,
        is_eager=True,
        callback=_set_memory,
        help="The memory to use (as the root option).",
    )(func)
