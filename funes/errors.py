"""The root of every error funes raises on purpose.

Subclasses live beside the code that raises them (dulwich's rule); only the kinds that several
layers share live here. The CLI maps each type to a one-line message and an exit code in one
place (`funes.cli.errors`), so library code never prints or exits.
"""

from __future__ import annotations


class FunesError(Exception):
    """Anything funes refuses or fails to do, with a message that names the fix.

    `hint` is the next command or action for the user; the CLI prints it after the message.
    """

    #: Exit code the CLI uses for this kind of error (see docs/cli.md).
    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


def describe(exc: FunesError) -> str:
    """The one line the CLI prints for an error: `funes: <message> (<hint>)`.

    Here rather than in the CLI because the warm server prints it too, for the thin client.
    """
    suffix = f" ({exc.hint})" if exc.hint else ""
    return f"funes: {exc.message}{suffix}"


class NotARepositoryError(FunesError):
    """No `.funes` repository where one was needed."""

    exit_code = 3

    def __init__(self, path: str) -> None:
        super().__init__(
            f"not a funes repository: {path}",
            hint="run `funes init`, or `funes init --global`, or pick one with --memory",
        )
        self.path = path


class CorruptObjectError(FunesError):
    """Stored bytes do not hash to the id they are stored under, or do not parse."""

    def __init__(self, object_id: str, detail: str) -> None:
        super().__init__(
            f"object {object_id} is corrupt: {detail}",
            hint="run `funes fsck` to see all damage; fetch the object again from a remote",
        )
        self.object_id = object_id


class ObjectMissingError(FunesError):
    """An object that a commit or ref names is not in the store."""

    def __init__(self, object_id: str) -> None:
        super().__init__(
            f"object {object_id} is missing",
            hint="run `funes fsck`; `funes fetch` can bring it back from a remote",
        )
        self.object_id = object_id


class UsageError(FunesError):
    """The arguments are well-formed for the parser but make no sense together."""

    exit_code = 2


class DivergedError(FunesError):
    """A ref did not move as a fast-forward, or a compare-and-swap lost a race."""

    exit_code = 4


class RemoteError(FunesError):
    """A remote could not be reached, refused us, or sent something we cannot accept."""

    exit_code = 5
