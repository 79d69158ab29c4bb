"""Memories the Rust funes writes: found by their layout, read row by row, never written.

The Rust funes (huggingface/funes) keeps a memory as one Lance dataset, `chunks.lance`, at the
memory's root: a Hub dataset repository (beside its `README.md` card) or a directory (its local
memory is `$FUNES_HOME/memory/`). Its table (huggingface/funes `src/memory/dataset.rs`) has the
columns `id` (16 hex of SHA-1 of `session:turn_uuid:block_idx:split_idx`), `text`,
`session_id`, `workdir`, `turn_uuid`, `parent_uuid`, `seq`, `ts`, `role`, `block_type`,
`tool_name`, `source_path`, `block_idx`, `split_idx`, `vector` (FixedSizeList<Float32, 384>),
then `harness` and `repo` (added later: older memories lack them), and its schema metadata
names the embedding model (`embedding_model`) and, optionally, a `project`. It carries an
inverted index on `text` and IVF_PQ on `vector` (`_indices/`); `docs/hub-caching.md` there
says every file is immutable and new data lands in new files. There are no refs and no
objects: that is what tells it from a funes remote (funes.remotes.base).

Everything here is input from a stranger, so it is bounded and validated before use:

* **Files.** Only what the latest version needs is fetched (its manifest, the data files and
  deletion files it names; never the indexes or the history), each name checked to stay
  inside the dataset, each size checked against what the manifest and the Hub say, the total
  against :data:`MAX_BYTES`, and the table's row count against :data:`MAX_ROWS`.
* **Schema.** The required columns must be there with their types, or the memory is refused
  (:class:`ForeignMemoryError`).
* **Rows.** Each row is checked on its own (:func:`to_chunk`): ids printable without spaces
  (they are printed in `funes get` commands), counters non-negative, a known block type, text
  within :data:`MAX_TEXT_CHARS`, a vector finite and non-zero. A row that fails is skipped and
  counted by reason, never fatal.

The conversion into funes's chunks (our content-addressed ids; the Rust id kept in `source`)
is documented with its column mapping in docs/import.md.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from funes.model.chunk import Chunk
from funes.model.turns import BLOCK_TYPES, is_harness, is_role
from funes.remotes.base import Progress, RemoteDataError, RemoteState
from funes.remotes.layout import MAX_OBJECT_BYTES, check_path, lance_version, latest_manifest

if TYPE_CHECKING:
    import lance

    from funes.remotes.hf import HubRemote

TABLE: Final = "chunks.lance"
#: What a Rust-funes row's provenance says of its origin, kept in our `source` column.
ORIGIN: Final = "rust-funes"
#: The most bytes of files read from one foreign memory (a 1M-chunk memory is ~2.3 GB).
MAX_BYTES: Final = 8 << 30
#: The most rows read from one foreign memory.
MAX_ROWS: Final = 5_000_000
#: The longest chunk text kept (the Rust funes cuts chunks at 1,200 characters).
MAX_TEXT_CHARS: Final = 1 << 20
#: The longest id, name or path kept in a provenance column.
MAX_FIELD_CHARS: Final = 4096
#: Rows read per batch (bounds the memory a conversion holds at once).
BATCH_ROWS: Final = 8192

#: Required columns and their Arrow type names; a memory without them is refused.
REQUIRED: Final = {
    "id": "string", "text": "string", "session_id": "string", "turn_uuid": "string",
    "seq": "int64", "ts": "string", "role": "string", "block_type": "string",
    "block_idx": "int64", "split_idx": "int64",
}
#: Columns read when present (older memories lack `harness` and `repo`).
OPTIONAL: Final = ("workdir", "parent_uuid", "tool_name", "source_path", "harness", "repo")
#: The Rust funes' harness names that funes spells otherwise.
HARNESS_ALIASES: Final = {"claude_code": "claude"}
#: Where a row without a `harness` column came from, told by its source path.
_SOURCE_HARNESS: Final = (("/.claude/", "claude"), ("/.codex/", "codex"), ("/.pi/", "pi"),
                          ("/.hermes/", "hermes"))

_RUST_ID: Final = re.compile(r"^[0-9a-f]{16}$")
#: An id printed in `funes get <session> <turn>`: no whitespace, no control characters.
_TOKEN: Final = re.compile(r"^[^\s\x00-\x1f\x7f]{1,512}$")
_FILE_NAME: Final = re.compile(r"^[A-Za-z0-9._-]{1,255}$")


class ForeignMemoryError(RemoteDataError):
    """A memory that looked like the Rust funes' is not one funes can read (named why)."""


