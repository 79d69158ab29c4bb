"""Moving history between memories: verified imports, ancestry, fast-forward and merge.

Remotes (funes.remotes) bring objects and fragment files from elsewhere; this module is where
they enter the repository, so every check that protects it lives here:

- an object is stored only if its bytes hash to its id and parse as the kind that refers to it;
- a fragment file is stored only if its size and SHA-256 match the manifest that names it, and
  only under `<table>.lance/data/<name>.lance` (names are checked before any path is built);
- objects are written in dependency order (files, then manifests, tombstones and links, then
  commits parents-first), so a commit present on disk always has its whole history present.
  Fetch relies on that to stop walking at the first commit it already has.

Merging is a set union. A fast-forward moves the branch; otherwise a merge commit with both
parents and no manifests of its own records that the content is everything reachable from
either side. Fragments are immutable, so rows indexed independently on both sides may exist
twice in the local table: readers dedup by id, and `Commit.chunk_count` counts the union.
Tombstones reachable from either parent are reachable from the merge, so they win on both
sides. Nothing is re-embedded: vectors travel as fragments like chunks do.

The local tables hold the rows of local branches only (docs/format.md, "Tables"): fetch stores
files without appending them; `merge` appends what the new tip adds, through the same journal
as an ordinary commit, so a crash at any point is finished or undone by the next writer.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError
from funes.model.ids import ObjectId, hash_bytes, is_object_id
from funes.model.objects import (
    AnyObject,
    Commit,
    DataFile,
    FragmentRecord,
    MalformedObjectError,
    Manifest,
    ModelStamp,
)
from funes.model.objects import decode as decode_object
from funes.model.refs import HEAD
from funes.storage.atomic import fsync_dir, sha256_file, write_atomic
from funes.storage.repo import ModelMismatchError, Repository, now_iso
from funes.storage.signing import sign_commit
from funes.storage.tables import LanceTable

if TYPE_CHECKING:
    import pyarrow as pa

#: A fragment file as manifests name it: Lance writes `data/<binary digits + hex>.lance`.
DATA_PATH_RE = re.compile(r"^data/[A-Za-z0-9][A-Za-z0-9_-]{0,200}\.lance$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class TransferError(FunesError):
    """Something received from another memory cannot be accepted (it names what and why)."""


class MissingFragmentError(FunesError):
    """A commit to merge names a fragment file that is not on this machine."""

    def __init__(self, path: Path, manifest: str) -> None:
        super().__init__(
            f"fragment file {path} (manifest {manifest[:12]}) is not on this machine",
            hint="run `funes fetch` again to download it",
        )
        self.path = path


# -- ancestry ------------------------------------------------------------------------------


def referenced(commit: Commit) -> list[tuple[ObjectId, str]]:
    """Every object a commit names, with the kind it must be: the commit's closure, one step."""
    out: list[tuple[ObjectId, str]] = [(p, "commit") for p in commit.parents]
    out += [(m, "manifest") for m in commit.manifests]
    out += [(t, "tombstone") for t in commit.tombstones]
    out += [(lid, "link") for lid in commit.links]
    return out


def ancestors(repo: Repository, tip: ObjectId | None, stop: set[str] | None = None) -> set[str]:
    """Commit ids reachable from `tip` (itself included), not walking past `stop`."""
    seen: set[str] = set()
    if tip is None:
        return seen
    stack: list[str] = [tip]
    stop = stop or set()
    while stack:
        oid = stack.pop()
        if oid in seen or oid in stop:
            continue
        seen.add(oid)
        stack.extend(repo.objects.commit(oid).parents)
    return seen


def is_ancestor(repo: Repository, ancestor: str, tip: str) -> bool:
    """True if `ancestor` is reachable from `tip` (a commit is its own ancestor)."""
    stack: list[str] = [tip]
    seen: set[str] = set()
    while stack:
        oid = stack.pop()
        if oid == ancestor:
            return True
        if oid in seen:
            continue
        seen.add(oid)
        stack.extend(repo.objects.commit(oid).parents)
    return False


def commits_between(
    repo: Repository, tip: ObjectId, exclude: set[str]
) -> Iterator[tuple[ObjectId, Commit]]:
    """Commits reachable from `tip` but not from `exclude` (a closed set of ancestors)."""
    seen: set[str] = set()
    stack: list[str] = [tip]
    while stack:
        oid = stack.pop()
        if oid in seen or oid in exclude:
            continue
        seen.add(oid)
        commit = repo.objects.commit(oid)
        yield ObjectId(oid), commit
        stack.extend(commit.parents)


