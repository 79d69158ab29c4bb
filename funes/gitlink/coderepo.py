"""The code repository a command or hook works in, read with dulwich (no git binary needed).

Finding the repository uses only the standard library (the hook runs this on every commit);
dulwich is imported inside the functions that read objects. Worktrees are first-class: a
linked worktree has its own git directory (`.git` is a `gitdir:` file) but shares the common
directory, where hooks, notes and objects live.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError, UsageError

if TYPE_CHECKING:
    from dulwich.objects import Commit
    from dulwich.repo import Repo


class NotAGitRepositoryError(FunesError):
    """No git work tree where one was needed."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"not inside a git work tree: {path}",
            hint="run this in a git repository (or pass -C DIR); bare repositories have no "
            "commits of their own to link",
        )
        self.path = path


class BadCommitError(UsageError):
    """A commit-ish that names no commit of the code repository."""

    def __init__(self, rev: str, detail: str = "names no commit here") -> None:
        super().__init__(
            f"{rev!r} {detail}",
            hint="use HEAD, HEAD~N, a branch, a tag or (a prefix of) a commit id; see `git log`",
        )
        self.rev = rev


class BlamePathError(UsageError):
    """A path `funes blame` cannot annotate."""


@dataclass(frozen=True)
class CodeRepo:
    """A git work tree and the directories that hold its repository."""

    worktree: Path
    git_dir: Path  # this work tree's git directory (differs from common_dir in a worktree)
    common_dir: Path  # shared by all worktrees: objects, refs, config, hooks, notes

    @property
    def identity(self) -> str:
        """The project identity (funes.ingest.project): what turns are matched against."""
        from funes.ingest.project import project_identity

        return project_identity(str(self.worktree)) or str(self.common_dir)

    def open(self) -> Repo:
        """The dulwich repository (imported here: it is not needed to find the repository)."""
        from dulwich.repo import Repo

        return Repo(str(self.worktree))


def find_code_repo(start: Path) -> CodeRepo:
    """The git work tree containing `start`, like git finds it.

    `start` may also be inside a git directory (dulwich runs hooks there): the work tree is
    then the one that directory belongs to.

    Raises:
        NotAGitRepositoryError: No work tree contains `start`.
    """
    start = Path(os.path.abspath(start))
    for directory in (start, *start.parents):
        dot_git = directory / ".git"
        git_dir: Path | None = None
        try:
            if dot_git.is_dir() and (dot_git / "HEAD").is_file():
                git_dir = dot_git
            elif dot_git.is_file():
                git_dir = _gitdir_file_target(dot_git)
        except OSError:
            continue
        if git_dir is not None:
            git_dir = Path(os.path.realpath(git_dir))
            return CodeRepo(Path(os.path.realpath(directory)), git_dir, _common_dir(git_dir))
    raise NotAGitRepositoryError(start)


def _gitdir_file_target(dot_git: Path) -> Path | None:
    for line in dot_git.read_text("utf-8", errors="replace").splitlines():
        if line.startswith("gitdir:"):
            target = Path(line[len("gitdir:") :].strip())
            target = target if target.is_absolute() else dot_git.parent / target
            return target if target.is_dir() else None
    return None


def _common_dir(git_dir: Path) -> Path:
    try:
        rel = (git_dir / "commondir").read_text("utf-8").strip()
    except OSError:
        return git_dir
    if not rel:
        return git_dir
    target = Path(rel)
    return Path(os.path.realpath(target if target.is_absolute() else git_dir / target))


def read_head(code: CodeRepo) -> str | None:
    """The commit id HEAD points at, read without dulwich (the hook's fast path).

    Follows a symbolic HEAD to a loose ref in the common directory, then `packed-refs`.
    None when HEAD is unborn or cannot be read; the caller then lets dulwich decide.
    """
    try:
        head = (code.git_dir / "HEAD").read_text("utf-8").strip()
    except OSError:
        return None
    for _ in range(5):
        if not head.startswith("ref:"):
            return head if re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head) else None
        ref = head[4:].strip()
        if ".." in ref or not ref.startswith("refs/"):
            return None
        try:
            head = (code.common_dir / ref).read_text("utf-8").strip()
            continue
        except OSError:
            pass
        try:
            packed = (code.common_dir / "packed-refs").read_text("utf-8")
        except OSError:
            return None
        for line in packed.splitlines():
            sha, _, name = line.partition(" ")
            if name == ref:
                return sha
        return None
    return None


