"""What a push sends, produced by the store: the outgoing rows, the published images, the plan.

Like a git object store that generates the pack a client then sends, storage answers the
questions a push asks and the remote layer only moves bytes:

- `outgoing` reads what the commits about to leave add: their manifests, the text and place of
  every chunk row they name (for the publish gate, funes.remotes.gate, to scan) and the record
  of fragment files `gc` rewrote;
- `publish` writes *published images* when rows must stay home (chunks the gate held back,
  rows `gc` removed). Fragments are immutable files, and the hf client uploads a sample of
  every file it offers, so a dirty fragment file is never offered: its clean rows go into
  new fragment files (in the local table's `data/`, outside any dataset version, like
  fetched files), manifests naming them, and commits rewritten onto those manifests with
  their parents mapped to their images and re-signed with this machine's key. The local
  branch keeps the original commits;
- `published.json` under `.funes/remotes/<r>/` maps each rewritten commit to its image, so the
  next push continues from the image (the remote tip) and sends only what is new;
- `transfer_plan` lists the objects and fragment records the published commits need.

Vectors of held chunks are held too: a manifest of any table drops the held ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError
from funes.model.ids import ObjectId
from funes.model.objects import Commit, DataFile, FragmentRecord, Manifest
from funes.storage.atomic import write_atomic
from funes.storage.transfer import referenced

if TYPE_CHECKING:
    import pyarrow as pa

    from funes.storage.gc import Collected
    from funes.storage.repo import Repository


class UnreadableRowsError(FunesError):
    """A fragment an outgoing manifest names cannot be read: nothing it holds can be checked."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"cannot read a fragment to scan it: {detail}")
        self.detail = detail


# -- the map of published images -----------------------------------------------------------------


def published_path(repo: Repository, remote: str) -> Path:
    """Where the local → image map of a remote is kept."""
    return repo.path / "remotes" / remote / "published.json"


def load_published(repo: Repository, remote: str) -> dict[str, str]:
    """Local commit → published image, for commits rewritten for this remote."""
    try:
        data = json.loads(published_path(repo, remote).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    from funes.model.ids import is_object_id

    return {
        k: v for k, v in data.items()
        if isinstance(k, str) and isinstance(v, str) and is_object_id(k) and is_object_id(v)
        and repo.objects.has(v)
    }


def save_published(repo: Repository, remote: str, mapping: Mapping[str, str]) -> None:
    """Record the local → image map (before the push that sends the images)."""
    path = published_path(repo, remote)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(dict(sorted(mapping.items())), indent=0).encode())


def originals(published: Mapping[str, str]) -> dict[str, str]:
    """Image → the local commit it was published for (the inverse of the map)."""
    return {image: mine for mine, image in published.items()}


# -- reading the rows a manifest names ---------------------------------------------------------


def read_record(
    table_path: Path, record: FragmentRecord, schema: pa.Schema,
    replaced: Mapping[str, list[str]] | None = None,
) -> pa.Table:
    """The rows of one fragment, read from its data files (not through a dataset version).

    `replaced` maps `<table>/data/x.lance` to the files `gc` rewrote it into (the rows that
    survived); such a fragment is read from those.
    """
    import pyarrow as pa
    from lance.file import LanceFileReader

    key = f"{table_path.name.removesuffix('.lance')}/{record.files[0].path}"
    if replaced and key in replaced:
        parts = [read_record(table_path, FragmentRecord({}, (DataFile(
            rel.split("/", 1)[1], 0, ""),)), schema) for rel in replaced[key]]
        return pa.concat_tables(parts) if parts else schema.empty_table()
    columns: dict[str, Any] = {}
    for f in record.files:
        part = LanceFileReader(str(table_path / f.path)).read_all().to_table()
        for name in part.column_names:
            columns[name] = part.column(name)
    names = [n for n in schema.names if n in columns]
    return pa.table({n: columns[n] for n in names}).cast(
        pa.schema([schema.field(n) for n in names])
    )


# -- what leaves -----------------------------------------------------------------------------------


@dataclass
class Outgoing:
    """The commits a push would send, parents first, and the rows they add."""

    commits: list[tuple[ObjectId, Commit]]
    manifests: dict[ObjectId, Manifest]
    chunk_ids: set[str]  # every chunk id the outgoing chunk manifests name
    texts: dict[str, str]  # chunk id → text, of the rows those manifests' fragments hold
    places: dict[str, tuple[str, str, str]]  # chunk id → (harness, session, turn)
    collected: Collected  # fragment files gc rewrote, and the ids it removed

    def scannable(self) -> dict[str, str]:
        """Chunk id → text of every outgoing chunk, in id order (what the gate scans)."""
        return {cid: self.texts[cid] for cid in sorted(self.chunk_ids) if cid in self.texts}

    def touched(self, manifest: Manifest) -> bool:
        """Whether `gc` rewrote a fragment file this manifest names."""
        return any(f"{manifest.table}/{f.path}" in self.collected.files
                   for r in manifest.fragments for f in r.files)


