"""Revisions: the names a user types for a commit, as git reads them.

`HEAD`, `ORIG_HEAD`, a branch, tag or remote-tracking name, a full ref, a commit id or a
unique prefix of one, `NAME@{n}` (the value NAME had n moves ago, from its reflog), each with
`~N` (N first parents back). Kept apart from the repository so the grammar has one home and
the repository module stays about storage.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from funes.errors import FunesError, UsageError
from funes.model.ids import ObjectId, is_object_id
from funes.model.refs import HEAD, RefName, check_ref_name

if TYPE_CHECKING:
    from funes.storage.repo import Repository

#: `HEAD@{2}`, `main@{1}`: a ref's value some moves ago (its reflog).
_REFLOG_REV_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._/-]{0,200})?@\{(\d{1,6})\}$")
#: Where a merge or reset leaves the tip it moved the branch away from (git's name).
ORIG_HEAD = "ORIG_HEAD"


class BadRevisionError(UsageError):
    """A revision that names no commit."""

    def __init__(self, rev: str) -> None:
        super().__init__(
            f"unknown revision {rev!r}",
            hint="use HEAD, a branch name, a ref, or (a prefix of) a commit id; see `funes log`",
        )
        self.rev = rev


def resolve(repo: Repository, rev: str) -> ObjectId:
    """Turn a revision into a commit id, or raise BadRevisionError."""
    base, _, tail = rev.partition("~")
    steps = 0
    if tail:
        if not tail.isdigit():
            raise BadRevisionError(rev)
        steps = int(tail)
    oid = _resolve_base(repo, base)
    if oid is None:
        raise BadRevisionError(rev)
    for _ in range(steps):
        parents = repo.objects.commit(oid).parents
        if not parents:
            raise BadRevisionError(rev)
        oid = parents[0]
    return oid


def _resolve_base(repo: Repository, rev: str) -> ObjectId | None:
    if rev == "HEAD":
        return repo.head()
    if rev == ORIG_HEAD:
        return repo.orig_head()
    at = _REFLOG_REV_RE.match(rev)
    if at:
        return _reflog_entry(repo, at.group(1) or "HEAD", int(at.group(2)))
    for candidate in (rev, f"refs/heads/{rev}", f"refs/tags/{rev}", f"refs/remotes/{rev}"):
        if candidate.startswith("refs/"):
            try:
                ref = check_ref_name(candidate)
            except FunesError:
                continue
            oid = repo.refs.read(ref)
            if oid is not None:
                return oid
    oid = repo.objects.resolve_prefix(rev)
    if oid is not None:
        repo.objects.commit(oid)  # must be a commit
    return oid


def _reflog_entry(repo: Repository, name: str, back: int) -> ObjectId | None:
    """`NAME@{n}`: the value NAME had n moves ago, from its reflog (0 is the current one)."""
    if name == "HEAD":
        ref: RefName = HEAD
    else:
        try:
            ref = check_ref_name(name if name.startswith("refs/") else f"refs/heads/{name}")
        except FunesError:
            return None
    values = [e.new for e in reversed(repo.refs.reflog(ref))]
    if back < len(values):
        value = values[back]
    elif back == len(values) and values:
        value = repo.refs.reflog(ref)[0].old
    else:
        value = None
    return ObjectId(value) if value is not None and is_object_id(value) else None
