"""Commit links: which turns a code commit gets, recording the link, and finding it again.

**Which turns.** A code commit made at time T in repository R is linked to the turns, of any
agent, that ran in R (same project identity, or a working directory inside the work tree) with
`since ≤ time < until`, where `until` is T plus one second (git times have whole seconds, turn
times milliseconds) and `since` is the `until` of R's previous linked commit — so consecutive
links split the session between them without overlap. The first commit linked in R looks back
to its parent commit, and never more than `FIRST_WINDOW`.

**Where links live.** A link is an object of the memory (funes.model.objects.Link) named by
the `links` field of the memory commit that records it, so push, pull and clone carry links
like any other object. Finding the links of a code commit walks the memory's history newest
first; a link is recorded after its code commit, so the walk stops once memory commits are
older than that code commit (less `CLOCK_SKEW`, for memories merged from other machines).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from funes.errors import FunesError
from funes.gitlink.coderepo import BadCommitError, CodeCommit, CodeRepo, iso_time
from funes.model.ids import ObjectId
from funes.model.objects import Link
from funes.retrieval.get import BlockView, TurnView, assemble
from funes.storage.lock import WriteLock
from funes.storage.repo import CommitResult, Repository

#: How far the first link of a repository looks back (when its parent commit is older).
FIRST_WINDOW = timedelta(hours=24)
#: How much later than its code commit a link may have been recorded by a clock that is behind.
CLOCK_SKEW = timedelta(days=1)
#: File in the git common directory that serialises linking (one hook worker at a time).
LINK_LOCK = "funes-link.lock"


class NotLinkedError(FunesError):
    """A code commit with no link in this memory."""

    def __init__(self, rev: str) -> None:
        super().__init__(
            f"commit {rev} is not linked to any agent turn in this memory",
            hint=f"`funes link {rev}` links it now; `funes hooks install` links future "
            "commits (or pick the memory with --memory)",
        )
        self.rev = rev


def parse_iso(text: str) -> datetime | None:
    """An ISO-8601 time as an aware datetime (UTC when it names no zone); None if unreadable."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _ts_literal(when: datetime) -> str:
    return f"TIMESTAMP '{when.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}'"


# -- finding links --------------------------------------------------------------------------


@dataclass(frozen=True)
class FoundLink:
    """A link and the memory commit that recorded it."""

    id: ObjectId
    link: Link
    memory_commit: ObjectId
    recorded: str  # the memory commit's time


def iter_links(
    memory: Repository, *, not_before: datetime | None = None
) -> Iterator[FoundLink]:
    """Links reachable from HEAD, most recently recorded first.

    With `not_before`, stop at memory commits older than it (less `CLOCK_SKEW`): a link is
    never recorded before its code commit exists.
    """
    floor = not_before - CLOCK_SKEW if not_before is not None else None
    for oid, commit in memory.walk():
        if floor is not None:
            when = parse_iso(commit.time)
            if when is not None and when < floor:
                return
        for lid in commit.links:
            yield FoundLink(lid, memory.objects.link(lid), oid, commit.time)


def links_for(
    memory: Repository, shas: Iterable[str], *, not_before: datetime | None = None
) -> dict[str, list[FoundLink]]:
    """The links of each code commit in `shas` (full ids), oldest record first."""
    wanted = set(shas)
    found: dict[str, list[FoundLink]] = {sha: [] for sha in wanted}
    for item in iter_links(memory, not_before=not_before):
        if item.link.commit in wanted:
            found[item.link.commit].insert(0, item)
    return found


