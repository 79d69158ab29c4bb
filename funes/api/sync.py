"""Distribution verbs: remote, push, fetch, pull, merge, clone, and reading a remote memory.

Each behaves like its git namesake: push refuses a non-fast-forward (exit 4, "fetch first"),
fetch moves only `refs/remotes/…`, pull is fetch + merge, merge fast-forwards when it can and
otherwise writes a merge commit whose content is the union of both sides (tombstones from
either side win). Nothing is ever re-embedded: vectors travel as fragments.

Reading a remote memory without cloning (`--memory org/name`) lives in funes.api.memory.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes.api.memory import merge_in, owns_remote, pick_tip, split_tag
from funes.api.memory import owned as owned_memory
from funes.errors import FunesError, UsageError
from funes.model.ids import ObjectId
from funes.model.objects import Commit
from funes.model.refs import HEAD, RefName, branch_ref, check_ref_name, remote_ref
from funes.remotes import crypt as _crypt
from funes.remotes import sync as _sync
from funes.remotes.base import (
    NonFastForwardError,
    RemoteSpec,
    check_remote_name,
    parse_url,
)
from funes.remotes.sync import FetchResult, PushResult, RefUpdate
from funes.storage.repo import PROJECT_DIR, Repository, RepositoryExistsError, now_iso
from funes.storage.signing import CommitCheck, check_commits
from funes.storage.signing import require_signed as require_all_signed
from funes.storage.transfer import MergeResult, ancestors, commits_between

__all__ = [
    "AttachResult",
    "CloneResult",
    "FetchResult",
    "LastSync",
    "MergeResult",
    "PublishCheck",
    "PublishRefusedError",
    "PublishResult",
    "PullResult",
    "PushResult",
    "RefUpdate",
    "RemoteInfo",
    "RemoteStatus",
    "SyncResult",
    "TagInfo",
    "attach_remote",
    "clone",
    "default_remote_name",
    "fetch",
    "is_directory_remote",
    "last_sync",
    "merge",
    "publish",
    "pull",
    "push",
    "record_sync",
    "remote_add",
    "remote_list",
    "remote_remove",
    "remote_set_url",
    "remote_status",
    "sync",
    "sync_note",
    "tag_create",
    "tag_delete",
    "tag_list",
]

Progress = Callable[[int, int, str], None]


def _progress(progress: Progress | None) -> Progress:
    return progress or (lambda done, total, label: None)


# -- remote ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteInfo:
    """A configured remote."""

    name: str
    url: str
    kind: str  # "hf" | "dir"


def _info(name: str, spec: RemoteSpec) -> RemoteInfo:
    return RemoteInfo(name, spec.url, spec.kind)


def remote_add(repo: Repository, name: str, url: str, *, encrypt: bool = False) -> RemoteInfo:
    """Configure a remote (`org/name`, `hf://datasets/org/name[/dir]`, a path, `file://…`).

    `encrypt` seals everything sent to it client-side (funes.remotes.crypt) with the memory
    key for its URL, made now under `$FUNES_HOME/keys/memories/` unless this machine has one.
    """
    check_remote_name(name)
    spec = parse_url(url, repo.settings.cwd)
    with repo.writing():
        if repo.config.get(f"remote.{name}.url"):
            raise UsageError(
                f"remote {name!r} already exists",
                hint=f"change it with `funes remote set-url {name} URL`",
            )
        if encrypt:
            _crypt.ensure_key(repo.settings, spec.url)
            repo.config.set(f"remote.{name}.encrypt", "true")
        repo.config.set(f"remote.{name}.url", spec.url)
    return _info(name, spec)


def remote_set_url(repo: Repository, name: str, url: str) -> RemoteInfo:
    """Point an existing remote elsewhere (its cached state is dropped)."""
    _sync.remote_url(repo, name)
    spec = parse_url(url, repo.settings.cwd)
    with repo.writing():
        repo.config.set(f"remote.{name}.url", spec.url)
        shutil.rmtree(repo.path / "remotes" / name, ignore_errors=True)
    return _info(name, spec)


def remote_remove(repo: Repository, name: str) -> RemoteInfo:
    """Forget a remote: its config, its remote-tracking refs and its caches."""
    url = _sync.remote_url(repo, name)
    _sync.remove_tracking(repo, name)
    with repo.writing():
        for key in ("url", "encrypt"):
            repo.config.unset(f"remote.{name}.{key}")
        for branch in repo.config.subsections("branch"):
            if repo.config.get(f"branch.{branch}.remote") == name:
                repo.config.unset(f"branch.{branch}.remote")
    return _info(name, parse_url(url, repo.settings.cwd))


def remote_list(repo: Repository) -> list[RemoteInfo]:
    """Every configured remote, by name."""
    out = []
    for name in sorted(repo.config.subsections("remote")):
        url = repo.config.get(f"remote.{name}.url")
        if url:
            out.append(_info(name, parse_url(url, repo.settings.cwd)))
    return out


# -- push, fetch, pull, merge ----------------------------------------------------------------


def _current_branch(repo: Repository) -> str:
    return repo.head_branch().removeprefix("refs/heads/")


def push(
    repo: Repository,
    remote: str | None = None,
    branch: str | None = None,
    *,
    force: bool = False,
    progress: Progress | None = None,
    dry_run: bool = False,
) -> PushResult:
    """Send a branch (default: the current one) to a remote (default: its remote or origin).

    Goes through the publish gate: chunks that still look secret are held back and listed in
    `PushResult.held` (the CLI then exits 1); `dry_run` changes nothing anywhere.
    """
    branch = branch or _current_branch(repo)
    _sync.check_branch(branch)
    name = remote or _sync.default_remote(repo, branch)
    if dry_run:
        return _sync.push(repo, _sync.configured_remote(repo, name), branch, force=force,
                          progress=_progress(progress), dry_run=True)
    with _recorded(repo, name, "push"):
        return _sync.push(
            repo, _sync.configured_remote(repo, name), branch, force=force,
            progress=_progress(progress),
        )


def fetch(
    repo: Repository, remote: str | None = None, *, progress: Progress | None = None
) -> FetchResult:
    """Download what a remote has and this memory lacks; move `refs/remotes/<remote>/*`."""
    name = remote or _sync.default_remote(repo, _current_branch(repo))
    return _sync.fetch(repo, _sync.configured_remote(repo, name), progress=_progress(progress))


@dataclass(frozen=True)
class PullResult:
    """A fetch and the merge that followed it."""

    fetch: FetchResult
    merge: MergeResult
    #: Signature status of each commit the pull brought in (funes.storage.signing).
    signatures: tuple[CommitCheck, ...] = ()


def pull(
    repo: Repository,
    remote: str | None = None,
    branch: str | None = None,
    *,
    progress: Progress | None = None,
    require_signed: bool = False,
) -> PullResult:
    """Fetch, then merge the remote's `branch` (default: the current one) into HEAD.

    The incoming commits' signatures are checked and reported; `require_signed` refuses the
    merge (SignatureError, HEAD unchanged) unless every one is signed by a trusted key.
    """
    current = _current_branch(repo)
    branch = branch or current
    _sync.check_branch(branch)
    name = remote or _sync.default_remote(repo, current)
    with _recorded(repo, name, "pull"):
        return _pull(repo, name, branch, progress, require_signed)


def _pull(repo: Repository, name: str, branch: str, progress: Progress | None,
          require_signed: bool) -> PullResult:
    fetched = _sync.fetch(
        repo, _sync.configured_remote(repo, name), progress=_progress(progress)
    )
    tip = fetched.refs.get(branch_ref(branch))
    if tip is None:
        raise UsageError(
            f"remote {name!r} has no branch {branch!r}",
            hint="`funes fetch` then `funes log refs/remotes/" + name + "/…` shows what it has",
        )
    checks = _incoming_signatures(repo, tip)
    if require_signed:
        require_all_signed(checks, f"the pull from {name}")
    return PullResult(fetched, _merged(repo, tip, f"{name}/{branch}"), tuple(checks))


def _incoming_signatures(repo: Repository, tip: ObjectId) -> list[CommitCheck]:
    """Signature checks of the commits reachable from `tip` and not from HEAD."""
    head = repo.head()
    known = ancestors(repo, head) if head else set()
    return check_commits(repo, list(commits_between(repo, tip, known)))


def merge(repo: Repository, rev: str) -> MergeResult:
    """Merge any commit (`origin/main`, an id, a branch) into the current branch."""
    return _merged(repo, repo.resolve(rev), rev)


def _merged(repo: Repository, tip: ObjectId, label: str) -> MergeResult:
    return merge_in(repo, tip, label)


# -- clone -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CloneResult:
    """The memory `clone` made."""

    path: Path
    url: str
    branch: str | None  # None when the remote had no branches (an empty memory)
    head: ObjectId | None
    fetch: FetchResult
    chunks: int
    signatures: tuple[CommitCheck, ...] = ()


def _default_dir(spec: RemoteSpec) -> str:
    if spec.kind == "hf":
        return (spec.subpath or spec.repo_id).rsplit("/", 1)[-1]
    assert spec.path is not None
    path = spec.path
    return path.parent.name if path.name == PROJECT_DIR else path.name


def clone(
    settings: Settings,
    source: str,
    directory: str | None = None,
    *,
    is_global: bool = False,
    progress: Progress | None = None,
    require_signed: bool = False,
) -> CloneResult:
    """A full local copy of a remote memory, with `origin` configured; usable at once.

    Default: a project memory in `./<name>/.funes`; with `directory`, `<directory>/.funes`;
    with `is_global`, the user's memory at `$FUNES_HOME`. A failed clone leaves nothing behind.
    Signatures are checked and reported; `require_signed` refuses (and leaves nothing) unless
    every commit is signed by a trusted key.
    """
    source, tag = split_tag(source, settings.cwd)
    spec = parse_url(source, settings.cwd)
    if is_global:
        if directory:
            raise UsageError("`funes clone --global` takes no DIR", hint="set FUNES_HOME instead")
        target = settings.home
        made = settings.home
    else:
        made = (Path(directory).expanduser() if directory else Path(_default_dir(spec)))
        made = made if made.is_absolute() else settings.cwd / made
        target = made / PROJECT_DIR
    if (target / "FORMAT").exists():
        raise RepositoryExistsError(
            f"a funes memory already exists at {target}",
            hint="clone somewhere else, or add the remote there: `funes remote add origin URL` "
            "and `funes pull`",
        )
    before = set(p.name for p in made.iterdir()) if made.is_dir() else None
    repo = Repository.init(target, settings, is_global=is_global)
    try:
        result = _clone_into(repo, spec, progress, require_signed, tag)
    except BaseException:
        _discard(made, before)
        raise
    return result


def _clone_into(
    repo: Repository, spec: RemoteSpec, progress: Progress | None, require_signed: bool = False,
    tag: str | None = None,
) -> CloneResult:
    repo.config.set("remote.origin.url", spec.url)
    # Another user's memory stays untrusted after every pull (funes.api.memory).
    repo.config.set("core.owned", "true" if owns_remote(repo.settings, spec) else "false")
    remote = _sync.open_remote(spec, "origin", repo.settings, repo.path)
    state = remote.state()
    fetched = _sync.fetch(repo, remote, state=state, progress=_progress(progress))
    record_sync(repo, "origin", True, "clone", None)
    if not state.branches:
        if tag is not None:
            pick_tip(state.refs, tag, remote.display)  # raises: no such tag
        return CloneResult(repo.path, spec.url, None, None, fetched, 0)
    main = branch_ref("main")
    ref = main if main in state.refs else sorted(state.branches)[0]
    branch = ref.removeprefix("refs/heads/")
    if ref != main:
        repo.refs.set_symbolic(HEAD, ref)
    repo.config.set(f"branch.{branch}.remote", "origin")
    if isinstance(remote, _crypt.EncryptedRemote):
        repo.config.set("remote.origin.encrypt", "true")
    tip = pick_tip(state.refs, tag, remote.display) if tag else state.refs[ref]
    checks = _incoming_signatures(repo, tip)
    if require_signed:
        require_all_signed(checks, f"the clone of {spec.display}")
    merged = _merged(repo, tip, f"tag {tag}" if tag else f"origin/{branch}")
    return CloneResult(repo.path, spec.url, branch, merged.new, fetched, merged.chunk_count,
                       tuple(checks))


def _discard(made: Path, before: set[str] | None) -> None:
    """Remove what a failed clone created (FORMAT first: it is what makes a memory)."""
    if before is None:
        shutil.rmtree(made, ignore_errors=True)
        return
    for name in ["FORMAT", *sorted(p.name for p in made.iterdir())]:
        if name in before:
            continue
        path = made / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


# -- sync: fetch, merge, push, retried; its last result recorded -------------------------------

#: Tries of fetch → merge → push when another machine pushes in between (a lost CAS race).
SYNC_ATTEMPTS = 4
#: A memory that has not synced with a remote for this long gets a note in agent output.
STALE_AFTER = 86400.0
#: Largest last-sync record read back (a few fields).
_RECORD_MAX = 1 << 14


@dataclass(frozen=True)
class SyncResult:
    """What `sync` did: fetched and merged the remote's work, then pushed ours."""

    remote: str
    url: str
    merged: MergeResult | None
    pushed: PushResult | None
    attempts: int


