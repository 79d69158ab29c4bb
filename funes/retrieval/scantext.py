"""The scan's text: each chunk fragment's blocks, stitched whole and lower-cased, on disk.

`funes scan` must check every passage. Asking Lance to evaluate `ILIKE '%needle%'` over the
text column decoded and compared every chunk on every scan: about 200 ms of CPU at 113k
chunks, most of it turning Lance pages into Arrow strings and lower-casing them, and the
needles that straddle two chunks of a split block needed a second predicate and a stitch.
A needle's bytes, though, can be found in lower-cased UTF-8 with a plain byte search
(`mmap.find`, memchr-fast), and UTF-8 is self-synchronising: a byte match is a character
match. So each fragment of `chunks.lance` gets, once, two files in `index/scan/`:

- `<key>.txt`: the fragment's blocks, each stitched from its chunks (docs/chunking.md) and
  lower-cased (Python's Unicode lower case, as the scan's excerpts match), NUL-separated;
- `<key>.arrow`: one row per block (Arrow IPC): its byte range in the text, its coordinates,
  the ids of its chunks (tombstones are applied at search time, so `forget` needs no rebuild)
  and their row addresses (the blocks shown are read by address, not by an id filter).

`<key>` hashes the fragment's data files, deletion file and row count: a fragment never
changes under its files, so a cache file is valid forever, a new commit (a new fragment)
costs a file the size of what it added, and a pack (new fragments) rebuilds for the packed
rows. Files no fragment of the current version names are removed once they are an hour old
(a reader of an older version may still want them). Everything here is a cache: safe to
delete; when it cannot be written (a read-only memory), it is built in memory for the call.

A block whose chunks are not all in one fragment, in order (a block completed by a later
commit), or do not stitch, is kept chunk by chunk and flagged `partial`; the scan checks the
seams of such blocks against Lance itself (funes.retrieval.scan).
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import time
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.ingest.chunking import ChunkingError, stitch_texts
from funes.storage.repo import Repository

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["FORMAT", "Piece", "encode", "find", "fragment_key", "pieces", "refresh"]

#: Changes when the files' layout or their text (stitching, lower-casing) changes.
FORMAT = 2
#: Stale cache files older than this are removed when a new one is written.
_STALE_AFTER = 3600.0
_COLUMNS = ["id", "text", "session_id", "turn_id", "block_idx", "split_idx", "seq", "ts"]
_SEP = b"\x00"


def encode(text: str) -> bytes:
    """The cache's bytes for `text` (and a needle's): lower-cased UTF-8."""
    return text.lower().encode("utf-8", "surrogatepass")


@dataclass
class Piece:
    """One fragment's cached blocks: their metadata and their lower-cased text."""

    #: start, end (bytes of `text`), session_id, turn_id, block_idx, seq, ts, split_idx, ids
    #: and rows (the chunks' ids and Lance row addresses, in split order), partial
    meta: pa.Table
    text: bytes | mmap.mmap

    def close(self) -> None:
        """Unmap the text (its pages then count in no process's memory)."""
        if isinstance(self.text, mmap.mmap):
            self.text.close()


def fragment_key(fragment: Any) -> str:
    """A name for the fragment's content: its files, deletions and size never change under it."""
    meta = fragment.metadata
    files = sorted(str(f.path) for f in meta.files)
    deletion = meta.deletion_file
    deleted = "" if deletion is None else f"{deletion.id}/{deletion.read_version}"
    parts = [f"scan-text {FORMAT}", *files, deleted, str(meta.physical_rows)]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:32]


