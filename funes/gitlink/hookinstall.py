"""Installing funes's git hooks next to whatever hooks a repository already has.

A hook already in place is *chained*, never replaced: it is renamed to `<name>.pre-funes`
(a rename keeps its bytes, mode and symlink-ness exactly), and the funes script runs it
first with the same arguments and input. Uninstalling renames it back, so the original is
restored byte for byte. The order of the two renames makes every intermediate state one that
a second `install` or `uninstall` completes.

The scripts are templates in the package (`funes/hooks/git-<name>`; the top-level `hooks/`
directory holds identical copies for readers of the source). Installing substitutes the
Python that runs funes, so the hook finds this installation without relying on PATH.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from funes.errors import FunesError
from funes.gitlink.coderepo import CodeRepo
from funes.storage.atomic import write_atomic

#: The hooks funes can install, in the order `status` lists them.
HOOK_NAMES: tuple[str, ...] = ("post-commit", "pre-push")
#: Suffix of a chained original hook.
BACKUP_SUFFIX = ".pre-funes"
#: The line that marks a hook script as funes's own.
MARKER = "# funes-hook: "

TEMPLATES = Path(__file__).resolve().parent.parent / "hooks"


class HookConflictError(FunesError):
    """A file funes needs to move is in the way."""


@dataclass(frozen=True)
class HookState:
    """One hook as `funes hooks status` reports it."""

    name: str
    path: Path
    #: "funes" (installed), "other" (someone else's hook), or "absent".
    state: str
    #: The original hook this funes hook runs first, when there is one.
    chained: Path | None
    #: The Python an installed funes hook runs (None if not funes's hook).
    python: str | None = None


def template(name: str) -> str:
    """The packaged script for a hook, with the `@PYTHON@` placeholder."""
    return (TEMPLATES / f"git-{name}").read_text("utf-8")


def render(name: str, python: str | None = None) -> str:
    """The script to install for `name`, pointing at `python` (default: this interpreter)."""
    return template(name).replace("@PYTHON@", shlex.quote(python or sys.executable), 1)


def hooks_dir(code: CodeRepo) -> Path:
    """Where git looks for hooks.

    `core.hooksPath` if set (at any config level), else `<common dir>/hooks`, which every
    worktree of the repository shares. A relative `core.hooksPath` is relative to the work
    tree root, as git runs hooks there.
    """
    repo = code.open()
    try:
        raw = repo.get_config_stack().get((b"core",), b"hooksPath")
    except KeyError:
        raw = None
    finally:
        repo.close()
    if raw:
        configured = Path(os.path.expanduser(raw.decode("utf-8", errors="replace")))
        return configured if configured.is_absolute() else code.worktree / configured
    return code.common_dir / "hooks"


def is_funes_hook(path: Path) -> bool:
    """True when `path` is a hook script funes installed (its marker is in the first lines)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return False
    return MARKER.encode() in head


def _python_of(path: Path) -> str | None:
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("FUNES_PYTHON="):
            parts = shlex.split(line[len("FUNES_PYTHON=") :])
            return parts[0] if parts else None
    return None


def state_of(directory: Path, name: str) -> HookState:
    """The state of one hook in a hooks directory."""
    path = directory / name
    backup = directory / (name + BACKUP_SUFFIX)
    chained = backup if os.path.lexists(backup) else None
    if not os.path.lexists(path):
        return HookState(name, path, "absent", chained)
    if is_funes_hook(path):
        return HookState(name, path, "funes", chained, _python_of(path))
    return HookState(name, path, "other", chained)


def install(code: CodeRepo, *, push: bool = False, python: str | None = None) -> list[HookState]:
    """Install `post-commit` (and `pre-push` with `push`), chaining hooks already there.

    Re-installing refreshes funes's scripts (e.g. after moving the virtual environment) and
    leaves chained originals alone.

    Raises:
        HookConflictError: An original hook would overwrite an earlier `<name>.pre-funes`.
    """
    directory = hooks_dir(code)
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("post-commit", "pre-push") if push else ("post-commit",):
        path = directory / name
        backup = directory / (name + BACKUP_SUFFIX)
        if os.path.lexists(path) and not is_funes_hook(path):
            if os.path.lexists(backup):
                raise HookConflictError(
                    f"cannot chain {path}: {backup.name} already exists",
                    hint=f"move {backup} out of the way, then run `funes hooks install` again",
                )
            os.rename(path, backup)
        _write_script(path, render(name, python))
    return status(code)


def _write_script(path: Path, text: str) -> None:
    """Replace `path` with an executable script in one rename (git never sees half a hook)."""
    write_atomic(path, text.encode("utf-8"), mode=0o755)


def uninstall(code: CodeRepo) -> list[HookState]:
    """Remove funes's hooks and put chained originals back exactly as they were.

    A hook that is not funes's is left alone (someone replaced ours; theirs wins).
    """
    directory = hooks_dir(code)
    for name in HOOK_NAMES:
        path = directory / name
        backup = directory / (name + BACKUP_SUFFIX)
        if os.path.lexists(path) and not is_funes_hook(path):
            continue
        if os.path.lexists(backup):
            os.replace(backup, path)  # the original comes back over our script in one step
        elif os.path.lexists(path):
            path.unlink()
    return status(code)


def status(code: CodeRepo) -> list[HookState]:
    """Every hook funes knows, as it is now."""
    directory = hooks_dir(code)
    return [state_of(directory, name) for name in HOOK_NAMES]
