"""A derived index of chunk ids, so a commit's dedup check costs what its batch costs.

Checking "is this chunk already in the memory?" by scanning the chunk table grows with the
memory; this keeps the ids (and the tombstoned ids) in a SQLite table next to the repository,
caught up from the commits since it was last synced. It is a cache: deleting `index/ids.sqlite`
is always safe (the next write rebuilds it from the commits).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING

from funes.model.ids import ObjectId
from funes.model.objects import Commit

if TYPE_CHECKING:
    from funes.storage.repo import Repository

_BATCH = 500


class IdIndex:
    """Ids present and ids hidden, as of the commit recorded in `meta.head`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        """Open the cache; a damaged one is deleted and started again (it is only a cache)."""
        try:
            return self._open()
        except sqlite3.DatabaseError:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            return self._open()

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS ids (id TEXT PRIMARY KEY) WITHOUT ROWID")
            db.execute("CREATE TABLE IF NOT EXISTS hidden (id TEXT PRIMARY KEY) WITHOUT ROWID")
            db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            db.execute("SELECT value FROM meta WHERE key='head'").fetchone()
        except BaseException:
            db.close()
            raise
        return db

    def synced_head(self) -> str | None:
        """The commit the index reflects."""
        with closing(self._connect()) as db:
            row = db.execute("SELECT value FROM meta WHERE key='head'").fetchone()
            return row[0] if row else None

    def known(self, ids: Iterable[str]) -> set[str]:
        """The subset of `ids` already present or hidden."""
        wanted = list(ids)
        if not wanted:
            return set()
        with closing(self._connect()) as db:  # one connection: each open reads the schema
            return _lookup(db, wanted, "ids") | _lookup(db, wanted, "hidden")

    def visible(self, ids: Iterable[str]) -> set[str]:
        """The subset of `ids` present and not hidden."""
        wanted = list(ids)
        if not wanted:
            return set()
        with closing(self._connect()) as db:
            return _lookup(db, wanted, "ids") - _lookup(db, wanted, "hidden")

    def sync(self, repo: Repository, head: ObjectId | None) -> None:
        """Catch up with `head`: add the ids of every commit since the last sync."""
        with closing(self._connect()) as db:
            row = db.execute("SELECT value FROM meta WHERE key='head'").fetchone()
            marker = row[0] if row else None
            if marker == head:
                return
            present, hidden, reached = self._since(repo, head, marker)
            if hidden is None:  # a tombstone was lifted: rebuild from scratch
                present, hidden, reached = self._since(repo, head, None)
                reached = False
            assert hidden is not None
            db.execute("BEGIN")
            if not reached:  # the marker is not an ancestor: rebuild from scratch
                db.execute("DELETE FROM ids")
                db.execute("DELETE FROM hidden")
            db.executemany("INSERT OR IGNORE INTO ids VALUES (?)", ((i,) for i in present))
            db.executemany("INSERT OR IGNORE INTO hidden VALUES (?)", ((i,) for i in hidden))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('head', ?)", (head,))
            db.execute("COMMIT")

    @staticmethod
    def _since(
        repo: Repository, head: ObjectId | None, marker: str | None
    ) -> tuple[set[str], set[str] | None, bool]:
        """Ids added and hidden since `marker`, and whether the walk reached it.

        Hidden is None when a tombstone was lifted: an incremental sync cannot un-hide, so the
        caller rebuilds.
        """
        present: set[str] = set()
        hidden: set[str] = set()
        targets: dict[str, tuple[str, ...]] = {}
        lifted: set[str] = set()
        reached = marker is None
        for oid, commit in _until(repo, head, marker):
            if oid == marker:
                reached = True
                continue
            for mid in commit.manifests:
                manifest = repo.objects.manifest(mid)
                if manifest.table == "chunks":
                    present.update(manifest.ids)
            for tid in commit.tombstones:
                stone = repo.objects.tombstone(tid)
                targets[tid] = stone.targets
                lifted.update(stone.lifts)
        if lifted and marker is not None:
            return present, None, reached
        for stone_id, ids in targets.items():
            if stone_id not in lifted:
                hidden.update(ids)
        return present, hidden, reached


