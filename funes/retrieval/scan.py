"""`scan`: a literal string (any case) in every passage of a memory, exhaustive and unranked.

Recall proves presence, never absence: it returns the passages nearest a query. A scan checks
every chunk, so zero matches means the string is nowhere in the memory. Lance evaluates the
match over the text column in one pass (ILIKE, wildcards escaped): only the provenance of
matching rows comes back, and the text is read for the blocks shown. A needle that straddles
two chunks of one block (the chunker splits long blocks, docs/chunking.md) is found too
(`_straddling`); a block counts once however many of its chunks match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from funes.errors import UsageError
from funes.ingest.chunking import ChunkingError, stitch_texts
from funes.retrieval.browse import _visible
from funes.retrieval.get import COLUMNS as TURN_COLUMNS
from funes.retrieval.recall import _lit
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
#: What a scan reads of each matching chunk before it knows which blocks it will show.
_PLACE_COLUMNS = ["id", "session_id", "turn_id", "seq", "ts", "block_idx", "split_idx"]


def _contains(needle: str) -> str:
    """A Lance (DataFusion) predicate: `text` contains `needle`, ignoring case, literally.

    ILIKE with its wildcards escaped: it spares the lower-cased copy of every text that
    `contains(lower(text), …)` makes (about 15% of a scan at 100k chunks).
    """
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"text ILIKE {_lit('%' + escaped + '%')} ESCAPE '\\'"


#: Longest overlap two chunks share (8 characters per overlap token, docs/chunking.md §5).
_MAX_OVERLAP = 8 * 64


def scan(repo: Repository, needle: str, *, sessions: Sequence[str] = (),
         limit: int = MAX_SCAN_HITS, offset: int = 0, context: int = 100) -> ScanResult:
    """Blocks whose text contains `needle` (case-insensitive, literal), oldest session first.

    Within a session, blocks come in turn order. `sessions` restricts the scan; each match
    keeps `context` characters on either side. Only the `limit` blocks from `offset` on (in
    that order) are read; the count is of all of them. The text column is read once: the
    same pass finds the direct matches and the chunks a needle may straddle into
    (`_straddling`).

    Raises:
        UsageError: an empty or over-long needle.
    """
    import pyarrow.compute as pc

    if not needle.strip():
        raise UsageError("the needle is empty", hint='pass the text to look for: funes scan "…"')
    if len(needle) > MAX_NEEDLE:
        raise UsageError(f"the needle is {len(needle)} characters; at most {MAX_NEEDLE}")
    if not repo.chunks.exists():
        return ScanResult(needle, [], 0, 0, offset)
    scope = ""
    if sessions:
        scope = f"session_id IN ({', '.join(_lit(s) for s in sessions)}) AND "
    ds = repo.chunks.dataset()
    lowered = needle.lower()
    columns: dict[str, str] = {c: c for c in _PLACE_COLUMNS}
    columns["hit"] = _contains(needle)
    where = _contains(needle)
    if len(needle) >= 2:
        # A later chunk the needle may straddle into starts with needle[j:] for some j ≥ 1:
        # its first three letters occur in needle[1:], or it starts with the needle's last
        # two letters or its last one. Its head comes back for the check.
        maybe = (f"strpos({_lit(lowered[1:])}, lower(substr(text, 1, 3))) > 0 OR "
                 f"lower(substr(text, 1, 2)) = {_lit(lowered[-2:])} OR "
                 f"lower(substr(text, 1, 1)) = {_lit(lowered[-1:])}")
        where = f"({where}) OR (split_idx > 0 AND ({maybe}))"
        columns["head"] = f"CAST(left(text, {len(needle) - 1 + _MAX_OVERLAP}) AS STRING)"
    table = _visible(repo, ds.to_table(columns=columns, filter=scope + f"({where})",
                                       with_row_id=True))
    hit = table.column("hit")
    places = _first_chunks(table.filter(hit).select(_PLACE_COLUMNS))
    straddling: dict[tuple[str, str, int], ScanMatch] = {}
    if "head" in columns:
        candidates = table.filter(pc.invert(hit)).drop_columns(["hit"]).to_pylist()
        straddling = _straddling(ds, candidates, lowered, set(places), context)
    for key, match in straddling.items():
        places[key] = match.row
    first_time: dict[str, str] = {}
    for row in places.values():
        sid = row["session_id"]
        first_time[sid] = min(first_time.get(sid, row["ts"] or ""), row["ts"] or "")
    order = sorted(places, key=lambda k: (first_time[k[0]], k[0], places[k]["seq"], k[2]))
    shown = order[offset : offset + limit]
    matches = _read_matches(ds, [places[k]["id"] for k in shown if k not in straddling],
                            needle, context)
    matches.update({k: m for k, m in straddling.items() if k in set(shown)})
    found = [matches[k] for k in shown if k in matches]
    return ScanResult(needle, found, len(places), len(first_time), offset)


def _first_chunks(table: pa.Table) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Per block, the place of its first chunk in `table` (grouped by Arrow, not in Python).

    Even a needle as common as "the" matches most of a memory: only one row per block
    comes to Python.
    """
    if table.num_rows == 0:
        return {}
    ordered = table.sort_by([("split_idx", "ascending")])
    grouped = ordered.group_by(["session_id", "turn_id", "block_idx"], use_threads=False) \
        .aggregate([("id", "first"), ("seq", "min"), ("ts", "min"), ("split_idx", "min")])
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for r in grouped.to_pylist():
        row = {"id": r["id_first"], "session_id": r["session_id"], "turn_id": r["turn_id"],
               "block_idx": r["block_idx"], "seq": r["seq_min"], "ts": r["ts_min"],
               "split_idx": r["split_idx_min"]}
        out[_block(row)] = row
    return out


