"""Distribution verbs: remote, push, fetch, pull, merge, clone, and reading a remote memory.

Each behaves like its git namesake: push refuses a non-fast-forward (exit 4, "fetch first"),
fetch moves only `refs/remotes/…`, pull is fetch + merge, merge fast-forwards when it can and
otherwise writes a merge commit whose content is the union of both sides (tombstones from
either side win). Nothing is ever re-embedded: vectors travel as fragments.

`open_remote_memory` serves `--memory org/name`: a private, read-only copy of the remote at
its current revision, kept under `$FUNES_HOME/cache/remotes/`, so a query reads one pinned
state and a repeated query costs one small request.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes.errors import FunesError, RemoteError, UsageError
from funes.model.ids import ObjectId
from funes.model.refs import HEAD, branch_ref
from funes.remotes import crypt as _crypt
from funes.remotes import sync as _sync
from funes.remotes.base import (
    RemoteNotFoundError,
    RemoteSpec,
    check_remote_name,
    looks_like_remote,
    parse_url,
)
from funes.remotes.sync import FetchResult, PushResult, RefUpdate
from funes.retrieval import indexes
from funes.storage.lock import WriteLock
from funes.storage.repo import PROJECT_DIR, Repository, RepositoryExistsError
from funes.storage.signing import CommitCheck, check_commits
from funes.storage.signing import require_signed as require_all_signed
from funes.storage.transfer import MergeResult, ancestors, commits_between, is_ancestor
from funes.storage.transfer import merge as _merge

__all__ = [
    "CloneResult",
    "FetchResult",
    "MemoryChoice",
    "MergeResult",
    "PullResult",
    "PushResult",
    "RefUpdate",
    "RemoteInfo",
    "clone",
    "fetch",
    "is_remote_memory",
    "merge",
    "open_remote_memory",
    "pull",
    "push",
    "read_memory",
    "remote_add",
    "remote_label",
    "remote_list",
    "remote_remove",
    "remote_set_url",
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
    return _sync.push(
        repo, _sync.configured_remote(repo, name), branch, force=force,
        progress=_progress(progress), dry_run=dry_run,
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
    """Merge, then bring the ANN index up to date with the vectors that came in.

    A memory that grows by pulling never runs `funes embed`, which is where the index is
    otherwise built; without this a pulled 100k-chunk memory would search exactly (≈200 ms a
    query instead of ≈40 ms, bench/results/recall.md).
    """
    result = _merge(repo, tip, label=label)
    indexes.ensure_vectors(repo)
    return result


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
    if (target / CLONING).exists():
        _discard_attempt(target)  # a clone killed half-way (SIGKILL, power): start again
        with contextlib.suppress(OSError):
            target.rmdir()
            if made != target and not is_global:
                made.rmdir()  # only if the failed clone made it and left it empty
    if (target / "FORMAT").exists():
        raise RepositoryExistsError(
            f"a funes memory already exists at {target}",
            hint="clone somewhere else, or add the remote there: `funes remote add origin URL` "
            "and `funes pull`",
        )
    before = set(p.name for p in made.iterdir()) if made.is_dir() else None
    target.mkdir(parents=True, exist_ok=True)
    (target / CLONING).write_text(f"{spec.url}\n", "utf-8")
    repo = Repository.init(target, settings, is_global=is_global)
    try:
        with _terminate_as_exit():
            result = _clone_into(repo, spec, progress, require_signed)
    except BaseException:
        _discard(made, before)
        raise
    (target / CLONING).unlink()
    return result


#: Present while a clone is in progress: a memory holding it is an unfinished clone that the
#: next `funes clone` of the same place removes instead of refusing.
CLONING = "CLONING"


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM during a clone unwinds like Ctrl-C (so the half-made memory is removed)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _discard_attempt(target: Path) -> None:
    """Remove what an interrupted clone left in `target` (its repository files only)."""
    with contextlib.suppress(FileNotFoundError):
        (target / "FORMAT").unlink()
    for name in ("objects", "refs", "reflogs", "chunks.lance", "vectors.lance", "index",
                 "remotes", "tmp", "HEAD", "ORIG_HEAD", "config", "PENDING", "lock",
                 "collected.json", CLONING):
        path = target / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _clone_into(
    repo: Repository, spec: RemoteSpec, progress: Progress | None, require_signed: bool = False
) -> CloneResult:
    repo.config.set("remote.origin.url", spec.url)
    remote = _sync.open_remote(spec, "origin", repo.settings, repo.path)
    state = remote.state()
    fetched = _sync.fetch(repo, remote, state=state, progress=_progress(progress))
    if not state.refs:
        return CloneResult(repo.path, spec.url, None, None, fetched, 0)
    main = branch_ref("main")
    ref = main if main in state.refs else sorted(state.refs)[0]
    branch = ref.removeprefix("refs/heads/")
    if ref != main:
        repo.refs.set_symbolic(HEAD, ref)
    repo.config.set(f"branch.{branch}.remote", "origin")
    if isinstance(remote, _crypt.EncryptedRemote):
        repo.config.set("remote.origin.encrypt", "true")
    checks = _incoming_signatures(repo, state.refs[ref])
    if require_signed:
        require_all_signed(checks, f"the clone of {spec.display}")
    merged = _merged(repo, state.refs[ref], f"origin/{branch}")
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


# -- reading a remote memory without cloning ------------------------------------------------


def is_remote_memory(text: str, cwd: Path | None = None) -> bool:
    """True when `--memory TEXT` names a remote (`org/name`, `hf://…`, `file://…`)."""
    return looks_like_remote(text, cwd or Path.cwd())


def _cache_root(settings: Settings) -> Path:
    return settings.home / "cache" / "remotes"


def open_remote_memory(settings: Settings, url: str) -> Repository:
    """A remote memory at its current revision, as a local read-only copy (not owned).

    The copy lives in `$FUNES_HOME/cache/remotes/<name>/`; only missing immutable files are
    downloaded, so a call when the remote has not moved costs one small request (its refs).
    The copy is marked `core.owned=false`: recall marks its passages as not the user's.

    Raises:
        RemoteError: the remote cannot be reached or read (the message names it).
    """
    spec = parse_url(url, settings.cwd)
    root = _cache_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    cache = root / spec.cache_name
    # One process fills a cache at a time; readers of a filled cache never wait long.
    with WriteLock(root / f"{spec.cache_name}.lock", timeout=60):
        for attempt in (1, 2):
            repo = _open_cache(settings, cache, spec)
            remote = _sync.open_remote(spec, "origin", settings, repo.path)
            try:
                state = remote.state()
            except FunesError:
                if repo.head() is None:  # never filled: leave no empty copy behind
                    shutil.rmtree(cache, ignore_errors=True)
                raise
            if not state.exists or not state.refs:
                raise RemoteNotFoundError(
                    f"{remote.display}: no funes memory there",
                    hint="check the name; a private memory needs a token (HF_TOKEN)",
                )
            main = branch_ref("main")
            tip = state.refs.get(main) or state.refs[sorted(state.refs)[0]]
            head = repo.head()
            if head == tip:
                return repo
            _sync.fetch(repo, remote, state=state)
            if head is None or is_ancestor(repo, head, tip):
                _merged(repo, tip, "origin")
                return repo
            # The remote was rewritten (a forced push): start the copy over.
            shutil.rmtree(cache, ignore_errors=True)
            if attempt == 2:
                break
    raise RemoteError(f"{spec.display}: cannot make a consistent local copy")


def _open_cache(settings: Settings, cache: Path, spec: RemoteSpec) -> Repository:
    if (cache / "FORMAT").is_file():
        return Repository.open(cache, settings)
    shutil.rmtree(cache, ignore_errors=True)  # a copy that never finished
    repo = Repository.init(cache, settings)
    repo.config.set("core.owned", "false")
    repo.config.set("remote.origin.url", spec.url)
    return repo


def remote_label(repo: Repository) -> str | None:
    """What `--memory` takes to read this memory again, if it is a remote's cached copy."""
    if repo.path.resolve().parent != _cache_root(repo.settings).resolve():
        return None
    url = repo.config.get("remote.origin.url")
    if not url:
        return None
    spec = parse_url(url, repo.settings.cwd)
    return spec.display if spec.kind == "hf" else f"file://{spec.path}"