# -- reading commits (dulwich) --------------------------------------------------------------

_SUFFIX_RE = re.compile(r"^(.+?)((?:[~^]\d*)*)$")
_STEP_RE = re.compile(r"([~^])(\d*)")


def _commit(repo: Repo, sha: bytes) -> Commit:
    """A commit object by id (dulwich's `repo[...]` may return any object type)."""
    from dulwich.objects import Commit, ObjectID

    obj = repo[ObjectID(sha)]
    if not isinstance(obj, Commit):
        raise BadCommitError(sha.decode("ascii", "replace"), "is not a commit")
    return obj


def resolve(code: CodeRepo, rev: str) -> str:
    """A commit-ish (`HEAD`, `HEAD~2`, `main^`, a tag, a short id) as a full commit id.

    Raises:
        BadCommitError: `rev` names no commit (or an ambiguous short id).
    """
    from dulwich.objectspec import AmbiguousShortId, parse_commit

    m = _SUFFIX_RE.match(rev.strip())
    if not m:
        raise BadCommitError(rev)
    repo = code.open()
    try:
        try:
            commit = parse_commit(repo, m.group(1).encode("utf-8"))
        except AmbiguousShortId:
            raise BadCommitError(rev, "is an ambiguous short id") from None
        except (KeyError, ValueError):
            raise BadCommitError(rev) from None
        for kind, count in _STEP_RE.findall(m.group(2)):
            n = int(count) if count else 1
            if kind == "~":
                for _ in range(n):
                    if not commit.parents:
                        raise BadCommitError(rev, "goes past the first commit")
                    commit = _commit(repo, commit.parents[0])
            elif n:  # ^N: the Nth parent; ^0 is the commit itself
                if len(commit.parents) < n:
                    raise BadCommitError(rev, f"has no parent {n}")
                commit = _commit(repo, commit.parents[n - 1])
        return str(commit.id.decode("ascii"))
    finally:
        repo.close()


#: The most commits a range may name (`--linked-to v1.0..v1.1`): a release, not a history.
MAX_RANGE = 100_000


def commit_range(code: CodeRepo, spec: str) -> list[str]:
    """The commits `spec` names: `A..B` (reachable from B, not from A) or one commit-ish.

    Raises:
        BadCommitError: either end names no commit, or the range holds more than `MAX_RANGE`.
    """
    start, sep, end = spec.partition("..")
    if not sep:
        return [resolve(code, spec)]
    if end.startswith("."):
        raise BadCommitError(spec, "is a symmetric range (A...B); use A..B")
    include = resolve(code, end or "HEAD")
    exclude = [resolve(code, start)] if start else []
    from dulwich.objects import ObjectID

    repo = code.open()
    try:
        out: list[str] = []
        walker = repo.get_walker(include=[ObjectID(include.encode())],
                                 exclude=[ObjectID(e.encode()) for e in exclude])
        for entry in walker:
            out.append(entry.commit.id.decode("ascii"))
            if len(out) > MAX_RANGE:
                raise BadCommitError(spec, f"holds more than {MAX_RANGE} commits")
        return out
    finally:
        repo.close()


@dataclass(frozen=True)
class CodeCommit:
    """What a link records about a code commit."""

    sha: str
    author: str  # "Name <email>"
    time: str  # committer time, UTC ISO-8601 (milliseconds, like funes's own times)
    timestamp: int  # committer time, seconds since the epoch
    message: str
    parents: tuple[str, ...]
    paths: tuple[str, ...]  # changed against the first parent, sorted
    branch: str | None

    @property
    def summary(self) -> str:
        """The first line of the message."""
        return self.message.splitlines()[0] if self.message else ""


