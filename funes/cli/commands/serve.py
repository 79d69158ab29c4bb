"""`funes serve`: the warm recall server of one memory (funes.api.serve, funes.api.warm)."""

from __future__ import annotations

import sys
from typing import Any

import click

from funes.api import serve as serve_api
from funes.api import warm
from funes.cli.options import memory_option
from funes.cli.output import render


def _app(ctx: click.Context) -> Any:
    return ctx.find_root().obj


def _status_text(s: warm.ServerStatus) -> str:
    requests = ", ".join(f"{op} {n}" for op, n in sorted(s.requests.items())) or "none"
    idle = f"exits after {s.idle_timeout:g}s idle" if s.idle_timeout else "never exits idle"
    return "\n".join([
        f"server   pid {s.pid}, funes {s.version}, up {s.uptime:.0f}s, idle {s.idle_for:.0f}s "
        f"({idle})",
        f"memory   {s.repo}",
        f"socket   {s.socket}",
        f"requests {requests}",
        f"models   {', '.join(s.models) or 'none loaded'} "
        f"(embedding model loaded {s.embedder_loads} time(s))",
    ])


@click.command()
@click.option("--idle", type=float, default=warm.DEFAULT_IDLE, show_default=True,
              metavar="SECONDS", help="Exit after this many seconds without requests (0: never).")
@click.option("--status", "show_status", is_flag=True,
              help="Describe the running server instead of starting one (exit 1 if none runs).")
@click.option("--stop", is_flag=True, help="Ask the running server to exit.")
@memory_option
@click.pass_context
def serve(ctx: click.Context, idle: float, show_status: bool, stop: bool) -> None:
    """Keep models and indexes loaded; answer `recall` and `get` for other funes commands.

    One server per memory, on a private Unix socket. `funes recall` and `funes get` use it when
    it runs and work alone when it does not; `funes recall` starts one in the background when
    none runs (FUNES_SERVE=use only uses a running one, FUNES_SERVE=off never talks to one).
    A second `funes serve` for the same memory exits at once, quietly.
    """
    app = _app(ctx)
    repo = app.repo()
    if show_status:
        found = warm.server_status(app.settings, repo)
        if found is None:
            click.echo("not running")
            sys.exit(1)
        render(app.fmt, found, human=_status_text)
        return
    if stop:
        click.echo("stopped" if warm.stop_server(app.settings, repo) else "not running")
        return
    result = serve_api.serve(app.settings, repo, idle=idle,
                             log=lambda line: click.echo(f"funes serve: {line}", err=True))
    if not result.started and app.fmt == "human":
        click.echo(f"funes serve: already running for this memory (pid {result.pid})", err=True)
    elif result.started:
        click.echo(f"funes serve: exiting ({result.reason}) after {result.requests} request(s)",
                   err=True)


COMMANDS = [serve]
