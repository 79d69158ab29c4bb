"""`scan`: a literal string (any case) in every passage of a memory, exhaustive and unranked.

Recall proves presence, never absence: it returns the passages nearest a query. A scan checks
every block, so zero matches means the string is nowhere in the memory. It searches the
lower-cased bytes of every block, stitched whole from its chunks (funes.retrieval.scantext,
one cache file per fragment of the chunk table, written the first time a fragment is
scanned): a needle that straddles two chunks of a split block is found like any other, and a
block counts once however many of its chunks hold it. Only the blocks shown are read from
Lance, for their provenance and the excerpt's original case. Tombstones are applied to the
blocks found; a block some of whose chunks are hidden, or whose chunks the cache could not
stitch, is checked again against the visible chunks themselves (`_verify`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from funes.errors import UsageError
from funes.ingest.chunking import ChunkingError, stitch_texts
from funes.retrieval import scantext
from funes.retrieval.browse import read_chunks
from funes.retrieval.get import COLUMNS as TURN_COLUMNS
from funes.storage.repo import Repository

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["MAX_NEEDLE", "MAX_SCAN_HITS", "ScanMatch", "ScanResult", "scan"]

#: Matching blocks a scan returns at most (the count is always of all of them).
MAX_SCAN_HITS = 1000
#: Longest needle a scan accepts: a literal, not a document.
MAX_NEEDLE = 500


@dataclass(frozen=True)
class ScanMatch:
    """One block that holds the needle: its provenance, and the match with its context."""

    row: dict[str, Any]  # the provenance of the block's first chunk (no `text`)
    before: str  # up to `context` characters before the first match
    found: str  # the match as the text has it (its own case)
    after: str  # up to `context` characters after it
    at: int  # character offset of the match in the chunk or stitched block searched


@dataclass(frozen=True)
class ScanResult:
    """What a scan found: the blocks (capped), and how many there were in all."""

    needle: str
    matches: list[ScanMatch]
    total: int  # matching blocks, including those not shown
    sessions: int  # distinct sessions among them
    offset: int = 0  # how many matching blocks come before the first shown


_SCAN_COLUMNS = [*TURN_COLUMNS, "parent_turn_id"]

Block = tuple[str, str, int]  # session_id, turn_id, block_idx


@dataclass
class _Found:
    """A block the cache says holds the needle."""

    seq: int
    ts: str
    #: Where: (cache metadata table, row) of each cached piece of the block that holds it;
    #: its chunks are resolved only for the blocks shown or doubted (`ids`).
    refs: list[tuple[pa.Table, int]]
    doubt: bool = False  # some chunk of it is hidden: checked against the visible ones
    known: dict[str, int] | None = None  # chunk ids → row addresses, when known already

    def ids(self, hidden: set[str]) -> dict[str, int]:
        """The visible chunks found: id → Lance row address."""
        if self.known is None:
            self.known = {}
            for meta, row in self.refs:
                ids = meta.column("ids")[row].as_py()
                rows = meta.column("rows")[row].as_py()
                self.known.update((i, a) for i, a in zip(ids, rows, strict=True)
                                  if i not in hidden)
        return self.known


def scan(repo: Repository, needle: str, *, sessions: Sequence[str] = (),
         limit: int = MAX_SCAN_HITS, offset: int = 0, context: int = 100) -> ScanResult:
    """Blocks whose text contains `needle` (case-insensitive, literal), oldest session first.

    Within a session, blocks come in turn order. `sessions` restricts the scan; each match
    keeps `context` characters on either side. Only the `limit` blocks from `offset` on (in
    that order) are read from the chunk table; the count is of all of them.

    Raises:
        UsageError: an empty or over-long needle.
    """
    if not needle.strip():
        raise UsageError("the needle is empty", hint='pass the text to look for: funes scan "…"')
    if len(needle) > MAX_NEEDLE:
        raise UsageError(f"the needle is {len(needle)} characters; at most {MAX_NEEDLE}")
    if not repo.chunks.exists():
        return ScanResult(needle, [], 0, 0, offset)
    hidden = repo.tombstoned_ids()
    found, seams = _search(repo, scantext.encode(needle), set(sessions), hidden)
    ds = repo.chunks.dataset()
    checked = _verify(ds, {k: f.ids(hidden) for k, f in found.items() if f.doubt} | seams,
                      needle, context, hidden)
    for key in [k for k, f in found.items() if f.doubt and k not in checked]:
        del found[key]  # its visible chunks do not hold the needle
    for key in seams:
        if key in checked:
            row = checked[key].row
            found[key] = _Found(int(row["seq"]), row["ts"] or "", [], known=seams[key])
    first_time: dict[str, str] = {}
    for (sid, _, _), f in found.items():
        first_time[sid] = min(first_time.get(sid, f.ts), f.ts)
    order = sorted(found, key=lambda k: (first_time[k[0]], k[0], found[k].seq, k[2]))
    shown = order[offset : offset + limit]
    matches = {k: checked[k] for k in shown if k in checked}
    matches.update(_verify(ds, {k: found[k].ids(hidden) for k in shown if k not in matches},
                           needle, context, hidden))
    result = [matches[k] for k in shown if k in matches]
    return ScanResult(needle, result, len(found), len(first_time), offset)


def _search(repo: Repository, needle: bytes, scope: set[str], hidden: set[str],
            ) -> tuple[dict[Block, _Found], dict[Block, dict[str, int]]]:
    """The blocks the cache finds `needle` in; and the split blocks to check at their seams.

    A block the cache kept chunk by chunk (`partial`) and found in none of its chunks may
    still hold the needle across two of them: those with two chunks or more come back as
    seams, by their visible chunk ids.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    found: dict[Block, _Found] = {}
    hidden_ids = pa.array(sorted(hidden), pa.string()) if hidden else None
    partial: list[pa.Table] = []
    pieces_of: dict[Block, dict[str, int]] = {}
    wanted = pa.array(sorted(scope), pa.string()) if scope else None
    with scantext.pieces(repo) as pieces:
        for piece in pieces:
            meta = piece.meta
            within = None
            if wanted is not None:
                mask = pc.is_in(meta.column("session_id"), value_set=wanted)
                within = pc.indices_nonzero(mask).to_pylist()
            rows = scantext.find(piece, needle, within)
            if rows:
                _collect(found, meta, rows, hidden_ids)
            if len(needle) >= 2:
                partial.append(meta.filter(meta.column("partial"))
                               .select(["session_id", "turn_id", "block_idx"]))
        if partial:
            pieces_of = _chunks_of(pieces, pa.concat_tables(partial), scope, hidden)
    seams = {k: ids for k, ids in pieces_of.items() if k not in found and len(ids) >= 2}
    return found, seams


