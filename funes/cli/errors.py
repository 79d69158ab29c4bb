"""The one place where errors become messages and exit codes (docs/cli.md lists them).

Library code raises typed `FunesError`s that carry their exit code and a hint; this module
prints them as one line (plus the hint) and exits. Anything that is not a FunesError is a bug:
it propagates with its traceback so it gets reported instead of hidden.
"""

from __future__ import annotations

import sys
import traceback
from typing import NoReturn

import click

from funes.errors import FunesError, describe

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_A_REPOSITORY = 3
EXIT_DIVERGED = 4
EXIT_REMOTE = 5
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141

#: (exit code, meaning) as docs/cli.md states them; a test keeps the two in step.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success (an empty recall is a success)"),
    (EXIT_ERROR, "an error funes could not get past (the message says what to do)"),
    (EXIT_USAGE, "bad usage: unknown option, bad argument or config key"),
    (EXIT_NOT_A_REPOSITORY, "not a funes repository where one was needed"),
    (EXIT_DIVERGED, "refused: non-fast-forward, diverged or moved ref"),
    (EXIT_REMOTE, "a remote is unreachable, refused authentication or sent bad data"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_BROKEN_PIPE, "output closed early (e.g. piped into `head`); nothing is printed"),
)


def fail(exc: FunesError, *, debug: bool) -> NoReturn:
    """Print a FunesError as one line, `funes: <message> (<hint>)`, and exit with its code."""
    if debug:
        traceback.print_exception(exc)
    click.echo(describe(exc), err=True)
    sys.exit(exc.exit_code)


def usage(message: str) -> NoReturn:
    """Report a usage error found by click."""
    click.echo(f"funes: {message} (see `funes --help`)", err=True)
    sys.exit(EXIT_USAGE)
