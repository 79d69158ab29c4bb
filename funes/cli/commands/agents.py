"""Agent verbs: add, remove, mcp, ask, and the hidden `hook` the agent hooks start."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from funes import api
from funes.cli.options import memory_option
from funes.cli.output import render
from funes.cli.progress import progress_bar

AGENTS = ("claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor", "copilot")
ASK_AGENTS = ("claude", "codex")


def _app(ctx: click.Context) -> Any:
    return ctx.find_root().obj


def _memory_arg(memory: str | None) -> str | None:
    return str(Path(memory).expanduser().resolve()) if memory else None


def _wiring_text(r: api.WiringResult, verb: str) -> str:
    lines = []
    if r.created_memory:
        lines.append(f"created the global memory {r.created_memory} (as `funes init --global`)")
    if r.changed:
        lines.append(f"{verb} {r.agent}:")
        lines += [f"  {line}" for line in r.changed]
        lines += r.notes
    elif verb == "wired":
        lines.append(f"{r.agent} is already wired to funes; nothing changed")
    else:
        lines.append(f"funes was not wired into {r.agent}; nothing changed")
    if r.indexed is not None:
        s = r.indexed
        lines.append(f"indexed {s.sessions} sessions, {s.turns} turns, {s.chunks} chunks "
                     f"({s.added} new)")
    elif verb == "wired":
        lines.append(f"index the sessions {r.agent} already has with: {r.index_command}")
    return "\n".join(lines)


@click.command()
@click.argument("agent", type=click.Choice(AGENTS))
@click.argument("memory", required=False)
@click.option("--index", "index_now", is_flag=True,
              help="Also index the agent's existing sessions now.")
@click.pass_context
def add(ctx: click.Context, agent: str, memory: str | None, index_now: bool) -> None:
    """Wire funes into an agent: MCP server, per-turn index hook, session-end push.

    Registers `funes mcp [MEMORY]` with AGENT (through its own CLI when it is on PATH,
    otherwise in its configuration file) and installs hooks that index each finished turn and
    push at session end when the memory has a remote. Without MEMORY, every session goes to its
    project memory or the global one (created if missing). Running it again changes nothing;
    every file edited is backed up first, and `funes remove AGENT` puts it back.
    """
    app = _app(ctx)
    with progress_bar("indexing", enabled=None if index_now else False) as progress:
        result = api.agents_add(app.settings, agent, _memory_arg(memory) or app.memory,
                                index_now=index_now, progress=progress)
    render(app.fmt, result, human=lambda r: _wiring_text(r, "wired"))


@click.command()
@click.argument("agent", type=click.Choice(AGENTS))
@click.pass_context
def remove(ctx: click.Context, agent: str) -> None:
    """Take funes out of an agent's configuration, restoring what was there.

    A file funes edited and nobody changed since gets its original bytes back; a file that
    changed since loses only funes' entries. The memory itself is not touched.
    """
    app = _app(ctx)
    result = api.agents_remove(app.settings, agent)
    render(app.fmt, result, human=lambda r: _wiring_text(r, "unwired"))


@click.command()
@click.argument("memory", required=False)
@click.pass_context
def mcp(ctx: click.Context, memory: str | None) -> None:
    """Serve the memory to an agent over MCP (stdio): tools recall, get and status.

    Each tool returns what `funes recall|get|status --format agent` prints. Models stay loaded
    between calls. Without MEMORY, each call finds the memory from the agent's working
    directory, like the CLI. Agents start this command themselves (`funes add`).
    """
    app = _app(ctx)
    api.mcp_serve(app.settings, _memory_arg(memory) or app.memory)


@click.command()
@click.argument("agent", type=click.Choice(ASK_AGENTS))
@click.argument("question")
@click.option("-k", type=int, default=None, help="Passages to hand over (default: recall.k, 8).")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Seconds the agent may take to answer.")
@click.option("--show-prompt", is_flag=True, help="Print the prompt sent to the agent (stderr).")
@memory_option
@click.pass_context
def ask(ctx: click.Context, agent: str, question: str, k: int | None, timeout: float,
        show_prompt: bool) -> None:
    """Answer a question from memory through an agent, with all its tools disabled.

    Recalls passages for QUESTION, hands them to `claude -p` or `codex exec` (no tools, no MCP
    servers) with the instruction to answer only from them and name the sessions used, and
    prints the answer. Fails before starting the agent when the memory cannot be read, the
    agent's CLI is not installed, or nothing was recalled.
    """
    app = _app(ctx)
    result = api.ask(app.settings, agent, question, memory=app.memory, k=k, timeout=timeout)
    if show_prompt:
        click.echo(result.prompt, err=True)
    if app.fmt == "json":
        render("json", {"agent": result.agent, "answer": result.answer, "memory": result.memory,
                        "sessions": result.sessions, "argv": result.argv}, human=str)
    else:
        click.echo(result.answer)


@click.command(hidden=True)
@click.argument("action", type=click.Choice(["run"]))
@click.pass_context
def hook(ctx: click.Context, action: str) -> None:
    """Drain the agent-hook queue (started detached by the hook script; logs to stdout)."""

    def say(line: str) -> None:
        stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        print(f"{stamp} {line}", flush=True)

    api.hook_run(_app(ctx).settings, say)


COMMANDS = [add, remove, mcp, ask, hook]
