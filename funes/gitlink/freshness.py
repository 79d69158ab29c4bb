"""Freshness against the code: did the files a passage is about change since it was said?

A recalled passage that explains code ("the parser retries twice in `src/parse.rs`") may be
out of date: the code moved on. Two ways tie a passage to files of the current repository:

- **Links**: its turn is linked to a code commit (funes.gitlink.links, `funes why`): the files
  are the commit's changed paths, the base is that commit.
- **Mentions**: it names paths of the repository (`funes/api/search.py`, an absolute path
  inside the work tree, `./docs/cli.md:12`): the base is the commit HEAD's line had when the
  turn ran (the newest commit on the first-parent line not newer than the turn). Only turns of
  this project (same identity, or a working directory inside the work tree) are read for
  mentions, and a mention counts only if the path existed in the base commit.

A file **changed since** the base when commits on HEAD's first-parent line after the base
touched it (a merge counts once, with everything it brought in); it is **removed** when HEAD no
longer has it.

**Cheap.** The first-parent line is read once with dulwich and kept per code repository under
`$FUNES_HOME/cache/code/` with each commit's changed paths; a later call reads only the commits
HEAD gained. Reading goes back only as far as the oldest turn asked about needs, at most
`MAX_COMMITS` commits, and for at most `READ_BUDGET` seconds per call (the rest is read by the
next calls): a passage whose base is not read yet is left unmarked rather than guessed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.gitlink.coderepo import CodeRepo, _commit, read_head
from funes.storage.atomic import write_atomic

if TYPE_CHECKING:
    from dulwich.repo import Repo

__all__ = ["MAX_COMMITS", "Change", "CodeHistory", "history", "mentioned_paths"]

#: Commits of the first-parent line read at most (older passages stay unmarked).
MAX_COMMITS = 5000
#: Seconds one call may spend reading commits it has not read before.
READ_BUDGET = 0.25
#: Largest cache file read back.
_MAX_BYTES = 64 << 20
_memo: dict[str, CodeHistory] = {}


@dataclass(frozen=True)
class Change:
    """One file a passage is about that changed (or went away) since its base commit."""

    path: str
    since: str  # the base commit (full id)
    commits: int  # commits on HEAD's first-parent line after the base that touched the path
    removed: bool  # HEAD no longer has the path
    linked: bool  # the base is a commit linked to the turn (else: the code when it ran)


@dataclass
class CodeHistory:
    """HEAD's first-parent line, newest first, each commit with its time and changed paths."""

    code: CodeRepo
    head: str
    chain: list[tuple[str, int, frozenset[str]]]
    complete: bool  # the chain reaches the first commit (or MAX_COMMITS)
    cache: Path | None = None  # the directory it is kept in between processes

    @property
    def oldest_time(self) -> int | None:
        """The time of the oldest commit read so far."""
        return self.chain[-1][1] if self.chain else None

    def read_back_to(self, when: int, budget: float = READ_BUDGET) -> None:
        """Read older commits until one is older than `when` (seconds), within `budget`."""
        if self.complete or (self.chain and self.chain[-1][1] < when):
            return
        deadline = time.monotonic() + budget
        repo = self.code.open()
        try:
            sha = self.chain[-1][0] if self.chain else self.head
            commit = _commit(repo, sha.encode("ascii"))
            if self.chain:  # continue from the oldest commit read
                if not commit.parents:
                    self.complete = True
                    return
                sha = commit.parents[0].decode("ascii")
            while len(self.chain) < MAX_COMMITS:
                entry, parent = _entry(repo, sha)
                self.chain.append(entry)
                if parent is None:
                    self.complete = True
                    break
                if entry[1] < when or time.monotonic() > deadline:
                    break
                sha = parent
            else:
                self.complete = True
        finally:
            repo.close()
        _save(self)

    def base_at(self, when: int) -> str | None:
        """The newest commit of the line not newer than `when`; None if not read that far."""
        for sha, commit_time, _ in self.chain:
            if commit_time <= when:
                return sha
        return None

    def changes(self, paths: Iterable[str], base: str, *, linked: bool,
                at_time: int | None = None) -> list[Change] | None:
        """How each of `paths` changed after `base`; None when `base` is not on the line read.

        A `base` off the first-parent line (a side branch merged later) is placed by its time
        `at_time` when given.
        """
        position = next((i for i, (sha, _, _) in enumerate(self.chain) if sha == base), None)
        if position is None and at_time is not None:
            position = next((i for i, (_, t, _) in enumerate(self.chain) if t <= at_time), None)
        if position is None:
            return None
        later = self.chain[:position]
        out = []
        repo = self.code.open()
        try:
            for path in sorted(set(paths)):
                touched = sum(1 for _, _, changed in later if path in changed)
                if not touched:
                    continue
                out.append(Change(path, base, touched, not _exists(repo, self.head, path),
                                  linked))
        finally:
            repo.close()
        return out

    def existed(self, sha: str, paths: Iterable[str]) -> set[str]:
        """Which of `paths` are files in commit `sha`."""
        repo = self.code.open()
        try:
            return {p for p in paths if _exists(repo, sha, p)}
        finally:
            repo.close()