# -- finding one -------------------------------------------------------------------------------


def table_in(path: Path) -> Path | None:
    """The `chunks.lance` of a Rust-funes memory at `path` (its root, or the table), else None.

    A funes memory (a `FORMAT` file, `.funes/`, `objects/`) is never one, whatever it holds.
    """
    root, table = (path.parent, path) if path.name == TABLE else (path, path / TABLE)
    if not (table / "_versions").is_dir():
        return None
    if any((root / marker).exists() for marker in ("FORMAT", "objects", ".funes")):
        return None
    return table


def is_rust_listing(files: Iterable[str]) -> bool:
    """Whether a remote's files are a Rust-funes memory: a `chunks.lance`, no refs, no objects."""
    manifest = funes_layout = False
    for name in files:
        if name.startswith(f"{TABLE}/_versions/") and name.endswith(".manifest"):
            manifest = True
        elif name.startswith(("refs/", "objects/")):
            funes_layout = True
    return manifest and not funes_layout


def is_rust_remote(remote: object, state: RemoteState) -> bool:
    """Whether a remote with no funes branches holds a Rust-funes memory (asks for its files).

    Only a Hub remote can be one here: a directory holding one is not a funes remote at all
    (funes.remotes.local refuses it before anything is read or written).
    """
    files = getattr(remote, "files", None)
    if not state.exists or state.branches or not callable(files):
        return False
    return is_rust_listing(files(state))


def refuse_writing(remote: object, state: RemoteState, display: str) -> None:
    """Raise ForeignMemoryError when `remote` is a Rust-funes memory: funes never writes one."""
    if is_rust_remote(remote, state):
        raise ForeignMemoryError(
            f"{display} is a memory the Rust funes wrote: funes reads it, never writes to it",
            hint=f"`funes import {display}` brings its rows into this memory; push to "
            "another dataset",
        )


def dir_revision(table: Path) -> str:
    """What identifies a local table's current state: its newest manifest, sized and dated."""
    names = [f"_versions/{n}" for n in os.listdir(table / "_versions")]
    latest = latest_manifest(names)
    if latest is None:
        raise ForeignMemoryError(f"{table} has no Lance version")
    st = (table / latest).stat()
    return f"{latest}:{st.st_size}:{st.st_mtime_ns}"


# -- fetching one from the Hub -----------------------------------------------------------------


