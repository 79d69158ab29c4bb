"""Browsing verbs: sessions, a session's turns by position, scan for a literal, sketch.

Recall answers "what was said about X"; these answer "what happened": list the sessions of a
project (newest first), read a digest of one (`sketch`), read it by turn position (`get
--from/--to`), and look for a literal string everywhere (`scan`). Each returns a frozen
dataclass carrying what it shows, the memory's label (what `--memory` takes to open it again)
and whether it is the user's; the CLI, the MCP tools, the warm server and `funes ui` render
these same results.

Every result is bounded and says where to continue: `SessionPage.next_offset`,
`TurnPage.next_seq`, `ScanPage.next_offset`; a sketch fits its character budget.

**Trust.** Passages are marked by the one decision every output uses
(funes.api.trust.passage_trust): in another owner's memory everything but the user's own turns,
in the user's memory what no commit they trust vouches for, exactly as recall and `get` mark
them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from funes.api.ingest import parse_since
from funes.api.memory import memory_label
from funes.api.trust import Trust, passage_trust
from funes.errors import UsageError
from funes.retrieval import browse as _browse
from funes.retrieval import scan as _scan
from funes.retrieval import sketch as _sketch
from funes.retrieval.browse import SessionNotFoundError, SessionRow
from funes.retrieval.get import TurnView
from funes.storage.repo import Repository

__all__ = [
    "DEFAULT_RANGE_CHARS",
    "DEFAULT_SKETCH_CHARS",
    "LinkedCommit",
    "ScanHit",
    "ScanPage",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionPage",
    "SketchPage",
    "TurnPage",
    "get_range",
    "scan",
    "sessions",
    "sketch",
]

#: Characters of turn text one `get --from/--to` page holds by default (about 4,000 tokens).
DEFAULT_RANGE_CHARS = 16_000
DEFAULT_SKETCH_CHARS = _sketch.DEFAULT_CHARS
MAX_PAGE = 500
#: Characters of a session's opening prompt a listing carries.
OPENING_CHARS = 400


# -- trust: the one decision point ---------------------------------------------------------


def _trust(repo: Repository) -> Trust:
    """The trust decision recall makes (funes.api.trust.passage_trust), for this memory.

    One call per page, cached per HEAD there: a passage is marked here exactly when a recall
    or `get` would mark it.
    """
    return passage_trust(repo)


# -- sessions ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkedCommit:
    """A code commit linked to a session's turns (funes.gitlink, `funes why`)."""

    sha: str
    summary: str
    time: str
    repository: str


@dataclass(frozen=True)
class SessionInfo:
    """One session as a listing shows it."""

    session_id: str
    harness: str
    project: str | None
    workdir: str | None
    start: str  # the first turn's time as the transcript gave it ("" when unknown)
    end: str
    turns: int
    chunks: int
    first_seq: int
    last_seq: int
    parent_session_id: str | None
    opening: str | None  # the start of the user's first request (OPENING_CHARS at most)
    commits: tuple[LinkedCommit, ...] = ()
    untrusted: bool = False  # holds passages no trusted commit vouches for (or not yours)


@dataclass(frozen=True)
class SessionPage:
    """One page of a memory's sessions, newest first."""

    memory: str
    trusted: bool
    sessions: list[SessionInfo]
    total: int  # sessions matching the filters
    offset: int
    limit: int
    filters: dict[str, Any] = field(default_factory=dict)

    @property
    def next_offset(self) -> int | None:
        """The `--offset` of the next page, None on the last one."""
        end = self.offset + len(self.sessions)
        return end if end < self.total else None


def _admits(row: SessionRow, project: Sequence[str], harness: Sequence[str],
            since: datetime | None, until: datetime | None) -> bool:
    if harness and row.harness not in harness:
        return False
    if project and not any(row.project == p or row.workdir == p
                           or (row.workdir or "").startswith(p.rstrip("/") + "/")
                           for p in project):
        return False
    if since is not None and (row.end_time is None or row.end_time < since):
        return False
    return not (until is not None and (row.start_time is None or row.start_time >= until))


