"""Agent verbs: add, remove, mcp, ask, and the hidden `hook` the agent hooks start."""

from __future__ import annotations

from pathlib import Path

import click

from funes import api
from funes.cli.app import App, pass_app
from funes.cli.options import memory_option
from funes.cli.output import backfill_text, render
from funes.cli.progress import progress_bar

AGENTS = ("claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor", "copilot")



def _memory_arg(memory: str | None) -> str | None:
    """A local MEMORY as an absolute path; a remote one (`org/name`, `file://…`) as given."""
    if not memory or api.is_remote_memory(memory) or memory.startswith("file://"):
        return memory
    return str(Path(memory).expanduser().resolve())


def _attached_text(a: api.AttachResult) -> str:
    if a.action == "cloned":
        head = f"cloned {a.url} into {a.path}"
    elif a.action == "created":
        head = f"created the remote {a.url} ({a.remote}) from {a.path}"
    else:
        head = f"{a.path} syncs with {a.url} ({a.remote})"
    if a.synced is not None and a.synced.pushed is not None and not a.synced.pushed.up_to_date:
        head += f"; pushed {a.synced.pushed.commits} commit(s)"
    if a.synced is not None and a.synced.merged is not None \
            and a.synced.merged.kind != "up-to-date":
        head += f"; merged its commits ({a.synced.merged.chunk_count} chunks now)"
    if not a.owned:
        head += "\nnot your memory (another owner): its passages are marked untrusted"
    return head


def _wiring_text(r: api.WiringResult, verb: str) -> str:
    lines = [_attached_text(r.attached)] if r.attached is not None else []
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
        line = (f"indexed {s.sessions} sessions, {s.turns} turns, {s.chunks} chunks "
                f"({s.added} new)")
        if s.added:
            line += "; searchable by their words now"
        lines.append(line)
        lines += [backfill_text(b) for b in r.backfill if b.action != "nothing"]
    elif verb == "wired":
        lines.append(f"index the sessions {r.agent} already has with: {r.index_command}")
    return "\n".join(lines)


@click.command()
@click.argument("agent", type=click.Choice(AGENTS))
@click.argument("memory", required=False)
@click.option("--no-index", "no_index", is_flag=True,
              help="Do not index the agent's existing sessions (the hooks still index every "
              "new turn).")
@click.option("--index", "index_flag", is_flag=True, hidden=True,
              help="Index the agent's existing sessions (the default now; kept for scripts).")
@click.option("--project", is_flag=True,
              help="With a remote MEMORY: keep it in this directory's project memory "
              "(./.funes), which then receives this project's sessions only.")
@pass_app
def add(app: App, agent: str, memory: str | None, no_index: bool, index_flag: bool,
        project: bool) -> None:
    """Wire funes into an agent: MCP server, per-turn index hook, sync at session boundaries.

    Registers `funes mcp [MEMORY]` with AGENT (through its own CLI when it is on PATH,
    otherwise in its configuration file) and installs hooks that index each finished turn and,
    when the memory has a remote, sync it (fetch, merge, push) at session start and end.
    Without MEMORY, every session goes to its project memory or the global one (created if
    missing). MEMORY may be a local memory (a path) or a remote one: ORG/NAME or
    hf://datasets/ORG/NAME (the Hub), file://PATH or a directory remote. For a remote, the
    same command on every machine makes it that machine's memory: cloned when this machine
    has none (into the global memory, or the project memory with --project or inside one),
    created from this memory (private) when the remote does not exist, synced when both
    exist. A project memory (PROJECT/.funes) receives only the sessions inside PROJECT; the
    agent's other sessions keep going where they went. The embedding model the hooks use is
    installed when missing. Running it again changes nothing; every file edited is backed up
    first, and `funes remove AGENT` puts it back; a failed `add` changes nothing at all.

    The sessions AGENT already has are indexed first (--no-index skips it): every turn by its
    words at once, newest first, searchable from the first batch on; with a remote MEMORY,
    before anything is pushed, so every machine's history reaches the others. Their vectors
    follow in a detached background backfill (`funes status` shows how far it is).

    \b
    Example:
      funes add claude
      funes add codex acme/funes-memory
    """  # noqa: D301 (click's \b keeps the example lines as written)
    if memory is None and app.memory and api.is_remote_memory(app.memory):
        api.writable_memory(app.settings, app.memory, command=f"add {agent}")  # refuses
    if no_index and index_flag:
        raise click.UsageError("--index and --no-index contradict each other")
    with progress_bar("indexing", enabled=False if no_index else None) as progress:
        result = api.agents_add(app.settings, agent, _memory_arg(memory) or app.memory,
                                project=project, index_now=not no_index, progress=progress)
    render(app.fmt, result, human=lambda r: _wiring_text(r, "wired"))


@click.command()
@click.argument("agent", type=click.Choice(AGENTS))
@pass_app
def remove(app: App, agent: str) -> None:
    """Take funes out of an agent's configuration, restoring what was there.

    A file funes edited and nobody changed since gets its original bytes back; a file that
    changed since loses only funes' entries. The memory itself is not touched.
    """
    result = api.agents_remove(app.settings, agent)
    render(app.fmt, result, human=lambda r: _wiring_text(r, "unwired"))


@click.command()
@click.argument("memory", required=False)
@pass_app
def mcp(app: App, memory: str | None) -> None:
    """Serve the memory to an agent over MCP (stdio): recall, get, sessions, sketch, scan, status.

    Each tool returns what `funes <tool> --format agent` prints. The session is answered by
    the per-user warm server (started on demand, shared by every agent, models loaded once);
    this process only relays, and serves alone when no server can run (FUNES_SERVE=off).
    Without MEMORY, each call finds the memory from the agent's working directory, like the
    CLI. Agents start this command themselves (`funes add`).
    """
    from funes.cli import mcprelay

    mcprelay.run(_memory_arg(memory) or app.memory)


@click.command()
@click.argument("agent", metavar="AGENT")
@click.argument("question")
@click.option("-k", type=int, default=None, help="Passages to hand over (default: recall.k, 8).")
@click.option("--timeout", type=float, default=300.0, show_default=True,
              help="Seconds the agent may take to answer.")
@click.option("--show-prompt", is_flag=True, help="Print the prompt sent to the agent (stderr).")
@memory_option
@pass_app
def ask(app: App, agent: str, question: str, k: int | None, timeout: float,
        show_prompt: bool) -> None:
    """Answer a question from memory through an agent (claude or codex), tools disabled.

    Recalls passages for QUESTION, hands them to `claude -p` or `codex exec` (no tools, no MCP
    servers) with the instruction to answer only from them and name the sessions used, and
    prints the answer. Fails before starting the agent when the memory cannot be read, the
    agent's CLI is not installed, or nothing was recalled.
    """
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
@pass_app
def hook(app: App, action: str) -> None:
    """Drain the agent-hook queue (started detached by the hook script; logs to stdout)."""
    api.hook_run(app.settings, click.echo)  # the library dates each line of the hook log


COMMANDS = [add, remove, mcp, ask, hook]