def links_by_prefix(memory: Repository, prefix: str) -> tuple[str, list[FoundLink]]:
    """The links of the one linked commit whose id starts with `prefix` (no code repo needed).

    Raises:
        NotLinkedError: No linked commit matches.
        BadCommitError: Several linked commits match.
    """
    prefix = prefix.lower()
    matches: dict[str, list[FoundLink]] = {}
    for item in iter_links(memory):
        if item.link.commit.startswith(prefix):
            matches.setdefault(item.link.commit, []).insert(0, item)
    if not matches:
        raise NotLinkedError(prefix)
    if len(matches) > 1:
        raise BadCommitError(prefix, f"matches {len(matches)} linked commits")
    sha, items = next(iter(matches.items()))
    return sha, items


def previous_link(memory: Repository, repository: str, before: str) -> Link | None:
    """The latest link of `repository` whose code commit is older than `before` (ISO time)."""
    limit = parse_iso(before)
    best: Link | None = None
    best_time: datetime | None = None
    for _, commit in memory.walk():
        recorded = parse_iso(commit.time)
        if best_time is not None and recorded is not None and recorded < best_time - CLOCK_SKEW:
            break  # everything older was recorded before `best` was even committed
        for lid in commit.links:
            link = memory.objects.link(lid)
            when = parse_iso(link.time)
            if link.repository != repository or when is None or limit is None or when >= limit:
                continue
            if best_time is None or when > best_time:
                best, best_time = link, when
    return best


# -- choosing turns -------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnRef:
    """A turn picked for a link, with what orders it."""

    harness: str
    session_id: str
    turn_id: str
    ts: str
    seq: int

    @property
    def key(self) -> tuple[str, str, str]:
        """(harness, session_id, turn_id), as links store it."""
        return (self.harness, self.session_id, self.turn_id)


def window(
    memory: Repository, code: CodeRepo, commit: CodeCommit, *, parent_time: int | None
) -> tuple[datetime | None, datetime]:
    """The `[since, until)` window of turns for `commit` (module docstring)."""
    until = datetime.fromtimestamp(commit.timestamp + 1, UTC)
    previous = previous_link(memory, code.identity, commit.time)
    if previous is not None:
        since = parse_iso(previous.until)
        if since is not None:
            return min(since, until), until
    since = until - FIRST_WINDOW
    if parent_time is not None:
        since = max(since, datetime.fromtimestamp(parent_time + 1, UTC))
    return min(since, until), until


def _inside(workdir: str | None, roots: tuple[str, ...]) -> bool:
    if not workdir:
        return False
    return any(workdir == root or workdir.startswith(root.rstrip("/") + "/") for root in roots)


def select_turns(
    memory: Repository,
    *,
    identity: str,
    worktree: Path,
    since: datetime | None,
    until: datetime,
) -> list[TurnRef]:
    """Turns of the repository in `[since, until)`, oldest first, tombstoned ones left out.

    A turn belongs to the repository when its project identity is the repository's, or when
    it ran inside the work tree (a session indexed before the repository had its remote).
    """
    if not memory.chunks.exists():
        return []
    where = f"time < {_ts_literal(until)}"
    if since is not None:
        where += f" AND time >= {_ts_literal(since)}"
    table = memory.chunks.dataset().to_table(
        columns=["id", "harness", "session_id", "turn_id", "seq", "ts", "workdir", "project"],
        filter=where,
    )
    roots = tuple({str(worktree), str(worktree.resolve())})
    hidden = memory.tombstoned_ids() if table.num_rows else set()
    turns: dict[tuple[str, str, str], TurnRef] = {}
    for row in table.to_pylist():
        if row["id"] in hidden:
            continue
        if row["project"] != identity and not _inside(row["workdir"], roots):
            continue
        ref = TurnRef(row["harness"], row["session_id"], row["turn_id"], row["ts"], row["seq"])
        turns.setdefault(ref.key, ref)
    return sorted(turns.values(), key=lambda t: (t.ts, t.session_id, t.seq, t.turn_id))


# -- recording ------------------------------------------------------------------------------


