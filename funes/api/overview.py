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
    "Origin",
    "branches",
    "code_commits",
    "head_id",
    "hidden_count",
    "session_commits",
    "session_origins",
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

    @property
    def sessions(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(harness, session_id, its turn ids) for each session behind the commit."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for harness, session, turn in self.turns:
            grouped.setdefault((harness, session), []).append(turn)
        return [(h, s, tuple(t)) for (h, s), t in grouped.items()]


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


# -- where each session came from ------------------------------------------------------------


@dataclass(frozen=True)
class Origin:
    """Who committed a session's chunks into the memory, and on which machine."""

    author: str  # "Name <email>" of the memory commit
    host: str

    @property
    def label(self) -> str:
        """`Name@host`, as the timeline shows and filters it."""
        name = self.author.split("<", 1)[0].strip() or self.author
        return f"{name}@{self.host}"


@dataclass
class _Adders:
    """Which commit first added each chunk, for the commits read so far (one per memory)."""

    seen: set[str]
    by_chunk: dict[str, Origin]
    head: str | None = None
    sessions: dict[str, tuple[Origin, ...]] | None = None


_adders: dict[str, _Adders] = {}


def session_origins(repo: Repository) -> dict[str, tuple[Origin, ...]]:
    """Each session's origins: the author and host of the commits that added its chunks.

    A session indexed on one machine has one; a session continued on a teammate's machine and
    merged here has several (oldest first). Kept in the process per memory: when HEAD moves,
    only the manifests of commits not read before are read (a hook's commit adds one), then
    two columns of the chunk table are scanned; funes ui's watcher does it in the background.
    """
    head = head_id(repo)
    state = _adders.setdefault(str(repo.path.resolve()), _Adders(set(), {}))
    if state.sessions is not None and state.head == head:
        return state.sessions
    fresh = [(oid, commit) for oid, commit in repo.walk() if str(oid) not in state.seen]
    for oid, commit in reversed(fresh):  # oldest first: a chunk's origin is its first adder
        origin = Origin(commit.author, commit.host)
        for mid in commit.manifests:
            manifest = repo.objects.manifest(mid)
            if manifest.table != "chunks":
                continue
            for cid in manifest.ids:
                state.by_chunk.setdefault(cid, origin)
        state.seen.add(str(oid))
    by_chunk = state.by_chunk
    out: dict[str, dict[Origin, None]] = {}
    if repo.chunks.exists() and by_chunk:
        table = repo.chunks.dataset().to_table(columns=["id", "session_id"])
        for cid, sid in zip(table.column("id").to_pylist(),
                            table.column("session_id").to_pylist(), strict=True):
            adder = by_chunk.get(cid)
            if adder is not None:
                out.setdefault(sid, {})[adder] = None
    state.sessions = {sid: tuple(origins) for sid, origins in out.items()}
    state.head = head
    return state.sessions