def topological(commits: Iterable[tuple[ObjectId, Commit]]) -> list[tuple[ObjectId, Commit]]:
    """Parents before children; among ready commits, oldest first."""
    pending = dict(commits)
    done: set[str] = set()
    out: list[tuple[ObjectId, Commit]] = []
    while pending:
        ready = sorted(
            (oid for oid, c in pending.items() if all(p in done or p not in pending
                                                      for p in c.parents)),
            key=lambda o: (pending[o].time, o),
        )
        if not ready:  # impossible in a DAG; keep going rather than loop
            ready = [next(iter(pending))]
        for oid in ready:
            out.append((oid, pending.pop(oid)))
            done.add(oid)
    return out


def outgoing(repo: Repository, sending: Iterable[tuple[ObjectId, Commit]]) -> Outgoing:
    """Read what `sending` adds: its manifests and the chunk rows they name.

    Raises:
        UnreadableRowsError: a chunk fragment cannot be read (what it holds cannot be scanned).
    """
    from funes.storage.gc import load_collected

    ordered = topological(sending)
    manifests: dict[ObjectId, Manifest] = {}
    chunk_ids: set[str] = set()
    for _, commit in ordered:
        for mid in commit.manifests:
            manifest = repo.objects.manifest(mid)
            manifests[mid] = manifest
            if manifest.table == "chunks":
                chunk_ids.update(manifest.ids)
    collected = load_collected(repo)
    texts, places = _chunk_rows(repo, manifests, collected.files)
    return Outgoing(ordered, manifests, chunk_ids, texts, places, collected)


def _chunk_rows(
    repo: Repository, manifests: Mapping[ObjectId, Manifest],
    replaced: Mapping[str, list[str]],
) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """Map id → text and id → (harness, session, turn) of every chunk row the manifests name."""
    texts: dict[str, str] = {}
    places: dict[str, tuple[str, str, str]] = {}
    if not repo.chunks.exists():
        return texts, places
    schema = repo.chunks.dataset().schema
    for manifest in manifests.values():
        if manifest.table != "chunks":
            continue
        for record in manifest.fragments:
            try:
                rows = read_record(repo.chunks.path, record, schema, replaced)
            except Exception as exc:  # unreadable data must stop the push
                raise UnreadableRowsError(str(exc)) from None
            for cid, text, harness, session, turn in zip(
                rows.column("id").to_pylist(), rows.column("text").to_pylist(),
                rows.column("harness").to_pylist(), rows.column("session_id").to_pylist(),
                rows.column("turn_id").to_pylist(), strict=True,
            ):
                texts[cid] = text
                places[cid] = (harness, session, turn)
    return texts, places


# -- published images ----------------------------------------------------------------------------


@dataclass
class Published:
    """The history a push sends in place of the local one."""

    tip: ObjectId  # what the remote ref should point to (the image of the local tip)
    commits: list[ObjectId]  # commit ids to send (images where rewritten), parents first
    images: dict[str, str] = field(default_factory=dict)  # local commit → image, new ones


def publish(
    repo: Repository, out: Outgoing, held: set[str], tip: ObjectId,
    published: Mapping[str, str], *, hidden: set[str] | frozenset[str] = frozenset(),
    extra: Mapping[ObjectId, Sequence[ObjectId]] | None = None,
) -> Published:
    """Rewrite the outgoing commits that would carry a row that must stay home.

    Rows stay home when the gate `held` them, when `gc` removed them, or when they are
    `hidden` (tombstoned at the pushed tip: every reader of the remote would hide them, so
    sending them would only leak them). `published` maps commits rewritten by earlier pushes
    to their images; a commit whose parent has an image is rewritten onto it. `extra` adds
    manifests to commits (the rows a lift brought back that the remote never received,
    `restoring`). When nothing needs rewriting, the commits are sent as they are and nothing
    is written.
    """
    result = Published(tip, [oid for oid, _ in out.commits])
    mapping = dict(published)
    named = {i for m in out.manifests.values() for i in m.ids}
    hold = set(held) | out.collected.ids | (set(hidden) & named)
    if (not hold & named and not extra
            and not any(out.touched(m) for m in out.manifests.values())
            and not any(p in mapping for _, c in out.commits for p in c.parents)):
        result.tip = ObjectId(mapping.get(tip, tip))
        return result
    images, sent = rewrite(repo, out.commits, out.manifests, hold, mapping,
                           out.collected.files, extra=extra)
    result.images = images
    result.commits = sent
    result.tip = ObjectId(mapping.get(tip, tip))
    return result


