"""Shell integration: `funes completion bash|zsh|fish` prints a completion script."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script; e.g. `eval "$(funes completion bash)"`."""
    cls = get_completion_class(shell)
    assert cls is not None  # the Choice above only admits shells click supports
    root = ctx.find_root().command
    click.echo(cls(root, {}, "funes", "_FUNES_COMPLETE").source())


COMMANDS = [completion]
