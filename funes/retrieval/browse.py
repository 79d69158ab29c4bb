"""Browsing a memory without a query: its sessions, a session by position, a literal string.

Recall ranks passages and says nothing about what it did not reach. These readers enumerate:

- **The session catalogue** (`catalogue`): every session with its first and last time, agent,
  project, working directory, turn and chunk counts, and the chunk its opening prompt starts
  with. One scan of the narrow provenance columns, aggregated by Arrow (no text is read), and
  kept per memory version (HEAD and the chunk table's Lance version) in this process: a warm
  process lists sessions in the time a dictionary lookup takes, a cold one pays one scan.
- **A range of turns** (`turn_range`): the turns of one session whose seq lies in
  `[first, last]`, stitched whole like `get`, cut at a character budget so an agent reading a
  4,000-turn session gets a page and the seq to continue from.
- **A literal string** (`scan`): case-insensitive, exhaustive, unranked. Lance evaluates the
  match over the text column (only matching rows' provenance comes back; the text is read
  for the blocks shown), so a zero means the string is nowhere in the memory. A needle that
  straddles two chunks of one block (the chunker splits long blocks, docs/chunking.md) is
  found too (`_straddling`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError, UsageError
from funes.ingest.chunking import ChunkingError, stitch_texts
from funes.retrieval.get import COLUMNS as TURN_COLUMNS
from funes.retrieval.get import TurnView, assemble
from funes.retrieval.recall import _lit
from funes.storage.repo import Repository

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MAX_SCAN_HITS",
    "ScanMatch",
    "ScanResult",
    "SessionRow",
    "TurnRange",
    "catalogue",
    "opening_texts",
    "scan",
    "session_info",
    "turn_range",
]

#: Matching blocks a scan returns at most (the count is always of all of them).
MAX_SCAN_HITS = 1000
#: Longest needle a scan accepts: a literal, not a document.
MAX_NEEDLE = 500
#: Memory versions whose catalogue this process keeps.
_KEEP = 8

_CATALOGUE_COLUMNS = ["id", "session_id", "turn_id", "seq", "ts", "time", "harness", "project",
                      "workdir", "role", "block_type", "block_idx", "split_idx", "noise",
                      "parent_session_id"]


@dataclass(frozen=True)
class SessionRow:
    """One session of a memory, as the catalogue knows it (no text)."""

    session_id: str
    harness: str
    project: str | None
    workdir: str | None
    start: str  # the earliest turn time, as the transcript wrote it ("" when unknown)
    end: str  # the latest
    start_time: datetime | None  # the same, parsed (None when no turn had a readable time)
    end_time: datetime | None
    turns: int  # distinct turns (chunks are an indexing artefact; a turn is what `get` reads)
    chunks: int
    first_seq: int
    last_seq: int
    parent_session_id: str | None  # a subagent's session names its parent's
    opening_id: str | None  # the chunk the opening prompt starts with (first user text)


_catalogues: OrderedDict[tuple[str, str | None, int | None], list[SessionRow]] = OrderedDict()


def _version(repo: Repository) -> tuple[str, str | None, int | None]:
    """What a catalogue is valid for: the memory, its HEAD and its chunk table's version."""
    version = None
    if repo.chunks.exists():
        version = int(repo.chunks.dataset().version)
    return (str(repo.path.resolve()), repo.head(), version)


def catalogue(repo: Repository) -> list[SessionRow]:
    """Every session of the memory, newest first (by start time, then session id).

    Tombstoned chunks do not count; a session whose every chunk is forgotten is not listed.
    """
    key = _version(repo)
    found = _catalogues.get(key)
    if found is not None:
        _catalogues.move_to_end(key)
        return found
    rows = _build(repo) if key[2] is not None else []
    _catalogues[key] = rows
    while len(_catalogues) > _KEEP:
        _catalogues.popitem(last=False)
    return rows


