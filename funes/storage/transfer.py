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

One file because it is the repository's one entrance: every check on what arrives (object
hashes, fragment metadata against the file, ids against content) sits beside the code that
installs it, so no path can store something unchecked.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError
from funes.model.ids import ObjectId, hash_bytes, is_object_id
from funes.model.objects import (
    VECTOR_TABLES,
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
    for f in files:
        for key in ("fields", "column_indices"):
            value = f.get(key)
            if value is not None and not (isinstance(value, list) and all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value)):
                raise TransferError(f"{where}: fragment metadata does not parse ({key} is not "
                                    "a list of numbers)")
    try:
        from lance.fragment import FragmentMetadata

        FragmentMetadata.from_json(json.dumps(meta))
    except BaseException as exc:  # Lance panics surface as pyo3's PanicException
        if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
            raise
        detail = " ".join(str(exc).split())[:160] or exc.__class__.__name__
        raise TransferError(f"{where}: fragment metadata does not parse ({detail})") from None


#: Keys of a fragment's metadata whose absence means the same as these values.
_META_DEFAULTS: dict[str, Any] = {
    "overlays": [], "deletion_file": None, "row_id_meta": None,
    "created_at_version_meta": None, "last_updated_at_version_meta": None,
}
_FILE_DEFAULTS: dict[str, Any] = {"base_id": None}


def _normal(meta: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k != "id" and not (k in defaults and v == defaults[k])}


def expected_schema(table: str, found: pa.Schema) -> pa.Schema:
    """The one schema a fragment of `table` may have (embeddings: of the dimension it has).

    An embedding table's schema fixes the component width too, so a float32 file named as a
    `vectors16` fragment (or the reverse) is refused here, before Lance would misread it.
    """
    import pyarrow as pa

    from funes.storage.tables import chunk_schema, vector_schema

    if table == "chunks":
        return chunk_schema()
    index = found.get_field_index("vector")
    kind = found.field(index).type if index >= 0 else None
    dim = kind.list_size if isinstance(kind, pa.FixedSizeListType) else 0
    return vector_schema(max(dim, 1), table)


def verify_fragments(
    table: str, ids: Sequence[str], records: Sequence[FragmentRecord],
    paths: Mapping[str, Path], where: str, model: ModelStamp | None = None,
    local_schema: pa.Schema | None = None,
) -> None:
    """Check a manifest's fragments against the bytes of their files; raise TransferError.

    The files' hashes match the manifest already (so they are bounded by its sizes); this
    checks that the Lance metadata describes them: one file per fragment, the table's exact
    schema (so the field ids mean the columns they should), the file's format version, size
    and row count, and nothing else (no overlays, deletion files, external bases, row-id
    sequences). Then the rows themselves: together they are exactly the manifest's `ids`,
    once each, and each chunk's content hashes to its id. Lance would otherwise trust the
    metadata and every later read of the table would fail or return garbled rows; a row the
    manifest does not name would be served without the signature check that covers `ids`.
    Vectors have no content hash: they must have the dimension of the model stamp of the
    commit that adds them (`model`) and be finite unit vectors. The schema to match is
    `local_schema` when given (the local table they will be appended to), else the one this
    funes writes.
    The cost is one read of each file: what arrives.
    """
    if list(ids) != sorted(set(ids)):
        raise TransferError(f"{where}: the manifest's ids are not sorted and distinct")
    seen: list[str] = []
    for record in records:
        if len(record.files) != 1:
            raise TransferError(f"{where}: a fragment with {len(record.files)} files (funes "
                                "writes one)")
        data = record.files[0]
        local = paths.get(data.path)
        if local is None:
            raise TransferError(f"{where}: fragment file {data.path} is not here to check")
        table_rows = _read_fragment_file(local, data.path, where)
        size = local.stat().st_size
        if size != data.size:
            raise TransferError(f"{where}: {data.path} is {size} bytes, its manifest says "
                                f"{data.size}")
        schema = table_rows.schema
        fields = list(range(len(schema)))
        expected = {
            "files": [{
                "fields": fields, "column_indices": fields,
                "file_major_version": table_rows.major, "file_minor_version": table_rows.minor,
                "file_size_bytes": data.size, "path": data.path[len("data/"):],
            }],
            "physical_rows": table_rows.num_rows,
        }
        files = record.meta.get("files")
        got = {
            **_normal(record.meta, _META_DEFAULTS),
            "files": [_normal(f, _FILE_DEFAULTS) for f in files]
            if isinstance(files, list) and all(isinstance(f, dict) for f in files) else files,
        }
        if got != expected:
            diff = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
            raise TransferError(
                f"{where}: the Lance metadata of {data.path} does not describe the file "
                f"(differs in {', '.join(diff)})",
                hint="the remote copy is damaged or was forged; nothing was stored",
            )
        wanted = local_schema if local_schema is not None else expected_schema(table, schema)
        if not schema.equals(wanted):
            raise TransferError(f"{where}: {data.path} has another schema than the {table} "
                                "table", hint="the two memories were written by incompatible "
                                "funes versions, or the file was forged; nothing was stored")
        if table in VECTOR_TABLES:
            _check_vectors(table_rows.table, model, where, data.path)
        seen.extend(table_rows.ids(table, where, data.path))
    if sorted(seen) != list(ids):
        extra = sorted(set(seen) - set(ids))
        missing = sorted(set(ids) - set(seen))
        twice = len(seen) - len(set(seen))
        detail = (f"{len(extra)} row(s) it does not list" if extra
                  else f"{len(missing)} listed id(s) without a row" if missing
                  else f"{twice} id(s) twice")
        raise TransferError(
            f"{where}: the fragments do not hold exactly the manifest's ids ({detail})",
            hint="the remote copy is damaged or was forged; nothing was stored",
        )