def fetch_hub_table(
    remote: HubRemote, state: RemoteState, mirror: Path, progress: Progress
) -> tuple[Path, int]:
    """Bring the files the Hub memory's latest version needs into `mirror`; (table, version).

    Files already in the mirror are not fetched again (they are immutable); indexes and older
    versions are never fetched.

    Raises:
        ForeignMemoryError: no Lance version, an unsafe file name, more than MAX_BYTES.
        RemoteError: the Hub cannot be reached or sends a file of another size.
    """
    listing = remote.files(state)
    revision = str(state.revision)
    prefix = f"{TABLE}/"
    latest = latest_manifest(p[len(prefix):] for p in listing if p.startswith(prefix))
    version = lance_version(latest) if latest else None
    if latest is None or version is None:
        raise ForeignMemoryError(f"{remote.spec.display}: {TABLE} has no Lance version")
    table = mirror / TABLE
    manifest = prefix + latest
    if not (table / latest).is_file():
        sizes = remote.sizes(revision, [manifest])
        if sizes.get(manifest, 0) > MAX_OBJECT_BYTES:
            raise ForeignMemoryError(f"{remote.spec.display}: its manifest is "
                                     f"{sizes[manifest]} bytes; refusing it")
        remote.download(state, [(manifest, table / latest)], progress, sizes=sizes)
    wanted = needed_files(table, version)
    missing = {rel: size for rel, size in wanted.items() if not _has(table / rel, size)}
    if missing:
        paths = [prefix + rel for rel in missing]
        hub_sizes = remote.sizes(revision, paths)
        sizes = {}
        for rel, size in missing.items():
            hub = hub_sizes.get(prefix + rel)
            if hub is None:
                raise ForeignMemoryError(f"{remote.spec.display}: {prefix + rel} is missing")
            if size is not None and hub != size:
                raise ForeignMemoryError(f"{remote.spec.display}: {prefix + rel} is {hub} "
                                         f"bytes, its manifest says {size}; refusing it")
            sizes[prefix + rel] = hub
        total = sum(sizes.values()) + sum(s or 0 for r, s in wanted.items() if r not in missing)
        if total > MAX_BYTES:
            raise ForeignMemoryError(f"{remote.spec.display} is {total} bytes of data, more "
                                     f"than the {MAX_BYTES} funes reads from one memory")
        remote.download(state, [(prefix + rel, table / rel) for rel in missing], progress,
                        sizes=sizes)
    _prune(table, {*wanted, latest})
    return table, version


def _prune(table: Path, keep: set[str]) -> None:
    """Remove the mirror's files the current version no longer names (the mirror stays small)."""
    for folder in ("_versions", "data", "_deletions"):
        for path in (table / folder).glob("*"):
            if path.is_file() and f"{folder}/{path.name}" not in keep:
                path.unlink(missing_ok=True)


def _has(path: Path, size: int | None) -> bool:
    try:
        st = path.stat()
    except OSError:
        return False
    return size is None or st.st_size == size


def needed_files(table: Path, version: int | None = None) -> dict[str, int | None]:
    """The data and deletion files a version names (relative paths, with sizes when known).

    Raises:
        ForeignMemoryError: a name that could leave the dataset, or files in another base.
    """
    ds = _dataset(table, version)
    out: dict[str, int | None] = {}
    for fragment in ds.get_fragments():
        meta = fragment.metadata
        for data in meta.files:
            if getattr(data, "base_id", None) is not None or not _FILE_NAME.match(data.path):
                raise ForeignMemoryError(f"{table}: refusing data file {data.path[:80]!r}")
            size = getattr(data, "file_size_bytes", None)
            out[check_path(f"data/{data.path}")] = size if isinstance(size, int) and size else None
        deletion = meta.deletion_file
        if deletion is not None:
            rel = str(deletion.path(meta.id))
            folder, _, name = rel.partition("/")
            if folder != "_deletions" or not _FILE_NAME.match(name):
                raise ForeignMemoryError(f"{table}: refusing deletion file {rel[:80]!r}")
            out[check_path(rel)] = None
    return out


# -- reading one -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForeignTable:
    """An opened Rust-funes table: where it is, which version, what its schema says."""

    path: Path
    version: int
    rows: int
    #: The stamped embedding model (`BAAI/bge-small-en-v1.5`), None when unstamped.
    model: str | None
    #: The vector width, None without a vector column.
    dim: int | None
    #: The schema's `project` metadata (a published memory's name), if any.
    project: str | None
    columns: tuple[str, ...]


def _dataset(table: Path, version: int | None) -> lance.LanceDataset:
    import lance

    try:
        return lance.dataset(str(table), version=version)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ForeignMemoryError(f"{table} is not a readable Lance dataset: "
                                 f"{str(exc).splitlines()[0][:200]}") from None