def _visible(repo: Repository, table: pa.Table) -> pa.Table:
    """`table` without tombstoned rows (filtered by Arrow, not row by row in Python)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    hidden = repo.tombstoned_ids()
    if not hidden or table.num_rows == 0:
        return table
    gone = pc.is_in(table.column("id"), value_set=pa.array(sorted(hidden), pa.string()))
    return table.filter(pc.invert(gone))


def _build(repo: Repository) -> list[SessionRow]:
    return _rows(repo, repo.chunks.dataset().to_table(columns=_CATALOGUE_COLUMNS))


def _rows(repo: Repository, table: pa.Table) -> list[SessionRow]:
    """Catalogue rows of the sessions in `table` (chunk rows with _CATALOGUE_COLUMNS)."""
    table = _visible(repo, table)
    if table.num_rows == 0:
        return []
    stats = table.group_by("session_id", use_threads=False).aggregate([
        ("time", "min"), ("time", "max"), ("ts", "min"), ("ts", "max"), ("seq", "min"),
        ("seq", "max"),
        ("turn_id", "count_distinct"), ("id", "count_distinct"), ("harness", "min"),
        ("project", "max"), ("workdir", "min"), ("parent_session_id", "max"),
    ])
    opening = _openings(table)
    out = []
    for r in stats.to_pylist():
        out.append((r["time_min"], SessionRow(
            session_id=r["session_id"], harness=r["harness_min"], project=r["project_max"],
            workdir=r["workdir_min"], start=r["ts_min"] or "", end=r["ts_max"] or "",
            start_time=r["time_min"], end_time=r["time_max"],
            turns=int(r["turn_id_count_distinct"]), chunks=int(r["id_count_distinct"]),
            first_seq=int(r["seq_min"]), last_seq=int(r["seq_max"]),
            parent_session_id=r["parent_session_id_max"],
            opening_id=opening.get(r["session_id"]))))
    # Newest first; sessions without a parseable time last (then by id, for a stable order).
    out.sort(key=lambda pair: pair[1].session_id)
    out.sort(key=lambda pair: (pair[0] is not None, pair[0] or 0), reverse=True)
    return [row for _, row in out]


def _openings(table: pa.Table) -> dict[str, str]:
    """Per session, the first chunk of its first user text block that is not scaffolding.

    Sessions whose user never typed text (an imported log) open with their first text block.
    """
    import pyarrow.compute as pc

    text = pc.equal(table.column("block_type"), "text")
    first_split = pc.equal(table.column("split_idx"), 0)
    own = pc.and_(pc.equal(table.column("role"), "user"), pc.is_null(table.column("noise")))
    found: dict[str, str] = {}
    for mask in (pc.and_(pc.and_(text, first_split), own), pc.and_(text, first_split)):
        part = table.filter(mask).select(["session_id", "seq", "block_idx", "id"])
        part = part.sort_by([("session_id", "ascending"), ("seq", "ascending"),
                             ("block_idx", "ascending")])
        sessions = part.column("session_id").to_pylist()
        ids = part.column("id").to_pylist()
        previous = None
        for sid, cid in zip(sessions, ids, strict=True):
            if sid != previous:
                found.setdefault(sid, cid)
                previous = sid
    return found


def opening_texts(repo: Repository, ids: Iterable[str]) -> dict[str, str]:
    """The text of the chunks `ids` (opening prompts), by id; a lookup on the id index."""
    wanted = sorted(set(ids))
    if not wanted or not repo.chunks.exists():
        return {}
    quoted = ", ".join(_lit(i) for i in wanted)
    table = repo.chunks.dataset().to_table(columns=["id", "text"], filter=f"id IN ({quoted})")
    return dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist(),
                    strict=True))


def session_info(repo: Repository, session_id: str) -> SessionRow | None:
    """The catalogue's row for one session (None when the memory does not hold it).

    From the catalogue when this process has it for the current version; else from the
    session's own rows (a filtered scan: a cold `get --from` does not list every session).
    """
    found = _catalogues.get(_version(repo))
    if found is None:
        if not repo.chunks.exists():
            return None
        found = _rows(repo, repo.chunks.dataset().to_table(
            columns=_CATALOGUE_COLUMNS, filter=f"session_id = {_lit(session_id)}"))
    return next((row for row in found if row.session_id == session_id), None)


# -- a range of turns --------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnRange:
    """Whole turns of one session by seq, cut at a character budget."""

    session: SessionRow
    turns: list[TurnView]
    first: int  # the seq asked for (after resolving negative and missing bounds)
    last: int
    #: The seq to continue from (`--from`), when turns in the asked range were left out.
    next_seq: int | None
    #: The last turn shown was cut at the budget (its blocks end with a marker).
    cut: bool
    #: The chunk ids of each turn shown (for trust marks).
    ids: dict[str, frozenset[str]]


#: Marker put where a block was cut at the budget (the rest: `funes get SESSION TURN`).
CUT = "[… {n} more characters: `funes get {session} {turn}` shows the whole turn]"


def turn_range(repo: Repository, session_id: str, first: int | None, last: int | None,
               max_chars: int) -> TurnRange:
    """The turns of `session_id` with `first ≤ seq ≤ last`, at most `max_chars` of text.

    A negative bound counts from the end (`-1` is the last turn, as in Python); a missing one
    is the session's first or last seq. Whole turns are added in order while they fit; the
    first turn is always shown (cut, with a marker, when it alone is over the budget).

    Raises:
        SessionNotFoundError: the memory holds no such session.
        UsageError: an empty or inverted range, or a budget below 200 characters.
    """
    from funes.retrieval.get import TurnNotFoundError

    if max_chars < 200:
        raise UsageError(f"--max-chars must be at least 200, not {max_chars}")
    info = session_info(repo, session_id)
    if info is None:
        raise SessionNotFoundError(session_id)
    lo = _bound(first, info, info.first_seq)
    hi = _bound(last, info, info.last_seq)
    if lo > hi:
        raise UsageError(f"--from {lo} is after --to {hi}",
                         hint=f"session {session_id} has turns seq {info.first_seq}–"
                         f"{info.last_seq}")
    ds = repo.chunks.dataset()
    where = f"session_id = {_lit(session_id)} AND seq >= {lo} AND seq <= {hi}"
    hidden = repo.tombstoned_ids()
    # Sizes first (no text): a 4,000-turn session is not read whole for one page.
    sizes: dict[int, int] = {}
    for row in ds.to_table(columns={"id": "id", "seq": "seq", "n": "char_length(text)"},
                           filter=where).to_pylist():
        if row["id"] not in hidden:
            sizes[row["seq"]] = sizes.get(row["seq"], 0) + int(row["n"] or 0)
    if not sizes:
        raise TurnNotFoundError(session_id, f"seq {lo}–{hi}")
    seqs = sorted(sizes)
    # Chunks of a block overlap, so their sizes add up to a little more than the turn: read
    # while the sum stays within the budget plus a margin, then cut exactly below.
    upto, total = seqs[0], 0
    for seq in seqs:
        total += sizes[seq]
        upto = seq
        if total > max_chars * 1.25:
            break
    rows = ds.to_table(columns=TURN_COLUMNS,
                       filter=f"session_id = {_lit(session_id)} AND seq >= {lo} AND "
                       f"seq <= {upto}").to_pylist()
    turns = assemble(rows, hidden)
    ids: dict[str, set[str]] = {}
    for row in rows:
        if row["id"] not in hidden:
            ids.setdefault(row["turn_id"], set()).add(row["id"])
    shown: list[TurnView] = []
    used = 0
    cut = False
    for turn in turns:
        size = sum(len(b.text) for b in turn.blocks)
        if shown and used + size > max_chars:
            break
        if used + size > max_chars:  # the first turn alone is over the budget
            turn = _cut(turn, max_chars)
            cut = True
        shown.append(turn)
        used += size
    later = [seq for seq in seqs if seq > shown[-1].seq]
    next_seq = later[0] if later else None
    return TurnRange(info, shown, lo, hi, next_seq, cut,
                     {t.turn_id: frozenset(ids.get(t.turn_id, ())) for t in shown})


def _bound(value: int | None, info: SessionRow, default: int) -> int:
    if value is None:
        return default
    if value < 0:
        return max(info.first_seq, info.last_seq + 1 + value)
    return value


def _cut(turn: TurnView, budget: int) -> TurnView:
    """`turn` with its blocks cut so their text fits `budget`, each cut marked."""
    from dataclasses import replace

    blocks = []
    left = budget
    for block in turn.blocks:
        if len(block.text) <= left:
            blocks.append(block)
            left -= len(block.text)
            continue
        rest = len(block.text) - max(left, 0)
        marker = CUT.format(n=rest, session=turn.session_id, turn=turn.turn_id)
        blocks.append(replace(block, text=block.text[: max(left, 0)] + "\n" + marker))
        left = 0
    return replace(turn, blocks=tuple(blocks))


class SessionNotFoundError(FunesError):
    """No session with that id in this memory (exit 1, like an unknown turn)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"no session {session_id} in this memory",
            hint="`funes sessions` lists them (copy an id from there or from a recall hit), "
            "or check --memory",
        )
        self.session_id = session_id


# -- scan --------------------------------------------------------------------------------------


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