def rewrite(
    repo: Repository, commits: Sequence[tuple[ObjectId, Commit]],
    manifests: Mapping[ObjectId, Manifest], hold: set[str], mapping: dict[str, str],
    replaced: Mapping[str, list[str]], *, extra: Mapping[ObjectId, Sequence[ObjectId]] | None
    = None, mark: bool = False,
) -> tuple[dict[str, str], list[ObjectId]]:
    """Rewrite `commits` (parents first) without the rows `hold` names.

    A manifest naming a held row, or a fragment file `gc` replaced (`replaced`), is replaced by
    one naming new fragment files with the other rows; a commit whose manifests or parents
    change becomes an image (re-signed when a key exists; with `mark`, naming the commit it
    `replaces`). `mapping` (commit → image, updated in place) maps parents. Each image's
    `chunk_count` drops by the held chunks its history added and no tombstone of its history
    hid yet (exact on a linear history; an estimate across merges, where it is only a count).
    Returns the new images (commit → image) and the ids to send, parents first.
    """
    rewritten: dict[ObjectId, ObjectId] = {}
    images: dict[str, str] = {}
    sent: list[ObjectId] = []
    gone: set[str] = set()  # held chunk ids the rewritten manifests left out so far
    hid: set[str] = set()  # held ids a tombstone of the history hid already
    live = 0  # |gone - hid|: what the visible counts lose
    for oid, commit in commits:
        new_manifests: list[ObjectId] = []
        for mid in commit.manifests:
            manifest = manifests[mid] if mid in manifests else repo.objects.manifest(mid)
            dropped = hold.intersection(manifest.ids)
            touched = any(f"{manifest.table}/{f.path}" in replaced
                          for r in manifest.fragments for f in r.files)
            if not dropped and not touched:
                new_manifests.append(mid)
                continue
            if mid not in rewritten:
                rewritten[mid] = _clean_manifest(repo, manifest, hold, replaced)
            new_manifests.append(rewritten[mid])
            if manifest.table == "chunks":
                fresh = dropped - gone
                gone |= fresh
                live += len(fresh - hid)
        new_manifests += list((extra or {}).get(oid, ()))
        for tid in commit.tombstones:
            newly = hold.intersection(repo.objects.tombstone(tid).targets) - hid
            hid |= newly
            live -= len(newly & gone)
        parents = tuple(ObjectId(mapping.get(p, p)) for p in commit.parents)
        if tuple(new_manifests) == commit.manifests and parents == commit.parents:
            sent.append(oid)
            continue
        image = replace(
            commit,
            parents=parents,
            manifests=tuple(new_manifests),
            chunk_count=max(0, commit.chunk_count - live),
            signature=None,
            replaces=ObjectId(oid) if mark else commit.replaces,
        )
        image_id = repo.objects.put(_resign(repo, image))
        mapping[oid] = image_id
        images[oid] = image_id
        sent.append(image_id)
    return images, sent


def restoring(
    repo: Repository, out: Outgoing, remote_tips: Iterable[ObjectId], tip: ObjectId
) -> dict[ObjectId, set[str]]:
    """The rows a lift in the outgoing commits makes visible again that the remote lacks.

    A push leaves hidden rows home (`publish`); when `funes unforget` (or `exclude --remove`)
    later lifts their tombstone, the remote never received them. So the outgoing commit that
    carries the lift must also carry them (`restored_manifests`): the ids visible at `tip`
    that the lifted tombstones named, that no manifest reachable from the remote's tips
    names, and that no outgoing manifest sends anyway. Rare, so its one walk of the remote's
    history costs nothing in an ordinary push.
    """
    lifting: dict[ObjectId, set[str]] = {}
    for oid, commit in out.commits:
        for tid in commit.tombstones:
            for lifted in repo.objects.tombstone(tid).lifts:
                lifting.setdefault(oid, set()).update(repo.objects.tombstone(lifted).targets)
    if not lifting:
        return {}
    from funes.storage.transfer import ancestors

    hidden = repo.tombstoned_ids(tip)
    there: set[str] = set(out.chunk_ids)
    seen: set[str] = set()
    for remote_tip in remote_tips:
        if repo.objects.has(remote_tip):
            for walked in ancestors(repo, remote_tip, stop=seen):
                seen.add(walked)
                for mid in repo.objects.commit(walked).manifests:
                    manifest = repo.objects.manifest(mid)
                    if manifest.table == "chunks":
                        there.update(manifest.ids)
    found: dict[ObjectId, set[str]] = {}
    for oid, ids in lifting.items():
        back = ids - hidden - there
        if back:
            found[oid] = back
            there |= back
    return found


