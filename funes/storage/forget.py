"""`funes forget`: choose chunks and hide them with a tombstone commit.

A tombstone names chunk ids; every reader hides the ids named by a tombstone reachable from
HEAD, index runs never add them again, and tombstones travel with push, pull and merge
(docs/format.md, "tombstone"). Forgetting hides; `funes gc` (funes.storage.gc) is what removes
the bytes from this machine's disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from funes.errors import UsageError
from funes.model.objects import ExclusionRule, Tombstone
from funes.storage.exclusions import COLUMNS, make_rule, restored_by, rule_matches
from funes.storage.repo import CommitResult, Repository, now_iso


@dataclass(frozen=True)
class Selection:
    """What to forget: a chunk matches when it meets every criterion given.

    `project`, `path` and `agent` match as the exclusion rules of the same kinds do
    (funes.storage.exclusions), but only once: nothing is kept out of later index runs.
    """

    session: str | None = None
    chunk: str | None = None
    before: str | None = None
    match: str | None = None
    project: str | None = None
    path: str | None = None
    agent: str | None = None

    def rules(self) -> list[ExclusionRule]:
        """The provenance criteria, as rules that must all match."""
        return [make_rule(kind, value) for kind, value in (
            ("project", self.project), ("path", self.path), ("agent", self.agent))
            if value is not None]

    def describe(self) -> str:
        """The criteria as a `forget` command line (the tombstone's reason).

        The `--match` text is left out: it is often the very thing being forgotten, and the
        reason travels with the tombstone.
        """
        parts = [
            f"--{name} {value}"
            for name, value in (("session", self.session), ("chunk", self.chunk),
                                ("before", self.before), ("project", self.project),
                                ("path", self.path), ("agent", self.agent))
            if value
        ]
        if self.match:
            parts.append("--match …")
        return "forget " + " ".join(parts)


def parse_before(text: str) -> datetime:
    """`--before DATE`: an ISO date or date-time (UTC unless it says otherwise)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise UsageError(
                f"cannot read the date {text!r}", hint="use YYYY-MM-DD or an ISO date-time"
            ) from None
        when = datetime(day.year, day.month, day.day)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def select(repo: Repository, selection: Selection) -> list[str]:
    """Ids of the visible chunks the selection matches, sorted."""
    if not any((selection.session, selection.chunk, selection.before, selection.match,
                selection.project, selection.path, selection.agent)):
        raise UsageError(
            "nothing to forget",
            hint="give --session, --chunk, --before, --match, --project, --path or --agent",
        )
    if selection.chunk is not None and len(selection.chunk) < 8:
        raise UsageError("a chunk id prefix needs at least 8 characters")
    rules = selection.rules()
    if not repo.chunks.exists():
        return []
    cutoff = parse_before(selection.before) if selection.before else None
    names = ["id", "text", "session_id", "ts", "time"]
    extra = [c for c in COLUMNS if c != "session_id"] if rules else []
    table = repo.chunks.dataset().to_table(columns=[*names, *extra])
    hidden = repo.tombstoned_ids()
    found: set[str] = set()
    cols = {name: table.column(name).to_pylist() for name in [*names, *extra]}
    for i, cid in enumerate(cols["id"]):
        if cid in hidden or cid in found:
            continue
        session = cols["session_id"][i]
        if selection.session is not None and session != selection.session:
            continue
        if rules and not all(rule_matches(
                rule, harness=cols["harness"][i], session=session,
                parent_session=cols["parent_session_id"][i], workdir=cols["workdir"][i],
                project=cols["project"][i], source=cols["source"][i]) for rule in rules):
            continue
        text, ts, when = cols["text"][i], cols["ts"][i], cols["time"][i]
        if selection.chunk is not None and not cid.startswith(selection.chunk):
            continue
        if selection.match is not None and selection.match not in text:
            continue
        if cutoff is not None:
            moment = when if when is not None else _parse_ts(ts)
            if moment is None or moment >= cutoff:
                continue
        found.add(cid)
    return sorted(found)


def _parse_ts(ts: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def tombstone(repo: Repository, ids: list[str], reason: str) -> CommitResult:
    """Commit one tombstone hiding `ids` (no commit when `ids` is empty)."""
    if not ids:
        head = repo.head_commit()
        return CommitResult(None, 0, 0, 0, head.chunk_count if head else 0)
    stone = Tombstone(tuple(sorted(ids)), reason, repo._who(), now_iso())
    return repo.commit_chunks([], f"{reason}: {len(ids)} chunk(s)", tombstones=[stone])


@dataclass(frozen=True)
class LiftResult:
    """What `unforget` lifted."""

    commit: str | None  # the commit recording the lift
    tombstones: tuple[str, ...]  # the tombstones lifted
    restored: int  # chunks visible again
    chunk_count: int


def lift(repo: Repository, rev: str) -> LiftResult:
    """Cancel the tombstones commit `rev` carries, with a tombstone that lifts them.

    The way back from a tombstone that arrived in a pull (an unsigned teammate's `forget`
    that also hid your own chunks of the same transcript): the chunks it hid are visible
    again here and, once pushed, everywhere the lift travels. Like any tombstone the lift is
    a commit: `funes reset --hard HEAD~1` takes it back.
    """
    oid = repo.resolve(rev)
    commit = repo.objects.commit(oid)
    head = repo.head()
    targets, lifted = repo.tombstones(head)
    wanted = tuple(sorted(t for t in commit.tombstones if t in targets and t not in lifted))
    if not commit.tombstones:
        raise UsageError(f"commit {oid[:12]} carries no tombstone",
                         hint="`funes log` shows the commits that forgot something")
    if not wanted:
        raise UsageError(f"the tombstones of {oid[:12]} are not in HEAD's history or are "
                         "already lifted")
    back = restored_by(repo, wanted)
    stone = Tombstone((), f"unforget {oid[:12]}", repo._who(), now_iso(), lifts=wanted)
    result = repo.commit_chunks([], f"unforget {oid[:12]}: {len(back)} chunk(s)",
                                tombstones=[stone], restored=len(back))
    return LiftResult(result.commit, wanted, len(back), result.chunk_count)