@dataclass(frozen=True)
class LastSync:
    """The last sync, push or pull against one remote, as `status` reports it."""

    time: float
    ok: bool
    #: The error's message when it failed, else a summary.
    detail: str
    #: The one command that fixes a failure (None when it succeeded).
    fix: str | None
    #: When a sync last succeeded (0: never).
    last_ok: float


@dataclass(frozen=True)
class RemoteStatus:
    """One remote in `status`: how far apart the two sides are, and how the last sync went."""

    name: str
    url: str
    #: Commits of the current branch the remote lacks, and the other way round, as of the
    #: last fetch (None: never fetched).
    ahead: int | None
    behind: int | None
    last: LastSync | None


def sync(
    repo: Repository,
    remote: str | None = None,
    *,
    push: bool = True,
    attempts: int = SYNC_ATTEMPTS,
    progress: Progress | None = None,
) -> SyncResult:
    """Fetch, merge the remote's branch into ours (union), push the result; retry a lost race.

    When another machine pushes between our fetch and our push, the remote's compare-and-swap
    refuses ours (NonFastForwardError): the whole round runs again, up to `attempts` times,
    so two machines that push at once both end up in the remote with no manual step. A remote
    that does not exist yet is created by the push (private on the Hub). `push=False` only
    brings this memory up to date (what a session start wants). The outcome, success or
    failure, is recorded for `status` (`last_sync`).

    Raises:
        NonFastForwardError: the race was lost `attempts` times in a row (exit 4).
        RemoteError: the remote cannot be reached or refuses us (exit 5); nothing local is lost.
    """
    branch = _current_branch(repo)
    _sync.check_branch(branch)
    name = remote or _sync.default_remote(repo, branch)
    with _recorded(repo, name, "sync"):
        handle = _sync.configured_remote(repo, name)
        merged: MergeResult | None = None
        pushed: PushResult | None = None
        for attempt in range(1, max(1, attempts) + 1):
            state = handle.state()
            if state.exists:
                fetched = _sync.fetch(repo, handle, state=state, progress=_progress(progress))
                tip = fetched.refs.get(branch_ref(branch))
                if tip is not None:
                    merged = _merged(repo, tip, f"{name}/{branch}")
            if not push or repo.head() is None:
                return SyncResult(name, handle.spec.url, merged, None, attempt)
            try:
                pushed = _sync.push(repo, handle, branch, progress=_progress(progress))
            except NonFastForwardError:
                if attempt >= attempts:
                    raise
                continue
            return SyncResult(name, handle.spec.url, merged, pushed, attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def default_remote_name(repo: Repository) -> str:
    """The remote a bare `funes sync` (or push, pull) uses for the current branch."""
    return _sync.default_remote(repo, _current_branch(repo))


def _record_path(repo: Repository, name: str) -> Path:
    return repo.path / "remotes" / name / "last-sync.json"


def last_sync(repo: Repository, name: str) -> LastSync | None:
    """The recorded outcome of the last sync, push or pull against remote `name`."""
    import json

    try:
        with _record_path(repo, name).open("rb") as fh:
            raw = fh.read(_RECORD_MAX + 1)
        data = json.loads(raw) if len(raw) <= _RECORD_MAX else {}
        return LastSync(float(data["time"]), bool(data["ok"]), str(data["detail"])[:500],
                        str(data["fix"])[:200] if data.get("fix") else None,
                        float(data.get("last_ok") or 0))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_sync(repo: Repository, name: str, ok: bool, detail: str, fix: str | None) -> None:
    """Record how a sync against `name` ended (`funes status` shows it; `last_sync` reads it)."""
    import json
    import time

    from funes.storage.atomic import write_atomic

    now = time.time()
    before = last_sync(repo, name)
    body = {"time": now, "ok": ok, "detail": detail, "fix": fix,
            "last_ok": now if ok else (before.last_ok if before else 0)}
    path = _record_path(repo, name)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(body).encode())


