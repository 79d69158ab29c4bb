"""Packing: many small fragments rewritten into few, under manifests that do not change.

Every commit appends a fragment to `chunks.lance` (and every embedding batch one to its
embedding table); a memory fed one turn at a time grows thousands of them, and every search,
row fetch and commit pays per fragment. Packing is funes's `git gc --auto`: when a table
holds `pack.threshold` fragments or more, Lance's compaction rewrites them into a few large
ones (search indexes remapped, not rebuilt), under the write lock, from the hook worker or
`funes index` after the turn is stored, never in the agent's path.

**A pack is a local physical layout, not history.** Manifests keep naming the original
fragment files: they are the unit of content addressing and transfer. So the originals stay
in `<table>/data/` (outside the dataset's latest version, like fetched files); the dataset
version lists the packs instead, and `packs.json` records which physical files are packs and
which logical files they hold (and, with the time they were retired, packs a later pack
rewrote: deleted a minute later, when no reader can still be reading them):

    {"chunks": {"packs": ["data/p.lance", …], "files": ["data/a.lance", …],
                "retired": {"data/q.lance": 1796140000}}, "vectors": …}

Once a table's `files` hold SEAL_AT entries they move to a sealed file `packs.d/<table>/<n>.json`
written once, so the record every pack rewrites stays small (FORMAT 3: docs/format.md).
Which fragments a pack rewrites follows the search indexes' segments (`_plan`).

The *logical* file set of a table (what merge, crash recovery and fsck ask "is this file in
the table?") is the version's files minus the packs, plus the packed files. Pushes and pulls
are untouched: a push sends the original files its manifests name, a pull appends the
fetched ones (and they are packed later, like local ones). Commit ids, chunk ids and the
remote's content do not depend on whether, when or how either side packed.

Crash safety: `PACKING` journals the table's files before the compaction's Lance commit (an
atomic new version). Killed before that commit: nothing changed (new files are orphans gc
removes). Killed after: the journal and the version's files say what was packed; every
read of the logical view applies a pending journal, and the next writer records it for good.
Old Lance versions (each commit's manifest lists every fragment, so keeping them costs the
square of the commit count) are pruned after a pack, without deleting any data file.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.model.objects import TABLES
from funes.storage.atomic import write_atomic
from funes.storage.lock import RepositoryBusyError

if TYPE_CHECKING:
    import lance

    from funes.storage.repo import Repository
    from funes.storage.tables import LanceTable

PACKS = "packs.json"
JOURNAL = "PACKING"
#: Sealed parts of the record: `packs.d/<table>/<n>.json`, each `{"files": [...]}`, written
#: once and never changed (until `reset` unpacks the table and deletes them).
SEALED = "packs.d"
#: A table's packed originals move from `packs.json` to a sealed file once this many are
#: listed there: `packs.json` is rewritten on every pack, and listing every original packed
#: since the memory began made that rewrite grow with the memory (7 MB at 100k commits).
SEAL_AT = 1024
#: Largest sealed file read back (input from disk: bounded; one holds about 100 kB).
_SEALED_MAX_BYTES = 16 << 20
#: Pack a table once it holds this many fragments (config `pack.threshold`; 0 turns auto off).
#: 8 with GEOMETRIC 4 kept a per-turn memory's recall within 1.2x of the same rows committed
#: at once, where 32 with 2 left it at 1.7-1.9x (bench/results/life.md, "Tuning").
DEFAULT_THRESHOLD = 8
#: A fragment at least GEOMETRIC times the rows of all smaller ones together is left alone:
#: a pack rewrites at most a few times what it gathers, so fragments stay O(log rows) and a
#: pack after one more turn does not rewrite the whole memory.
GEOMETRIC = 4
#: Lance versions, index files and transaction files younger than this are kept when pruning
#: (a reader that opened the dataset a moment ago may still read them).
PRUNE_GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class PackResult:
    """What one pack did, per table."""

    packed: dict[str, int]  # table → fragments rewritten
    fragments: dict[str, int]  # table → fragments in the dataset afterwards
    seconds: float

    @property
    def did_pack(self) -> bool:
        """True when any table was rewritten."""
        return any(self.packed.values())


# -- the pack record -------------------------------------------------------------------------


def _load(repo_path: Path) -> dict[str, dict[str, set[str]]]:
    try:
        data = json.loads((repo_path / PACKS).read_text("utf-8"))
        # Internally a retired pack is "<unix time> <path>", so that every field is a set.
        return {str(t): {"packs": {str(p) for p in v["packs"]},
                         "files": {str(f) for f in v["files"]},
                         "retired": {f"{int(when)} {rel}"
                                     for rel, when in dict(v.get("retired", {})).items()}}
                for t, v in data.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _save(repo_path: Path, record: dict[str, dict[str, set[str]]]) -> None:
    data: dict[str, dict[str, Any]] = {}
    for t, v in sorted(record.items()):
        data[t] = {"packs": sorted(v["packs"]), "files": sorted(v["files"])}
        if v.get("retired"):
            data[t]["retired"] = dict(sorted(
                (rel, int(when)) for when, _, rel in (r.partition(" ") for r in v["retired"])))
    write_atomic(repo_path / PACKS, json.dumps(data, indent=0).encode())


def _apply(record: dict[str, dict[str, set[str]]], table: str, before: set[str],
           after: set[str]) -> None:
    """Fold one compaction (the table's files before and after it) into the record."""
    entry = record.setdefault(table, {"packs": set(), "files": set(), "retired": set()})
    entry.setdefault("retired", set())
    removed, added = before - after, after - before
    entry["files"] |= removed - entry["packs"]  # originals (not packs of packs) stay logical
    now = int(time.time())  # packs packed again: deleted a little later
    entry["retired"] |= {f"{now} {rel}" for rel in removed & entry["packs"]}
    entry["packs"] = (entry["packs"] - removed) | added


def rename_packs(repo_path: Path, table: str, replaced: dict[str, list[str]]) -> None:
    """Follow packs that `gc` rewrote (`data/p.lance` → the files holding its survivors)."""
    packs = _load(repo_path)
    entry = packs.get(table)
    if not entry or not entry["packs"] & set(replaced):
        return
    for old in entry["packs"] & set(replaced):
        entry["packs"] = (entry["packs"] - {old}) | set(replaced[old])
    _save(repo_path, packs)


def forget_packs(repo_path: Path, table: str) -> None:
    """Record that `table`'s packs left its dataset version (`funes reset` unpacked it)."""
    packs = _load(repo_path)
    entry = packs.get(table)
    if entry and (entry["packs"] or entry["files"]):
        now = int(time.time())
        entry["retired"] = entry.get("retired", set()) | {f"{now} {p}" for p in entry["packs"]}
        entry["packs"], entry["files"] = set(), set()
        _save(repo_path, packs)
    shutil.rmtree(repo_path / SEALED / table, ignore_errors=True)


def _journaled(repo_path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((repo_path / JOURNAL).read_text("utf-8"))
        return data if isinstance(data, dict) and isinstance(data.get("files"), list) else None
    except (OSError, ValueError):
        return None


def record(repo_path: Path, table: LanceTable, current: set[str]) -> dict[str, set[str]]:
    """The pack record of `table` (`packs`, `files`), sealed files and a pending journal in."""
    packs = _load(repo_path)
    journal = _journaled(repo_path)
    if journal and journal.get("table") == table.name and \
            int(journal.get("version", -1)) < _latest_version(table):
        _apply(packs, table.name, set(journal["files"]), current)
    entry = packs.get(table.name, {"packs": set(), "files": set()})
    return {"packs": entry["packs"], "files": entry["files"] | _sealed(repo_path, table.name)}


def _sealed(repo_path: Path, table: str) -> set[str]:
    """The originals listed in `packs.d/<table>/`.

    Read only where the whole logical file set is needed (merge, recovery, fsck, gc, reset),
    never by a pack.
    """
    out: set[str] = set()
    folder = repo_path / SEALED / table
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            if path.stat().st_size > _SEALED_MAX_BYTES:
                continue
            files = json.loads(path.read_text("utf-8")).get("files")
        except (OSError, ValueError, AttributeError):
            continue  # lost or damaged: its files read as missing, which fsck reports
        if isinstance(files, list):
            out.update(f for f in files if isinstance(f, str) and _data_name(f))
    return out


def _seal(repo: Repository, packs: dict[str, dict[str, set[str]]]) -> None:
    """Move the originals of a table's record to a sealed file once there are SEAL_AT of them.

    FORMAT is raised first (a format-2 funes would take the sealed files for missing ones),
    then the sealed file is written, then `packs.json` (by the caller): killed in between,
    a file is listed twice, which a set does not mind.
    """
    for name, entry in packs.items():
        if len(entry["files"]) < SEAL_AT:
            continue
        repo.raise_format(3)
        folder = repo.path / SEALED / name
        folder.mkdir(parents=True, exist_ok=True)
        taken = [int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()]
        data = {"files": sorted(entry["files"])}
        write_atomic(folder / f"{max(taken, default=0) + 1:08d}.json", json.dumps(data).encode())
        entry["files"] = set()


def logical_paths(repo_path: Path, table: LanceTable, physical: set[str]) -> set[str]:
    """The files a table holds as manifests see them: packs replaced by what they pack."""
    rec = record(repo_path, table, physical)
    if not rec["packs"] and not rec["files"]:
        return physical
    return (physical - rec["packs"]) | rec["files"]


def _latest_version(table: LanceTable) -> int:
    try:
        return int(table.dataset().version)
    except Exception:  # a damaged or absent table: no pack of it can be pending
        return -1


def recover(repo: Repository) -> None:
    """Record a pack a crash interrupted (called under the write lock, before any write)."""
    journal = _journaled(repo.path)
    if journal is None:
        (repo.path / JOURNAL).unlink(missing_ok=True)
        return
    name = str(journal.get("table"))
    if name in TABLES:
        table = repo.table(name)
        if table.exists() and int(journal.get("version", -1)) < _latest_version(table):
            packs = _load(repo.path)
            _apply(packs, name, set(journal["files"]), table.file_paths())
            _save(repo.path, packs)
    (repo.path / JOURNAL).unlink(missing_ok=True)


# -- packing ---------------------------------------------------------------------------------


def threshold(repo: Repository) -> int:
    """Fragments per table that trigger an automatic pack (config `pack.threshold`)."""
    raw = repo.config.get("pack.threshold")
    try:
        return max(0, int(raw)) if raw else DEFAULT_THRESHOLD
    except ValueError:
        return DEFAULT_THRESHOLD


def due(repo: Repository) -> bool:
    """Whether a table has something to pack (cheap: one manifest read per table)."""
    limit = threshold(repo)
    if limit == 0:
        return False
    return any(table.exists() and _plan(table.dataset(), limit) is not None
               for table in (repo.chunks, *repo.embeddings.values()))


def auto(repo: Repository) -> PackResult | None:
    """Pack when due, like `git gc --auto`; never waits for the lock (None when busy or not due).

    Meant for background maintenance (the hook worker, the end of `funes index`).
    """
    if not due(repo):
        return None
    try:
        return pack(repo, lock_timeout=0)
    except RepositoryBusyError:
        return None


def pack(repo: Repository, *, force: bool = False, lock_timeout: float | None = None) -> PackResult:
    """Pack every table that is due (or, with `force`, whatever two fragments can be packed)."""
    started = time.monotonic()
    packed: dict[str, int] = {}
    fragments: dict[str, int] = {}
    limit = threshold(repo)
    with repo.writing(lock_timeout):
        for table in (repo.chunks, *repo.embeddings.values()):
            if not table.exists():
                continue
            excluded = _plan(table.dataset(), 0 if force else limit) if force or limit else None
            if excluded is not None:
                packed[table.name] = _pack_table(repo, table, excluded)
            fragments[table.name] = len(table.dataset().get_fragments())
    return PackResult(packed, fragments, time.monotonic() - started)


def _exclusions(rows: list[tuple[int, int]]) -> list[int]:
    """Fragment ids left as they are: those much larger than all smaller ones together."""
    excluded: list[int] = []
    smaller = 0
    for fid, n in sorted(rows, key=lambda r: (r[1], r[0])):
        if smaller and n >= GEOMETRIC * smaller:
            excluded.append(fid)
        smaller += n
    return excluded


def _plan(ds: lance.LanceDataset, limit: int) -> list[int] | None:
    """The fragment ids a pack leaves alone, or None when there is nothing worth packing.

    Lance remaps every index segment that covers a rewritten fragment, and packs together
    only fragments of the same coverage. One search-index segment over the whole table made
    every pack rewrite the whole index: work proportional to the memory every few turns
    (bench/results/life.md, "A hook's whole call"). So fragments are packed by coverage:

    - fragments no index covers yet (the newest rows) are packed among themselves once there
      are `limit` of them (0: any two), the geometric rule keeping a large one as it is;
    - fragments covered by the same index segments are packed together whenever there are
      two or more: that follows a fold that merged segments
      (funes.retrieval.indexes.fold), whose sizes grow geometrically, so a pack rewrites
      about the rows that fold just indexed, never the whole table.
    """
    frags = ds.get_fragments()
    rows = {f.fragment_id: f.count_rows() for f in frags}
    cover: dict[int, list[str]] = {}
    for ix in ds.describe_indices():
        for segment in ix.segments:
            for fid in segment.fragment_ids:
                cover.setdefault(int(fid), []).append(str(segment.uuid))
    groups: dict[tuple[str, ...], list[int]] = {}
    for fid in rows:
        groups.setdefault(tuple(sorted(cover.get(fid, ()))), []).append(fid)
    chosen: set[int] = set()
    tail = groups.pop((), [])
    if len(tail) >= max(2, limit):
        left = set(_exclusions([(fid, rows[fid]) for fid in tail]))
        if len(tail) - len(left) >= 2:
            chosen.update(fid for fid in tail if fid not in left)
    for group in groups.values():
        if len(group) >= 2:
            chosen.update(group)
    if not chosen:
        return None
    return [fid for fid in rows if fid not in chosen]


def _pack_table(repo: Repository, table: LanceTable, excluded: list[int]) -> int:
    ds = table.dataset()
    before = table.file_paths()
    journal = {"table": table.name, "version": int(ds.version), "files": sorted(before)}
    write_atomic(repo.path / JOURNAL, json.dumps(journal).encode())
    metrics = ds.optimize.compact_files(excluded_fragment_ids=excluded or None, num_threads=1)
    after = table.file_paths()
    packs = _load(repo.path)
    _apply(packs, table.name, before, after)
    _seal(repo, packs)
    _save(repo.path, packs)
    (repo.path / JOURNAL).unlink()
    prune_versions(table)
    _drop_retired(repo.path, table)
    return int(metrics.fragments_removed)


def _drop_retired(repo_path: Path, table: LanceTable, grace: float = PRUNE_GRACE_SECONDS) -> None:
    """Delete packs that a later pack rewrote, once no reader can still be reading them."""
    packs = _load(repo_path)
    entry = packs.get(table.name)
    if not entry or not entry.get("retired"):
        return
    deadline = time.time() - grace
    gone = set()
    for item in entry["retired"]:
        when, _, rel = item.partition(" ")
        if not when.isdigit() or int(when) >= deadline or not _data_name(rel):
            continue  # retired less than `grace` ago: a reader may hold it
        (table.path / rel).unlink(missing_ok=True)
        gone.add(item)
    if gone:
        entry["retired"] -= gone
        _save(repo_path, packs)


def _data_name(rel: str) -> bool:
    """`data/<name>.lance` and nothing else (the record is read from disk: never trusted)."""
    name = rel.removeprefix("data/")
    return rel.startswith("data/") and name.endswith(".lance") and \
        name.replace("-", "").replace("_", "").removesuffix(".lance").isalnum()


# -- pruning old Lance versions --------------------------------------------------------------


def prune_versions(table: LanceTable, grace: float = PRUNE_GRACE_SECONDS) -> int:
    """Delete old version manifests, their transactions and unused index files; no data file.

    Lance's own cleanup would also delete the data files only old versions list, which are
    exactly the packed originals the manifests name. Funes reads only the latest version
    (and readers that opened an older one a moment ago: hence the grace). Returns the files
    deleted.
    """
    ds = table.dataset()
    latest = int(ds.version)
    keep_indices = {str(seg.uuid) for ix in ds.describe_indices() for seg in ix.segments}
    deadline = time.time() - grace
    deleted = 0

    def old(path: Path) -> bool:
        try:
            return path.stat().st_mtime < deadline
        except OSError:
            return False

    for path in (table.path / "_versions").glob("*.manifest"):
        version = _manifest_version(path.name)
        if version is not None and version < latest and old(path):
            path.unlink(missing_ok=True)
            deleted += 1
    for path in (table.path / "_transactions").glob("*.txn"):
        read_version = path.name.split("-", 1)[0]
        if read_version.isdigit() and int(read_version) < latest - 1 and old(path):
            path.unlink(missing_ok=True)
            deleted += 1
    indices = table.path / "_indices"
    if indices.is_dir():
        for entry in indices.iterdir():
            if entry.name not in keep_indices and old(entry):
                shutil.rmtree(entry, ignore_errors=True)
                deleted += 1
    return deleted


def _manifest_version(name: str) -> int | None:
    """A manifest's version from its file name (Lance's V2 names count down from 2**64 − 1)."""
    stem = name.removesuffix(".manifest")
    if not stem.isdigit():
        return None
    value = int(stem)
    return (2**64 - 1) - value if len(stem) == 20 else value