# -- checking what arrives -----------------------------------------------------------------


def parse_received(oid: str, raw: bytes, kind: str | None, source: str) -> AnyObject:
    """Verify and parse an object received from `source`; the error names both."""
    if not is_object_id(oid):
        raise TransferError(f"{source} sent an invalid object id {oid[:80]!r}")
    if raw.startswith(b"FUNESENC1\n"):  # funes.remotes.crypt.MAGIC: sealed, and no key here
        raise TransferError(
            f"{source} is an encrypted memory and this machine has no key for it",
            hint="ask a teammate for `funes keys export --remote NAME`, run `funes keys "
            "import LINE`, and try again; nothing was stored",
        )
    actual = hash_bytes(raw)
    if actual != oid:
        raise TransferError(
            f"{source} sent object {oid} whose bytes hash to {actual}",
            hint="the remote copy is damaged or was tampered with; nothing was stored",
        )
    try:
        obj = decode_object(raw, (kind,) if kind else None)
    except MalformedObjectError as exc:
        raise TransferError(f"{source} sent object {oid}: {exc.message}") from None
    if isinstance(obj, Manifest):
        for record in obj.fragments:
            check_record(record, f"{source} object {oid[:12]}")
    return obj


def check_data_path(path: str, where: str) -> str:
    """Refuse a fragment file name that is not `data/<name>.lance` (it becomes a local path)."""
    if not isinstance(path, str) or not DATA_PATH_RE.match(path):
        raise TransferError(f"{where}: refusing fragment file name {str(path)[:80]!r}")
    return path


def check_record(record: FragmentRecord, where: str) -> None:
    """Check a manifest's fragment: safe file names, hashes, and Lance metadata that agrees.

    The metadata is what gets committed to a Lance dataset, so it must name exactly the files
    the manifest hashes, with no deletion file and no external base path (either would make
    Lance read something that no hash covers).
    """
    if not record.files:
        raise TransferError(f"{where}: a fragment without files")
    for f in record.files:
        check_data_path(f.path, where)
        if not _SHA256_RE.match(f.sha256) or f.size < 0:
            raise TransferError(f"{where}: bad size or hash for {f.path}")
    meta = record.meta
    files = meta.get("files")
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise TransferError(f"{where}: fragment metadata has no file list")
    names = [f.get("path") for f in files]
    if names != [f.path[len("data/") :] for f in record.files]:
        raise TransferError(f"{where}: fragment metadata names other files than its hashes")
    if any(f.get("base_id") is not None for f in files) or meta.get("deletion_file") is not None:
        raise TransferError(f"{where}: fragment metadata points outside its files")
    rows = meta.get("physical_rows")
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
        raise TransferError(f"{where}: fragment metadata has no row count")
    try:
        from lance.fragment import FragmentMetadata

        FragmentMetadata.from_json(json.dumps(meta))
    except (ValueError, TypeError, KeyError, OSError, RuntimeError) as exc:
        raise TransferError(f"{where}: fragment metadata does not parse ({exc})") from None





def install_data_file(table: LanceTable, expected: DataFile, src: Path, source: str) -> int:
    """Move a downloaded fragment file into `table` after checking it; returns its size.

    `src` must be on the repository's file system (a staging directory inside it), so the
    final step is an atomic rename: a reader never sees half a file under its final name.
    """
    check_data_path(expected.path, source)
    size, digest = sha256_file(src)
    if (size, digest) != (expected.size, expected.sha256):
        with contextlib.suppress(FileNotFoundError):
            src.unlink()
        raise TransferError(
            f"{source} sent fragment file {expected.path} whose content does not match its "
            f"manifest ({size} bytes, sha256 {digest[:12]}; expected {expected.size} bytes, "
            f"{expected.sha256[:12]})",
            hint="the remote copy is damaged or was tampered with; nothing was stored",
        )
    dest = table.path / expected.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dest)
    fsync_dir(dest.parent)
    return size