@contextlib.contextmanager
def _recorded(repo: Repository, name: str, verb: str) -> Iterator[None]:
    """Record how a sync, push or pull against `name` ended (what `status` shows)."""
    try:
        yield
    except FunesError as exc:
        record_sync(repo, name, False, exc.message, _fix_for(repo, exc, name))
        raise
    record_sync(repo, name, True, verb, None)


def _fix_for(repo: Repository, exc: FunesError, name: str) -> str:
    """The one command that gets a failed sync going again.

    On the Hub, a refusal (HTTP 401/403, or "no such repository, or no access", which is what
    the Hub answers a revoked token) needs a fresh token first.
    """
    from funes.remotes.base import RemoteNotFoundError

    url = repo.config.get(f"remote.{name}.url") or ""
    refused = isinstance(exc, RemoteNotFoundError) or "not allowed" in exc.message
    if url.startswith("hf://") and refused:
        return f"hf auth login && funes sync {name}"
    return f"funes sync {name}"


def remote_status(repo: Repository) -> list[RemoteStatus]:
    """Every remote: ahead/behind of the current branch against its tracking ref, last sync."""
    branch = _current_branch(repo)
    head = repo.head()
    out = []
    for info in remote_list(repo):
        tracking = repo.refs.read(remote_ref(info.name, branch))
        ahead = behind = None
        if tracking is not None and repo.objects.has(tracking):
            theirs = ancestors(repo, tracking)
            ours = ancestors(repo, head) if head else set()
            ahead, behind = len(ours - theirs), len(theirs - ours)
        out.append(RemoteStatus(info.name, info.url, ahead, behind,
                                last_sync(repo, info.name)))
    return out