def open_table(table: Path, version: int | None = None) -> ForeignTable:
    """Open and check a Rust-funes table (its schema, its size).

    Raises:
        ForeignMemoryError: a required column is missing or of another type, or the table is
            larger than MAX_ROWS.
    """
    import pyarrow as pa

    ds = _dataset(table, version)
    schema = ds.schema
    for name, kind in REQUIRED.items():
        index = schema.get_field_index(name)
        if index < 0:
            raise ForeignMemoryError(f"{table} is not a Rust-funes memory: no column {name!r}")
        field = schema.field(index)
        if str(field.type) not in (kind, "large_" + kind):
            raise ForeignMemoryError(f"{table}: column {name!r} is {field.type}, not {kind}")
    dim = None
    index = schema.get_field_index("vector")
    if index >= 0:
        vtype = schema.field(index).type
        if pa.types.is_fixed_size_list(vtype) and pa.types.is_floating(vtype.value_type):
            dim = int(vtype.list_size)
    rows = int(ds.count_rows())
    if rows > MAX_ROWS:
        raise ForeignMemoryError(f"{table} holds {rows} rows, more than the {MAX_ROWS} funes "
                                 "reads from one memory")
    meta = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace")
            for k, v in (schema.metadata or {}).items()}
    model = meta.get("embedding_model") or None
    project = meta.get("project") or None
    return ForeignTable(table, int(ds.version), rows, _short(model, 200), dim,
                        _short(project, 200), tuple(schema.names))


def _short(value: str | None, limit: int) -> str | None:
    return value if value is not None and len(value) <= limit and value.isprintable() else None


@dataclass(frozen=True)
class ForeignRow:
    """One accepted row: the chunk it becomes, the Rust id, and its vector if kept."""

    chunk: Chunk
    rust_id: str
    vector: Sequence[float] | None


def read_rows(
    table: ForeignTable, *, vectors: bool, skipped: collections.Counter[str],
    redactions: collections.Counter[str] | None = None,
) -> Iterator[list[ForeignRow]]:
    """The table's accepted rows in batches of at most BATCH_ROWS; rejects counted by reason.

    Each text is redacted like any transcript's (funes.ingest.redact) before it becomes a
    chunk: the Rust funes redacts best-effort, and its rows are a stranger's text here.
    """
    import numpy as np

    from funes.ingest.engines import redact_texts

    columns = [*REQUIRED, *(c for c in OPTIONAL if c in table.columns)]
    with_vectors = vectors and table.dim is not None
    if with_vectors:
        columns.append("vector")
    ds = _dataset(table.path, table.version)
    for batch in ds.to_batches(columns=columns, batch_size=BATCH_ROWS):
        matrix = None
        if with_vectors:
            col = batch.column("vector")
            valid = np.asarray(col.is_valid())
            flat = col.fill_null([0.0] * int(table.dim or 0)) if not valid.all() else col
            matrix = np.asarray(flat.flatten(), dtype=np.float32).reshape(-1, int(table.dim or 0))
        out: list[ForeignRow] = []
        rows = batch.to_pylist()
        chunks = [to_chunk(row, table.project) for row in rows]
        cleaned = iter(redact_texts([c.text for c, _ in chunks if c is not None]))
        for i, row in enumerate(rows):
            chunk, reason = chunks[i]
            if chunk is None:
                skipped[reason] += 1
                continue
            clean, found = next(cleaned)
            if found:
                chunk = dataclasses.replace(chunk, text=clean)
                if redactions is not None:
                    redactions.update(f.kind for f in found)
            vector = None
            if matrix is not None and valid[i]:
                vector = _unit(matrix[i])
                if vector is None:
                    skipped["vector-not-usable"] += 1
            out.append(ForeignRow(chunk, str(row["id"]), vector))
        yield out


def _unit(vec: Any) -> Any:
    import numpy as np

    if not np.all(np.isfinite(vec)):
        return None
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else None


