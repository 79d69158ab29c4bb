"""Generate troff man pages from the click command tree.

`python -m funes.cli.manpages man/` writes `funes.1` and one `funes-<command>.1` per command;
tests/test_docs.py fails when the checked-in pages differ from what this produces, so the
pages cannot drift from the real options.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click

from funes import __version__
from funes.cli.errors import EXIT_CODES
from funes.cli.main import cli

DATE = "2026"  # fixed, so regenerating does not churn the files

#: The EXAMPLES section of each page: (command line, what it does). tests/test_docs.py parses
#: every line against the real command tree, so an example cannot name an option that is gone.
EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "funes": (
        ("funes quickstart", "index this machine's agent sessions and answer a first recall"),
        ("funes add claude", "wire funes into Claude Code: each turn indexed, a recall tool"),
        ('funes recall "why did we drop the streaming parser"', "search the memory"),
        ("funes status", "what the memory holds"),
    ),
    "quickstart": (
        ("funes quickstart", "set up and answer the sample question"),
        ('funes quickstart "which database did we pick for the cache"', "ask your own"),
        ("funes quickstart --budget 0", "index only; embed later with funes embed"),
    ),
    "init": (
        ("funes init", "a project memory in ./.funes"),
        ("funes init --global", "the user's memory at $FUNES_HOME"),
    ),
    "index": (
        ("funes index", "index every agent's new turns on this machine"),
        ("funes index --agent codex --since 7d", "only Codex sessions from the last week"),
        ("funes index --check exports/", "validate turn files (.funes.jsonl) before publishing"),
    ),
    "import": (
        ("funes import huggingface/funes-memory", "a Rust-funes memory on the Hub"),
        ("funes import", "the Rust funes' local memory, $FUNES_HOME/memory"),
    ),
    "recall": (
        ('funes recall "why did we drop the streaming parser"', "passages with provenance"),
        ('funes recall "retry policy" --harness claude --since 30d', "narrowed by filters"),
        ('funes --format json recall "release checklist" -k 3', "three hits, as JSON"),
    ),
    "get": (
        ("funes get SESSION TURN --window 2", "a turn whole, with two turns either side"),
    ),
    "embed": (
        ("funes embed", "embed everything waiting"),
        ("funes embed --budget 60", "embed for about a minute; run again to continue"),
    ),
    "status": (
        ("funes status", "the memory, HEAD, chunks by agent, the embedding backlog"),
        ("funes status --memory ~/.funes", "the global memory, from anywhere"),
    ),
    "log": (("funes log -n 5", "the last five commits"),
            ("funes log --links", "with the code commits each one links")),
    "show": (("funes show HEAD~1", "the commit before the last"),),
    "config": (
        ('funes config --global set user.name "Ada Lovelace"', "your name in every memory"),
        ("funes config set recall.k 12", "this memory returns 12 passages"),
        ("funes config", "list what this memory sets"),
    ),
    "add": (
        ("funes add claude", "wire Claude Code to the memory of each session's project"),
        ("funes add codex", "wire Codex and index its past sessions (words now, vectors behind)"),
    ),
    "remove": (("funes remove claude", "restore Claude Code's files"),),
    "ask": (('funes ask claude "why did we drop the streaming parser"', "a grounded answer"),),
    "remote": (
        ("funes remote add origin acme/funes-memory", "a Hugging Face dataset as origin"),
        ("funes remote", "list the remotes"),
    ),
    "push": (("funes push", "send the branch to origin through the publish gate"),
             ("funes push --dry-run", "show what would be sent and held back")),
    "pull": (("funes pull", "fetch origin and merge"),),
    "clone": (("funes clone acme/funes-memory", "a copy in ./funes-memory/.funes"),),
    "hooks": (("funes hooks install", "link each git commit here to its agent turns"),
              ("funes hooks", "show the hooks and where commits are linked")),
    "why": (("funes why HEAD", "the agent turns behind the last commit"),),
    "blame": (("funes blame funes/cli/main.py:40", "the commit and turns behind line 40"),),
    "forget": (("funes forget --session SESSION", "hide a session everywhere"),),
    "keys": (("funes keys generate", "start signing commits"),
             ("funes keys", "list your key and the keys you trust")),
    "models": (("funes models", "the models, and which are installed"),
               ("funes models install minilm-l6-v2", "install the default embedding model")),
    "serve": (("funes serve --status", "is a warm server running for this memory?"),),
    "ui": (
        ("funes ui", "serve the pages on a free port and open them in the browser"),
        ("funes ui --port 8765 --no-open", "a fixed address, printed, no browser"),
        ("funes ui --memory acme/team-memory --memory .", "a team's memory beside this one"),
    ),
    "fsck": (("funes fsck --verify", "check everything, signatures included"),),
}


def _esc(text: str) -> str:
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(
        ("\\&" + line) if line.startswith((".", "'")) else line for line in out.splitlines()
    )


def _options(command: click.Command, ctx: click.Context, *, with_help: bool = True) -> list[str]:
    lines = []
    for param in command.get_params(ctx):
        if not with_help and param.name == "help":
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, help_text = record
        lines += [".TP", f"\\fB{_esc(names)}\\fR", _esc(help_text or "")]
    return lines


def _usage(command: click.Command, ctx: click.Context) -> str:
    pieces = command.collect_usage_pieces(ctx)
    return " ".join([ctx.command_path, *pieces])


def render_page(path: list[str], command: click.Command, parent: click.Context | None) -> str:
    """One man page for `command` (with a section per subcommand if it is a group)."""
    # The root context carries the group's settings (help option names, widths) so pages come
    # out the same whether or not the command tree has already run in this process.
    settings = command.context_settings if parent is None else {}
    ctx = click.Context(command, info_name=path[-1], parent=parent, **settings)
    help_text = inspect.cleandoc(command.help or "")
    summary = help_text.splitlines()[0] if help_text else ""
    # NAME is "page \- summary": a summary that names the program again reads "funes \- funes:"
    summary = summary.removeprefix(f"{path[-1]}: ")
    lines = [
        f'.TH "{"-".join(path).upper()}" 1 "{DATE}" "funes {__version__}" "funes manual"',
        ".SH NAME",
        f"{_esc('-'.join(path))} \\- {_esc(summary)}",
        ".SH SYNOPSIS",
        f"\\fB{_esc(_usage(command, ctx))}\\fR",
        ".SH DESCRIPTION",
        _esc(help_text.replace("\b\n", "")),
    ]
    options = _options(command, ctx)
    if options:
        lines += [".SH OPTIONS", *options]
    if isinstance(command, click.Group):
        lines.append(".SH COMMANDS")
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is None or sub.hidden:
                continue
            sub_ctx = click.Context(sub, info_name=sub_name, parent=ctx)
            lines += [
                ".TP",
                f"\\fB{_esc(_usage(sub, sub_ctx))}\\fR",
                _esc(inspect.cleandoc(sub.help or "")),
            ]
            lines += _options(sub, sub_ctx, with_help=False)
    examples = EXAMPLES.get(path[-1] if len(path) > 1 else path[0], ())
    if examples:
        lines.append(".SH EXAMPLES")
        for example, meaning in examples:
            lines += [".TP", f"\\fB{_esc(example)}\\fR", _esc(meaning)]
    if len(path) == 1:
        lines.append(".SH EXIT STATUS")
        for code, meaning in EXIT_CODES:
            lines += [".TP", f"\\fB{code}\\fR", _esc(meaning)]
        lines += [
            ".SH ENVIRONMENT",
            ".TP",
            "\\fBFUNES_HOME\\fR",
            "The user's funes directory and global memory (default ~/.funes).",
            ".TP",
            "\\fBFUNES_DEBUG\\fR",
            "Set to 1 to print tracebacks with errors.",
        ]
    lines += [".SH SEE ALSO", "\\fBfunes\\fR(1)" if len(path) > 1 else _see_also()]
    return "\n".join(lines) + "\n"


def _see_also() -> str:
    ctx = click.Context(cli, info_name="funes")
    return ", ".join(f"\\fBfunes\\-{_esc(n)}\\fR(1)" for n in cli.list_commands(ctx))


def render_all() -> dict[str, str]:
    """Every page, keyed by file name."""
    pages = {"funes.1": render_page(["funes"], cli, None)}
    root_ctx = click.Context(cli, info_name="funes", **cli.context_settings)
    for name in cli.list_commands(root_ctx):
        command = cli.get_command(root_ctx, name)
        if command is not None and not command.hidden:
            pages[f"funes-{name}.1"] = render_page(["funes", name], command, root_ctx)
    return pages


def main(argv: list[str]) -> int:
    """Write the pages into a directory (default man/), removing stale funes pages."""
    out = Path(argv[0] if argv else "man")
    out.mkdir(parents=True, exist_ok=True)
    pages = render_all()
    for stale in out.glob("funes*.1"):
        if stale.name not in pages:
            stale.unlink()
    for name, text in pages.items():
        (out / name).write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