def _check_vectors(rows: pa.Table, model: ModelStamp | None, where: str, name: str) -> None:
    """Vectors must have the stamped model's dimension and be finite unit vectors.

    Readers rank by cosine on the assumption that vectors are normalised; a NaN or a huge
    vector would otherwise win or break every search.
    """
    import numpy as np

    if rows.num_rows == 0:
        return
    matrix = np.asarray(rows.column("vector").combine_chunks().flatten(), dtype=np.float32)
    dim = matrix.size // rows.num_rows
    if model is not None and dim != model.dim:
        raise TransferError(f"{where}: vectors in {name} do not have the stamped model's "
                            f"{model.dim} dimensions")
    matrix = matrix.reshape(rows.num_rows, dim)
    norms = np.linalg.norm(matrix, axis=1) if np.isfinite(matrix).all() else None
    if norms is None or not np.allclose(norms, 1.0, atol=1e-3):
        raise TransferError(f"{where}: vectors in {name} are not finite unit vectors")


@dataclass
class _FileRows:
    """What a Lance data file really holds."""

    table: pa.Table
    major: int
    minor: int

    @property
    def schema(self) -> pa.Schema:
        return self.table.schema

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    def ids(self, table: str, where: str, name: str) -> list[str]:
        """The rows' ids; for chunks, each checked against the content it hashes."""
        from funes.model.chunk import ID_FIELDS, id_from_fields

        ids = [str(i) for i in self.table.column("id").to_pylist()]
        if table != "chunks":
            return ids
        # Column by column: only the fields the id hashes, no row dicts from Arrow.
        columns = [self.table.column(f).to_pylist() for f in ID_FIELDS]
        for cid, values in zip(ids, zip(*columns, strict=True), strict=True):
            if id_from_fields(dict(zip(ID_FIELDS, values, strict=True))) != cid:
                raise TransferError(
                    f"{where}: a row of {name} does not hash to its id {cid[:12]}",
                    hint="the remote copy is damaged or was forged; nothing was stored",
                )
        return ids


def _read_fragment_file(path: Path, name: str, where: str) -> _FileRows:
    """Open a Lance data file and read all of it; anything Lance cannot read is refused."""
    try:
        import lance.file

        reader = lance.file.LanceFileReader(str(path))
        meta = reader.metadata()
        table = reader.read_all().to_table()
        if table.num_rows != meta.num_rows:
            raise ValueError("row count disagrees with the footer")
        version = (int(meta.major_version), int(meta.minor_version))  # type: ignore[attr-defined]
        return _FileRows(table, *version)
    except TransferError:
        raise
    except BaseException as exc:  # Lance panics surface as pyo3's PanicException
        if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
            raise
        detail = " ".join(str(exc).split())[:160] or exc.__class__.__name__
        raise TransferError(
            f"{where}: {name} is not a readable Lance data file ({detail})",
            hint="the remote copy is damaged or was forged; nothing was stored",
        ) from None