def sync_note(repo: Repository, now: float | None = None) -> str | None:
    """One line for agent output when the memory has not synced with a remote for long."""
    import time
    from datetime import UTC, datetime

    stale_after = float(repo.config.get("sync.staleAfter") or STALE_AFTER)
    now = time.time() if now is None else now
    for name in sorted(repo.config.subsections("remote")):
        last = last_sync(repo, name)
        if last is None or (last.ok and now - last.time < stale_after):
            continue
        if last.last_ok and now - last.last_ok < stale_after:
            continue
        since = (datetime.fromtimestamp(last.last_ok, UTC).strftime("%Y-%m-%d %H:%M UTC")
                 if last.last_ok else "never")
        why = "" if last.ok else f" ({last.detail})"
        return (f"# note: this memory has not synced with {name} since {since}{why}; "
                f"run `{last.fix or f'funes sync {name}'}`")
    return None


# -- one memory on every machine: `funes add AGENT REMOTE` -------------------------------------


@dataclass(frozen=True)
class AttachResult:
    """What `attach_remote` did to make a remote memory this machine's memory too."""

    path: Path  # the local memory
    remote: str
    url: str
    #: "cloned" (the remote existed, this memory did not), "created" (the remote did not
    #: exist: made from this memory, private), "synced" (both existed: fetch, merge, push).
    action: str
    owned: bool
    synced: SyncResult | None = None


