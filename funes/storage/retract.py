"""Retraction: a remote's history rewritten without the rows tombstones hide, and adopted here.

Tombstones hide; `funes push --retract` erases. The remote's whole history (every commit its
branches and tags reach) is rewritten like a published image (funes.storage.publish.rewrite):
each manifest naming a hidden row becomes one naming new fragment files with the other rows,
and each commit whose manifests or parents change becomes an image that names the commit it
`replaces`. Commits older than the first affected one keep their ids, so what other machines
already hold of them is never sent again. This module computes that history from local
objects (`plan`); the remote layer (funes.remotes.retract) writes it and deletes the rest.

A memory that holds the old history *adopts* the new one (`adopt`): after a retraction here,
or on the next pull elsewhere, the local branch moves to the images (its own commits the
remote never saw are rewritten onto them) and the tables follow, as `reset --hard` makes
them; the old fragment files leave the dataset and `funes gc` erases them. Adoption trusts an
image only as far as it checks: `replaces` must name a commit this memory had from that
remote, and an image may only lack rows that a tombstone reachable from it hides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from funes.model.ids import ObjectId
from funes.model.objects import Commit, DataFile, FragmentRecord, Manifest
from funes.model.refs import RefName
from funes.storage import publish
from funes.storage.atomic import write_atomic
from funes.storage.repo import Repository
from funes.storage.transfer import ancestors, commits_between


@dataclass
class Rewrite:
    """A remote's history without the retracted rows, as local objects."""

    refs: dict[RefName, tuple[ObjectId, ObjectId]]  # every remote ref: (old tip, new tip)
    images: dict[str, str]  # old commit → the image that replaces it
    commits: list[ObjectId]  # every commit of the new history, parents first
    objects: dict[ObjectId, bytes]  # every object the new history names, raw
    tables: dict[str, list[FragmentRecord]]  # table → every fragment it names (one per file)
    rows: int = 0  # chunk rows left out
    sessions: set[tuple[str, str]] = field(default_factory=set)  # (harness, session) touched
    oldest: str | None = None  # time of the oldest commit rewritten


def _history(repo: Repository, tips: Iterable[ObjectId]) -> list[tuple[ObjectId, Commit]]:
    seen: set[str] = set()
    found: list[tuple[ObjectId, Commit]] = []
    for tip in tips:
        for oid, commit in commits_between(repo, tip, seen):
            seen.add(oid)
            found.append((oid, commit))
    return publish.topological(found)


def missing_files(repo: Repository, tips: Iterable[ObjectId],
                  hidden: set[str]) -> list[tuple[str, DataFile]]:
    """Fragment files the rewrite must read and this machine lacks (the remote has them)."""
    from funes.storage.gc import load_collected

    replaced = load_collected(repo).files
    out: list[tuple[str, DataFile]] = []
    for _, commit in _history(repo, tips):
        for mid in commit.manifests:
            manifest = repo.objects.manifest(mid)
            if not hidden.intersection(manifest.ids):
                continue
            table = repo.table(manifest.table)
            for record in manifest.fragments:
                for f in record.files:
                    local = table.path / f.path
                    if f"{manifest.table}/{f.path}" in replaced or (
                            local.is_file() and local.stat().st_size == f.size):
                        continue
                    out.append((manifest.table, f))
    return out


def plan(repo: Repository, refs: Mapping[RefName, ObjectId], hidden: set[str]) -> Rewrite:
    """The history `refs` reach, without the rows `hidden` names (new files written locally).

    Raises:
        UnreadableRowsError: a fragment to rewrite cannot be read.
    """
    from funes.storage.gc import load_collected

    ordered = _history(repo, refs.values())
    manifests = {mid: repo.objects.manifest(mid) for _, c in ordered for mid in c.manifests}
    named = {i for m in manifests.values() for i in m.ids}
    hold = hidden & named
    result = Rewrite({}, {}, [], {}, {})
    if hold:
        result.sessions = _sessions(repo, manifests, hold)
        result.rows = len(hold & {i for m in manifests.values() if m.table == "chunks"
                                  for i in m.ids})
        mapping: dict[str, str] = {}
        try:
            images, _ = publish.rewrite(repo, ordered, manifests, hold, mapping,
                                        load_collected(repo).files, mark=True)
        except Exception as exc:  # unreadable data must stop the rewrite before it starts
            raise publish.UnreadableRowsError(str(exc)) from None
        result.images = images
        times = [c.time for oid, c in ordered if oid in images]
        result.oldest = min(times) if times else None
    for ref, tip in refs.items():
        result.refs[ref] = (tip, ObjectId(result.images.get(tip, tip)))
    new_history = _history(repo, [new for _, new in result.refs.values()])
    result.commits = [oid for oid, _ in new_history]
    wanted = publish.transfer_plan(repo, result.commits)
    result.objects = dict(wanted.objects)
    for table, records in wanted.tables.items():
        unique: dict[str, FragmentRecord] = {}
        for record in records:
            unique.setdefault(record.files[0].path, record)
        result.tables[table] = list(unique.values())
    return result


def _sessions(repo: Repository, manifests: Mapping[ObjectId, Manifest],
              hold: set[str]) -> set[tuple[str, str]]:
    """(harness, session) of the held chunk rows (read from the local table)."""
    _, places = publish.row_texts(repo, hold)
    return {(harness, session) for harness, session, _ in places.values()}


