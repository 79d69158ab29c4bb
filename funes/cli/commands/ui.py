"""`funes ui`: the local web page (funes.ui)."""

from __future__ import annotations

import click

from funes.cli.app import App, pass_app


@click.command()
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              metavar="N", help="Listen on this port of 127.0.0.1 (0: a free one, at random).")
@click.option("--no-open", "no_open", is_flag=True,
              help="Print the address without opening a browser.")
@pass_app
def ui(app: App, port: int, no_open: bool) -> None:
    """See the memory in a browser: timeline, search, sessions, commits, remotes.

    Serves pages on 127.0.0.1 only (nothing listens beyond this machine) until Ctrl-C, and
    opens them in the browser when a display exists; the address is printed either way.
    Pages: / (timeline), /search?q=…, /session/ID, /commits, /memory. Forgetting a session,
    pushing and syncing ask for confirmation first and refuse requests from other sites.
    Several --memory options offer each of those memories on every page.
    """
    from funes.ui.server import serve_ui

    memories: list[str | None] = list(dict.fromkeys(app.memories)) or [app.memory]
    serve_ui(app.settings, memories, port=port, open_browser=not no_open,
             say=lambda line: click.echo(line, err=True))


COMMANDS = [ui]
