"""Project identity: one stable name per code project, shared by its clones and worktrees.

A session's ``workdir`` is where the agent ran; the *project* is what recall groups by and what
a team shares. The identity is, in order:

1. the normalised URL of the repository's ``origin`` remote (else of the first other remote,
   by name), e.g. ``git@github.com:a/b.git``, ``https://github.com/a/b`` and
   ``ssh://git@github.com/a/b.git`` all become ``github.com/a/b`` — so every clone on every
   machine agrees;
2. otherwise the absolute path of the repository's *common* git directory, which a main
   checkout and all its ``git worktree``s share;
3. None when ``workdir`` does not exist or is not inside a git repository.

Only the standard library reads ``.git`` (a directory, or a ``gitdir:`` file for worktrees and
submodules), ``commondir`` and ``config``: no git binary, no dulwich, so it is cheap enough to
call per session. Results are cached per directory for the life of the process.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

_SECTION_RE = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$')
_SCP_RE = re.compile(r"^(?:[^@/\s]+@)?([^:/\s]+):(?!//)(.+)$")
_URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(?:[^@/]*@)?([^/:]*)(?::\d*)?(/.*)?$")


def project_identity(workdir: str | None) -> str | None:
    """The stable project name of a working directory (see the module docstring).

    Args:
        workdir: A directory (or a file inside one); None gives None.

    Returns:
        ``host/path`` of the remote, the common git directory's path, or None.
    """
    if not workdir:
        return None
    try:
        path = Path(workdir).expanduser()
        if not path.is_absolute():
            return None
        return _identity_of(os.path.normpath(path))
    except (OSError, ValueError):
        return None


def clear_cache() -> None:
    """Forget cached identities (tests, or a long-lived process after `git remote add`)."""
    _identity_of.cache_clear()


@functools.lru_cache(maxsize=4096)
def _identity_of(directory: str) -> str | None:
    return _compute(Path(directory), 0)


_MAX_LOCAL_HOPS = 3


def _compute(path: Path, depth: int) -> str | None:
    if not path.exists():
        return None
    if not path.is_dir():
        path = path.parent
    common = find_common_dir(path)
    if common is None:
        return None
    url = remote_url(common)
    if url:
        local = _local_target(url, common)
        if local is None:
            normalised = normalise_remote_url(url, base=common)
            if normalised:
                return normalised
        elif depth < _MAX_LOCAL_HOPS and local.is_dir():
            # A clone of a repository on this machine is that repository's project.
            found = _compute(local, depth + 1)
            if found:
                return found
    return str(common)


def find_git_dir(start: Path) -> Path | None:
    """The git directory of the repository containing ``start`` (walking up), or None."""
    for directory in (start, *start.parents):
        dot_git = directory / ".git"
        try:
            if dot_git.is_dir():
                if (dot_git / "HEAD").exists():
                    return dot_git
            elif dot_git.is_file():
                target = _read_gitdir_file(dot_git)
                if target is not None and target.is_dir():
                    return target
            elif _is_bare_repo(directory):
                return directory
        except OSError:
            continue
    return None


def find_common_dir(start: Path) -> Path | None:
    """The common git directory (shared by worktrees) of the repository containing ``start``."""
    git_dir = find_git_dir(start)
    if git_dir is None:
        return None
    commondir = git_dir / "commondir"
    try:
        if commondir.is_file():
            rel = commondir.read_text(encoding="utf-8", errors="replace").strip()
            if rel:
                target = Path(rel)
                common = target if target.is_absolute() else git_dir / target
                return Path(os.path.realpath(common))
    except OSError:
        pass
    return Path(os.path.realpath(git_dir))


def _read_gitdir_file(dot_git: Path) -> Path | None:
    try:
        text = dot_git.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = Path(line[len("gitdir:") :].strip())
            if not target.is_absolute():
                target = dot_git.parent / target
            return Path(os.path.realpath(target))
    return None


def _is_bare_repo(directory: Path) -> bool:
    return (
        (directory / "HEAD").is_file()
        and (directory / "objects").is_dir()
        and (directory / "refs").is_dir()
        and (directory / "config").is_file()
    )


def remote_url(common_dir: Path) -> str | None:
    """The URL of ``origin``, else of the alphabetically first remote with a URL, else None."""
    try:
        text = (common_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    remotes = parse_remotes(text)
    if "origin" in remotes:
        return remotes["origin"]
    for name in sorted(remotes):
        return remotes[name]
    return None


def parse_remotes(config_text: str) -> dict[str, str]:
    """Remote name -> first ``url`` from git config text (a small subset of git's syntax).

    Handles ``[remote "name"]`` and the legacy ``[remote.name]`` headers, comments (``#``,
    ``;``), quoted values and key case-insensitivity; ignores includes and ``insteadOf``.
    """
    remotes: dict[str, str] = {}
    current: str | None = None
    for raw in config_text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        m = _SECTION_RE.match(line)
        if m:
            section, sub, rest = m.group(1), m.group(2), m.group(3)
            current = None
            if sub is not None and section.lower() == "remote":
                current = re.sub(r"\\(.)", r"\1", sub)
            elif sub is None and section.lower().startswith("remote."):
                current = section[len("remote.") :]
            line = rest.strip()
            if not line:
                continue
        if current is None or "=" not in line:
            continue
        key, _, value = line.partition("=")
        if key.strip().lower() != "url" or current in remotes:
            continue
        value = _config_value(value)
        if value:
            remotes[current] = value
    return remotes


def _config_value(raw: str) -> str:
    out: list[str] = []
    quoted = False
    i = 0
    raw = raw.strip()
    while i < len(raw):
        ch = raw[i]
        if ch == '"':
            quoted = not quoted
        elif ch == "\\" and i + 1 < len(raw):
            i += 1
            out.append({"n": "\n", "t": "\t"}.get(raw[i], raw[i]))
        elif ch in "#;" and not quoted:
            break
        else:
            out.append(ch)
        i += 1
    return "".join(out).strip()


def normalise_remote_url(url: str, base: Path | None = None) -> str | None:
    """``host/path`` for a remote URL, without scheme, user, port, ``.git`` or trailing slash.

    Local remotes (a path, or ``file://``) normalise to the common git directory of the
    repository they point at (relative paths against ``base``'s worktree), which is also what
    that repository is called when it has no remote itself — so a local original and its
    clones agree. A local path that does not exist is kept as its absolute path.

    Returns:
        The normalised identity, or None for an empty/unusable URL.
    """
    url = url.strip()
    if not url:
        return None
    m = _URL_RE.match(url)
    if m:
        scheme, host, path = m.group(1).lower(), m.group(2).lower(), m.group(3) or ""
        if scheme == "file":
            return _local_identity(url, base)
        return _join(host, path)
    if "://" not in url and not url.startswith(("/", ".", "~")):
        m = _SCP_RE.match(url)
        if m and not re.match(r"^[A-Za-z]:[\\/]", url):
            return _join(m.group(1).lower(), m.group(2))
    return _local_identity(url, base)


def _join(host: str, path: str) -> str | None:
    path = path.strip().strip("/")
    if path.endswith(".git"):
        path = path[: -len(".git")]
    path = path.rstrip("/")
    if not host:
        return None
    return f"{host}/{path}" if path else host


def _local_target(url: str, base: Path | None) -> Path | None:
    """The path a local remote URL points at (None for a network URL)."""
    url = url.strip()
    m = _URL_RE.match(url)
    if m:
        if m.group(1).lower() != "file":
            return None
        raw = m.group(3) or ""
    elif "://" in url:
        return None
    elif url.startswith(("/", ".", "~")) or re.match(r"^[A-Za-z]:[\\/]", url):
        raw = url
    elif _SCP_RE.match(url):
        return None
    else:
        raw = url
    target = Path(raw).expanduser()
    if not target.is_absolute():
        if base is None:
            return None
        worktree = base.parent if base.name == ".git" else base
        target = worktree / target
    return Path(os.path.realpath(target))


def _local_identity(path: str, base: Path | None) -> str | None:
    real = _local_target(path, base)
    if real is None:
        return None
    if real.is_dir():
        common = find_common_dir(real)
        if common is not None:
            return str(common)
    return str(real).rstrip("/") or None
