"""What a person looking at a memory asks that no agent verb answers: `funes ui`'s reads.

The code commits a memory links (newest first, with the turns behind each), the commits of
one session, the branches, how many chunks tombstones hide, and the HEAD to watch for new
turns. Each is a small read, bounded, returning frozen dataclasses like the other verbs, so
funes.ui renders them without reaching below the library.
"""

from __future__ import annotations

from dataclasses import dataclass

from funes.api.browse import LinkedCommit
from funes.errors import UsageError
from funes.storage.repo import Repository

__all__ = [
    "BranchInfo",
    "CodeCommitPage",
    "LinkedCode",
    "branches",
    "code_commits",
    "head_id",
    "hidden_count",
    "session_commits",
]

#: Most code commits one page lists.
MAX_COMMITS = 500


@dataclass(frozen=True)
class LinkedCode:
    """A code commit the git hook linked, and the agent turns it names."""

    sha: str
    repository: str
    branch: str | None
    author: str
    time: str
    message: str
    paths: tuple[str, ...]
    turns: tuple[tuple[str, str, str], ...]  # (harness, session_id, turn_id)

    @property
    def summary(self) -> str:
        """The message's first line."""
        return self.message.strip().splitlines()[0] if self.message.strip() else ""


@dataclass(frozen=True)
class CodeCommitPage:
    """One page of the linked code commits, newest first."""

    commits: list[LinkedCode]
    total: int
    offset: int
    limit: int

    @property
    def next_offset(self) -> int | None:
        """The offset of the next page, None on the last one."""
        end = self.offset + len(self.commits)
        return end if end < self.total else None


def _index(repo: Repository):  # type: ignore[no-untyped-def]
    from funes.gitlink.linkindex import link_index

    return link_index(repo)


def code_commits(repo: Repository, *, limit: int = 50, offset: int = 0) -> CodeCommitPage:
    """The code commits this memory links to agent turns, newest commit first.

    Raises:
        UsageError: a limit outside [1, MAX_COMMITS] or a negative offset.
    """
    if not 1 <= limit <= MAX_COMMITS:
        raise UsageError(f"limit must be between 1 and {MAX_COMMITS}, not {limit}")
    if offset < 0:
        raise UsageError(f"offset must be ≥ 0, not {offset}")
    links = _index(repo).links.values()
    by_sha: dict[str, LinkedCode] = {}
    for link in sorted(links, key=lambda k: (k.time, k.commit)):
        known = by_sha.get(link.commit)
        turns = tuple(sorted(set(link.turns) | set(known.turns if known else ())))
        by_sha[link.commit] = LinkedCode(link.commit, link.repository, link.branch,
                                         link.author, link.time, link.message, link.paths,
                                         turns)
    ordered = sorted(by_sha.values(), key=lambda c: (c.time, c.sha), reverse=True)
    return CodeCommitPage(ordered[offset : offset + limit], len(ordered), offset, limit)


def session_commits(repo: Repository, session_id: str) -> tuple[LinkedCommit, ...]:
    """The code commits linked to any turn of `session_id`, oldest first."""
    return tuple(LinkedCommit(link.commit, link.message.strip().splitlines()[0]
                              if link.message.strip() else "", link.time, link.repository)
                 for link in _index(repo).for_session(session_id))


@dataclass(frozen=True)
class BranchInfo:
    """A local branch of the memory."""

    name: str
    head: str
    current: bool


def branches(repo: Repository) -> list[BranchInfo]:
    """The memory's local branches, by name, the checked-out one marked."""
    current = repo.head_branch()
    return [BranchInfo(name.removeprefix("refs/heads/"), str(oid), name == current)
            for name, oid in repo.refs.iter_refs("refs/heads/")]


def hidden_count(repo: Repository) -> int:
    """How many chunks the tombstones reachable from HEAD hide (forget, exclude)."""
    return len(repo.tombstoned_ids())


def head_id(repo: Repository) -> str | None:
    """The memory's HEAD commit id: what changes when an index run or a hook adds a turn."""
    head = repo.head()
    return str(head) if head is not None else None