def _text(value: object, limit: int = MAX_FIELD_CHARS) -> str | None:
    if not isinstance(value, str) or not value or len(value) > limit:
        return None
    return value if "\x00" not in value else None


def _count(value: object, limit: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        return None
    return value


def harness_of(row: dict[str, Any]) -> str:
    """A row's harness in funes's names (`claude_code` is `claude`), inferred when absent."""
    raw = row.get("harness")
    if isinstance(raw, str) and raw:
        name = HARNESS_ALIASES.get(raw, raw)
        return name if is_harness(name) else "import"
    source = row.get("source_path") if isinstance(row.get("source_path"), str) else ""
    return next((h for marker, h in _SOURCE_HARNESS if marker in str(source)), "import")


def to_chunk(row: dict[str, Any], project: str | None = None) -> tuple[Chunk | None, str]:
    """A Rust-funes row as our chunk (docs/import.md has the mapping), or (None, skip reason).

    The id is ours (content-addressed, funes.model.chunk); the Rust id stays in `source`,
    after the source path: `<source_path>#rust-funes:<id>`.
    """
    rust_id = row.get("id")
    if not isinstance(rust_id, str) or not _RUST_ID.match(rust_id):
        return None, "bad-id"
    text = _text(row.get("text"), MAX_TEXT_CHARS)
    if text is None or not text.strip():
        return None, "empty-text"
    session, turn = row.get("session_id"), row.get("turn_uuid")
    if not (isinstance(session, str) and _TOKEN.match(session)
            and isinstance(turn, str) and _TOKEN.match(turn)):
        return None, "bad-session-or-turn"
    seq = _count(row.get("seq"), 1 << 62)
    block_idx = _count(row.get("block_idx"), 1 << 31)
    split_idx = _count(row.get("split_idx"), 1 << 31)
    if seq is None or block_idx is None or split_idx is None:
        return None, "bad-position"
    block_type = row.get("block_type")
    if block_type not in BLOCK_TYPES:
        return None, "unknown-block-type"
    role = row.get("role")
    if not is_role(role):
        return None, "bad-role"
    ts = row.get("ts")
    ts = ts if isinstance(ts, str) and len(ts) <= 64 and _parses(ts) else ""
    parent = row.get("parent_uuid")
    tool = row.get("tool_name")
    source = _text(row.get("source_path")) or ""
    return Chunk(
        text=text,
        harness=harness_of(row),
        session_id=session,
        turn_id=turn,
        seq=seq,
        ts=ts,
        role=str(role),
        block_type=str(block_type),
        block_idx=block_idx,
        split_idx=split_idx,
        tool_name=tool if isinstance(tool, str) and _TOKEN.match(tool) else None,
        parent_turn_id=parent if isinstance(parent, str) and _TOKEN.match(parent) else None,
        workdir=_text(row.get("workdir")),
        project=_text(row.get("repo")) or project,
        source=f"{source}#{ORIGIN}:{rust_id}",
    ), ""


def _parses(ts: str) -> bool:
    from funes.storage.tables import parse_time

    return parse_time(ts) is not None


def origin_id(source: str | None) -> str | None:
    """The Rust id an imported chunk's `source` keeps, else None."""
    if not source:
        return None
    _, sep, tail = source.rpartition(f"#{ORIGIN}:")
    return tail if sep and _RUST_ID.match(tail) else None


def describe_skips(skipped: collections.Counter[str]) -> str:
    """`3 bad-id, 1 empty-text`: the rows a conversion left out, for messages."""
    return ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))


__all__ = [
    "MAX_BYTES",
    "MAX_ROWS",
    "ORIGIN",
    "TABLE",
    "ForeignMemoryError",
    "ForeignRow",
    "ForeignTable",
    "describe_skips",
    "dir_revision",
    "fetch_hub_table",
    "harness_of",
    "is_rust_listing",
    "is_rust_remote",
    "needed_files",
    "open_table",
    "origin_id",
    "read_rows",
    "refuse_writing",
    "table_in",
    "to_chunk",
]
