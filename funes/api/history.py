"""History verbs: reset, reflog and unforget, the way back from a merge one regrets."""

from __future__ import annotations

from dataclasses import dataclass

from funes.model.refs import HEAD, RefName, check_ref_name
from funes.storage.forget import LiftResult
from funes.storage.forget import lift as _lift
from funes.storage.refs import ReflogEntry
from funes.storage.repo import Repository
from funes.storage.reset import ResetResult
from funes.storage.reset import reset_hard as _reset_hard

__all__ = ["LiftResult", "ReflogLine", "ResetResult", "reflog", "reset", "unforget"]


def unforget(repo: Repository, rev: str) -> LiftResult:
    """Lift the tombstones commit `rev` carries (one a pull brought in, say)."""
    return _lift(repo, rev)


def reset(repo: Repository, rev: str) -> ResetResult:
    """`funes reset --hard REV`: the current branch, and the rows readers see, at REV."""
    return _reset_hard(repo, rev)


@dataclass(frozen=True)
class ReflogLine:
    """One move of a ref, newest first, with the `NAME@{n}` that names its result."""

    selector: str
    old: str | None
    new: str | None
    who: str
    time: str
    message: str


def reflog(repo: Repository, ref: str = "HEAD") -> list[ReflogLine]:
    """The moves of `ref` (HEAD or a branch), newest first."""
    name: RefName = HEAD if ref == "HEAD" else check_ref_name(
        ref if ref.startswith("refs/") else f"refs/heads/{ref}")
    entries: list[ReflogEntry] = list(reversed(repo.refs.reflog(name)))
    return [ReflogLine(f"{ref}@{{{i}}}", e.old, e.new, e.who, e.time, e.message)
            for i, e in enumerate(entries)]