def sessions(repo: Repository, *, project: Sequence[str] = (), harness: Sequence[str] = (),
             since: str | None = None, until: str | None = None, limit: int = 20,
             offset: int = 0, commits: bool = True,
             only: Collection[str] | None = None) -> SessionPage:
    """The sessions of the memory, newest first, `limit` of them from `offset`.

    `project` matches the project identity or the working directory (or a directory above
    it); `since`/`until` keep sessions with a turn in the window (`2026-11-01`, `7d`).
    With `commits`, each session lists the code commits linked to its turns. `only` keeps
    just these session ids (funes ui's filter by author and machine).

    Raises:
        UsageError: a limit outside [1, MAX_PAGE], a negative offset, an unreadable time.
    """
    if not 1 <= limit <= MAX_PAGE:
        raise UsageError(f"--limit must be between 1 and {MAX_PAGE}, not {limit}")
    if offset < 0:
        raise UsageError(f"--offset must be ≥ 0, not {offset}")
    after = parse_since(since) if since else None
    before = parse_since(until) if until else None
    rows = [r for r in _browse.catalogue(repo)
            if (only is None or r.session_id in only)
            and _admits(r, project, harness, after, before)]
    page = rows[offset : offset + limit]
    trust = _trust(repo)
    trusted = trust.owned
    texts = _browse.opening_texts(repo, {r.opening_id: r.opening_row for r in page
                                         if r.opening_id})
    marked = _sessions_holding(repo, trust, [r.session_id for r in page])
    links = _links(repo) if commits else None
    out = []
    for r in page:
        opening = texts.get(r.opening_id or "")
        out.append(SessionInfo(
            r.session_id, r.harness, r.project, r.workdir, r.start, r.end, r.turns, r.chunks,
            r.first_seq, r.last_seq, r.parent_session_id,
            opening[:OPENING_CHARS] if opening else None,
            _commits_of(links, r.session_id) if links is not None else (),
            r.session_id in marked))
    filters = {k: v for k, v in (("project", list(project)), ("harness", list(harness)),
                                 ("since", since), ("until", until)) if v}
    return SessionPage(memory_label(repo), trusted, out, len(rows), offset, limit, filters)


def _sessions_holding(repo: Repository, trust: Trust, among: list[str]) -> set[str]:
    """Which of the sessions `among` hold a passage `trust` marks untrusted."""
    from funes.retrieval.recall import _lit

    if not among or not repo.chunks.exists() or (trust.owned and not trust.exceptions):
        return set()
    where = f"session_id IN ({', '.join(_lit(s) for s in among)})"
    table = repo.chunks.dataset().to_table(columns=["id", "session_id"], filter=where)
    return {s for i, s in zip(table.column("id").to_pylist(),
                              table.column("session_id").to_pylist(), strict=True)
            if trust.untrusted(str(i))}


def _links(repo: Repository) -> Any:
    from funes.gitlink.linkindex import link_index

    return link_index(repo)


def _commits_of(links: Any, session_id: str) -> tuple[LinkedCommit, ...]:
    return tuple(LinkedCommit(link.commit, link.summary, link.time, link.repository)
                 for link in links.for_session(session_id))


# -- get by range ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnPage:
    """Whole turns of one session by position (seq), within a character budget."""

    memory: str
    trusted: bool
    session: SessionRow
    turns: list[TurnView]
    first: int  # the seq range asked for, bounds resolved
    last: int
    next_seq: int | None  # where the next page starts (`--from`), None when all was shown
    cut: bool  # the only turn shown was longer than the budget and is cut (marked)
    untrusted_turns: frozenset[str] = frozenset()  # turn ids holding doubtful passages
    max_chars: int = DEFAULT_RANGE_CHARS


def get_range(repo: Repository, session_id: str, first: int | None = None,
              last: int | None = None, *, max_chars: int = DEFAULT_RANGE_CHARS) -> TurnPage:
    """The turns of `session_id` whose seq is in `[first, last]`, whole, within `max_chars`.

    A negative bound counts from the end (`first=-5`: the last five turns); a missing one is
    the session's first or last turn.

    Raises:
        SessionNotFoundError: the memory has no such session.
        UsageError: an inverted range or a budget below 200 characters.
    """
    found = _browse.turn_range(repo, session_id, first, last, max_chars)
    trust = _trust(repo)
    marked = frozenset(t.turn_id for t in found.turns
                       if trust.any_untrusted(found.ids.get(t.turn_id, frozenset())))
    return TurnPage(memory_label(repo), trust.owned, found.session, found.turns, found.first,
                    found.last, found.next_seq, found.cut, marked, max_chars)


# -- scan --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanHit:
    """One block holding the needle: where it is, and the match with its context."""

    row: dict[str, Any]  # provenance: session_id, turn_id, seq, ts, harness, role, block_type…
    before: str
    found: str
    after: str
    untrusted: bool


@dataclass(frozen=True)
class ScanPage:
    """What a scan found, oldest session first; every match is counted, `limit` shown."""

    memory: str
    trusted: bool
    needle: str
    hits: list[ScanHit]
    total: int  # matching blocks
    sessions: int  # sessions among them
    offset: int
    limit: int
    scope: tuple[str, ...] = ()  # the sessions scanned (empty: all)

    @property
    def next_offset(self) -> int | None:
        """The `--offset` showing the next matches, None when all were shown."""
        end = self.offset + len(self.hits)
        return end if end < self.total else None


