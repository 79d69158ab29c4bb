"""The root `funes` command: global options, the lazy command table, and error handling.

Commands are listed here by name with the module that defines them, their section in
`funes --help` and a short help, and imported only when they run: `funes --version`,
`funes --help` and shell completion never import a command module (nor, through them, the
library). tests/test_docs.py checks the table against the modules' `COMMANDS` lists.

The global options (`--format`, `--memory/-m`, `-C`) work before the subcommand and after
it: every command gets them on load (agents write `funes recall "…" --format json`, and the
agent format itself prints `funes get … --memory <label>`).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import click

from funes import __version__
from funes._env import Settings, color_default, debug_enabled
from funes.cli.errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, fail, usage
from funes.cli.output import FORMATS, default_format
from funes.errors import FunesError

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class App:
    """Per-invocation state handed to every command (`pass_app`)."""

    fmt: str
    memory: str | None
    #: Every `--memory` given, in order (a pooled recall reads them all; others read the last).
    memories: list[str] = field(default_factory=list)
    _settings: Settings | None = field(default=None, repr=False)
    _choice: Any = field(default=None, repr=False)

    @property
    def settings(self) -> Settings:
        """The environment, read once per command."""
        if self._settings is None:
            from funes import api

            self._settings = api.load_settings()
        return self._settings

    def repo(self) -> Any:
        """The repository this command works on (discovered, or `--memory`)."""
        return self.choice().repo

    def choice(self, made: Any = None) -> Any:
        """The memory, its label and whether it is the user's (funes.api.memory), once.

        `made` is that choice when the caller made it already (a recall choosing its memories).

        `--memory org/name` reads a remote memory; when it cannot be reached, the last copy
        of it (or the local memory) is read instead and a warning says so.
        """
        from funes import api

        if self._choice is None:
            self._choice = made if made is not None else \
                api.choose_memory(self.settings, self.memory)
            self.warn(self._choice)
        return self._choice

    def warn(self, choice: Any) -> None:
        """Say on stderr that a memory is read from a fallback (an unreachable remote)."""
        if choice.warning:
            click.echo(f"funes: warning: {choice.warning}", err=True)


#: `@pass_app` hands a command the typed `App` instead of a click context.
pass_app = click.make_pass_decorator(App)


def names_remote(memory: str) -> bool:
    """`--memory org/name` (or hf://…, file://…) names a remote memory, not a path."""
    if "/" not in memory or memory.startswith(("/", ".", "~")):
        return False  # a plain local path: decided without importing the library
    from funes import api

    return api.is_remote_memory(memory)


def set_memory(ctx: click.Context, value: str | None) -> None:
    """Record `--memory` (from either place) on the root `App`, resolved as a path or not."""
    app = ctx.find_root().obj
    if value and isinstance(app, App):
        app.memory = value if names_remote(value) else str(Path(value).expanduser().resolve())
        app.memories.append(app.memory)


# -- the command table -------------------------------------------------------------------------


class Entry(NamedTuple):
    """One top-level command: where it lives, where `--help` lists it, what it does."""

    module: str
    section: str
    short: str


_M = "funes.cli.commands."
START, SYNC, GIT, SECURITY, PLUMBING = "Start here", "Sync", "Git", "Security", "Plumbing"
SECTIONS = (START, SYNC, GIT, SECURITY, PLUMBING)
#: Name → entry, in the order `--help` lists them within a section.
COMMANDS: dict[str, Entry] = {
    "quickstart": Entry(_M + "recall", START, "Index this machine's sessions, answer a recall."),
    "add": Entry(_M + "agents", START, "Wire funes into an agent (and a shared memory)."),
    "recall": Entry(_M + "recall", START, "Find past passages: BM25 + vectors, reranked."),
    "get": Entry(_M + "recall", START, "Open a turn (and its neighbours) or a range of turns."),
    "sessions": Entry(_M + "browse", START, "List sessions, newest first: agent, project, turns."),
    "sketch": Entry(_M + "browse", START, "A query-free digest of one session, in order."),
    "scan": Entry(_M + "browse", START, "Find a literal string everywhere (exhaustive)."),
    "status": Entry(_M + "repo", START, "Where the memory is, what it holds, what waits."),
    "ui": Entry(_M + "ui", START, "See the memory in a browser: timeline, search, commits."),
    "remote": Entry(_M + "sync", SYNC, "Manage remotes: where this memory syncs."),
    "push": Entry(_M + "sync", SYNC, "Send a branch to a remote (secrets gate first)."),
    "fetch": Entry(_M + "sync", SYNC, "Download what a remote has and this memory lacks."),
    "pull": Entry(_M + "sync", SYNC, "Fetch a remote and merge its branch into HEAD."),
    "merge": Entry(_M + "sync", SYNC, "Merge a branch or commit into the current branch."),
    "clone": Entry(_M + "sync", SYNC, "Copy a remote memory into a new local one."),
    "sync": Entry(_M + "sync", SYNC, "Fetch, merge and push in one go; retries a lost race."),
    "tag": Entry(_M + "sync", SYNC, "Name a commit; tags travel with push and fetch."),
    "publish": Entry(_M + "sync", SYNC, "Publish chosen sessions (a release's) as their own "
                     "memory."),
    "hooks": Entry(_M + "git", GIT, "Git hooks that link commits to agent turns."),
    "link": Entry(_M + "git", GIT, "Link a code commit to the agent turns behind it."),
    "why": Entry(_M + "git", GIT, "The agent turns behind a code commit."),
    "blame": Entry(_M + "git", GIT, "The agent turns behind lines of a file."),
    "forget": Entry(_M + "security", SECURITY, "Hide chunks from every recall (tombstones)."),
    "scrub": Entry(_M + "security", SECURITY, "Re-run secret redaction over stored chunks."),
    "gc": Entry(_M + "security", SECURITY, "Remove tombstoned and unreachable data."),
    "exclude": Entry(_M + "security", SECURITY, "Keep a project, path or agent out, even "
                     "what is indexed."),
    "keys": Entry(_M + "security", SECURITY, "Signing keys: yours and the ones you trust."),
    "unforget": Entry(_M + "repo", SECURITY, "Lift the tombstones a commit carries."),
    "init": Entry(_M + "repo", PLUMBING, "Create a memory (here, or the global one)."),
    "index": Entry(_M + "ingest", PLUMBING, "Index agent transcripts, incrementally."),
    "import": Entry(_M + "ingest", PLUMBING, "Add the rows of a Rust-funes memory to this one."),
    "embed": Entry(_M + "recall", PLUMBING, "Embed chunks waiting for vectors, newest first."),
    "reindex": Entry(_M + "recall", PLUMBING, "Re-embed the memory with another model."),
    "log": Entry(_M + "repo", PLUMBING, "List commits, newest first."),
    "show": Entry(_M + "repo", PLUMBING, "Show one commit."),
    "config": Entry(_M + "repo", PLUMBING, "Read and write memory settings."),
    "reset": Entry(_M + "repo", PLUMBING, "Point the current branch at another commit."),
    "reflog": Entry(_M + "repo", PLUMBING, "Where a ref pointed, newest first."),
    "fsck": Entry(_M + "repo", PLUMBING, "Verify the memory; exit 1 on damage."),
    "models": Entry(_M + "models", PLUMBING, "Manage the GGUF models (embedding, reranking)."),
    "serve": Entry(_M + "serve", PLUMBING, "Keep models and memories loaded (one per user)."),
    "mcp": Entry(_M + "agents", PLUMBING, "Serve a memory to an agent over MCP (stdio)."),
    "ask": Entry(_M + "agents", PLUMBING, "Answer a question from memory through an agent."),
    "remove": Entry(_M + "agents", PLUMBING, "Take funes out of an agent's configuration."),
    "completion": Entry(_M + "shell", PLUMBING, "Print the shell completion script."),
    "hook": Entry(_M + "agents", PLUMBING, "Drain the agent-hook queue (internal)."),
}


def _global_options(command: click.Command) -> None:
    """Give `command` (and its subcommands) the root's options, so they work after it too."""
    names = {opt for p in command.params for opt in getattr(p, "opts", ())}
    extra: list[click.Parameter] = []
    if "--format" not in names:
        extra.append(click.Option(
            ["--format", "global_fmt"], type=click.Choice(FORMATS), default=None,
            expose_value=False, is_eager=True, callback=_set_format,
            help="Output format (as before the command)."))
    if "--memory" not in names:
        extra.append(click.Option(
            ["--memory", "-m", "global_memory"], metavar="PATH", default=None,
            expose_value=False, is_eager=True,
            callback=lambda ctx, _p, value: set_memory(ctx, value),
            help="The memory to use (as before the command)."))
    if "-C" not in names:
        extra.append(click.Option(
            ["-C", "global_chdir"], metavar="DIR", default=None, expose_value=False,
            is_eager=True, type=click.Path(file_okay=False, exists=True),
            callback=_set_chdir, help="Run as if started in DIR (as before the command)."))
    command.params.extend(extra)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _global_options(sub)


def _set_format(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    app = ctx.find_root().obj
    if value and isinstance(app, App):
        app.fmt = value


def _set_chdir(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        os.chdir(value)


class LazyGroup(click.Group):
    """A group that imports a command's module only when that command runs.

    `funes --help` lists the table's sections and short helps without importing anything.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command of the table, without importing one."""
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported now; it gets the root's options on the way."""
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry.module)
        for command in module.COMMANDS:
            assert isinstance(command, click.Command)
            if command.name == cmd_name:
                command.short_help = entry.short
                _global_options(command)
                self.commands[cmd_name] = command
                return command
        raise LookupError(f"{entry.module} has no command {cmd_name!r}")

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands by section, with the table's short helps (nothing imported)."""
        for section in SECTIONS:
            rows = [(name, entry.short) for name, entry in COMMANDS.items()
                    if entry.section == section and name != "hook"]
            with formatter.section(section):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
    help="The memory to use: a .funes directory or its parent, or a remote memory (org/name, "
    "hf://datasets/org/name). Default: discovered from the current directory like git, else "
    "the global memory ($FUNES_HOME).",
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

    Global options work before or after the command (`funes status --format json`).
    Errors print one line and a hint; set FUNES_DEBUG=1 for tracebacks.
    Exit codes: 0 ok, 1 error, 2 usage, 3 not a repository, 4 diverged, 5 remote, 130 interrupted.
    """
    if color_default() is False:
        ctx.color = False  # NO_COLOR (no-color.org): every subcommand's context inherits it
    if chdir:
        os.chdir(chdir)
    ctx.obj = App(fmt=fmt or default_format(), memory=None)
    set_memory(ctx, memory)


def run(argv: list[str] | None = None) -> None:
    """Run the full CLI and turn errors into messages and exit codes."""
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
    except BrokenPipeError:
        # The reader went away (`funes log | head`): say nothing, and keep Python from
        # complaining while it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(EXIT_BROKEN_PIPE)
    except (OSError, ValueError, RuntimeError) as exc:
        # A damaged Lance table fails deep inside Lance: one line naming the fix, not a
        # traceback; anything else is a bug and keeps its traceback.
        from funes.api import storage_damage

        damage = storage_damage(exc)
        if damage is None:
            raise
        fail(damage, debug=debug)
