"""The `funes` entry point: the thin client first, the full CLI when it cannot answer.

Light on purpose: this module imports no click and no library code, so `funes recall` and
`funes get` answered by a running server cost an interpreter start and a socket round trip
(funes.cli.thin). Everything else runs the click command tree in funes.cli.app, whose
commands are imported only when they run. `from funes.cli.main import cli` still gives the
root command (loaded on first use).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing's constant, without importing typing (every relay and thin client)
if TYPE_CHECKING:
    from typing import Any


def main(argv: list[str] | None = None) -> None:
    """Entry point: answer through the warm server when possible, else run the CLI."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        # click's version option prints exactly this; an agent probing for funes waits less.
        from funes import __version__

        sys.stdout.write(f"funes, version {__version__}\n")
        sys.exit(0)
    if args[:1] == ["mcp"] and len(args) <= 2 and not any(a.startswith("-") for a in args):
        # What `funes add` registers: the relay to the warm server, without the click tree.
        from funes.cli import mcprelay

        mcprelay.run(args[1] if len(args) == 2 else None)
        return
    from funes.cli import thin

    code = thin.run(args)
    if code is not None:
        sys.exit(code)
    from funes.cli.app import run

    run(args)


def __getattr__(name: str) -> Any:
    if name == "cli":
        from funes.cli.app import cli

        return cli
    raise AttributeError(name)


if __name__ == "__main__":
    main()