def _lookup(db: sqlite3.Connection, wanted: list[str], table: str) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(wanted), _BATCH):
        part = wanted[start : start + _BATCH]
        marks = ",".join("?" * len(part))
        sql = f"SELECT id FROM {table} WHERE id IN ({marks})"
        found.update(row[0] for row in db.execute(sql, part))
    return found


def _until(
    repo: Repository, head: ObjectId | None, marker: str | None
) -> Iterator[tuple[str, Commit]]:
    """Commits from `head` back to (and including) `marker`, not past it."""
    if head is None:
        return
    stack = [head]
    seen: set[str] = set()
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        commit = repo.objects.commit(oid)
        yield oid, commit
        if oid != marker:
            stack.extend(commit.parents)


#: Hidden-id sets kept on disk, newest first (readers are almost always at HEAD or just behind).
_HIDDEN_KEEP = 4
#: Largest cache file read back (a cache is input from disk: bounded, and ignored when odd).
_HIDDEN_MAX_BYTES = 256 << 20
_memo: dict[tuple[str, str], frozenset[str]] = {}


class HiddenCache:
    """Chunk ids hidden as of a commit, cached per commit id in `index/hidden.json`.

    Every read applies the tombstones reachable from its HEAD. Walking every commit to collect
    them cost one object read per commit on every recall and `get` (half a recall's time after
    600 per-turn commits). The set at a commit never changes (commits are immutable), so it
    is cached by commit id: a read walks back only to the nearest commit whose set is known
    (usually HEAD itself, or its parent after a commit) and unions. Safe to delete.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> list[tuple[str, frozenset[str], frozenset[str]]]:
        """Entries: (commit, ids hidden there, tombstones lifted in its history)."""
        import json

        try:
            if self.path.stat().st_size > _HIDDEN_MAX_BYTES:
                return []
            data = json.loads(self.path.read_text("utf-8"))
            return [(str(e["head"]), frozenset(str(i) for i in e["hidden"]),
                     frozenset(str(i) for i in e.get("lifts", ())))
                    for e in data["entries"]][:_HIDDEN_KEEP]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []

    def _save(self, entries: list[tuple[str, frozenset[str], frozenset[str]]]) -> None:
        import json

        from funes.storage.atomic import write_atomic

        data = {"entries": [{"head": h, "hidden": sorted(s), **({"lifts": sorted(x)} if x else {})}
                            for h, s, x in entries]}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(data).encode(), durable=False)
        except OSError:
            pass  # a read-only memory (a cache of a remote) simply walks again next time

    def hidden(self, repo: Repository, head: ObjectId | None) -> set[str]:
        """Ids hidden by the tombstones reachable from `head` (inclusive)."""
        if head is None:
            return set()
        key = (str(self.path), head)
        if key in _memo:
            return set(_memo[key])
        entries = self._load()
        known = {h: (s, x) for h, s, x in entries}
        result: set[str] = set()
        lifted: set[str] = set()
        stack: list[str] = [head]
        seen: set[str] = set()
        while stack:
            oid = stack.pop()
            if oid in seen:
                continue
            seen.add(oid)
            if oid in known:  # its whole ancestry is summed up in its set
                result |= known[oid][0]
                lifted |= known[oid][1]
                continue
            commit = repo.objects.commit(oid)
            for tid in commit.tombstones:
                stone = repo.objects.tombstone(tid)
                result.update(stone.targets)
                lifted.update(stone.lifts)
            stack.extend(commit.parents)
        if lifted:
            # A lift (`funes unforget`) subtracts, which a union of cached sets cannot do:
            # work the set out from every tombstone (rare: only histories with a lift).
            result = set()
            targets, lifted_now = repo.tombstones(head)
            for stone_id, ids in targets.items():
                if stone_id not in lifted_now:
                    result.update(ids)
            lifted = lifted_now
        frozen = frozenset(result)
        if len(_memo) > 64:
            _memo.clear()
        _memo[key] = frozen
        if head not in known:
            self._save([(head, frozen, frozenset(lifted)), *entries][:_HIDDEN_KEEP])
        return set(frozen)