# -- adopting a rewritten history ----------------------------------------------------------------


def replacements(repo: Repository, tip: ObjectId, known: set[str]) -> dict[str, str]:
    """Old commit → image, from the `replaces` of the commits `tip` reaches.

    Only commits in `known` (what this memory had from the remote) may be replaced; an image
    must name the same tombstones and links as the commit it replaces and lack only rows
    hidden at `tip`. Anything else is ignored: the commit then stays in the history (merged
    like any other), so a lying remote can hide nothing this way.
    """
    found: dict[str, str] = {}
    hidden: set[str] | None = None
    for oid, commit in commits_between(repo, tip, set()):
        old = commit.replaces
        if old is None or old not in known or not repo.objects.has(old):
            continue
        before = repo.objects.commit(old)
        if (before.tombstones, before.links) != (commit.tombstones, commit.links):
            continue
        if hidden is None:
            hidden = repo.tombstoned_ids(tip)
        if not _only_hidden_lost(repo, before, commit, hidden):
            continue
        found[old] = oid
    return found


def _ids(repo: Repository, commit: Commit) -> set[tuple[str, str]]:
    return {(m.table, i) for mid in commit.manifests
            for m in [repo.objects.manifest(mid)] for i in m.ids}


def _only_hidden_lost(repo: Repository, before: Commit, after: Commit, hidden: set[str]) -> bool:
    old, new = _ids(repo, before), _ids(repo, after)
    return new <= old and all(i in hidden for _, i in old - new)


@dataclass(frozen=True)
class Adoption:
    """What adopting a rewritten history did to the current branch."""

    old: ObjectId | None
    new: ObjectId | None
    replaced: int  # commits of the local history the remote's images replaced
    rebased: int  # local commits the remote never saw, rewritten onto the images


def adopt(repo: Repository, remote: str, tip: ObjectId, known: set[str]) -> Adoption | None:
    """Move the current branch onto the images of a retracted remote (see the module docs).

    `known` is what this memory had from `remote` before the fetch that brought `tip`. None
    when the local history holds no replaced commit (a plain merge follows).
    """
    from funes.storage.reset import reset_hard

    found = replacements(repo, tip, known)
    head = repo.head()
    if not found or head is None:
        return None
    published = publish.load_published(repo, remote)
    mapping: dict[str, str] = dict(found)
    for original, image in published.items():  # a local original stands for its image
        if image in found or image in known:
            mapping.setdefault(original, found.get(image, image))
    local = ancestors(repo, head)
    if not set(mapping) & local:
        return None
    old_part = set().union(*(ancestors(repo, ObjectId(o)) for o in set(mapping) & local))
    theirs = ancestors(repo, tip)
    mine = [(oid, c) for oid, c in _history(repo, [head])
            if oid not in old_part and oid not in theirs]
    images, _ = publish.rewrite(repo, mine, {}, set(), mapping, {})
    new_head = ObjectId(mapping.get(head, head))
    if new_head != head:
        reset_hard(repo, new_head)
    _move_tags(repo, mapping)
    publish.save_published(repo, remote, {k: mapping.get(v, v) for k, v in published.items()})
    return Adoption(head, new_head, len(set(found) & local), len(images))


def _move_tags(repo: Repository, mapping: Mapping[str, str]) -> None:
    """Local tags on replaced commits follow them: the one case where a tag moves.

    Otherwise a tag would keep the old commits, and with them the retracted rows' files, alive
    past every `gc`.
    """
    from funes.storage.repo import now_iso

    moves = [(ref, oid) for ref, oid in repo.refs.iter_refs("refs/tags/") if oid in mapping]
    if not moves:
        return
    with repo.writing():
        for ref, oid in moves:
            repo.refs.set_if_equals(ref, oid, ObjectId(mapping[oid]), who=repo._who(),
                                    time=now_iso(), message="retract: follow the image")


# -- the note a fetch leaves ---------------------------------------------------------------------


def _note_path(repo: Repository, name: str) -> Path:
    return repo.path / "remotes" / name / "rewritten.json"


def note_rewrite(repo: Repository, name: str) -> None:
    """Remember where the remote-tracking refs were before a fetch brought a retraction.

    Kept until a pull adopts the rewritten history, so a `fetch` and a later `pull` adopt it
    just as one `pull` does; an earlier note (an older `before`) is kept.
    """
    import json

    if rewritten_from(repo, name) is not None:
        return
    before = {str(ref): oid for ref, oid in repo.refs.iter_refs(f"refs/remotes/{name}/")}
    path = _note_path(repo, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"before": before}).encode(), durable=False)


def rewritten_from(repo: Repository, name: str) -> dict[str, ObjectId] | None:
    """Where `refs/remotes/<name>/*` were before a retraction was fetched (None: none was)."""
    import json

    from funes.model.ids import is_object_id

    try:
        data = json.loads(_note_path(repo, name).read_text("utf-8"))
        before = dict(data["before"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {str(k): ObjectId(v) for k, v in before.items()
            if isinstance(v, str) and is_object_id(v)}


def clear_rewrite(repo: Repository, name: str) -> None:
    """The retraction was adopted (or found nothing to adopt): forget the note."""
    _note_path(repo, name).unlink(missing_ok=True)