def store_objects(repo: Repository, objects: Mapping[ObjectId, tuple[bytes, AnyObject]]) -> int:
    """Write verified objects so that whatever an object names is on disk before it.

    Manifests, tombstones and links first (their files are already in place), then commits
    with parents before children. Returns how many were new.
    """
    written = 0
    commits = {oid: obj for oid, (_, obj) in objects.items() if isinstance(obj, Commit)}
    for leaf, (raw, obj) in objects.items():
        if not isinstance(obj, Commit):
            written += repo.objects.put_raw(leaf, raw)
    done: set[str] = set()
    for start in commits:
        stack: list[tuple[str, bool]] = [(start, False)]
        while stack:
            oid, expanded = stack.pop()
            if oid in done or oid not in commits:
                continue
            if expanded:
                written += repo.objects.put_raw(ObjectId(oid), objects[ObjectId(oid)][0])
                done.add(oid)
                continue
            stack.append((oid, True))
            stack.extend((p, False) for p in commits[ObjectId(oid)].parents if p not in done)
    return written


# -- tables --------------------------------------------------------------------------------


def data_file_schema(path: Path) -> pa.Schema:
    """The Arrow schema stored in a Lance data file's footer.

    Used to create a table that exists on the sending side only (`vectors.lance` on a machine
    that never embedded): a dataset created from the same schema numbers its fields the same
    way, which is what the fragment metadata's field ids refer to.
    """
    import lance.file

    try:
        return lance.file.LanceFileReader(str(path)).metadata().schema
    except (OSError, ValueError, RuntimeError) as exc:
        raise TransferError(f"cannot read the schema of {path} ({exc})") from None


def append_records(
    table: LanceTable, records: list[FragmentRecord], schema: pa.Schema | None = None
) -> int:
    """Append received fragments to a table (created on first use); returns the new version.

    Fragment ids are dataset-local: each is reset to 0, which Lance reads as "assign the next
    free id", so fragments from several memories never clash. The incoming files' schema must
    equal the table's, or the field ids in the metadata would mean other columns.
    """
    if not records:
        return int(table.dataset().version) if table.exists() else 0
    first = table.path / records[0].files[0].path
    incoming = schema if schema is not None else data_file_schema(first)
    if not table.exists():
        table.create(incoming)
    current = table.dataset()
    if schema is None and not current.schema.equals(incoming):
        raise TransferError(
            f"fragments for {table.path.name} have another schema than the local table",
            hint="the two memories were written by incompatible funes versions",
        )
    renumbered = [FragmentRecord({**r.meta, "id": 0}, r.files) for r in records]
    return table.append(renumbered, int(current.version))


# -- merge ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MergeResult:
    """What `merge` (or the merge step of `pull` and `clone`) did to the current branch."""

    kind: str  # "up-to-date" | "fast-forward" | "merge"
    branch: str
    old: ObjectId | None
    new: ObjectId | None
    merge_commit: ObjectId | None  # the commit written, for kind == "merge"
    fragments: int  # fragments appended to the local tables
    rows: int  # rows those fragments hold (duplicates of local rows included)
    chunk_count: int  # chunks visible after the merge (the union, tombstones applied)


