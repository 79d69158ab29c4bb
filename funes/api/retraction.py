"""Retraction verbs: `funes push --retract`, and adopting a remote another machine retracted.

funes.remotes.retract rewrites the remote; funes.storage.retract computes the new history and
moves a local branch onto it. Here: which remote and branch, the sync record `funes status`
shows, and the step `pull` and `sync` take before merging, so a rewritten remote is adopted
rather than merged with the history it replaced.
"""

from __future__ import annotations

from collections.abc import Callable

from funes.api.syncstate import recorded
from funes.model.ids import ObjectId
from funes.model.refs import remote_ref
from funes.remotes import sync as _sync
from funes.remotes.base import Progress, no_progress
from funes.remotes.retract import RetractCheck, RetractResult
from funes.remotes.retract import retract as _retract
from funes.storage import retract as _adoption
from funes.storage.repo import Repository
from funes.storage.transfer import ancestors

__all__ = ["Adoption", "RetractCheck", "RetractResult", "adopt_rewritten", "retract"]

Adoption = _adoption.Adoption


def retract(
    repo: Repository, remote: str | None = None, *,
    confirm: Callable[[RetractCheck], bool], progress: Progress | None = None,
) -> RetractResult:
    """Erase from a remote (default: the branch's, or origin) the rows tombstones hide.

    `confirm` sees what would be lost (rows, sessions, rewritten commits, deleted files, on
    the Hub the revisions no longer served) and may decline; nothing changes then.
    """
    branch = repo.head_branch().removeprefix("refs/heads/")
    name = remote or _sync.default_remote(repo, branch)
    _sync.check_branch(branch)
    with recorded(repo, name, "push"):
        return _retract(repo, _sync.configured_remote(repo, name), branch, confirm=confirm,
                        progress=progress or no_progress)


def adopt_rewritten(repo: Repository, remote: str, branch: str,
                    tip: ObjectId) -> Adoption | None:
    """Before `pull` or `sync` merges `tip`: adopt a retraction a fetch brought.

    Costs nothing unless a fetch noted one (funes.remotes.sync: images that name the commits
    they replace arrived); the note says where the tracking ref was before, which bounds what
    may be replaced (funes.storage.retract.adopt).
    """
    before = _adoption.rewritten_from(repo, remote)
    if before is None:
        return None
    old = before.get(str(remote_ref(remote, branch)))
    try:
        if old is None or not repo.objects.has(old) or old == tip:
            return None
        return _adoption.adopt(repo, remote, tip, ancestors(repo, old))
    finally:
        _adoption.clear_rewrite(repo, remote)
