"""`funes serve`: this user's warm recall server (funes.api.serve, funes.api.warm)."""

from __future__ import annotations

import sys

import click

from funes.api import serve as serve_api
from funes.api import warm
from funes.cli.app import App, pass_app
from funes.cli.output import render


def _status_text(s: warm.ServerStatus) -> str:
    requests = ", ".join(f"{op} {n}" for op, n in sorted(s.requests.items())) or "none"
    idle = f"exits after {s.idle_timeout:g}s idle" if s.idle_timeout else "never exits idle"
    rss = f"{s.rss_mb:.0f} MB" if s.rss_mb is not None else "unknown"
    lines = [
        f"server   pid {s.pid}, funes {s.version}, up {s.uptime:.0f}s, idle {s.idle_for:.0f}s "
        f"({idle})",
        f"home     {s.home}",
        f"socket   {s.socket}",
        f"requests {requests}",
        f"models   {', '.join(s.models) or 'none loaded'} "
        f"(embedding model loaded {s.embedder_loads} time(s))",
        f"resident {rss} (budget {s.memory_budget_mb:.0f} MB)",
        f"memories {len(s.memories)} open" + (":" if s.memories else ""),
    ]
    lines += [f"  {m.path}  ({m.requests} request(s), idle {m.idle_for:.0f}s)"
              for m in s.memories]
    return "\n".join(lines)


@click.command()
@click.option("--idle", type=float, default=warm.DEFAULT_IDLE, show_default=True,
              metavar="SECONDS", help="Exit after this many seconds without requests (0: never).")
@click.option("--memory-budget", type=float, default=serve_api.MEMORY_BUDGET_MB,
              show_default=True, metavar="MB",
              help="Close the least recently used memories above this resident size.")
@click.option("--status", "show_status", is_flag=True,
              help="Describe the running server and the memories it holds (exit 1 if none).")
@click.option("--stop", is_flag=True, help="Ask the running server to exit.")
@pass_app
def serve(app: App, idle: float, memory_budget: float, show_status: bool, stop: bool) -> None:
    """Keep models and indexes loaded; answer `recall` and `get` for other funes commands.

    One server per user, on a private Unix socket, for every memory: each is opened on first
    use and closed when idle. `funes recall` and `funes get` use it when it runs and work alone
    when it does not; `funes recall` starts one in the background when none runs
    (FUNES_SERVE=use only uses a running one, FUNES_SERVE=off never talks to one). A second
    `funes serve` exits at once, quietly. With --memory, that memory is opened at start.
    """
    if show_status:
        found = warm.server_status(app.settings)
        if found is None:
            click.echo("not running")
            sys.exit(1)
        render(app.fmt, found, human=_status_text)
        return
    if stop:
        click.echo("stopped" if warm.stop_server(app.settings) else "not running")
        return
    first = app.repo() if app.memory else None
    result = serve_api.serve(app.settings, idle=idle, warm_up=first,
                             memory_budget_mb=memory_budget,
                             log=lambda line: click.echo(f"funes serve: {line}", err=True))
    if not result.started and app.fmt == "human":
        click.echo(f"funes serve: already running (pid {result.pid})", err=True)
    elif result.started:
        click.echo(f"funes serve: exiting ({result.reason}) after {result.requests} request(s)",
                   err=True)


COMMANDS = [serve]
