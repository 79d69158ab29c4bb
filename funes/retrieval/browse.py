"""Browsing a memory without a query: its sessions, a session by position, a literal string.

Recall ranks passages and says nothing about what it did not reach. These readers enumerate:

- **The session catalogue** (`catalogue`): every session with its first and last time, agent,
  project, working directory, turn and chunk counts, and the chunk its opening prompt starts
  with. One scan of the narrow provenance columns, aggregated by Arrow (no text is read), and
  kept per memory version (HEAD and the chunk table's Lance version) in this process: a warm
  process lists sessions in the time a dictionary lookup takes, a cold one pays one scan,
  and after a commit only the sessions its new fragments touch are aggregated again.
- **A range of turns** (`turn_range`): the turns of one session whose seq lies in
  `[first, last]`, stitched whole like `get`, cut at a character budget so an agent reading a
  4,000-turn session gets a page and the seq to continue from.
- **A literal string**: funes.retrieval.scan.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError, UsageError
from funes.retrieval.get import COLUMNS as TURN_COLUMNS
from funes.retrieval.get import TurnView, assemble
from funes.retrieval.recall import _lit
from funes.storage.repo import Repository

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "SessionNotFoundError",
    "SessionRow",
    "TurnRange",
    "catalogue",
    "opening_texts",
    "read_chunks",
    "session_info",
    "turn_range",
]

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
    opening_row: int | None = None  # its Lance row address (read by address, checked by id)


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


@dataclass(frozen=True)
class _Built:
    """The last catalogue built for a memory: what it was built from, to update it from."""

    fragments: frozenset[str]  # funes.retrieval.scantext.fragment_key of each fragment
    hidden: frozenset[str]  # the tombstoned chunk ids it left out
    rows: list[SessionRow]


_latest: dict[str, _Built] = {}


def _build(repo: Repository) -> list[SessionRow]:
    """The catalogue of the memory's current version: updated from the last one when it can.

    A commit appends fragments and changes no row of the others, so when the last catalogue
    built here covered a subset of this version's fragments under the same tombstones, only
    the sessions the new fragments touch are aggregated again (from all their rows): a
    listing after each turn's commit costs that session, not the memory. Anything else (a
    pack rewrote the fragments, `forget` hid chunks, another memory) rebuilds it whole.
    """
    from funes.retrieval.scantext import fragment_key

    ds = repo.chunks.dataset()
    fragments = {fragment_key(f): f for f in ds.get_fragments()}
    hidden = frozenset(repo.tombstoned_ids())
    where = str(repo.path.resolve())
    prev = _latest.get(where)
    if prev is not None and prev.hidden == hidden and prev.fragments <= fragments.keys():
        added = [f for k, f in fragments.items() if k not in prev.fragments]
        rows = _update(repo, ds, prev.rows, added)
    else:
        rows = _rows(repo, ds.to_table(columns=_CATALOGUE_COLUMNS, with_row_address=True))
    _latest[where] = _Built(frozenset(fragments), hidden, rows)
    return rows


def _update(repo: Repository, ds: Any, rows: list[SessionRow],
            added: list[Any]) -> list[SessionRow]:
    """`rows` with the sessions holding a row of the fragments `added` aggregated again."""
    import pyarrow.compute as pc

    touched: set[str] = set()
    for fragment in added:
        column = fragment.to_table(columns=["session_id"]).column("session_id")
        touched.update(pc.unique(column).to_pylist())
    if not touched:
        return rows
    fresh = _rows(repo, ds.to_table(columns=_CATALOGUE_COLUMNS, with_row_address=True, filter=(
        f"session_id IN ({', '.join(_lit(s) for s in sorted(touched))})")))
    return _newest_first([r for r in rows if r.session_id not in touched] + fresh)


def _newest_first(rows: list[SessionRow]) -> list[SessionRow]:
    """Newest first; sessions without a parseable time last (then by id, a stable order)."""
    out = sorted(rows, key=lambda r: r.session_id)
    out.sort(key=lambda r: (r.start_time is not None, r.start_time or 0), reverse=True)
    return out


def _rows(repo: Repository, table: pa.Table) -> list[SessionRow]:
    """Catalogue rows of the sessions in `table` (_CATALOGUE_COLUMNS, perhaps `_rowaddr`)."""
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
        out.append(SessionRow(
            session_id=r["session_id"], harness=r["harness_min"], project=r["project_max"],
            workdir=r["workdir_min"], start=r["ts_min"] or "", end=r["ts_max"] or "",
            start_time=r["time_min"], end_time=r["time_max"],
            turns=int(r["turn_id_count_distinct"]), chunks=int(r["id_count_distinct"]),
            first_seq=int(r["seq_min"]), last_seq=int(r["seq_max"]),
            parent_session_id=r["parent_session_id_max"],
            opening_id=opening.get(r["session_id"], (None, None))[0],
            opening_row=opening.get(r["session_id"], (None, None))[1]))
    return _newest_first(out)


def _openings(table: pa.Table) -> dict[str, tuple[str, int | None]]:
    """Per session, the first chunk of its first user text block that is not scaffolding.

    Its id, and its row address when `table` has them. Sessions whose user never typed text
    (an imported log) open with their first text block.
    """
    import pyarrow.compute as pc

    text = pc.equal(table.column("block_type"), "text")
    first_split = pc.equal(table.column("split_idx"), 0)
    own = pc.and_(pc.equal(table.column("role"), "user"), pc.is_null(table.column("noise")))
    found: dict[str, tuple[str, int | None]] = {}
    has_rows = "_rowaddr" in table.column_names
    for mask in (pc.and_(pc.and_(text, first_split), own), pc.and_(text, first_split)):
        part = table.filter(mask).select(["session_id", "seq", "block_idx", "id",
                                          *(["_rowaddr"] if has_rows else [])])
        part = part.sort_by([("session_id", "ascending"), ("seq", "ascending"),
                             ("block_idx", "ascending")])
        sessions = part.column("session_id").to_pylist()
        ids = part.column("id").to_pylist()
        rows = part.column("_rowaddr").to_pylist() if has_rows else [None] * len(ids)
        previous = None
        for sid, cid, row in zip(sessions, ids, rows, strict=True):
            if sid != previous:
                found.setdefault(sid, (cid, row))
                previous = sid
    return found


def opening_texts(repo: Repository, ids: Mapping[str, int | None]) -> dict[str, str]:
    """The text of the chunks `ids` (opening prompts: id → row address, or None), by id."""
    if not ids or not repo.chunks.exists():
        return {}
    found = read_chunks(repo.chunks.dataset(), ids, ["id", "text"])
    return {r["id"]: r["text"] for r in found}


def read_chunks(ds: Any, wanted: Mapping[str, int | None],
                columns: list[str]) -> list[dict[str, Any]]:
    """The chunks `wanted` (id → row address), by address; by id those not found there.

    An address names a row of the dataset version it was read from; the same data files
    keep their rows, so it holds in every version that has the fragment. Each row read is
    checked against its id all the same, and a miss (or a None address) is looked up by id:
    a `id IN (…)` filter costs a pass over the id column, 15 ms at 113k chunks.
    """
    by_address = sorted({a for a in wanted.values() if a is not None})
    out: list[dict[str, Any]] = []
    try:
        table = ds._take_rows(by_address, columns=columns) if by_address else None
    except (ValueError, OSError, IndexError):
        table = None
    if table is not None and table.num_rows == len(by_address):
        got = dict(zip(by_address, table.to_pylist(), strict=True))
        out = [got[a] for i, a in wanted.items() if a is not None and got[a]["id"] == i]
    missing = sorted(set(wanted) - {r["id"] for r in out})
    for start in range(0, len(missing), 500):
        quoted = ", ".join(_lit(i) for i in missing[start : start + 500])
        out += ds.to_table(columns=columns, filter=f"id IN ({quoted})").to_pylist()
    return out


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
            columns=_CATALOGUE_COLUMNS, with_row_address=True,
            filter=f"session_id = {_lit(session_id)}"))
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