def _block(row: dict[str, Any]) -> tuple[str, str, int]:
    return (row["session_id"], row["turn_id"], int(row["block_idx"]))


def _read_matches(ds: Any, ids: Sequence[str], needle: str,
                  context: int) -> dict[tuple[str, str, int], ScanMatch]:
    """The excerpt of each block found by a direct match: its first matching chunk, by id."""
    found: dict[tuple[str, str, int], ScanMatch] = {}
    for start in range(0, len(ids), 500):
        quoted = ", ".join(_lit(i) for i in ids[start : start + 500])
        for row in ds.to_table(columns=_SCAN_COLUMNS, filter=f"id IN ({quoted})").to_pylist():
            match = _excerpt_of(row, row["text"], needle, context)
            if match is not None:
                found.setdefault(_block(row), match)
    return found


def _straddling(ds: Any, candidates: list[dict[str, Any]], lowered: str,
                known: set[tuple[str, str, int]],
                context: int) -> dict[tuple[str, str, int], ScanMatch]:
    """Blocks where the needle lies across the seam of two chunks, and in neither alone.

    Chunk i+1 of a block starts with the part chunk i repeats (the overlap, possibly empty,
    docs/chunking.md) followed by new text, so an occurrence in neither chunk alone covers
    the overlap and starts in chunk i: chunk i+1 then starts with a proper suffix of the
    needle. For the later chunks whose head does, the chunk before (the row stored just
    before it: a block's chunks are written in order) is read, the seam checked with plain
    string operations (`_may_straddle`), and only a likely match stitched exactly.
    """
    wanted: dict[int, dict[str, Any]] = {}
    for row in candidates:
        head = (row.get("head") or "").lower()
        if not head or _block(row) in known:
            continue
        starts = [j for j in range(1, len(lowered)) if lowered[j] == head[0]]
        if any(head.startswith(lowered[j:]) for j in starts):
            wanted[int(row["_rowid"])] = row
    found: dict[tuple[str, str, int], ScanMatch] = {}
    if not wanted:
        return found
    before = _take(ds, [rid - 1 for rid in wanted], {
        "id": "id", "session_id": "session_id", "turn_id": "turn_id", "block_idx": "block_idx",
        "split_idx": "split_idx",
        "tail": f"CAST(right(text, {len(lowered) - 1 + _MAX_OVERLAP}) AS STRING)"})
    likely = []
    for rid, after in wanted.items():
        prev = before.get(rid - 1)
        if prev is None or _block(prev) != _block(after) \
                or prev["split_idx"] != after["split_idx"] - 1:
            prev = None  # not stored next to it: checked the slow way below
        if prev is None or _may_straddle(prev["tail"] or "", after["head"] or "", lowered):
            likely.append((rid, after))
    if not likely:
        return found
    whole = _take(ds, [r for rid, _ in likely for r in (rid - 1, rid)],
                  {c: c for c in _SCAN_COLUMNS})
    for rid, after in likely:
        prev, cur = whole.get(rid - 1), whole.get(rid)
        if prev is None or cur is None or _block(prev) != _block(after) \
                or prev["split_idx"] != after["split_idx"] - 1:
            prev, cur = _pair(ds, after)
        if prev is None or cur is None:
            continue
        try:
            text = stitch_texts([prev["text"], cur["text"]])
        except ChunkingError:
            continue
        match = _excerpt_of(prev, text, lowered, context)
        if match is not None:
            found.setdefault(_block(after), match)
    return found


def _take(ds: Any, row_ids: list[int], columns: dict[str, str]) -> dict[int, dict[str, Any]]:
    """Rows by row id (a Lance row id names a row of one fragment; -1 and gaps are skipped)."""
    ids = sorted({r for r in row_ids if r >= 0})
    if not ids:
        return {}
    try:
        table = ds._take_rows(ids, columns=columns)
    except (ValueError, OSError, IndexError):
        return {}
    return dict(zip(ids, table.to_pylist(), strict=False)) if table.num_rows == len(ids) \
        else {}


def _pair(ds: Any, after: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Chunk i and i+1 of `after`'s block, found by their coordinates."""
    split = int(after["split_idx"])
    rows = ds.to_table(columns=_SCAN_COLUMNS, filter=(
        f"session_id = {_lit(after['session_id'])} AND turn_id = {_lit(after['turn_id'])} "
        f"AND block_idx = {int(after['block_idx'])} AND split_idx IN ({split - 1}, {split})"
    )).to_pylist()
    by_split = {int(r["split_idx"]): r for r in rows}
    return by_split.get(split - 1), by_split.get(split)


def _may_straddle(tail: str, head: str, lowered: str) -> bool:
    """Whether `lowered` occurs across the seam for some overlap the two chunks could share.

    The true overlap is a suffix of chunk i (`tail` ends it) that chunk i+1 (`head` starts
    it) also starts with; trying each such length with plain string operations spares the
    tokenizer (`stitch_texts`) for the pairs that cannot hold the needle: nearly all.
    """
    tail, head = tail.lower(), head.lower()
    n = len(lowered) - 1
    overlaps = [0]
    if head:
        j = tail.find(head[0], max(0, len(tail) - _MAX_OVERLAP))
        while j >= 0:
            if head.startswith(tail[j:]):
                overlaps.append(len(tail) - j)
            j = tail.find(head[0], j + 1)
    return any(lowered in tail[-n:] + head[k : k + n] for k in overlaps)


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