def iso_time(timestamp: float) -> str:
    """Seconds since the epoch as funes writes times (UTC, milliseconds, `Z`)."""
    when = datetime.fromtimestamp(timestamp, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def commit_info(code: CodeRepo, sha: str) -> CodeCommit:
    """Read a commit: author, committer time, message, changed paths and branch."""
    from dulwich.diff_tree import tree_changes

    repo = code.open()
    try:
        commit = _commit(repo, sha.encode("ascii"))
        parent_tree = _commit(repo, commit.parents[0]).tree if commit.parents else None
        paths: set[str] = set()
        for change in tree_changes(repo.object_store, parent_tree, commit.tree):
            for entry in (change.old, change.new):
                if entry is not None and entry.path is not None:
                    paths.add(_text(entry.path))
        return CodeCommit(
            sha=sha,
            author=_text(commit.author),
            time=iso_time(commit.commit_time),
            timestamp=int(commit.commit_time),
            message=_text(commit.message).strip(),
            parents=tuple(p.decode("ascii") for p in commit.parents),
            paths=tuple(sorted(paths)),
            branch=_branch_of(repo, sha),
        )
    finally:
        repo.close()


def _branch_of(repo: Any, sha: str) -> str | None:
    """The branch HEAD is on when it points at `sha`, else a branch whose tip is `sha`."""
    target = sha.encode("ascii")
    names, value = repo.refs.follow(b"HEAD")
    if value == target and names and names[-1].startswith(b"refs/heads/"):
        return _text(names[-1][len(b"refs/heads/") :])
    for name in sorted(repo.refs.keys(base=b"refs/heads/")):
        if repo.refs[b"refs/heads/" + name] == target:
            return _text(name)
    return None


def commit_time(code: CodeRepo, sha: str) -> int:
    """The committer time of a commit, in seconds since the epoch."""
    repo = code.open()
    try:
        return int(_commit(repo, sha.encode("ascii")).commit_time)
    finally:
        repo.close()


# -- blame ----------------------------------------------------------------------------------


def repo_path(code: CodeRepo, path: str, cwd: Path) -> str:
    """A path as the user typed it (relative to `cwd`), as a path inside the work tree.

    Raises:
        BlamePathError: The path lies outside the work tree.
    """
    absolute = Path(os.path.normpath(cwd / path))
    try:
        rel = absolute.relative_to(code.worktree)
    except ValueError:
        # cwd may be reached through a symlink; compare real paths before giving up
        try:
            rel = Path(os.path.realpath(absolute)).relative_to(code.worktree)
        except ValueError:
            raise BlamePathError(
                f"{path} is outside the work tree {code.worktree}",
                hint="name a file inside this git repository",
            ) from None
    if not rel.parts:
        raise BlamePathError(f"{path} is the work tree itself", hint="name a file")
    return rel.as_posix()


@dataclass(frozen=True)
class BlameLine:
    """One line of a file and the commit that last changed it."""

    number: int  # 1-based
    sha: str
    text: str


def blame(code: CodeRepo, sha: str, path: str) -> list[BlameLine]:
    """Annotate every line of `path` as of commit `sha` with the commit that last changed it.

    Raises:
        BlamePathError: `path` is not a file in that commit.
    """
    from dulwich.annotate import annotate_lines
    from dulwich.object_store import tree_lookup_path
    from dulwich.objects import Blob

    repo = code.open()
    try:
        commit = _commit(repo, sha.encode("ascii"))
        try:
            _, blob_id = tree_lookup_path(repo.object_store.__getitem__, commit.tree,
                                          path.encode("utf-8"))
        except KeyError:
            raise BlamePathError(
                f"{path} is not in commit {sha[:12]}",
                hint="name a file that is committed (funes blame reads the committed version)",
            ) from None
        if not isinstance(repo[blob_id], Blob):
            raise BlamePathError(f"{path} is a directory in commit {sha[:12]}",
                                 hint="name a file")
        annotated = annotate_lines(repo.object_store, commit.id, path.encode("utf-8"))
        return [
            BlameLine(i, entry[0].id.decode("ascii"), _text(line).rstrip("\r\n"))
            for i, (entry, line) in enumerate(annotated, start=1)
        ]
    finally:
        repo.close()
