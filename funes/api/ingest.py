"""Ingest verbs: index."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from funes._env import Settings
from funes.api.memory import writable_memory
from funes.errors import UsageError
from funes.ingest.parsers.base import ParseError, walk_files
from funes.ingest.parsers.registry import FORMATS
from funes.ingest.parsers.turnfile import TurnFileCheck, is_turn_file
from funes.ingest.parsers.turnfile import check as check_turn_file
from funes.ingest.run import BATCH_BYTES, BATCH_CHUNKS, IndexSummary, index_sources
from funes.ingest.sources import default_sources, explicit_sources
from funes.ingest.state import memory_states, routed_states
from funes.model.turns import Turn
from funes.retrieval.indexes import maintain, make_searchable, merge_segments
from funes.storage.repo import PROJECT_DIR, Repository

__all__ = ["FORMATS", "IndexSummary", "TurnFileCheck", "check_turn_files", "index", "inside",
           "parse_since"]


_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")


def parse_since(value: str, now: datetime | None = None, *, option: str = "--since") -> datetime:
    """Read a `--since` value: an ISO date or time (UTC unless it says), or 30m/12h/7d/2w ago.

    `option` names the option in the error (`--until` and `--as-of` read the same values).
    """
    now = now or datetime.now(UTC)
    m = _RELATIVE.match(value.strip().lower())
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        try:
            return now - timedelta(**{unit: int(m.group(1))})
        except (OverflowError, ValueError):  # before year 1: no date can say it
            raise UsageError(
                f"{option} {value!r} reaches back past year 1",
                hint="use a smaller span (e.g. 5000w) or an ISO date",
            ) from None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise UsageError(
            f"cannot read {option} {value!r}",
            hint="use an ISO date (2026-11-01), a time (2026-11-01T12:00Z) or 30m/12h/7d/2w",
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


class _ProjectRouter:
    """Route sessions as docs/design.md §7 says.

    A session inside a project with its own `.funes/` goes to that memory; every other session
    goes to the global memory (or nowhere, if there is none).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._by_dir: dict[str, Repository | None] = {}
        self._repos: dict[Path, Repository] = {}
        self._global: Repository | bool | None = False

    def _open(self, path: Path) -> Repository:
        repo = Repository.open(path, self.settings)
        return self._repos.setdefault(repo.path, repo)

    def _global_repo(self) -> Repository | None:
        if self._global is False:
            fmt = self.settings.home / "FORMAT"
            self._global = self._open(self.settings.home) if fmt.is_file() else None
        return self._global if isinstance(self._global, Repository) else None

    def __call__(self, turn: Turn) -> Repository | None:
        workdir = turn.workdir or ""
        if workdir not in self._by_dir:
            target: Repository | None = None
            if workdir:
                here = Path(workdir)
                for directory in (here, *here.parents):
                    if (directory / PROJECT_DIR / "FORMAT").is_file():
                        target = self._open(directory / PROJECT_DIR)
                        break
            self._by_dir[workdir] = target or self._global_repo()
        return self._by_dir[workdir]


def inside(workdir: str | None, root: Path) -> bool:
    """Whether a session's working directory is `root` or below it (the routing rule's test)."""
    if not workdir:
        return False
    here = Path(workdir)
    return here == root or root in here.parents


def _within(workdir: str | None) -> Callable[[Turn], bool] | None:
    """The `scope` of `index --workdir DIR`: turns whose working directory is under DIR."""
    if workdir is None:
        return None
    root = Path(workdir).expanduser().resolve()
    return lambda turn: inside(turn.workdir, root)


def index(
    settings: Settings,
    *,
    memory: str | None = None,
    paths: Sequence[str] = (),
    agents: Sequence[str] = (),
    since: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    tool_results: bool | None = None,
    workdir: str | None = None,
) -> IndexSummary:
    """Index agent transcripts.

    Named paths go into the current memory (like `git add`); without paths, the agents'
    default locations are read and each session is routed to its project memory or the global
    memory. `tool_results=False` leaves tool output out; None follows each memory's
    `index.toolResults`. `workdir` keeps only the sessions whose working directory is that
    directory or inside it (what `funes add AGENT REMOTE --project` indexes: one project).

    Sources are read newest first and every batch is searchable as soon as it is committed
    (funes.ingest.run), so a first run over a long history answers from its latest sessions
    within seconds, while the rest is still being read.
    """
    when = parse_since(since) if since else None
    harness = agents[0] if len(agents) == 1 else None
    router: Callable[[Turn], Repository | None]
    if paths or memory:
        repo = writable_memory(settings, memory, command="index")
        if paths:
            sources = explicit_sources(paths, harness=harness)
            sources = [s for s in sources if not agents or s.harness in agents]
        else:
            sources = default_sources(settings, harnesses=agents or None)
        router = lambda _turn: repo  # noqa: E731
        states = memory_states(repo.path)
        max_tokens = int(repo.config.get("index.maxTokens") or 256)
        configured = repo
    else:
        # like every command: refuse when there is no memory; a run scoped to a project has
        # that project's memory (`funes add AGENT PROJECT/.funes` with no global memory)
        scoped = Path(workdir) / PROJECT_DIR if workdir else None
        configured = (Repository.open(scoped, settings)
                      if scoped is not None and (scoped / "FORMAT").is_file()
                      else Repository.discover(settings))
        sources = default_sources(settings, harnesses=agents or None)
        router = _ProjectRouter(settings)
        states = routed_states(settings.home)
        max_tokens = 256
    with contextlib.closing(states):
        summary = index_sources(
            sources, router, states, since=when, max_tokens=max_tokens, newest=True,
            progress=progress, tool_results=tool_results, searchable=make_searchable,
            scope=_within(workdir),
            batch_chunks=int(configured.config.get("index.batchChunks") or BATCH_CHUNKS),
            batch_bytes=int(configured.config.get("index.batchBytes") or BATCH_BYTES),
        )
    for path, committed in summary.commits.items():
        if committed.added:  # like `git gc --auto` after a commit: cheap unless due
            repo = Repository.open(Path(path), settings)
            # the upkeep before the merge: a pack after it would find every fragment of the run
            # under the one merged segment and rewrite the whole table (and remap its index)
            # here, the peak of a first run's memory (825 MB at 323k chunks against 800,
            # bench/results/day0.md); the background upkeep (the backfill, the hook worker)
            # packs them later, out of the command's way
            maintain(repo)
            merge_segments(repo)  # one segment per batch while the run went on
    return summary


def check_turn_files(settings: Settings, paths: Sequence[str]) -> list[TurnFileCheck]:
    """`funes index --check`: validate turn files as indexing would, writing nothing.

    A named file is checked whatever its name; a directory contributes its `*.funes.jsonl`
    files (recursively). Each result says how many turns, chunks and sessions the file would
    give, or the line and field that refuse it (funes.ingest.parsers.turnfile).

    Raises:
        ParseError: a path does not exist.
        UsageError: no path, or directories holding no turn file.
    """
    if not paths:
        raise UsageError("`funes index --check` needs the turn files (or directories) to check",
                         hint="funes index --check exports/session.funes.jsonl")
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else settings.cwd / path
        if path.is_dir():
            files += [f for f in walk_files(path) if is_turn_file(f)]
        elif path.is_file():
            files.append(path)
        else:
            raise ParseError(f"no such file or directory: {path}")
    if not files:
        raise UsageError(f"no turn files (*.funes.jsonl) under {', '.join(paths)}")
    return [check_turn_file(f) for f in files]