def merge(
    repo: Repository,
    theirs: ObjectId,
    *,
    label: str,
    lock_timeout: float | None = None,
) -> MergeResult:
    """Merge commit `theirs` (and its history) into the current branch.

    A fast-forward when the branch is an ancestor of `theirs` (or unborn); nothing when
    `theirs` is already contained; otherwise a merge commit. Every commit and fragment file
    `theirs` needs must already be on this machine (fetch puts them there).

    Raises:
        ModelMismatchError: both sides are stamped with different embedding models.
        MissingFragmentError: a fragment file the new commits name has not been fetched.
    """
    with repo.writing(lock_timeout):
        ref = repo.head_branch()
        branch = ref.removeprefix("refs/heads/")
        ours = repo.refs.read(ref)
        their_commit = repo.objects.commit(theirs)
        ours_commit = repo.objects.commit(ours) if ours else None
        if ours is not None and (ours == theirs or is_ancestor(repo, theirs, ours)):
            count = ours_commit.chunk_count if ours_commit else 0
            return MergeResult("up-to-date", branch, ours, ours, None, 0, 0, count)
        stamp = _merged_stamp(ours_commit, their_commit)

        ours_closure = ancestors(repo, ours)
        incoming = list(commits_between(repo, theirs, ours_closure))
        appends, files, rows = _fragments_to_append(repo, incoming)
        fast_forward = ours is None or is_ancestor(repo, ours, theirs)

        if fast_forward:
            new = theirs
            merge_commit = None
            count = their_commit.chunk_count
            message = f"merge {label}: fast-forward"
        else:
            assert ours is not None and ours_commit is not None
            count = _union_count(repo, ours, ours_commit, incoming)
            commit = Commit(
                parents=(ours, theirs),
                manifests=(),
                tombstones=(),
                model=stamp,
                author=repo._who(),
                host=socket.gethostname(),
                time=now_iso(),
                message=f"merge {label} into {branch}",
                chunk_count=count,
            )
            commit = sign_commit(repo, commit)
            new = repo.objects.put(commit)
            merge_commit = new
            message = commit.message

        journal = {"ref": ref, "old": ours, "commit": new, "tables": files, "message": message}
        write_atomic(repo.path / "PENDING", json.dumps(journal).encode())
        fragments = 0
        for name, records in appends.items():
            append_records(repo.table(name), records)
            fragments += len(records)
        repo.refs.set_if_equals(
            HEAD, ours, new, who=repo._who(), time=now_iso(), message=message
        )
        (repo.path / "PENDING").unlink()
        kind = "fast-forward" if fast_forward else "merge"
        return MergeResult(kind, branch, ours, new, merge_commit, fragments, rows, count)


def _merged_stamp(ours: Commit | None, theirs: Commit) -> ModelStamp | None:
    """The model stamp of the union; two different stamps cannot be merged."""
    a = ours.model if ours else None
    b = theirs.model
    if a is not None and b is not None and (a.name, a.sha256) != (b.name, b.sha256):
        raise ModelMismatchError(a, b)
    return a or b


def _fragments_to_append(
    repo: Repository, incoming: Iterable[tuple[ObjectId, Commit]]
) -> tuple[dict[str, list[FragmentRecord]], dict[str, list[str]], int]:
    """Fragments the incoming commits add that the local tables do not hold yet."""
    present: dict[str, set[str]] = {}
    appends: dict[str, list[FragmentRecord]] = {}
    files: dict[str, list[str]] = {}
    rows = 0
    # Oldest first, so rows land in the table in the order they were committed.
    for _, commit in sorted(incoming, key=lambda item: item[1].time):
        for mid in commit.manifests:
            manifest = repo.objects.manifest(mid)
            table = repo.table(manifest.table)
            if manifest.table not in present:
                present[manifest.table] = table.logical_paths() if table.exists() else set()
            for record in manifest.fragments:
                check_record(record, f"manifest {mid[:12]}")
                paths = [f.path for f in record.files]
                if all(p in present[manifest.table] for p in paths):
                    continue
                for f in record.files:
                    local = table.path / f.path
                    if not local.is_file() or local.stat().st_size != f.size:
                        raise MissingFragmentError(local, mid)
                appends.setdefault(manifest.table, []).append(record)
                files.setdefault(manifest.table, []).extend(paths)
                present[manifest.table].update(paths)
                rows += _physical_rows(record.meta)
    return appends, files, rows


def _physical_rows(meta: Mapping[str, Any]) -> int:
    rows = meta.get("physical_rows")
    return rows if isinstance(rows, int) else 0


def _union_count(
    repo: Repository, ours: ObjectId, ours_commit: Commit, incoming: list[tuple[ObjectId, Commit]]
) -> int:
    """Chunks visible in the union: ours, plus theirs' new ids, minus what either side hides.

    Uses the id index (caught up to `ours`), so the cost is what the incoming commits name:
    theirs' new ids count unless ours already has them or any tombstone hides them, and our
    visible ids that theirs' tombstones hide stop counting.
    """
    repo.ids.sync(repo, ours)
    added: set[str] = set()
    hidden: set[str] = set()
    for _, commit in incoming:
        for mid in commit.manifests:
            manifest = repo.objects.manifest(mid)
            if manifest.table == "chunks":
                added.update(manifest.ids)
        for tid in commit.tombstones:
            hidden.update(repo.objects.tombstone(tid).targets)
    new_visible = added - repo.ids.known(added) - hidden
    lost = repo.ids.visible(hidden)
    return ours_commit.chunk_count - len(lost) + len(new_visible)