def row_texts(
    repo: Repository, ids: Iterable[str]
) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """Text and place (harness, session, turn) of local chunk rows, for the gate to scan."""
    import pyarrow.compute as pc

    wanted = sorted(set(ids))
    texts: dict[str, str] = {}
    places: dict[str, tuple[str, str, str]] = {}
    if not wanted or not repo.chunks.exists():
        return texts, places
    rows = repo.chunks.dataset().to_table(
        columns=["id", "text", "harness", "session_id", "turn_id"],
        filter=pc.field("id").isin(wanted))
    for cid, text, harness, session, turn in zip(*(rows.column(c).to_pylist() for c in (
            "id", "text", "harness", "session_id", "turn_id")), strict=True):
        texts[cid] = text
        places[cid] = (harness, session, turn)
    return texts, places


def restored_manifests(repo: Repository, ids: set[str]) -> list[ObjectId]:
    """Manifests of new fragments holding the local rows of `ids` (chunks, then vectors)."""
    out = [rows_manifest(repo, table, ids) for table in ("chunks", repo.vectors.name)]
    return [mid for mid in out if mid is not None]


def rows_manifest(repo: Repository, name: str, ids: set[str], *,
                  redaction: str | None = None) -> ObjectId | None:
    """A manifest of new fragment files holding the local rows of `ids` in table `name`.

    A row held twice (both sides of a merge indexed it) goes once; None when the table holds
    none of them. `redaction`: the rules the rows met (`Manifest.redaction`).
    """
    import pyarrow.compute as pc

    table = repo.table(name)
    if not ids or not table.exists():
        return None
    rows = table.dataset().to_table(filter=pc.field("id").isin(sorted(ids)))
    if not rows.num_rows:
        return None
    firsts = {cid: i for i, cid in reversed(list(enumerate(rows.column("id").to_pylist())))}
    rows = rows.take(sorted(firsts.values()))
    records = table.write_fragments(rows)
    return repo.objects.put(Manifest(name, tuple(sorted(firsts)), tuple(records), redaction))


def _resign(repo: Repository, commit: Commit) -> Commit:
    """Sign an image with this machine's key when one exists (funes.storage.signing)."""
    import importlib

    try:
        signing = importlib.import_module("funes.storage.signing")
    except ImportError:  # pragma: no cover - signing lands separately
        return commit
    sign = getattr(signing, "sign_commit", None)
    return sign(repo, commit) if sign is not None else commit


def _clean_manifest(
    repo: Repository, manifest: Manifest, hold: set[str], replaced: Mapping[str, list[str]]
) -> ObjectId:
    """A manifest naming new fragments with the rows of `manifest` minus the held ids."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = repo.table(manifest.table)
    schema = table.dataset().schema
    records: list[FragmentRecord] = []
    keep = pa.array(sorted(hold), pa.string())
    for record in manifest.fragments:
        gone = f"{manifest.table}/{record.files[0].path}" in replaced
        rows = read_record(table.path, record, schema, replaced)
        clean = rows.filter(pc.invert(pc.is_in(rows.column("id"), value_set=keep)))
        if clean.num_rows == rows.num_rows and not gone:
            records.append(record)
        elif clean.num_rows:
            records.extend(table.write_fragments(clean))
    ids = tuple(i for i in manifest.ids if i not in hold)
    return repo.objects.put(Manifest(manifest.table, ids, tuple(records), manifest.redaction))


# -- the transfer plan ---------------------------------------------------------------------------


@dataclass
class TransferPlan:
    """The objects and fragment records a set of published commits needs on the remote."""

    objects: dict[ObjectId, bytes]  # commit, manifest and other objects, raw
    tables: dict[str, list[FragmentRecord]]  # table → fragment records the manifests name


def transfer_plan(repo: Repository, commits: Iterable[ObjectId]) -> TransferPlan:
    """Everything `commits` name, read from the store (the remote drops what it has)."""
    objects: dict[ObjectId, bytes] = {}
    tables: dict[str, list[FragmentRecord]] = {}
    for oid in commits:
        commit = repo.objects.commit(oid)
        objects[oid] = repo.objects.get_raw(oid)
        for child, kind in referenced(commit):
            if kind == "commit":
                continue
            objects[child] = repo.objects.get_raw(child)
            if kind == "manifest":
                manifest = repo.objects.manifest(child)
                tables.setdefault(manifest.table, []).extend(manifest.fragments)
    return TransferPlan(objects, tables)
