"""A published selection: some sessions of a private memory, as a public memory of their own.

`funes publish REMOTE --linked-to v1.0..v1.1 --tag v1.1` (funes.api.public) chooses sessions;
this module chooses their chunks and writes the selection's history. That history is not a
branch of the private memory: each publish is one commit whose parent is the remote's tip (so
a later publish appends), with manifests naming new fragment files that hold only the chosen
sessions' visible rows (and their vectors), the links of the release's code commits narrowed
to the chosen turns, and a tombstone for rows it published before that the private memory
has forgotten since. Nothing else of the private memory is named, so nothing else can leave:
not its other rows, its tombstones, its other links or its commits.

The private memory is untouched: its branches do not move; the new objects and files sit
beside its own, kept from `gc` by the remote-tracking ref the push moves.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from funes.errors import UsageError
from funes.model.ids import ObjectId
from funes.model.objects import Commit, ExclusionRule, Link, Tombstone
from funes.storage import publish
from funes.storage.exclusions import rule_matches
from funes.storage.repo import Repository, now_iso
from funes.storage.signing import sign_commit
from funes.storage.transfer import ancestors

Session = tuple[str, str]  # (harness, session id)


@dataclass(frozen=True)
class Choice:
    """Which sessions: each criterion given must hold (subagents follow their session)."""

    sessions: tuple[str, ...] = ()  # ids, or unique prefixes of at least 8 characters
    project: str | None = None  # as `exclude --project` matches
    since: datetime | None = None  # a turn at or after
    until: datetime | None = None  # a turn before
    linked: frozenset[Session] | None = None  # the sessions of the linked turns

    def given(self) -> bool:
        """Whether any criterion was given."""
        return bool(self.sessions or self.project or self.since or self.until
                    or self.linked is not None)


def choose(repo: Repository, choice: Choice) -> dict[Session, set[str]]:
    """The chosen sessions and the ids of their visible chunks."""
    if not choice.given():
        raise UsageError("choose what to publish",
                         hint="give --sessions ID…, --project P, --since/--until or "
                         "--linked-to REV-RANGE")
    if not repo.chunks.exists():
        return {}
    names = ["id", "harness", "session_id", "parent_session_id", "workdir", "project",
             "source", "time"]
    table = repo.chunks.dataset().to_table(columns=names)
    cols = {n: table.column(n).to_pylist() for n in names}
    hidden = repo.tombstoned_ids()
    rows: dict[Session, set[str]] = {}
    parent: dict[Session, str | None] = {}
    times: dict[Session, list[datetime]] = {}
    matched: set[Session] = set()
    rule = ExclusionRule("project", choice.project) if choice.project else None
    for i, cid in enumerate(cols["id"]):
        if cid in hidden:
            continue
        key = (cols["harness"][i], cols["session_id"][i])
        rows.setdefault(key, set()).add(cid)
        parent[key] = cols["parent_session_id"][i]
        when = cols["time"][i]
        if when is not None:
            times.setdefault(key, []).append(when if when.tzinfo else when.replace(tzinfo=UTC))
        if rule is not None and rule_matches(rule, harness=key[0], session=key[1],
                                             workdir=cols["workdir"][i],
                                             project=cols["project"][i],
                                             source=cols["source"][i]):
            matched.add(key)
    unknown = [p for p in choice.sessions if not any(_names(p, s) for _, s in rows)]
    if unknown:
        raise UsageError(f"no session {unknown[0]!r} in this memory",
                         hint="give a whole id or a prefix of 8+ characters (recall and get "
                         "print them)")
    chosen = {key for key in rows if _keeps(key, choice, matched, times)}
    # A subagent's session follows the session that spawned it.
    chosen |= {key for key in rows if (key[0], parent.get(key)) in chosen}
    return {key: rows[key] for key in sorted(chosen)}


def _names(given: str, session: str) -> bool:
    """A whole session id, or a prefix of at least 8 characters of it."""
    return session == given or (len(given) >= 8 and session.startswith(given))


def _keeps(key: Session, choice: Choice, matched: set[Session],
           times: dict[Session, list[datetime]]) -> bool:
    if choice.sessions and not any(_names(p, key[1]) for p in choice.sessions):
        return False
    if choice.project and key not in matched:
        return False
    if choice.linked is not None and key not in choice.linked:
        return False
    if choice.since or choice.until:
        when = times.get(key, [])
        return any((choice.since is None or t >= choice.since)
                   and (choice.until is None or t < choice.until) for t in when)
    return True


@dataclass
class Built:
    """The publish commit (None when the remote holds everything chosen already)."""

    commit: ObjectId | None
    added: int = 0  # chunks new to the published memory
    vectors: int = 0  # vectors new to it
    forgotten: int = 0  # published chunks the private memory has forgotten since
    total: int = 0  # chunks the published memory holds afterwards
    sessions: set[Session] = field(default_factory=set)


def published_ids(repo: Repository, base: ObjectId | None) -> dict[str, set[str]]:
    """Per table, the ids the manifests reachable from `base` name."""
    out: dict[str, set[str]] = {}
    if base is None:
        return out
    for oid in ancestors(repo, base):
        for mid in repo.objects.commit(oid).manifests:
            manifest = repo.objects.manifest(mid)
            out.setdefault(manifest.table, set()).update(manifest.ids)
    return out


def build(
    repo: Repository, base: ObjectId | None, chosen: dict[Session, set[str]],
    links: Sequence[Link], message: str, *, redaction: str | None = None,
) -> Built:
    """The next commit of the published memory on top of `base` (its current tip).

    `redaction`: the rules the publish gate checks the new chunks with before they leave
    (`Manifest.redaction`).
    """
    ids = set().union(*chosen.values()) if chosen else set()
    there = published_ids(repo, base)
    base_hidden = repo.tombstoned_ids(base) if base else set()
    new = ids - there.get("chunks", set())
    home = repo.vectors.name
    have_vectors = set().union(*(v for t, v in there.items() if t != "chunks"))
    vector_ids = (ids | there.get("chunks", set())) - have_vectors - repo.tombstoned_ids()
    forgotten = (there.get("chunks", set()) - base_hidden) & repo.tombstoned_ids()
    chunk_manifest = publish.rows_manifest(repo, "chunks", new, redaction=redaction)
    vector_manifest = publish.rows_manifest(repo, home, vector_ids)
    manifests = [m for m in (chunk_manifest, vector_manifest) if m is not None]
    vectors = len(repo.objects.manifest(vector_manifest).ids) if vector_manifest else 0
    known_links = _link_ids(repo, base)
    link_ids = tuple(lid for lid in dict.fromkeys(repo.objects.put(link) for link in links)
                     if lid not in known_links)
    stones = ((Tombstone(tuple(sorted(forgotten)), "forgotten in the memory it was published "
                         "from", repo._who(), now_iso()),) if forgotten else ())
    previous = repo.objects.commit(base) if base else None
    total = (previous.chunk_count if previous else 0) + len(new) - len(forgotten)
    built = Built(None, len(new), vectors, len(forgotten), total, set(chosen))
    if not manifests and not link_ids and not stones:
        built.total = previous.chunk_count if previous else 0
        return built
    commit = Commit(
        parents=(base,) if base else (),
        manifests=tuple(manifests),
        tombstones=tuple(repo.objects.put(s) for s in stones),
        model=repo.model_stamp(),
        author=repo._who(),
        host=socket.gethostname(),
        time=now_iso(),
        message=message,
        chunk_count=total,
        links=link_ids,
    )
    built.commit = repo.objects.put(sign_commit(repo, commit))
    return built


def _link_ids(repo: Repository, base: ObjectId | None) -> set[str]:
    if base is None:
        return set()
    return {lid for oid in ancestors(repo, base) for lid in repo.objects.commit(oid).links}


def narrowed(links: Iterable[Link], sessions: set[Session]) -> list[Link]:
    """The links, each naming only the turns of `sessions` (links left with none are dropped).

    A release's code commits are public with its code; the turns of sessions not published
    stay private.
    """
    out = []
    for link in links:
        turns = tuple(t for t in link.turns if (t[0], t[1]) in sessions)
        if turns:
            out.append(replace(link, turns=turns))
    return out
