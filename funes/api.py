"""The porcelain: one function per verb, returning dataclasses and never printing.

The CLI (funes.cli) parses arguments, makes one call here, and renders the result; agents and
tests can make the same calls in-process. Lower layers are reached only through this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from funes._env import Settings
from funes._env import settings as load_settings
from funes.errors import UsageError
from funes.ingest.run import IndexSummary, index_sources
from funes.ingest.sources import default_sources, explicit_sources
from funes.ingest.state import SourceStates
from funes.model.ids import ObjectId
from funes.model.objects import Commit, Manifest, ModelStamp
from funes.model.turns import Turn
from funes.storage.fsck import FsckReport, Problem
from funes.storage.fsck import fsck as _fsck
from funes.storage.repo import PROJECT_DIR, CommitResult, Repository

__all__ = [
    "Commit",
    "CommitResult",
    "FsckReport",
    "IndexSummary",
    "InitResult",
    "LogEntry",
    "Problem",
    "Repository",
    "Settings",
    "ShowResult",
    "StatusResult",
    "config_get",
    "config_list",
    "config_set",
    "config_unset",
    "fsck",
    "index",
    "init",
    "load_settings",
    "log",
    "open_memory",
    "parse_since",
    "show",
    "status",
]


def open_memory(settings: Settings, memory: str | None = None) -> Repository:
    """The repository a command works on: `--memory` if given, else discovery from cwd."""
    if memory:
        return Repository.open(Path(memory), settings)
    return Repository.discover(settings)


@dataclass(frozen=True)
class InitResult:
    """The memory `init` created, or found already there (git's "reinitialized")."""

    repo: Repository
    created: bool


def init(settings: Settings, path: Path | None = None, *, is_global: bool = False) -> InitResult:
    """Create a project memory (`<path>/.funes`) or the user's global memory (`$FUNES_HOME`).

    Like `git init`, running it where a memory already exists changes nothing and succeeds,
    so setup scripts can run it unconditionally.
    """
    if is_global:
        if path is not None:
            raise UsageError("`funes init --global` takes no PATH", hint="use FUNES_HOME instead")
        target = settings.home
    else:
        target = (path or settings.cwd).expanduser()
        if target.name != PROJECT_DIR:
            target = target / PROJECT_DIR
        target = target.resolve()
    if (target / "FORMAT").exists():
        return InitResult(Repository.open(target, settings), created=False)
    return InitResult(Repository.init(target, settings, is_global=is_global), created=True)


@dataclass(frozen=True)
class LogEntry:
    """One commit as `log` lists it."""

    id: ObjectId
    commit: Commit
    refs: tuple[str, ...] = ()


def log(repo: Repository, rev: str | None = None, limit: int | None = None) -> list[LogEntry]:
    """Commits reachable from `rev` (default HEAD), newest first."""
    if limit is not None and limit <= 0:
        raise UsageError(f"--limit must be positive, not {limit}")
    start = repo.resolve(rev) if rev else repo.head()
    if start is None:
        return []
    decorations: dict[str, list[str]] = {}
    for name, oid in repo.refs.iter_refs():
        decorations.setdefault(oid, []).append(_short_ref(name))
    out = []
    for oid, commit in repo.walk(start):
        out.append(LogEntry(oid, commit, tuple(decorations.get(oid, ()))))
        if limit is not None and len(out) >= limit:
            break
    return out


def _short_ref(name: str) -> str:
    for prefix in ("refs/heads/", "refs/remotes/", "refs/tags/"):
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


@dataclass(frozen=True)
class ShowResult:
    """A commit with its manifests summarised."""

    id: ObjectId
    commit: Commit
    manifests: dict[ObjectId, Manifest]
    tombstoned: int


def show(repo: Repository, rev: str = "HEAD") -> ShowResult:
    """One commit in full."""
    oid = repo.resolve(rev)
    commit = repo.objects.commit(oid)
    manifests = {mid: repo.objects.manifest(mid) for mid in commit.manifests}
    tombstoned = sum(len(repo.objects.tombstone(t).targets) for t in commit.tombstones)
    return ShowResult(oid, commit, manifests, tombstoned)


@dataclass(frozen=True)
class StatusResult:
    """What `status` reports."""

    path: Path
    kind: str  # "project" | "global"
    branch: str
    head: ObjectId | None
    head_time: str | None
    chunks: int
    sessions: int
    by_harness: dict[str, dict[str, int]] = field(default_factory=dict)
    model: ModelStamp | None = None


def status(repo: Repository) -> StatusResult:
    """Repository, HEAD, counts by agent and the model stamp."""
    head = repo.head()
    commit = repo.objects.commit(head) if head else None
    stats = repo.stats()
    return StatusResult(
        path=repo.path,
        kind="global" if repo.is_global else "project",
        branch=_short_ref(repo.head_branch()),
        head=head,
        head_time=commit.time if commit else None,
        chunks=stats.chunks,
        sessions=stats.sessions,
        by_harness=stats.by_harness,
        model=commit.model if commit else None,
    )


def fsck(repo: Repository, *, rows: bool = True) -> FsckReport:
    """Verify every object, ref, fragment file and (unless `rows=False`) chunk row."""
    return _fsck(repo, rows=rows)


def config_get(repo: Repository, key: str) -> str | None:
    """A config value (or its default)."""
    return repo.config.get(key)


def config_set(repo: Repository, key: str, value: str) -> str:
    """Set a config value; returns it normalised."""
    with repo.writing():
        return repo.config.set(key, value)


def config_unset(repo: Repository, key: str) -> bool:
    """Remove a config value."""
    with repo.writing():
        return repo.config.unset(key)


def config_list(repo: Repository) -> list[tuple[str, str]]:
    """Every value that is set."""
    return repo.config.items()


_RELATIVE = re.compile(r"^(\d+)\s*([mhdw])$")


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """Read a `--since` value: an ISO date or time (UTC unless it says), or 30m/12h/7d/2w ago."""
    now = now or datetime.now(UTC)
    m = _RELATIVE.match(value.strip().lower())
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        return now - timedelta(**{unit: int(m.group(1))})
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise UsageError(
            f"cannot read --since {value!r}",
            hint="use an ISO date (2026-11-01), a time (2026-11-01T12:00Z) or 30m/12h/7d/2w",
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


class _ProjectRouter:
    """Route sessions as DESIGN §7 says.

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


def index(
    settings: Settings,
    *,
    memory: str | None = None,
    paths: Sequence[str] = (),
    agents: Sequence[str] = (),
    since: str | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> IndexSummary:
    """Index agent transcripts.

    Named paths go into the current memory (like `git add`); without paths, the agents'
    default locations are read and each session is routed to its project memory or the global
    memory.
    """
    when = parse_since(since) if since else None
    harness = agents[0] if len(agents) == 1 else None
    router: Callable[[Turn], Repository | None]
    if paths or memory:
        repo = open_memory(settings, memory)
        if paths:
            sources = explicit_sources(paths, harness=harness)
            sources = [s for s in sources if not agents or s.harness in agents]
        else:
            sources = default_sources(settings, harnesses=agents or None)
        router = lambda _turn: repo  # noqa: E731
        states = SourceStates(repo.path / "index" / "sources.json")
        max_tokens = int(repo.config.get("index.maxTokens") or 256)
    else:
        Repository.discover(settings)  # like every command: refuse when there is no memory
        sources = default_sources(settings, harnesses=agents or None)
        router = _ProjectRouter(settings)
        states = SourceStates(settings.home / "state" / "sources.json")
        max_tokens = 256
    return index_sources(
        sources, router, states, since=when, max_tokens=max_tokens, progress=progress
    )