def is_directory_remote(text: str, cwd: Path) -> bool:
    """`file://…`, or a directory laid out as a remote (objects/ but no FORMAT): not a memory."""
    if text.startswith("file://"):
        return True
    if "://" in text:
        return False
    path = Path(text).expanduser()
    path = path if path.is_absolute() else cwd / path
    if (path / "FORMAT").is_file() or (path / PROJECT_DIR / "FORMAT").is_file():
        return False
    return (path / "objects").is_dir() and (path / "refs").is_dir()


def attach_remote(
    settings: Settings,
    url: str,
    *,
    project: bool = False,
    progress: Progress | None = None,
) -> AttachResult:
    """Make the remote memory at `url` this machine's memory; the same call on every machine.

    The local memory is the project memory when `project` is set (`./.funes`, made if
    missing) or the current directory is inside one, else the global memory. Then:

    - the local memory does not exist and the remote does: clone it there;
    - the remote does not exist: create it from the local memory (made if missing; private on
      the Hub) and push what there is;
    - both exist: configure the remote (as `origin` when free) and sync (fetch, merge, push).

    Idempotent: a second call finds both and syncs. The current branch tracks the remote, so
    the agent hooks sync with it.
    """
    url, tag = split_tag(url, settings.cwd)
    if tag is not None:
        raise UsageError(f"{url}@{tag} is a fixed revision: it cannot be this machine's memory",
                         hint=f"`funes add AGENT {url}` shares the memory; `funes clone "
                         f"{url}@{tag}` reads the tag")
    spec = parse_url(url, settings.cwd)
    target = _attach_target(settings, project)
    with tempfile.TemporaryDirectory(prefix="funes-probe-") as scratch:  # no cache left behind
        exists_remote = _sync.open_remote(spec, "origin", settings, Path(scratch)).state().exists
    if not (target / "FORMAT").is_file() and exists_remote:
        cloned = clone(settings, spec.url, str(target.parent) if not _is_home(settings, target)
                       else None, is_global=_is_home(settings, target), progress=progress)
        repo = Repository.open(cloned.path, settings)
        return AttachResult(repo.path, "origin", spec.url, "cloned", owned_memory(repo))
    if (target / "FORMAT").is_file():
        repo = Repository.open(target, settings)
    else:
        repo = Repository.init(target, settings, is_global=_is_home(settings, target))
    name = _remote_for(repo, spec)
    with repo.writing():
        repo.config.set(f"branch.{_current_branch(repo)}.remote", name)
    if not exists_remote:
        handle = _sync.configured_remote(repo, name)
        if repo.head() is None:
            handle.create()
            record_sync(repo, name, True, "created", None)
            return AttachResult(repo.path, name, spec.url, "created", owned_memory(repo))
        result = sync(repo, name, progress=progress)
        return AttachResult(repo.path, name, spec.url, "created", owned_memory(repo), result)
    result = sync(repo, name, progress=progress)
    return AttachResult(repo.path, name, spec.url, "synced", owned_memory(repo), result)