def check_data_file(expected: DataFile, src: Path, source: str) -> int:
    """Refuse a downloaded fragment file whose size or hash is not its manifest's."""
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
    return size


def install_data_file(
    table: LanceTable, expected: DataFile, src: Path, source: str, *, checked: bool = False
) -> int:
    """Move a downloaded fragment file into `table` after checking it; returns its size.

    `src` must be on the repository's file system (a staging directory inside it), so the
    final step is an atomic rename: a reader never sees half a file under its final name.
    `checked`: the caller ran `check_data_file` already.
    """
    check_data_path(expected.path, source)
    size = expected.size if checked else check_data_file(expected, src, source)
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

    Used to create a table that exists on the sending side only (an embedding table on a
    machine that never embedded): a dataset created from the same schema numbers its fields the same
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


def overwrite_records(
    table: LanceTable, records: Sequence[FragmentRecord], schema: pa.Schema
) -> int:
    """Make the table's next version hold exactly `records` (a Lance `Overwrite`).

    Created with `schema` when missing; fragment ids are numbered afresh. Returns the new
    version. The files no longer listed stay on disk: the caller decides what to delete.
    """
    import lance
    from lance.fragment import FragmentMetadata

    if not table.exists():
        table.create(schema)
    ds = table.dataset()
    frags = [FragmentMetadata.from_json(json.dumps({**r.meta, "id": index}))
             for index, r in enumerate(records)]
    lance.LanceDataset.commit(str(table.path), lance.LanceOperation.Overwrite(ds.schema, frags),
                              read_version=ds.version)
    return int(table.dataset().version)


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
    #: The redaction stamps (`Manifest.redaction`) of the incoming chunk manifests (None: an
    #: older funes wrote one), so the memory knows which rules its new chunks met.
    redaction: frozenset[str | None] = frozenset()


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
        appends, files, rows, rules = _fragments_to_append(repo, incoming)
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
                # a tokenizer chosen on one side (`funes reindex --tokenizer`) reaches the other
                tokenizer=ours_commit.tokenizer or their_commit.tokenizer,
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
        repo.mark_format()
        repo.set_orig_head(ours)  # `funes reset --hard ORIG_HEAD` undoes this merge
        repo.refs.set_if_equals(
            HEAD, ours, new, who=repo._who(), time=now_iso(), message=message
        )
        (repo.path / "PENDING").unlink()
        kind = "fast-forward" if fast_forward else "merge"
        return MergeResult(kind, branch, ours, new, merge_commit, fragments, rows, count, rules)


def _merged_stamp(ours: Commit | None, theirs: Commit) -> ModelStamp | None:
    """The model stamp of the union; two different stamps cannot be merged."""
    a = ours.model if ours else None
    b = theirs.model
    if a is not None and b is not None and (a.name, a.sha256) != (b.name, b.sha256):
        raise ModelMismatchError(a, b)
    return a or b


def _fragments_to_append(
    repo: Repository, incoming: Iterable[tuple[ObjectId, Commit]]
) -> tuple[dict[str, list[FragmentRecord]], dict[str, list[str]], int, frozenset[str | None]]:
    """Fragments the incoming commits add that the local tables do not hold yet.

    Also the redaction stamps of the incoming chunk manifests (`MergeResult.redaction`).
    """
    present: dict[str, set[str]] = {}
    appends: dict[str, list[FragmentRecord]] = {}
    files: dict[str, list[str]] = {}
    rows = 0
    rules: set[str | None] = set()
    # Oldest first, so rows land in the table in the order they were committed.
    for _, commit in sorted(incoming, key=lambda item: item[1].time):
        for mid in commit.manifests:
            manifest = repo.objects.manifest(mid)
            if manifest.table == "chunks":
                rules.add(manifest.redaction)
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
    return appends, files, rows, frozenset(rules)


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
