"""One memory on every machine: `funes sync` and `funes add AGENT REMOTE`.

- `sync` is fetch → merge (union) → push as one round; when another machine pushes between
  our fetch and our push, the remote's compare-and-swap refuses ours and the round runs again,
  a bounded number of times, so concurrent syncs converge with no manual step. The agent hooks
  run it at session boundaries (funes.api.hookworker).
- `attach_remote` is what `funes add AGENT REMOTE` does before wiring the agent: the same call
  on every machine clones the remote, creates it from the local memory, or syncs the two.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes.api.exclusions import reconcile
from funes.api.memory import merge_in, split_tag
from funes.api.memory import owned as owned_memory
from funes.api.remotes import (
    Progress,
    PushResult,
    clone,
    current_branch,
    progress_or_silent,
    refuse_selection,
    remote_add,
    remote_list,
)
from funes.api.retraction import adopt_rewritten
from funes.api.syncstate import record_sync, recorded
from funes.errors import UsageError
from funes.model.refs import branch_ref
from funes.remotes import sync as _sync
from funes.remotes.base import NonFastForwardError, RemoteSpec, parse_url
from funes.remotes.foreign import refuse_writing
from funes.storage.repo import PROJECT_DIR, Repository
from funes.storage.transfer import MergeResult

__all__ = ["SYNC_ATTEMPTS", "AttachResult", "SyncResult", "attach_remote", "attach_target",
           "is_directory_remote", "sync"]

#: Tries of fetch → merge → push when another machine pushes in between (a lost CAS race).
SYNC_ATTEMPTS = 4


@dataclass(frozen=True)
class SyncResult:
    """What `sync` did: fetched and merged the remote's work, then pushed ours."""

    remote: str
    url: str
    merged: MergeResult | None
    pushed: PushResult | None
    attempts: int


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
    branch = current_branch(repo)
    _sync.check_branch(branch)
    name = remote or _sync.default_remote(repo, branch)
    refuse_selection(repo, name)
    with recorded(repo, name, "sync") as outcome:
        handle = _sync.configured_remote(repo, name)
        merged: MergeResult | None = None
        pushed: PushResult | None = None
        for attempt in range(1, max(1, attempts) + 1):
            state = handle.state()
            if state.exists:
                fetched = _sync.fetch(repo, handle, state=state,
                                      progress=progress_or_silent(progress))
                tip = fetched.refs.get(branch_ref(branch))
                if tip is not None:
                    adopt_rewritten(repo, name, branch, tip)  # a retracted remote
                    before = repo.head()
                    merged = merge_in(repo, tip, f"{name}/{branch}")
                    reconcile(repo, before)  # exclusions the merge brought hold here too
            if not push or repo.head() is None:
                return SyncResult(name, handle.spec.url, merged, None, attempt)
            try:
                pushed = _sync.push(repo, handle, branch, progress=progress_or_silent(progress))
            except NonFastForwardError:
                if attempt >= attempts:
                    raise
                continue
            outcome.pushed(pushed)
            return SyncResult(name, handle.spec.url, merged, pushed, attempt)
    raise AssertionError("unreachable")  # pragma: no cover


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
    fill: Callable[[Repository], int] | None = None,
) -> AttachResult:
    """Make the remote memory at `url` this machine's memory; the same call on every machine.

    `fill(repo)` runs on the local memory before anything is pushed (`funes add` indexes the
    agent's existing sessions there) and returns how many chunks it added: so the remote is
    created with this machine's history, a clone sends it back, and the second machine's
    `add` brings the first machine's history and sends its own.

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
    target = attach_target(settings, project)
    with tempfile.TemporaryDirectory(prefix="funes-probe-") as scratch:  # no cache left behind
        probe = _sync.open_remote(spec, "origin", settings, Path(scratch))
        probed = probe.state()
        refuse_writing(probe, probed, spec.display)  # a Rust funes' memory is only read
        exists_remote = probed.exists
    if not (target / "FORMAT").is_file() and exists_remote:
        cloned = clone(settings, spec.url, str(target.parent) if not _is_home(settings, target)
                       else None, is_global=_is_home(settings, target), progress=progress)
        repo = Repository.open(cloned.path, settings)
        if fill is not None and fill(repo):
            result = sync(repo, "origin", progress=progress)
            return AttachResult(repo.path, "origin", spec.url, "cloned", owned_memory(repo),
                                result)
        return AttachResult(repo.path, "origin", spec.url, "cloned", owned_memory(repo))
    if (target / "FORMAT").is_file():
        repo = Repository.open(target, settings)
    else:
        repo = Repository.init(target, settings, is_global=_is_home(settings, target))
    name = _remote_for(repo, spec)
    with repo.writing():
        repo.config.set(f"branch.{current_branch(repo)}.remote", name)
    if fill is not None:
        fill(repo)
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


def attach_target(settings: Settings, project: bool) -> Path:
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