def _is_home(settings: Settings, target: Path) -> bool:
    return target.resolve() == settings.home.expanduser().resolve()


def _attach_target(settings: Settings, project: bool) -> Path:
    """Where `attach_remote` keeps the memory: the project one, else the global one."""
    if project:
        return (settings.cwd / PROJECT_DIR).resolve()
    here = settings.cwd.resolve()
    for directory in (here, *here.parents):
        if (directory / PROJECT_DIR / "FORMAT").is_file():
            return directory / PROJECT_DIR
    return settings.home.expanduser().resolve()


def _remote_for(repo: Repository, spec: RemoteSpec) -> str:
    """The configured remote pointing at `spec`, else a new one (`origin` when free)."""
    for info in remote_list(repo):
        if info.url == spec.url:
            return info.name
    names = set(repo.config.subsections("remote"))
    name = "origin"
    if name in names:
        base = re.sub(r"[^A-Za-z0-9_-]+", "-", spec.display.rsplit("/", 1)[-1]).strip("-")
        name = base or "shared"
        n = 2
        while name in names:
            name, n = f"{base or 'shared'}-{n}", n + 1
    remote_add(repo, name, spec.url)
    return name


# -- what to say about incoming signatures -----------------------------------------------------


def signature_note(settings: Settings, checks: tuple[CommitCheck, ...]) -> str | None:
    """The line `pull` and `clone` print about incoming commits not signed by a trusted key.

    Bad signatures (tampering) are always reported. Unsigned commits and unknown keys are news
    only to a user who trusts keys (`funes keys`); anyone else hears it once, with what turns
    the checks on, then never again (a marker under `$FUNES_HOME/state/`).
    """
    from funes.storage.signing import trusted_keys

    counts: dict[str, int] = {}
    for c in checks:
        if c.status != "good":
            counts[c.status] = counts.get(c.status, 0) + 1
    if not counts:
        return None
    parts = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    line = f"signatures: {parts} commit(s) not signed by a trusted key (`funes fsck --verify`)"
    if "bad" in counts or trusted_keys(settings):
        return line
    marker = settings.home / "state" / "signature-note-shown"
    if marker.exists():
        return None
    with contextlib.suppress(OSError):
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    return (f"{line}\n(shown once: you trust no signing keys; `funes keys trust PUBKEY` "
            "turns these reports on)")