def make_link(
    commit: CodeCommit,
    identity: str,
    turns: Iterable[TurnRef],
    since: datetime | None,
    until: datetime,
) -> Link:
    """The link object for a code commit and its turns."""
    return Link(
        commit=commit.sha,
        repository=identity,
        branch=commit.branch,
        author=commit.author,
        time=commit.time,
        message=commit.message,
        paths=commit.paths,
        turns=tuple(sorted({t.key for t in turns})),
        since=iso_time(since.timestamp()) if since is not None else None,
        until=iso_time(until.timestamp()),
    )


def link_message(link: Link) -> str:
    """The memory commit message: `link: 1a2b3c4d5e6f Fix the parser (3 turns, 1 session)`."""
    sessions = len(link.sessions)
    return (
        f"link: {link.commit[:12]} {link.summary} ({len(link.turns)} turns, "
        f"{sessions} session{'s' if sessions != 1 else ''})"
    )


def record(memory: Repository, link: Link, *, lock_timeout: float | None = None) -> CommitResult:
    """Commit the link to the memory (one commit, no chunks)."""
    return memory.commit_chunks([], link_message(link), links=[link], lock_timeout=lock_timeout)


def note_text(link: Link, link_id: str, memory_commit: str) -> str:
    """The `refs/notes/funes` note: what `git log --notes=funes` shows under the commit."""
    sessions = link.sessions
    if link.turns:
        head = (
            f"funes: {len(link.turns)} agent turns from {len(sessions)} "
            f"session{'s' if len(sessions) != 1 else ''}; `funes why {link.commit[:12]}` "
            "shows them"
        )
    else:
        head = "funes: no agent session took part in this commit"
    lines = [head, f"memory-commit: {memory_commit}", f"link: {link_id}"]
    lines += [f"session: {h} {s} ({n} turns)" for (h, s), n in sessions.items()]
    return "\n".join(lines) + "\n"


def link_lock(code: CodeRepo, timeout: float) -> WriteLock:
    """The lock that makes hook workers of one repository link one commit at a time.

    Without it, two quick commits could both compute their window before either recorded
    its link, and the second would repeat the first one's turns.
    """
    return WriteLock(code.common_dir / LINK_LOCK, timeout)


# -- reading the linked turns ---------------------------------------------------------------


#: Linked turns are the same whole turns `funes get` shows (funes.retrieval.get.assemble).
TurnText = TurnView
TurnBlock = BlockView


_COLUMNS = ["id", "text", "harness", "session_id", "turn_id", "seq", "ts", "role",
            "block_type", "block_idx", "split_idx", "tool_name", "workdir", "noise"]


def _lit(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def load_turns(memory: Repository, keys: Iterable[tuple[str, str]]) -> list[TurnText]:
    """The turns named by (session_id, turn_id), oldest first (newest last).

    Turns this memory does not hold (forgotten since, or never pulled) are left out; callers
    compare counts to say so.
    """
    wanted = set(keys)
    if not wanted or not memory.chunks.exists():
        return []
    sessions = sorted({s for s, _ in wanted})
    rows: dict[str, dict[str, Any]] = {}
    for start in range(0, len(sessions), 500):  # keep each filter expression small
        batch = ", ".join(_lit(s) for s in sessions[start : start + 500])
        table = memory.chunks.dataset().to_table(
            columns=_COLUMNS, filter=f"session_id IN ({batch})"
        )
        for row in table.to_pylist():
            if (row["session_id"], row["turn_id"]) in wanted:
                rows.setdefault(row["id"], row)  # a merged memory may hold a row twice
    hidden = memory.tombstoned_ids() if rows else set()
    out = assemble(rows.values(), hidden)
    out.sort(key=lambda t: (t.ts, t.session_id, t.seq, t.turn_id))
    return out


def union_turns(found: Iterable[FoundLink]) -> set[tuple[str, str]]:
    """(session_id, turn_id) of every turn the links name (a commit may be linked twice)."""
    return {(s, t) for item in found for _, s, t in item.link.turns}
