"""`funes gc`: physically remove tombstoned and unreachable data from this machine.

Tombstones only hide. gc is the one operation allowed to rewrite fragments:

1. every fragment of `chunks.lance` and the embedding tables holding a row hidden by a tombstone
   reachable from a local branch is rewritten without those rows (a new fragment file), and the
   dataset moves to a version listing the new fragments (a Lance `Overwrite`); old versions,
   the files only they used and the search indexes built over them (the full-text index holds
   the words) are deleted (the indexes are rebuilt on the next recall);
2. objects no ref reaches, fragment files no dataset version and no reachable manifest names,
   and `tmp/` are deleted once they are an hour old (younger ones may belong to a push or
   fetch in flight, which do not take the write lock); the id index (a cache) is dropped and
   rebuilt on demand.

Commits and manifests are immutable, so a manifest may now name a file gc replaced.
`collected.json` records each replaced file, the files holding its surviving rows, and the
ids removed; fsck accepts exactly that, and a push reads the replacement files instead.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from funes.model.ids import ObjectId
from funes.model.objects import TABLES
from funes.storage import pack
from funes.storage.atomic import write_atomic
from funes.storage.repo import Repository
from funes.storage.tables import LanceTable

COLLECTED = "collected.json"
#: Unreferenced files and objects younger than this are kept: a push, fetch or index run that
#: does not hold the write lock (the publish gate's images, a fetch's staging) may own them.
GRACE_SECONDS = 3600.0


def _young(path: Path) -> bool:
    import time

    try:
        return time.time() - path.stat().st_mtime < GRACE_SECONDS
    except OSError:
        return True


@dataclass
class Collected:
    """What earlier gc runs replaced: `table/data/x.lance` → surviving files, and removed ids."""

    files: dict[str, list[str]] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)


def load_collected(repo: Repository) -> Collected:
    """The record of replaced fragment files (empty when gc never rewrote one)."""
    try:
        data = json.loads((repo.path / COLLECTED).read_text("utf-8"))
        files = {str(k): [str(x) for x in v] for k, v in dict(data["files"]).items()}
        return Collected(files, {str(i) for i in data["ids"]})
    except (OSError, ValueError, KeyError, TypeError):
        return Collected()


def _save_collected(repo: Repository, collected: Collected) -> None:
    data = {"files": dict(sorted(collected.files.items())), "ids": sorted(collected.ids)}
    write_atomic(repo.path / COLLECTED, json.dumps(data, indent=0).encode())


@dataclass(frozen=True)
class GcResult:
    """What gc removed."""

    rows_removed: int
    fragments_rewritten: int
    files_deleted: int
    objects_deleted: int
    bytes_freed: int
    fragments_packed: int = 0  # small fragments packed into few (funes.storage.pack)


def _tips(repo: Repository) -> list[ObjectId]:
    tips: list[ObjectId] = []
    head = repo.head()
    if head is not None:
        tips.append(head)
    for ref in repo.refs.names():
        oid = repo.refs.read(ref)
        if oid is not None:
            tips.append(oid)
    return tips


def _local_tips(repo: Repository) -> list[ObjectId]:
    tips: list[ObjectId] = []
    head = repo.head()
    if head is not None:
        tips.append(head)
    for ref in repo.refs.names():
        if ref.startswith("refs/heads/"):
            oid = repo.refs.read(ref)
            if oid is not None:
                tips.append(oid)
    return tips


def gc(repo: Repository) -> GcResult:
    """Remove tombstoned rows and unreachable files and objects; see the module docstring."""
    with repo.writing():
        hidden: set[str] = set()
        for tip in _local_tips(repo):
            hidden |= repo.tombstoned_ids(tip)
        collected = load_collected(repo)
        rows = rewritten = freed = 0
        for name in TABLES:
            table = repo.table(name)
            if table.exists():
                r, w, b = _rewrite_table(name, table, hidden, collected)
                rows, rewritten, freed = rows + r, rewritten + w, freed + b
                r, w, b = _rewrite_packed(repo, name, table, hidden, collected)
                rows, rewritten, freed = rows + r, rewritten + w, freed + b
        if rewritten:
            collected.ids |= hidden
            _save_collected(repo, collected)
        objects, obj_bytes, named = _sweep_objects(repo)
        files, file_bytes = _sweep_files(repo, named, collected)
        tmp = repo.path / "tmp"
        if tmp.is_dir():
            for entry in tmp.iterdir():
                if not _young(entry):
                    if entry.is_dir():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink(missing_ok=True)
        with contextlib.suppress(FileNotFoundError):
            (repo.path / "index" / "ids.sqlite").unlink()
    # After the rewrite (which leaves the layout as it found it), outside its lock: pack
    # takes the lock itself.
    packed = pack.pack(repo, force=True)
    return GcResult(rows, rewritten, files, objects, freed + obj_bytes + file_bytes,
                    sum(packed.packed.values()))


def _rewrite_table(
    name: str, table: LanceTable, hidden: set[str], collected: Collected
) -> tuple[int, int, int]:
    import lance
    import pyarrow as pa
    import pyarrow.compute as pc
    from lance.fragment import FragmentMetadata

    ds = table.dataset()
    schema = ds.schema
    metas: list[dict[str, Any]] = []
    removed = rewritten = 0
    this_run: dict[str, list[str]] = {}  # data/x.lance → its replacements, this run
    value_set = pa.array(sorted(hidden), pa.string())
    for frag in ds.get_fragments():
        meta: dict[str, Any] = dict(frag.metadata.to_json())
        if not hidden:
            metas.append(meta)
            continue
        ids = frag.to_table(columns=["id"]).column("id")
        mask = pc.is_in(ids, value_set=value_set)
        if not pc.any(mask).as_py():
            metas.append(meta)
            continue
        rows = frag.to_table()
        clean = rows.filter(pc.invert(pc.is_in(rows.column("id"), value_set=value_set)))
        removed += rows.num_rows - clean.num_rows
        rewritten += 1
        new = table.write_fragments(clean) if clean.num_rows else []
        old_files = [f"{name}/data/{f['path']}" for f in meta["files"]]
        new_files = [f"{name}/{f.path}" for rec in new for f in rec.files]
        for f in meta["files"]:
            this_run[f"data/{f['path']}"] = [f.path for rec in new for f in rec.files]
        for old in old_files:
            collected.files[old] = new_files
        # Replacements of files an earlier gc made: point the originals at the newest files.
        for key, value in collected.files.items():
            if set(value) & set(old_files):
                collected.files[key] = [v for v in value if v not in old_files] + new_files
        metas.extend(dict(rec.meta) for rec in new)
    if not rewritten:
        return 0, 0, 0
    frags = []
    for index, meta in enumerate(metas):
        meta = dict(meta)
        meta["id"] = index
        frags.append(FragmentMetadata.from_json(json.dumps(meta)))
    before = _size(table.path)
    physical_before = table.file_paths()
    lance.LanceDataset.commit(
        str(table.path), lance.LanceOperation.Overwrite(schema, frags), read_version=ds.version
    )
    # Not Lance's cleanup: it would also delete the packed originals, which manifests name.
    # The files just rewritten go now (they hold the hidden rows); so do the old versions.
    after = table.file_paths()
    pack.rename_packs(table.path.parent, name, this_run)
    for rel in physical_before - after:
        (table.path / rel).unlink(missing_ok=True)
    pack.prune_versions(table, grace=0)
    return removed, rewritten, max(0, before - _size(table.path))


def _rewrite_packed(
    repo: Repository, name: str, table: LanceTable, hidden: set[str], collected: Collected
) -> tuple[int, int, int]:
    """Packed originals (outside the dataset version) that hold hidden rows: rewritten too.

    The pack holding their rows was rewritten with the dataset; the original files are what
    a push reads for the manifests that name them, so they get the same treatment as any
    fragment: survivors to a new file, the mapping in `collected.json`, the original deleted.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from lance.file import LanceFileReader

    if not hidden:
        return 0, 0, 0
    value_set = pa.array(sorted(hidden), pa.string())
    removed = rewritten = freed = 0
    schema = table.dataset().schema
    for rel in sorted(pack.record(repo.path, table, table.file_paths())["files"]):
        key = f"{name}/{rel}"
        path = table.path / rel
        if key in collected.files or not path.is_file():
            continue
        rows = LanceFileReader(str(path)).read_all().to_table()
        mask = pc.is_in(rows.column("id"), value_set=value_set)
        if not pc.any(mask).as_py():
            continue
        clean = rows.filter(pc.invert(mask))
        clean = pa.table({n: clean.column(n) for n in schema.names if n in clean.column_names})
        new = table.write_fragments(clean.cast(pa.schema(
            [schema.field(n) for n in clean.column_names]))) if clean.num_rows else []
        collected.files[key] = [f"{name}/{f.path}" for rec in new for f in rec.files]
        removed += rows.num_rows - clean.num_rows
        rewritten += 1
        freed += path.stat().st_size
        path.unlink()
    return removed, rewritten, freed


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _sweep_objects(repo: Repository) -> tuple[int, int, dict[str, set[str]]]:
    """Delete unreachable objects; returns (count, bytes, files named per table)."""
    keep: set[str] = set()
    named: dict[str, set[str]] = {name: set() for name in TABLES}
    stack = list(_tips(repo))
    while stack:
        oid = stack.pop()
        if oid in keep:
            continue
        keep.add(oid)
        commit = repo.objects.commit(oid)
        stack.extend(commit.parents)
        keep.update(commit.tombstones)
        keep.update(commit.links)
        for mid in commit.manifests:
            keep.add(mid)
            manifest = repo.objects.manifest(mid)
            named[manifest.table].update(f.path for r in manifest.fragments for f in r.files)
    count = nbytes = 0
    for oid in list(repo.objects):
        if oid in keep:
            continue
        path = repo.path / "objects" / oid[:2] / oid[2:]
        if _young(path):
            continue
        with contextlib.suppress(FileNotFoundError):
            nbytes += path.stat().st_size
            path.unlink()
            count += 1
    return count, nbytes, named


def _sweep_files(
    repo: Repository, named: dict[str, set[str]], collected: Collected
) -> tuple[int, int]:
    """Delete data files that no dataset version and no reachable manifest names."""
    count = nbytes = 0
    replacements = {v for values in collected.files.values() for v in values}
    for name in TABLES:
        table = repo.table(name)
        data = table.path / "data"
        if not table.exists() or not data.is_dir():
            continue
        included = table.file_paths()
        for path in data.iterdir():
            rel = f"data/{path.name}"
            if (rel in included or rel in named[name] or f"{name}/{rel}" in replacements
                    or _young(path)):
                continue
            nbytes += path.stat().st_size
            path.unlink()
            count += 1
    return count, nbytes