def scan(repo: Repository, needle: str, *, sessions: Sequence[str] = (), limit: int = 20,
         offset: int = 0, context: int = 100) -> ScanPage:
    """Every block containing `needle` (literal, case-insensitive), `limit` shown.

    Raises:
        UsageError: an empty needle, a limit outside [1, MAX_PAGE], a negative offset or
            context outside [0, 2000].
    """
    if not 1 <= limit <= MAX_PAGE:
        raise UsageError(f"--limit must be between 1 and {MAX_PAGE}, not {limit}")
    if offset < 0:
        raise UsageError(f"--offset must be ≥ 0, not {offset}")
    if not 0 <= context <= 2000:
        raise UsageError(f"--context must be between 0 and 2000, not {context}")
    result = _scan.scan(repo, needle, sessions=sessions, limit=limit, offset=offset,
                          context=context)
    trust = _trust(repo)
    hits = [ScanHit(m.row, m.before, m.found, m.after, trust.untrusted(str(m.row.get("id"))))
            for m in result.matches]
    return ScanPage(memory_label(repo), trust.owned, needle, hits, result.total, result.sessions,
                    offset, limit, tuple(sessions))


# -- sketch ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SketchPage:
    """A session's sketch, with the memory it came from and the passages to distrust."""

    memory: str
    trusted: bool
    sketch: _sketch.Sketch
    untrusted_turns: frozenset[str] = frozenset()
    cached: bool = False  # read from the cache (the same bytes a fresh computation gives)


_sketches: OrderedDict[tuple[str, str], _sketch.Sketch] = OrderedDict()


def sketch(repo: Repository, session_id: str, *,
           max_chars: int = DEFAULT_SKETCH_CHARS) -> SketchPage:
    """The session's digest (funes.retrieval.sketch), cached per session version.

    The cache lives in this process and in `index/sketches/` (safe to delete); a session
    that gains or loses a chunk, or whose chunks gain vectors, gets a new sketch.

    Raises:
        SessionNotFoundError: the memory has no such session.
        UsageError: a budget outside the sketch's bounds.
    """
    if not _sketch.MIN_CHARS <= max_chars <= _sketch.MAX_CHARS:
        raise UsageError(f"--max-chars must be between {_sketch.MIN_CHARS} and "
                         f"{_sketch.MAX_CHARS}, not {max_chars}")
    version, ids = _sketch.fingerprint(repo, session_id, max_chars)
    if not ids:
        raise SessionNotFoundError(session_id)
    key = (str(repo.path.resolve()), version)
    found = _sketches.get(key)
    cached = found is not None
    if found is None:
        found = _read_cached(repo, session_id, version)
        cached = found is not None
    if found is None:
        found = _sketch.sketch(repo, session_id, max_chars, version=version)
        _write_cached(repo, session_id, found)
    _sketches[key] = found
    _sketches.move_to_end(key)
    while len(_sketches) > 64:
        _sketches.popitem(last=False)
    trust = _trust(repo)
    marked = frozenset(p.turn_id for p in found.passages if trust.any_untrusted(p.ids))
    return SketchPage(memory_label(repo), trust.owned, found, marked, cached)


def _sketch_file(repo: Repository, session_id: str) -> Path:
    name = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return repo.path / "index" / "sketches" / f"{name}.json"


#: Largest cached sketch read back (one is a few kilobytes).
_MAX_SKETCH_FILE = 4 << 20


def _read_cached(repo: Repository, session_id: str, version: str) -> _sketch.Sketch | None:
    try:
        with _sketch_file(repo, session_id).open("rb") as fh:
            raw = fh.read(_MAX_SKETCH_FILE + 1)
        data = json.loads(raw) if len(raw) <= _MAX_SKETCH_FILE else None
        if not isinstance(data, dict) or data.get("version") != version \
                or data.get("session_id") != session_id:
            return None
        passages = [_sketch.SketchPassage(**{**p, "why": tuple(p["why"]),
                                             "ids": tuple(p["ids"])})
                    for p in data["passages"]]
        return _sketch.Sketch(**{**data, "passages": passages})
    except (OSError, ValueError, KeyError, TypeError):
        return None  # absent, damaged or of another version: computed again


def _write_cached(repo: Repository, session_id: str, found: _sketch.Sketch) -> None:
    from funes.storage.atomic import write_atomic

    path = _sketch_file(repo, session_id)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(asdict(found), ensure_ascii=False).encode("utf-8"),
                     durable=False)
