"""Options shared by many commands.

`--memory` is a root option, but the agent contract prints commands such as
`funes get <session> <turn> --memory <label>` with the option last, so every command accepts
it too (funes.cli.app gives every command the root's options); either place sets the same
thing. `memory_option` declares it where a command wants it listed with its own options.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def _set_memory(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    from funes.cli.app import set_memory

    set_memory(ctx, value)


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


if TYPE_CHECKING:
    _ParamType = click.ParamType[str]  # generic in click 8.5's types, not at run time before it
else:
    _ParamType = click.ParamType


class HarnessType(_ParamType):
    """A harness filter: a known agent, or the producer name a turn file carries."""

    name = "harness"

    def __init__(self, known: tuple[str, ...]) -> None:
        self.known = known

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        """`[claude|codex|…]`, like a choice, though other producer names are allowed."""
        return "[" + "|".join(self.known) + "|…]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """Refuse what no turn can carry (funes.model.turns.is_harness)."""
        from funes.api import is_harness

        text = str(value)
        if not is_harness(text):
            self.fail(f"{text!r} is not a harness: use {', '.join(self.known)}, or a turn "
                      "file's producer name (lowercase letters, digits, '_', '-')", param, ctx)
        return text


def _set_memories(ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> None:
    from funes.cli.app import set_memory

    for value in values:
        set_memory(ctx, value)


def memories_option(func: F) -> F:
    """`--memory/-m PATH` given any number of times (a pooled recall reads them all)."""
    return click.option(
        "--memory",
        "-m",
        metavar="PATH",
        multiple=True,
        expose_value=False,
        is_eager=True,
        callback=_set_memories,
        help="The memory to read; repeat it to rank several memories in one list "
        "(default: this memory and those its recall.pool config lists).",
    )(func)
