"""Distribution verbs: remote, push, fetch, pull, merge, clone.

Each behaves like its git namesake: push refuses a non-fast-forward (exit 4, "fetch first"),
fetch moves only `refs/remotes/…`, pull is fetch + merge, merge fast-forwards when it can and
otherwise writes a merge commit whose content is the union of both sides (tombstones from
either side win). Nothing is ever re-embedded: vectors travel as fragments.

Every push, pull and clone records how it ended (funes.api.syncstate: `funes status` shows it).
Reading a remote memory without cloning (`--memory org/name`) lives in funes.api.memory; the
sync round and `funes add AGENT REMOTE` in funes.api.share; tags and `push --public` in
funes.api.public.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes.api.exclusions import reconcile
from funes.api.memory import merge_in, owns_remote, pick_tip, split_tag
from funes.api.retraction import Adoption, adopt_rewritten
from funes.api.syncstate import record_sync, recorded
from funes.errors import UsageError
from funes.model.ids import ObjectId
from funes.model.refs import HEAD, branch_ref
from funes.remotes import crypt as _crypt
from funes.remotes import sync as _sync
from funes.remotes.base import (
    RemoteNotFoundError,
    RemoteSpec,
    check_remote_name,
    parse_url,
)
from funes.remotes.foreign import is_rust_remote, table_in
from funes.remotes.sync import FetchResult, PushResult, RefUpdate
from funes.storage.repo import PROJECT_DIR, Repository, RepositoryExistsError
from funes.storage.signing import CommitCheck, check_commits
from funes.storage.signing import require_signed as require_all_signed
from funes.storage.transfer import MergeResult, ancestors, commits_between

__all__ = [
    "CloneResult",
    "FetchResult",
    "MergeResult",
    "PullResult",
    "PushResult",
    "RefUpdate",
    "RemoteInfo",
    "clone",
    "current_branch",
    "fetch",
    "merge",
    "progress_or_silent",
    "pull",
    "push",
    "remote_add",
    "remote_list",
    "remote_remove",
    "remote_set_url",
    "signature_note",
]

Progress = Callable[[int, int, str], None]


def progress_or_silent(progress: Progress | None) -> Progress:
    """The caller's progress callback, or one that shows nothing."""
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


def current_branch(repo: Repository) -> str:
    """The branch HEAD points at (`main`)."""
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
    branch = branch or current_branch(repo)
    _sync.check_branch(branch)
    name = remote or _sync.default_remote(repo, branch)
    refuse_selection(repo, name)
    if dry_run:
        return _sync.push(repo, _sync.configured_remote(repo, name), branch, force=force,
                          progress=progress_or_silent(progress), dry_run=True)
    with recorded(repo, name, "push") as outcome:
        result = _sync.push(
            repo, _sync.configured_remote(repo, name), branch, force=force,
            progress=progress_or_silent(progress),
        )
        outcome.pushed(result)
        return result


def refuse_selection(repo: Repository, name: str) -> None:
    """A remote that holds sessions `funes publish` chose never receives the whole memory."""
    if (repo.config.get(f"remote.{name}.selection") or "false") == "true":
        raise UsageError(
            f"remote {name!r} holds a published selection: `funes push` and `sync` would send "
            "the whole memory there",
            hint=f"add sessions to it with `funes publish {name} --sessions …` (or "
            f"--linked-to); `funes config unset remote.{name}.selection` if it is a memory")


def fetch(
    repo: Repository, remote: str | None = None, *, progress: Progress | None = None
) -> FetchResult:
    """Download what a remote has and this memory lacks; move `refs/remotes/<remote>/*`."""
    name = remote or _sync.default_remote(repo, current_branch(repo))
    return _sync.fetch(repo, _sync.configured_remote(repo, name),
                       progress=progress_or_silent(progress))


@dataclass(frozen=True)
class PullResult:
    """A fetch and the merge that followed it."""

    fetch: FetchResult
    merge: MergeResult
    #: Signature status of each commit the pull brought in (funes.storage.signing).
    signatures: tuple[CommitCheck, ...] = ()
    #: Set when the remote had been retracted: the local branch moved onto its images first.
    adopted: Adoption | None = None


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
    current = current_branch(repo)
    branch = branch or current
    _sync.check_branch(branch)
    name = remote or _sync.default_remote(repo, current)
    with recorded(repo, name, "pull"):
        return _pull(repo, name, branch, progress, require_signed)


