"""Ref names: which strings may name a branch, a remote-tracking branch or a tag.

The grammar is git's, narrowed: refs are also file paths under the repository, so anything
that could escape it (`..`, absolute paths, backslashes, control characters) is refused here,
before any file is touched.
"""

from __future__ import annotations

import re
from typing import NewType

from funes.errors import FunesError

RefName = NewType("RefName", str)

HEAD = RefName("HEAD")
DEFAULT_BRANCH = "main"

_COMPONENT_RE = re.compile(r"^[A-Za-z0-9._+@-]+$")
#: A component becomes a file name (with a temporary-file prefix while it is written, and
#: the same again under reflogs/): well inside the 255 bytes file systems allow.
MAX_COMPONENT_LENGTH = 100
MAX_REF_LENGTH = 400


class InvalidRefError(FunesError):
    """A ref name that funes will not store or read."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(
            f"invalid ref name {name!r}: {why}",
            hint="use names like `main`, `refs/heads/main` or `refs/remotes/origin/main`",
        )
        self.name = name


def check_ref_name(name: str) -> RefName:
    """Validate a full ref name (`HEAD` or `refs/...`) and return it typed."""
    if name == "HEAD":
        return HEAD
    if not name.startswith("refs/"):
        raise InvalidRefError(name, "full ref names start with refs/")
    parts = name.split("/")
    if len(parts) < 3:
        raise InvalidRefError(name, "expected refs/<kind>/<name>")
    if len(name) > MAX_REF_LENGTH:
        raise InvalidRefError(name[:80] + "…", f"longer than {MAX_REF_LENGTH} characters")
    for part in parts[1:]:
        if len(part) > MAX_COMPONENT_LENGTH:
            raise InvalidRefError(name[:80] + "…",
                                  f"a component longer than {MAX_COMPONENT_LENGTH} characters")
        if not part or part in {".", ".."} or not _COMPONENT_RE.match(part):
            raise InvalidRefError(name, f"bad component {part!r}")
        if part.startswith(".") or part.endswith(".lock") or part.endswith("."):
            raise InvalidRefError(name, f"bad component {part!r}")
    return RefName(name)


def branch_ref(branch: str) -> RefName:
    """The full ref of a local branch (`main` → `refs/heads/main`)."""
    return check_ref_name(f"refs/heads/{branch}")


def remote_ref(remote: str, branch: str) -> RefName:
    """The remote-tracking ref of a branch (`origin`, `main` → `refs/remotes/origin/main`)."""
    return check_ref_name(f"refs/remotes/{remote}/{branch}")