def _collect(found: dict[Block, _Found], meta: pa.Table, rows: list[int],
             hidden: pa.Array | None) -> None:
    """Add the blocks of `meta`'s `rows` to `found`, each once, leaving out the hidden ones.

    Column by column, and tombstones checked by Arrow: a needle as common as "the" holds in
    most blocks of a memory.
    """
    import numpy as np
    import pyarrow.compute as pc

    hit = meta.take(rows)
    gone = np.zeros(len(rows), dtype=np.int64)
    if hidden is not None:
        ids = hit.column("ids").combine_chunks()
        flat = pc.is_in(pc.list_flatten(ids), value_set=hidden)
        parents = pc.list_parent_indices(ids).to_numpy()
        gone = np.bincount(parents[flat.to_numpy(zero_copy_only=False)],
                           minlength=len(rows))
    sizes = pc.list_value_length(hit.column("ids")).to_numpy()
    columns = hit.select(["session_id", "turn_id", "block_idx", "seq", "ts"]).to_pydict()
    for j, (sid, tid, bidx, seq, ts) in enumerate(zip(
            columns["session_id"], columns["turn_id"], columns["block_idx"], columns["seq"],
            columns["ts"], strict=True)):
        if gone[j] >= sizes[j]:
            continue  # every chunk of it is forgotten
        key = (sid, tid, bidx)
        f = found.get(key)
        if f is None:
            found[key] = _Found(seq, ts or "", [(meta, rows[j])], bool(gone[j]))
            continue
        f.seq, f.ts = min(f.seq, seq), min(f.ts, ts or "")
        f.refs.append((meta, rows[j]))
        f.doubt = f.doubt or bool(gone[j])