def _pull(repo: Repository, name: str, branch: str, progress: Progress | None,
          require_signed: bool) -> PullResult:
    fetched = _sync.fetch(
        repo, _sync.configured_remote(repo, name), progress=progress_or_silent(progress)
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
    adopted = adopt_rewritten(repo, name, branch, tip)  # a retracted remote: onto its images
    return PullResult(fetched, _merged(repo, tip, f"{name}/{branch}"), tuple(checks), adopted)


def _incoming_signatures(repo: Repository, tip: ObjectId) -> list[CommitCheck]:
    """Signature checks of the commits reachable from `tip` and not from HEAD."""
    head = repo.head()
    known = ancestors(repo, head) if head else set()
    return check_commits(repo, list(commits_between(repo, tip, known)))


def merge(repo: Repository, rev: str) -> MergeResult:
    """Merge any commit (`origin/main`, an id, a branch) into the current branch."""
    return _merged(repo, repo.resolve(rev), rev)


def _merged(repo: Repository, tip: ObjectId, label: str) -> MergeResult:
    before = repo.head()
    result = merge_in(repo, tip, label)
    reconcile(repo, before)  # exclusions the merge brought hold here too
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
    home = settings.home.expanduser()
    home_before = set(p.name for p in home.iterdir()) if home.is_dir() else None
    target.mkdir(parents=True, exist_ok=True)
    (target / CLONING).write_text(f"{spec.url}\n", "utf-8")
    repo = Repository.init(target, settings, is_global=is_global)
    try:
        with _terminate_as_exit():
            result = _clone_into(repo, spec, progress, require_signed, tag)
    except BaseException:
        _discard(made, before)
        if not made.resolve().is_relative_to(home.resolve()):
            _discard(home, home_before)  # what deciding ownership cached (whoami)
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
    for name in ("objects", "refs", "reflogs", "chunks.lance", "vectors.lance", "vectors16.lance",
                 "index", "remotes", "tmp", "HEAD", "ORIG_HEAD", "config", "PENDING", "lock",
                 "collected.json", "written-here", CLONING):
        path = target / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _clone_into(
    repo: Repository, spec: RemoteSpec, progress: Progress | None, require_signed: bool = False,
    tag: str | None = None,
) -> CloneResult:
    if spec.kind == "dir" and spec.path is not None and table_in(spec.path) is not None:
        return _clone_foreign(repo, spec, progress, tag)
    repo.config.set("remote.origin.url", spec.url)
    # Another user's memory stays untrusted after every pull (funes.api.memory).
    repo.config.set("core.owned", "true" if owns_remote(repo.settings, spec) else "false")
    remote = _sync.open_remote(spec, "origin", repo.settings, repo.path)
    state = remote.state()
    if is_rust_remote(remote, state):
        return _clone_foreign(repo, spec, progress, tag)
    fetched = _sync.fetch(repo, remote, state=state, progress=progress_or_silent(progress))
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


def _clone_foreign(repo: Repository, spec: RemoteSpec, progress: Progress | None,
                   tag: str | None) -> CloneResult:
    """A clone of a Rust-funes memory: its rows imported (funes.api.foreign), no `origin`.

    The source stays read-only: with no `origin`, nothing this memory does (push, sync, the
    hooks) can write to it; `funes import SOURCE` again brings what it gained since. It is
    not the user's, whoever owns the source (`core.owned = false`).
    """
    from funes.api.foreign import import_memory

    if tag is not None:
        raise RemoteNotFoundError(f"{spec.display} is a Rust-funes memory: it has no tags")
    repo.config.unset("remote.origin.url")
    repo.config.set("core.owned", "false")
    import_memory(repo.settings, repo, spec.url if spec.kind == "hf" else str(spec.path),
                  progress=progress)
    fetched = FetchResult("origin", spec.url, None)
    return CloneResult(repo.path, spec.url, repo.head_branch().removeprefix("refs/heads/"),
                       repo.head(), fetched, repo.stats().chunks)


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
