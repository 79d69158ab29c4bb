"""The root `funes` command: global options, command registration, and error handling."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from funes import __version__
from funes._env import debug_enabled
from funes.cli.errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, fail, usage
from funes.cli.output import FORMATS, default_format
from funes.errors import FunesError


@dataclass
class App:
    """Per-invocation state handed to every command (`ctx.obj`)."""

    fmt: str
    memory: str | None
    _settings: Any = field(default=None, repr=False)

    @property
    def settings(self) -> Any:
        """The environment, read once per command."""
        if self._settings is None:
            from funes import api

            self._settings = api.load_settings()
        return self._settings

    def repo(self) -> Any:
        """The repository this command works on (discovered, or `--memory`).

        `--memory org/name` reads a remote memory; when it cannot be reached, the last copy
        of it (or the local memory) is read instead and a warning says so.
        """
        from funes import api

        if not self.memory or not _names_remote(self.memory):
            return api.open_memory(self.settings, self.memory)
        choice = api.read_memory(self.settings, self.memory)
        if choice.warning:
            click.echo(f"funes: warning: {choice.warning}", err=True)
        return choice.repo


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Output format. Default: human on a terminal, agent otherwise.",
)
@click.option(
    "--memory",
    "-m",
    metavar="PATH",
    default=None,
    help="The memory to use (a .funes directory or its parent). Default: discovered from the "
    "current directory like git, else the global memory ($FUNES_HOME).",
)
@click.option(
    "-C",
    "chdir",
    metavar="DIR",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Run as if funes was started in DIR.",
)
@click.version_option(__version__, "--version", prog_name="funes")
@click.pass_context
def cli(ctx: click.Context, fmt: str | None, memory: str | None, chdir: str | None) -> None:
    """funes: a git-style memory for coding agents, built from their session transcripts.

    Errors print one line and a hint; set FUNES_DEBUG=1 for tracebacks.
    Exit codes: 0 ok, 1 error, 2 usage, 3 not a repository, 4 diverged, 5 remote, 130 interrupted.
    """
    if chdir:
        os.chdir(chdir)
    if memory and not _names_remote(memory):
        memory = str(Path(memory).expanduser().resolve())
    ctx.obj = App(fmt=fmt or default_format(), memory=memory)


def _names_remote(memory: str) -> bool:
    """`--memory org/name` (or hf://…, file://…) names a remote memory, not a path."""
    if "/" not in memory or memory.startswith(("/", ".", "~")):
        return False  # a plain local path: decided without importing the library
    from funes import api

    return api.is_remote_memory(memory)


def _register() -> None:
    from funes.cli.commands import git, ingest, models, recall, repo, shell

    for module in (repo, ingest, recall, models, git, shell):
        for command in module.COMMANDS:
            cli.add_command(command)
    from funes.cli.commands import sync

    for command in sync.COMMANDS:
        cli.add_command(command)
    from funes.cli.commands.serve import serve

    cli.add_command(serve)
    from funes.cli.commands import agents

    for command in agents.COMMANDS:
        cli.add_command(command)
    from funes.cli.commands import security

    for command in security.COMMANDS:
        cli.add_command(command)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI and turn errors into messages and exit codes."""
    debug = debug_enabled()
    try:
        cli.main(args=argv, prog_name="funes", standalone_mode=False)
    except FunesError as exc:
        fail(exc, debug=debug)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=False)
        sys.exit(2)
    except click.UsageError as exc:
        usage(exc.format_message())
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, click.Abort):
        click.echo("funes: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except (OSError, ValueError, RuntimeError) as exc:
        # A damaged Lance table fails deep inside Lance: one line naming the fix, not a
        # traceback; anything else is a bug and keeps its traceback.
        from funes.api import storage_damage

        damage = storage_damage(exc) if not isinstance(exc, BrokenPipeError) else None
        if damage is None:
            raise
        fail(damage, debug=debug)
    except BrokenPipeError:
        # The reader went away (`funes log | head`): say nothing, and keep Python from
        # complaining while it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_BROKEN_PIPE)


if __name__ == "__main__":
    main()