@dataclass(frozen=True)
class MemoryChoice:
    """The memory a read-only command (recall, get) should read, and what to tell the user."""

    repo: Repository
    label: str  # how output names it
    owned: bool
    warning: str | None = None  # set when the remote was unreachable and a fallback is read


def read_memory(settings: Settings, memory: str | None = None) -> MemoryChoice:
    """Open `--memory` for reading, falling back when a remote memory is unreachable.

    A remote that cannot be reached falls back to its cached copy (if an earlier call made
    one), else to the local memory found from the current directory, with a warning naming
    the remote; with neither, the `RemoteError` propagates (exit 5).
    """
    from funes.api.repo import open_memory

    if not memory or not is_remote_memory(memory, settings.cwd):
        repo = open_memory(settings, memory)
        return MemoryChoice(repo, remote_label(repo) or str(repo.path), _owned(repo))
    spec = parse_url(memory, settings.cwd)
    try:
        repo = open_remote_memory(settings, memory)
        return MemoryChoice(repo, remote_label(repo) or spec.display, False)
    except RemoteError as exc:
        cached = _cache_root(settings) / spec.cache_name
        if (cached / "FORMAT").is_file():
            repo = Repository.open(cached, settings)
            commit = repo.head_commit()
            if commit is not None:
                return MemoryChoice(
                    repo, spec.display, False,
                    f"{exc.message}; reading the copy cached at {commit.time}",
                )
        with contextlib.suppress(FunesError):
            local = Repository.discover(settings)
            return MemoryChoice(
                local, str(local.path), _owned(local),
                f"{exc.message}; reading the local memory {local.path} instead",
            )
        raise


def _owned(repo: Repository) -> bool:
    return (repo.config.get("core.owned") or "true") == "true"