def _chunks_of(pieces: list[scantext.Piece], blocks: pa.Table, scope: set[str],
               hidden: set[str]) -> dict[Block, dict[str, int]]:
    """The visible chunk ids, in every piece, of the blocks some piece kept chunk by chunk."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = {(r["session_id"], r["turn_id"], int(r["block_idx"])) for r in blocks.to_pylist()
            if not scope or r["session_id"] in scope}
    if not keys:
        return {}
    sessions = pa.array(sorted({k[0] for k in keys}), pa.string())
    out: dict[Block, dict[str, int]] = {}
    for piece in pieces:
        meta = piece.meta
        near = meta.filter(pc.is_in(meta.column("session_id"), value_set=sessions))
        for r in near.select(["session_id", "turn_id", "block_idx", "ids", "rows"]).to_pylist():
            key = (r["session_id"], r["turn_id"], int(r["block_idx"]))
            if key in keys:
                out.setdefault(key, {}).update((i, a) for i, a in zip(r["ids"], r["rows"],
                                                                      strict=True)
                                               if i not in hidden)
    return out


def _verify(ds: Any, blocks: dict[Block, dict[str, int]], needle: str, context: int,
            hidden: set[str]) -> dict[Block, ScanMatch]:
    """Each block's match read from its visible chunks: their provenance, the original case.

    The first chunk holding the needle gives the excerpt; a needle in none of them alone is
    looked for in the block stitched whole (it straddles a seam), excerpted from its first
    chunk. A block whose chunks do not hold it (hidden ones left out) is not returned.
    """
    wanted = {i: a for chunk_ids in blocks.values() for i, a in chunk_ids.items()
              if i not in hidden}
    rows: dict[Block, dict[int, dict[str, Any]]] = {}
    for row in read_chunks(ds, wanted, _SCAN_COLUMNS):
        rows.setdefault(_block(row), {}).setdefault(int(row["split_idx"]), row)
    found: dict[Block, ScanMatch] = {}
    for key in blocks:
        chunks = [c for _, c in sorted(rows.get(key, {}).items())]
        match = next((m for m in (_excerpt_of(c, c["text"] or "", needle, context)
                                  for c in chunks) if m is not None), None)
        if match is None and len(chunks) >= 2:
            match = _stitched(chunks, needle, context)
        if match is not None:
            found[key] = match
    return found


def _stitched(chunks: list[dict[str, Any]], needle: str, context: int) -> ScanMatch | None:
    """The needle across the seams of runs of consecutive chunks (split i, i+1, …)."""
    runs: list[list[dict[str, Any]]] = [[chunks[0]]]
    for chunk in chunks[1:]:
        if int(chunk["split_idx"]) == int(runs[-1][-1]["split_idx"]) + 1:
            runs[-1].append(chunk)
        else:
            runs.append([chunk])
    for run in runs:
        if len(run) < 2:
            continue
        try:
            text = stitch_texts([c["text"] or "" for c in run])
        except ChunkingError:
            continue
        match = _excerpt_of(run[0], text, needle, context)
        if match is not None:
            return match
    return None


def _block(row: dict[str, Any]) -> Block:
    return (row["session_id"], row["turn_id"], int(row["block_idx"]))


def _excerpt_of(row: dict[str, Any], text: str, needle: str,
                context: int) -> ScanMatch | None:
    """The first match of `needle` in `text` with its context (None: no match)."""
    at = text.lower().find(needle.lower())
    if at < 0:
        return None
    start = _offset(text, at)
    end = start + len(needle)
    place = {k: v for k, v in row.items() if k != "text"}
    return ScanMatch(place, text[max(0, start - context) : start], text[start:end],
                     text[end : end + context], start)


def _offset(text: str, lowered_at: int) -> int:
    """`lowered_at` (an offset into `text.lower()`) as an offset into `text`.

    Lower-casing changes the length of a few characters (İ); for other text the offsets
    agree. Matching lower-cases both sides, as Lance's `lower` does (Unicode lower case, not
    case folding: `ß` does not match `ss`).
    """
    if len(text.lower()) == len(text):
        return lowered_at
    position = 0
    for i, ch in enumerate(text):
        if position >= lowered_at:
            return i
        position += len(ch.lower())
    return len(text)