# -- name what you publish: tags ---------------------------------------------------------------


@dataclass(frozen=True)
class TagInfo:
    """A tag: a name for one commit, which travels with push and fetch and never moves."""

    name: str
    commit: ObjectId
    time: str | None  # the tagged commit's time


def _tag_ref(name: str) -> RefName:
    if not name or name.startswith("-"):
        raise UsageError(f"invalid tag name {name!r}", hint="use letters, digits, '.', '-', '_'")
    try:
        return check_ref_name(f"refs/tags/{name}")
    except FunesError:
        raise UsageError(f"invalid tag name {name!r}",
                         hint="use letters, digits, '.', '-', '_' (like `v1.2` or `release-3`)"
                         ) from None


def tag_create(repo: Repository, name: str, rev: str | None = None) -> TagInfo:
    """Name commit `rev` (default HEAD) `name`; a tag that exists is never moved (exit 2).

    `funes push` sends the tags of the history it publishes; `funes fetch` (and clone, pull,
    sync) brings the remote's; `--memory org/name@TAG` and `funes clone org/name@TAG` read
    the memory at that tag.
    """
    ref = _tag_ref(name)
    oid = repo.resolve(rev or "HEAD")
    with repo.writing():
        current = repo.refs.read(ref)
        if current is not None:
            raise UsageError(f"tag {name!r} already exists (at {current[:12]})",
                             hint=f"`funes tag -d {name}` first to name another commit")
        repo.refs.set_if_equals(ref, None, oid, who=repo._who(), time=now_iso(),
                                message=f"tag {name}")
    return TagInfo(name, oid, repo.objects.commit(oid).time)


