"""Repository verbs: init, log, show, status, fsck, config (which memory: funes.api.memory)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from funes._env import Settings
from funes.api.exclusions import ExclusionInfo, exclusion_list, set_exclusion_key
from funes.api.syncstate import RemoteStatus, remote_status
from funes.errors import UsageError
from funes.model.ids import ObjectId
from funes.model.objects import Commit, Link, Manifest, ModelStamp
from funes.storage.exclusions import CONFIG_KEYS
from funes.storage.fsck import FsckReport
from funes.storage.fsck import fsck as _fsck
from funes.storage.repo import PROJECT_DIR, Repository

EXCLUDE_KEYS = frozenset(CONFIG_KEYS.values())


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
    #: The code commits this memory commit links (read only when `log(links=True)`).
    links: tuple[Link, ...] = ()


def log(
    repo: Repository, rev: str | None = None, limit: int | None = None, *, links: bool = False
) -> list[LogEntry]:
    """Commits reachable from `rev` (default HEAD), newest first.

    With `links`, each entry also carries the code commits it links (`funes log --links`).
    """
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
        linked = tuple(repo.objects.link(lid) for lid in commit.links) if links else ()
        out.append(LogEntry(oid, commit, tuple(decorations.get(oid, ())), linked))
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
    #: The redaction rules the stored chunks met, when older than the installed ones.
    redaction_outdated: str | None = None
    redaction_rules: str = ""
    #: Each remote: ahead/behind (as of the last fetch, or checked now), how the last sync went.
    remotes: tuple[RemoteStatus, ...] = ()
    #: The exclusions the memory honours and what they hide (funes.api.exclusions).
    exclusions: tuple[ExclusionInfo, ...] = ()
    #: The memory is the user's own (else its passages are marked, but the user's own turns).
    owned: bool = True
    #: Which rule decides whether a commit vouches for its passages (SECURITY.md).
    trust_rule: str = ""


def status(repo: Repository, *, refresh: bool = False) -> StatusResult:
    """Repository, HEAD, counts by agent, the model stamp, scrub advice, each remote, trust.

    `refresh` asks each remote where its branch is now (one small request each), so a
    memory that is behind says so (funes.api.syncstate.remote_status).
    """
    from funes.api.memory import is_cache, owned
    from funes.ingest.redact import rules_version
    from funes.ingest.scrub import rules_outdated
    from funes.storage.signing import trust_rule

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
        redaction_outdated=rules_outdated(repo),
        redaction_rules=rules_version(),
        # a remote's read-only copy was brought up to date when it was opened
        remotes=tuple(remote_status(repo, refresh=refresh and not is_cache(repo))),
        exclusions=tuple(exclusion_list(repo)),
        owned=owned(repo),
        trust_rule=trust_rule(repo.settings),
    )


def fsck(repo: Repository, *, rows: bool = True, verify: bool = False) -> FsckReport:
    """Verify every object, ref, fragment file and (unless `rows=False`) chunk row.

    `verify` also checks commit signatures: a bad or malformed signature is damage; unsigned
    commits and unknown signers are warnings (funes.api.security.check_signatures).
    """
    report = _fsck(repo, rows=rows)
    if verify:
        from funes.api.security import add_signature_problems

        add_signature_problems(repo, report)
    return report


def config_get(repo: Repository, key: str) -> str | None:
    """A config value (or its default)."""
    return repo.config.get(key)


def config_set(repo: Repository, key: str, value: str) -> str:
    """Set a config value; returns it normalised.

    An `exclude.*` key is an exclusion: what it adds is hidden at once and recorded in the
    memory, what it drops is lifted (funes.api.exclusions.set_exclusion_key).
    """
    if key in EXCLUDE_KEYS:
        return set_exclusion_key(repo, key, value) or ""
    with repo.writing():
        return repo.config.set(key, value)


def config_unset(repo: Repository, key: str) -> bool:
    """Remove a config value (an `exclude.*` key ends those exclusions, see `config_set`)."""
    if key in EXCLUDE_KEYS:
        had = repo.config.get(key) is not None
        set_exclusion_key(repo, key, None)
        return had
    with repo.writing():
        return repo.config.unset(key)


def config_list(repo: Repository) -> list[tuple[str, str]]:
    """Every value that is set."""
    return repo.config.items()
