"""Browsing verbs: sessions, sketch, scan (and `get --from/--to`, in funes.cli.commands.recall).

Each parses its options, makes one call into the library (funes.api.run_browse) and prints the
agent format (docs/agents.md) or JSON; on a terminal the human format is the agent format, which
is already meant to be read.
"""

from __future__ import annotations

from typing import Any

import click

from funes import api
from funes.cli.app import App, pass_app
from funes.cli.options import HarnessType, memory_option


def _print(app: App, command: str, fields: dict[str, Any]) -> None:
    page = api.run_browse(app.repo(), command, fields)
    click.echo(api.browse_output("json" if app.fmt == "json" else "agent", page))


@click.command()
@click.option("--project", multiple=True,
              help="Only sessions of this project identity or working directory (or below it).")
@click.option("--harness", multiple=True, type=HarnessType(api.HARNESSES),
              help="Only sessions of this agent (repeatable).")
@click.option("--since", help="Only sessions with a turn since WHEN (2026-11-01, 7d, 12h).")
@click.option("--until", help="Only sessions with a turn before WHEN.")
@click.option("--limit", type=int, default=20, show_default=True,
              help="Sessions to list (at most 500).")
@click.option("--offset", type=int, default=0, show_default=True,
              help="Sessions to skip (the `# next:` line gives the next page's).")
@memory_option
@pass_app
def sessions(app: App, project: tuple[str, ...], harness: tuple[str, ...], since: str | None,
             until: str | None, limit: int, offset: int) -> None:
    """List the memory's sessions, newest first.

    Each entry: when it started (and ended), the agent, the project, how many turns, the
    user's opening request, the code commits linked to it, and the `funes sketch` line that
    digests it. Ends with the count and, when there are more, the command for the next page.

    \b
    Example:
      funes sessions --since 7d
      funes sessions --project github.com/acme/app --harness claude --offset 20
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    _print(app, "sessions", {"project": project, "harness": harness, "since": since,
                             "until": until, "limit": limit, "offset": offset})


@click.command()
@click.argument("session_id")
@click.option("--max-chars", type=int, default=api.DEFAULT_SKETCH_CHARS, show_default=True,
              metavar="N", help="Characters of passages the sketch may show.")
@memory_option
@pass_app
def sketch(app: App, session_id: str, max_chars: int) -> None:
    """A digest of one session without a query: its most telling passages, in order.

    Picks whole passages that together stand for the session (its opening request, its last
    answer, the passages the rest is closest to, the ones that differ most), verbatim, within
    --max-chars, each with the `funes get` line that opens its turn. The same session gives
    the same sketch; it is cached until the session changes.

    \b
    Example:
      funes sketch 5f0c2a1e-…
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    _print(app, "sketch", {"session_id": session_id, "max_chars": max_chars})


@click.command()
@click.argument("needle")
@click.argument("session_ids", nargs=-1, metavar="[SESSION]...")
@click.option("--limit", type=int, default=20, show_default=True,
              help="Matches to show (every match is counted).")
@click.option("--offset", type=int, default=0, show_default=True,
              help="Matches to skip (the `# next:` line gives the next page's).")
@click.option("--context", type=int, default=100, show_default=True,
              help="Characters shown on each side of a match.")
@memory_option
@pass_app
def scan(app: App, needle: str, session_ids: tuple[str, ...], limit: int, offset: int,
         context: int) -> None:
    """Find a literal string (any case) in every passage, or in the sessions named.

    Exhaustive and unranked where recall is ranked and partial: zero matches means the string
    is nowhere in the memory. NEEDLE is literal, not a pattern. Matches come oldest session
    first, each with the `funes get` line that opens its turn.

    \b
    Example:
      funes scan "ECONNRESET"
      funes scan "acme-internal" 5f0c2a1e-…
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    _print(app, "scan", {"needle": needle, "sessions": session_ids, "limit": limit,
                         "offset": offset, "context": context})


COMMANDS = [sessions, sketch, scan]