def _entry(repo: Repo, sha: str) -> tuple[tuple[str, int, frozenset[str]], str | None]:
    """A commit of the line (id, time, paths changed against its first parent), its parent."""
    from dulwich.diff_tree import tree_changes

    commit = _commit(repo, sha.encode("ascii"))
    parent = commit.parents[0] if commit.parents else None
    parent_tree = _commit(repo, parent).tree if parent is not None else None
    paths: set[str] = set()
    for change in tree_changes(repo.object_store, parent_tree, commit.tree):
        for side in (change.old, change.new):
            if side is not None and side.path is not None:
                paths.add(side.path.decode("utf-8", "replace"))
    return ((sha, int(commit.commit_time), frozenset(paths)),
            parent.decode("ascii") if parent is not None else None)


def _exists(repo: Repo, sha: str, path: str) -> bool:
    from dulwich.object_store import tree_lookup_path
    from dulwich.objects import Blob

    try:
        tree = _commit(repo, sha.encode("ascii")).tree
        _, oid = tree_lookup_path(repo.object_store.__getitem__, tree, path.encode("utf-8"))
        return isinstance(repo[oid], Blob)
    except (KeyError, ValueError, NotADirectoryError):
        return False


def history(code: CodeRepo, cache_dir: Path) -> CodeHistory | None:
    """The first-parent line of `code`'s HEAD as read so far (None: HEAD is unborn).

    Kept in this process and in `cache_dir`; commits HEAD gained since are read now (a new
    HEAD whose line does not contain the old one starts over).
    """
    head = read_head(code)
    if head is None:
        return None
    key = str(code.common_dir)
    found = _memo.get(key) or _load(code, cache_dir)
    if found is not None and found.head != head:
        found = _advance(found, head)
    if found is None:
        found = CodeHistory(code, head, [], False, cache_dir)
    if len(_memo) > 16:
        _memo.clear()
    _memo[key] = found
    return found


def _advance(old: CodeHistory, head: str) -> CodeHistory | None:
    """`old` with the commits of `head`'s line newer than `old.head`; None: not a descendant."""
    known = {sha for sha, _, _ in old.chain} or {old.head}
    repo = old.code.open()
    new: list[tuple[str, int, frozenset[str]]] = []
    try:
        sha: str | None = head
        while sha is not None and sha not in known and len(new) < MAX_COMMITS:
            entry, sha = _entry(repo, sha)
            new.append(entry)
    except KeyError:
        return None
    finally:
        repo.close()
    if sha is None or sha not in known:
        return None
    cut = next(i for i, (s, _, _) in enumerate(old.chain) if s == sha) if old.chain else 0
    result = CodeHistory(old.code, head, new + old.chain[cut:], old.complete, old.cache)
    _save(result)
    return result


def _cache_file(code: CodeRepo, cache_dir: Path) -> Path:
    digest = hashlib.sha256(str(code.common_dir).encode("utf-8", "surrogateescape"))
    return cache_dir / f"{digest.hexdigest()[:24]}.json"


def _load(code: CodeRepo, cache_dir: Path) -> CodeHistory | None:
    try:
        with _cache_file(code, cache_dir).open("rb") as fh:
            raw = fh.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            return None
        data = json.loads(raw)
        chain = [(str(s), int(t), frozenset(str(p) for p in paths))
                 for s, t, paths in data["chain"]]
        return CodeHistory(code, str(data["head"]), chain, bool(data["complete"]), cache_dir)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _save(found: CodeHistory) -> None:
    where = found.cache
    if where is None:
        return
    data = {"head": found.head, "complete": found.complete,
            "chain": [[s, t, sorted(p)] for s, t, p in found.chain]}
    with contextlib.suppress(OSError):
        where.mkdir(parents=True, exist_ok=True)
        write_atomic(_cache_file(found.code, where), json.dumps(data).encode(), durable=False)


# -- mentions ----------------------------------------------------------------------------------

#: A path-like token: segments joined by `/`, optionally absolute or `./`-relative.
_PATH = re.compile(r"(?<![\w.@/-])(?:\.{1,2}/|/)?(?:[\w.+-]+/)+[\w.+-]+")
#: Most paths read from one passage.
MAX_MENTIONS = 12


def mentioned_paths(text: str, worktree: Path, workdir: str | None) -> list[str]:
    """Paths inside the work tree a passage names, relative to the work tree (not checked).

    Absolute paths count when inside the work tree; relative ones are read against the work
    tree, and against the turn's working directory when it lies inside the work tree.
    """
    roots = [str(worktree).rstrip("/") + "/"]
    inside = None
    if workdir and (workdir + "/").startswith(roots[0]):
        inside = workdir[len(roots[0]):].strip("/")
    out: list[str] = []
    for token in _PATH.findall(text):
        token = token.rstrip(".,:;)'\"`")
        if token.startswith("/"):
            if not token.startswith(roots[0]):
                continue
            candidates = [token[len(roots[0]):]]
        else:
            token = token.removeprefix("./")
            candidates = [token] + ([f"{inside}/{token}"] if inside else [])
        for candidate in candidates:
            parts = candidate.split("/")
            if ".." in parts or "" in parts or candidate in out:
                continue
            out.append(candidate)
        if len(out) >= MAX_MENTIONS:
            break
    return out


def to_epoch(when: datetime | None) -> int | None:
    """A turn's time as seconds since the epoch (None when unknown)."""
    return int(when.timestamp()) if when is not None else None


def link_paths(links: Sequence[Any]) -> list[tuple[str, int, tuple[str, ...]]]:
    """(commit, time, paths) of each link, for `CodeHistory.changes`."""
    from funes.gitlink.links import parse_iso

    out = []
    for link in links:
        when = parse_iso(link.time)
        out.append((link.commit, int(when.timestamp()) if when else 0, tuple(link.paths)))
    return out
