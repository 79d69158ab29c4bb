"""The Lance tables of a memory: `chunks.lance` (text and provenance) and its embeddings.

Both are append-only Lance datasets. Rows arrive as fragments written before the funes commit
that names them, and become part of the dataset with a Lance `Append` afterwards; the data files
are hashed into the commit's manifest, so they are verifiable objects like any other.

Embeddings live in their own table because they arrive after their chunks (BM25 first, then a
background backlog): putting them in the chunk rows would mean rewriting fragments, and nothing
here is ever rewritten. Any Lance reader can open each dataset; an embedding table
(`vectors16.lance`, float16; `vectors.lance`, float32 in memories written before it) joins
`chunks.lance` on `id`.

`lance` and `pyarrow` are imported inside functions: this module is on the CLI's start-up path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError
from funes.model.chunk import Chunk
from funes.model.objects import VECTOR_TABLES, DataFile, FragmentRecord
from funes.storage.atomic import sha256_file

if TYPE_CHECKING:
    import lance
    import pyarrow as pa

#: Columns of `chunks.lance`, in order; `time` is `ts` parsed, for filters and recency.
CHUNK_COLUMNS: tuple[str, ...] = (
    "id",
    "text",
    "harness",
    "session_id",
    "turn_id",
    "parent_turn_id",
    "parent_session_id",
    "seq",
    "ts",
    "time",
    "role",
    "block_type",
    "block_idx",
    "split_idx",
    "tool_name",
    "workdir",
    "project",
    "source",
    "noise",
)


def chunk_schema() -> pa.Schema:
    """The Arrow schema of `chunks.lance` (docs/format.md documents it)."""
    import pyarrow as pa

    s = pa.string()
    return pa.schema(
        [
            pa.field("id", s, nullable=False),
            pa.field("text", s, nullable=False),
            pa.field("harness", s, nullable=False),
            pa.field("session_id", s, nullable=False),
            pa.field("turn_id", s, nullable=False),
            pa.field("parent_turn_id", s),
            pa.field("parent_session_id", s),
            pa.field("seq", pa.int64(), nullable=False),
            pa.field("ts", s, nullable=False),
            pa.field("time", pa.timestamp("us", tz="UTC")),
            pa.field("role", s, nullable=False),
            pa.field("block_type", s, nullable=False),
            pa.field("block_idx", pa.int32(), nullable=False),
            pa.field("split_idx", pa.int32(), nullable=False),
            pa.field("tool_name", s),
            pa.field("workdir", s),
            pa.field("project", s),
            pa.field("source", s),
            pa.field("noise", s),
        ]
    )


#: Chunk columns copied into the embedding tables so vector search can filter before it ranks.
VECTOR_FILTER_COLUMNS: tuple[str, ...] = (
    "harness", "session_id", "block_type", "project", "workdir", "time", "noise"
)


def vector_schema(dim: int, table: str = "vectors16") -> pa.Schema:
    """The Arrow schema of an embedding table (`vectors16` or `vectors`) for `dim` dimensions.

    Besides the vector, each row repeats the chunk's filter columns (harness, session, block
    type, project, time, noise): filters apply before the vector search ranks, and a join
    with `chunks.lance` per query would cost more than these few bytes per row. The two
    tables differ only in the vector's component type (funes.model.objects.VECTOR_TABLES).
    """
    import pyarrow as pa

    chunk = chunk_schema()
    component = pa.float16() if VECTOR_TABLES[table] == "float16" else pa.float32()
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("model", pa.string(), nullable=False),
            pa.field("vector", pa.list_(component, dim), nullable=False),
            *(chunk.field(name) for name in VECTOR_FILTER_COLUMNS),
        ]
    )


def parse_time(ts: str) -> datetime | None:
    """Parse an ISO-8601 time for the `time` column; None when absent or unparseable."""
    if not ts:
        return None
    try:
        value = datetime.fromisoformat(ts)
    except ValueError:
        return None
    if value.tzinfo is None:
        from datetime import UTC

        value = value.replace(tzinfo=UTC)
    return value


def chunks_to_arrow(chunks: Sequence[Chunk]) -> pa.Table:
    """Build the Arrow table for a batch of chunks, column by column (fast path)."""
    import pyarrow as pa

    cols: dict[str, list[Any]] = {name: [] for name in CHUNK_COLUMNS}
    for c in chunks:
        cols["id"].append(c.id)
        cols["time"].append(parse_time(c.ts))
        for name in CHUNK_COLUMNS:
            if name not in ("id", "time"):
                cols[name].append(getattr(c, name))
    return pa.Table.from_pydict(cols, schema=chunk_schema())


class DamagedTableError(FunesError):
    """A Lance table of the memory cannot be read: a file missing, truncated or corrupt."""


def storage_damage(exc: BaseException) -> DamagedTableError | None:
    """The one-line error for an exception Lance or Arrow raised reading a damaged table.

    Lance reports a missing or truncated fragment file, a lost `_versions/` and the like as
    OSError, ValueError or Arrow errors from deep inside its reader, wherever a read happens
    (a scan, an index build, a count). Telling those apart from funes's own bugs by where
    they were raised keeps the rule that an unexpected exception is a bug with a traceback.
    """
    if not isinstance(exc, (OSError, ValueError, RuntimeError)):
        return None
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    if last is None or not any(f"{os.sep}{name}{os.sep}" in last or last.startswith(name)
                               for name in ("lance", "pyarrow")):
        return None
    detail = " ".join(str(exc).split(", /")[0].split())[:200] or exc.__class__.__name__
    return DamagedTableError(
        f"a table of this memory cannot be read ({detail})",
        hint="run `funes fsck` to see the damage; restore the named file from a backup, or "
        "clone the memory again from its remote",
    )


class LanceTable:
    """One append-only Lance dataset inside the repository."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def name(self) -> str:
        """The table's name in manifests (`chunks`, `vectors16`, `vectors`)."""
        return self.path.name.removesuffix(".lance")

    def exists(self) -> bool:
        """True once the dataset has been created."""
        return (self.path / "_versions").is_dir()

    def create(self, schema: pa.Schema) -> None:
        """Create the dataset empty (version 1) so later writes only ever append."""
        import lance

        lance.LanceDataset.commit(str(self.path), lance.LanceOperation.Overwrite(schema, []))

    def dataset(self, version: int | None = None) -> lance.LanceDataset:
        """Open the dataset (latest version unless pinned)."""
        import lance

        return lance.dataset(str(self.path), version=version)

    def write_fragments(self, data: pa.Table) -> list[FragmentRecord]:
        """Write rows as new fragment files, not yet part of any dataset version."""
        import lance.fragment

        frags = lance.fragment.write_fragments(data, str(self.path), schema=data.schema)
        records = []
        for frag in frags:
            meta = frag.to_json()
            files = []
            for f in meta["files"]:
                rel = f"data/{f['path']}"
                size, digest = sha256_file(self.path / rel)
                files.append(DataFile(rel, size, digest))
            records.append(FragmentRecord(meta, tuple(files)))
        return records

    def append(self, records: Iterable[FragmentRecord], read_version: int) -> int:
        """Make written fragments part of the dataset; returns the new version.

        Fragment ids are per dataset, so Lance re-numbers them; the files are what matter.
        """
        import lance
        from lance.fragment import FragmentMetadata

        frags = [FragmentMetadata.from_json(json.dumps(r.meta)) for r in records]
        ds = lance.LanceDataset.commit(
            str(self.path), lance.LanceOperation.Append(frags), read_version=read_version
        )
        return int(ds.version)

    def file_paths(self, version: int | None = None) -> set[str]:
        """Data files (relative paths) that a dataset version includes."""
        ds = self.dataset(version)
        return {f"data/{f.path}" for frag in ds.get_fragments() for f in frag.metadata.files}

    def logical_paths(self) -> set[str]:
        """The files the latest version holds as manifests name them.

        A pack (funes.storage.pack) is listed by the dataset in place of the files it holds;
        merge, crash recovery and fsck ask about the files manifests name, so they ask here.
        """
        from funes.storage.pack import logical_paths

        return logical_paths(self.path.parent, self, self.file_paths())
