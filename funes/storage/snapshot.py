"""Read snapshots: one query sees one HEAD and one version of each Lance table.

A commit appends to `chunks.lance`, then to its embedding table, then moves the ref (see
funes.storage.repo). A reader that opened the latest dataset each time it looked (BM25, then
the rows of the vector hits, then the neighbours, then the backlog) could see a different
version at every step while an index run commits: a hit without its neighbours, a backlog
larger than the memory, tombstones from one commit applied to rows of another. A `Snapshot`
fixes everything a read looks at when it starts:

- HEAD is read first, then each table's latest version; so the tables are never older than
  HEAD (rows a commit in flight has appended but not yet named are visible, harmless: the
  commit names them a moment later, or recovery does);
- each table is opened once and that dataset object answers every later `dataset()` call.

Opening the datasets once also makes a query cheaper (one manifest read per table instead of
one per step), and a long-lived process passes a shared `lance.Session` so index and metadata
caches survive between queries (the warm server, funes.api.serve).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from funes.errors import UsageError
from funes.model.ids import ObjectId
from funes.storage.repo import CommitResult, Repository
from funes.storage.tables import LanceTable

if TYPE_CHECKING:
    import lance

__all__ = ["PinnedTable", "Snapshot", "snapshot"]


class PinnedTable(LanceTable):
    """A Lance table fixed at the version that was latest when it was pinned."""

    def __init__(self, table: LanceTable, dataset: lance.LanceDataset | None) -> None:
        super().__init__(table.path)
        self._dataset = dataset

    @classmethod
    def pin(cls, table: LanceTable, session: Any = None) -> PinnedTable:
        """Open `table` at its latest version now (absent tables stay absent)."""
        if not table.exists():
            return cls(table, None)
        import lance

        return cls(table, lance.dataset(str(table.path), session=session))

    @property
    def version(self) -> int | None:
        """The pinned version (None when the table did not exist yet)."""
        return None if self._dataset is None else int(self._dataset.version)

    def exists(self) -> bool:
        """Whether the table existed when pinned (a table created since stays invisible)."""
        return self._dataset is not None

    def dataset(self, version: int | None = None) -> lance.LanceDataset:
        """The pinned dataset; another explicit version is opened as usual.

        Index maintenance (funes.retrieval.indexes.ensure) may write through this object; Lance
        then moves it to the version it committed, before any search has read it.
        """
        if self._dataset is not None and (version is None or version == self._dataset.version):
            return self._dataset
        return super().dataset(version)


class Snapshot(Repository):
    """A read view of a repository: HEAD and every table pinned when it is made.

    Everything that reads through `head()`, `chunks` and `vectors` (tombstones, the model
    stamp, search, `get`) agrees with everything else. Writing a commit through a snapshot is
    refused; taking the write lock (index maintenance) works as on the live repository.
    """

    def __init__(self, live: Repository, *, session: Any = None) -> None:
        super().__init__(live.path, live.settings, is_global=live.is_global)
        self.live = live
        # HEAD before the tables: the tables can only be newer than it, never older.
        self._head = live.head()
        live.require_tables(self._head)
        self.chunks = PinnedTable.pin(live.chunks, session)
        # Both embedding tables, so `vectors` (the home) is chosen from the pinned state too.
        self.embeddings = {name: PinnedTable.pin(table, session)
                           for name, table in live.embeddings.items()}

    def head(self) -> ObjectId | None:
        """The commit HEAD pointed to when the snapshot was made."""
        return self._head

    @property
    def versions(self) -> dict[str, int | None]:
        """The pinned Lance version of each table (None: the table did not exist).

        `vectors` is the home embedding table's, whichever its name (`Repository.vectors`).
        """
        chunks, vectors = self.chunks, self.vectors
        assert isinstance(chunks, PinnedTable) and isinstance(vectors, PinnedTable)
        return {"chunks": chunks.version, "vectors": vectors.version}

    @contextlib.contextmanager
    def writing(self, timeout: float | None = None) -> Iterator[None]:
        """The live repository's write lock (its crash recovery must see the live tables)."""
        with self.live.writing(timeout):
            yield

    def commit_chunks(self, *args: Any, **kwargs: Any) -> CommitResult:
        """Refused: a snapshot is for reading; commit through the live repository."""
        raise UsageError("a snapshot is read-only; commit through the repository itself")


def snapshot(repo: Repository, *, session: Any = None) -> Repository:
    """`repo` pinned for one read (a snapshot is returned as it is, not pinned again)."""
    if isinstance(repo, Snapshot):
        return repo
    return Snapshot(repo, session=session)