def tag_delete(repo: Repository, name: str) -> TagInfo:
    """Remove a local tag (a pushed one stays on the remote: tags do not move there)."""
    ref = _tag_ref(name)
    with repo.writing():
        oid = repo.refs.read(ref)
        if oid is None:
            raise UsageError(f"no tag {name!r}", hint="`funes tag` lists them")
        repo.refs.delete_if_equals(ref, oid, who=repo._who(), time=now_iso())
    return TagInfo(name, oid, None)


def tag_list(repo: Repository) -> list[TagInfo]:
    """Every tag, by name."""
    out = []
    for ref, oid in repo.refs.iter_refs("refs/tags/"):
        commit = repo.objects.commit(oid) if repo.objects.has(oid) else None
        out.append(TagInfo(ref.removeprefix("refs/tags/"), oid, commit.time if commit else None))
    return sorted(out, key=lambda t: t.name)


# -- making a memory public --------------------------------------------------------------------


class PublishRefusedError(FunesError):
    """`push --public` found passages that still look secret: nothing was made public."""


@dataclass(frozen=True)
class PublishCheck:
    """What would become public, as the publish gate saw it."""

    remote: str
    url: str
    commits: int
    scanned: int  # chunks the gate scanned: every chunk the remote's history names


@dataclass(frozen=True)
class PublishResult:
    """What `push --public` did."""

    push: PushResult
    check: PublishCheck
    public: bool  # False when the confirmation was declined


def publish(
    repo: Repository,
    remote: str | None = None,
    *,
    confirm: Callable[[PublishCheck], bool],
    progress: Progress | None = None,
) -> PublishResult:
    """Push, run the publish gate over everything the remote holds, confirm, make it public.

    Everything that would become public is scanned: the whole history reachable from the
    remote's branches and tags after the push (fetched first, so another machine's pushes are
    scanned too), not just what this push sends. `confirm` sees the summary and may decline.

    Raises:
        UsageError: the remote is not on the Hub (only the Hub has visibility) or is encrypted.
        PublishRefusedError: the push held chunks back, or the scan flagged chunks already on
            the remote (exit 1, the memory stays private).
    """
    branch = _current_branch(repo)
    name = remote or _sync.default_remote(repo, branch)
    spec = parse_url(_sync.remote_url(repo, name), repo.settings.cwd)
    if spec.kind != "hf":
        raise UsageError(f"remote {name!r} is a directory: only a Hub memory can be made public",
                         hint="share a directory remote with the file system's permissions")
    if (repo.config.get(f"remote.{name}.encrypt") or "false") == "true":
        raise UsageError(f"remote {name!r} is encrypted: making it public would publish "
                         "ciphertext nobody can read", hint="push to an unencrypted remote")
    pushed = push(repo, name, branch, progress=progress)
    if pushed.held:
        raise PublishRefusedError(
            f"{len(pushed.held)} chunk(s) still look secret and were held back; "
            "the memory stays private",
            hint="run `funes push --dry-run` to list them, `funes scrub` to redact them")
    handle = _sync.configured_remote(repo, name)
    state = handle.state()
    _sync.fetch(repo, handle, state=state, progress=_progress(progress))
    everything: dict[ObjectId, Commit] = {}
    for tip in state.refs.values():
        for oid, commit in commits_between(repo, tip, set(everything)):
            everything[oid] = commit
    from funes.remotes import gate

    tip = state.refs.get(branch_ref(branch)) or pushed.new
    scan = gate.run_gate(repo, list(everything.items()), tip, {}, dry_run=True)
    check = PublishCheck(name, spec.url, len(everything), scan.scanned)
    if scan.held:
        raise PublishRefusedError(
            f"{len(scan.held)} chunk(s) on {spec.display} still look secret; the memory stays "
            "private",
            hint="`funes forget --chunk ID` then `funes gc` and push again; or keep it private")
    if not confirm(check):
        return PublishResult(pushed, check, False)
    from funes.remotes.hf import set_visibility

    set_visibility(repo.settings.hf_endpoint, spec.repo_id, private=False)
    return PublishResult(pushed, check, True)