def _build(fragment: Any) -> tuple[pa.Table, bytes]:
    """The metadata table and the text of one fragment's blocks."""
    import pyarrow as pa

    table = fragment.to_table(columns=_COLUMNS, with_row_address=True)
    cols = {c: table.column(c).to_pylist() for c in [*_COLUMNS, "_rowaddr"]}
    blocks: dict[tuple[str, str, int], list[int]] = {}
    for i, (sid, tid, bidx) in enumerate(zip(cols["session_id"], cols["turn_id"],
                                             cols["block_idx"], strict=True)):
        blocks.setdefault((sid, tid, int(bidx)), []).append(i)
    out: dict[str, list[Any]] = {k: [] for k in (
        "start", "end", "session_id", "turn_id", "block_idx", "seq", "ts", "split_idx", "ids",
        "rows", "partial")}
    parts: list[bytes] = []
    at = 0

    def add(key: tuple[str, str, int], rows: list[int], text: str, partial: bool) -> None:
        nonlocal at
        data = encode(text)
        times = [cols["ts"][r] for r in rows if cols["ts"][r]]
        out["start"].append(at)
        out["end"].append(at + len(data))
        out["session_id"].append(key[0])
        out["turn_id"].append(key[1])
        out["block_idx"].append(key[2])
        out["seq"].append(min(int(cols["seq"][r]) for r in rows))
        out["ts"].append(min(times) if times else None)
        out["split_idx"].append(min(int(cols["split_idx"][r]) for r in rows))
        out["ids"].append([cols["id"][r] for r in rows])
        out["rows"].append([cols["_rowaddr"][r] for r in rows])
        out["partial"].append(partial)
        parts.append(data)
        at += len(data) + len(_SEP)

    for key, rows in blocks.items():
        by_split: dict[int, int] = {}
        for r in rows:  # the same chunk stored twice counts once
            by_split.setdefault(int(cols["split_idx"][r]), r)
        ordered = [by_split[s] for s in sorted(by_split)]
        whole = sorted(by_split) == list(range(len(ordered)))
        text = None
        if whole:
            try:
                text = stitch_texts([cols["text"][r] or "" for r in ordered])
            except ChunkingError:
                text = None
        if text is not None:
            add(key, ordered, text, False)
        else:
            for r in ordered:
                add(key, [r], cols["text"][r] or "", True)
    schema = pa.schema([("start", pa.int64()), ("end", pa.int64()),
                        ("session_id", pa.string()), ("turn_id", pa.string()),
                        ("block_idx", pa.int64()), ("seq", pa.int64()), ("ts", pa.string()),
                        ("split_idx", pa.int64()), ("ids", pa.list_(pa.string())),
                        ("rows", pa.list_(pa.uint64())),
                        ("partial", pa.bool_())])
    meta = pa.table(out, schema=schema)
    return meta, _SEP.join(parts)


def _ipc(table: pa.Table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def _open(directory: Path, key: str) -> Piece | None:
    """The cached piece `key`, None when it is absent or does not fit together."""
    import pyarrow as pa

    try:
        meta = pa.ipc.open_file(pa.memory_map(str(directory / f"{key}.arrow"))).read_all()
        with (directory / f"{key}.txt").open("rb") as fh:
            size = fh.seek(0, 2)
            expected = int(meta.column("end")[-1].as_py()) if meta.num_rows else 0
            if size != expected:
                return None
            if size == 0:
                return Piece(meta, b"")
            return Piece(meta, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
    except (OSError, ValueError, pa.ArrowException):
        return None


def _store(directory: Path, key: str, meta: pa.Table, text: bytes) -> None:
    from funes.storage.atomic import write_atomic

    with contextlib.suppress(OSError):
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / f"{key}.txt", text, durable=False)
        write_atomic(directory / f"{key}.arrow", _ipc(meta), durable=False)  # last: the marker


def _sweep(directory: Path, keep: set[str]) -> None:
    """Remove cache files of fragments the current version does not name, once old."""
    now = time.time()
    with contextlib.suppress(OSError):
        for path in directory.iterdir():
            if path.stem in keep or path.suffix not in (".txt", ".arrow"):
                continue
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime > _STALE_AFTER:
                    path.unlink()


@contextlib.contextmanager
def pieces(repo: Repository) -> Iterator[list[Piece]]:
    """Every fragment's piece of the memory's chunk table, built where missing; closed after."""
    out: list[Piece] = []
    try:
        if not repo.chunks.exists():
            yield out
            return
        directory = repo.path / "index" / "scan"
        keys = []
        built = False
        for fragment in repo.chunks.dataset().get_fragments():
            key = fragment_key(fragment)
            keys.append(key)
            piece = _open(directory, key)
            if piece is None:
                meta, text = _build(fragment)
                _store(directory, key, meta, text)
                piece = _open(directory, key) or Piece(meta, text)
                built = True
            out.append(piece)
        if built:
            _sweep(directory, set(keys))
        yield out
    finally:
        for piece in out:
            piece.close()


def refresh(repo: Repository) -> None:
    """Cache the fragments not cached yet, in a memory that was scanned before.

    For background upkeep (funes.retrieval.indexes.maintain): after a pack, the next scan
    would otherwise build the packed fragments' text itself (about 4 s of CPU at 113k
    chunks). A memory never scanned gets no cache: it costs disk the size of its text.
    """
    if (repo.path / "index" / "scan").is_dir():
        with contextlib.suppress(OSError), pieces(repo):
            pass


def find(piece: Piece, needle: bytes, within: Sequence[int] | None = None) -> list[int]:
    """The rows of `piece.meta` whose text holds `needle` (`within`: only these rows)."""
    if piece.meta.num_rows == 0:
        return []
    starts: list[int] = piece.meta.column("start").to_pylist()
    ends: list[int] = piece.meta.column("end").to_pylist()
    text = piece.text
    if within is not None:
        return [i for i in within if text.find(needle, starts[i], ends[i]) >= 0]
    found = []
    pos = 0
    size = len(text)
    n = len(needle)
    while pos < size:
        at = text.find(needle, pos)
        if at < 0:
            break
        i = bisect_right(starts, at) - 1
        if at + n <= ends[i]:
            found.append(i)
            pos = ends[i] + 1  # the next block
        else:  # across the separator (a needle holding NUL): not in one block
            pos = at + 1
    return found
