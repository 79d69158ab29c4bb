"""Git verbs: hooks install/uninstall/status, link, why, blame, and the turns of a commit.

The code repository is the one containing the current directory (`-C DIR` moves it); the
memory is the one a command would use there (`--memory` picks another). Everything reads git
through dulwich: no git binary is needed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from funes._env import Settings
from funes.api.ingest import index as _index
from funes.api.memory import open_memory
from funes.errors import FunesError, UsageError
from funes.gitlink import hookinstall
from funes.gitlink.coderepo import (
    BadCommitError,
    BlameLine,
    CodeCommit,
    CodeRepo,
    NotAGitRepositoryError,
    commit_info,
    commit_time,
    find_code_repo,
    repo_path,
    resolve,
)
from funes.gitlink.coderepo import blame as _blame
from funes.gitlink.hookinstall import HookState
from funes.gitlink.hookrun import log_path
from funes.gitlink.links import (
    FoundLink,
    NotLinkedError,
    TurnText,
    link_lock,
    links_by_prefix,
    links_for,
    load_turns,
    make_link,
    note_text,
    record,
    select_turns,
    union_turns,
    window,
)
from funes.gitlink.notes import write_note
from funes.ingest.run import IndexSummary
from funes.model.ids import ObjectId
from funes.model.objects import Link, encode
from funes.process import utc_stamp
from funes.storage.repo import Repository

__all__ = [
    "BlameCommit",
    "BlameResult",
    "HooksReport",
    "LinkResult",
    "WhyResult",
    "blame",
    "hooks_install",
    "hooks_status",
    "hooks_uninstall",
    "link_commit",
    "link_commit_for_hook",
    "linked_turns",
    "why",
]

#: What `funes link --hook` (the post-commit hook's detached process) allows itself.
HOOK_INDEX_BUDGET = 60.0  # seconds of indexing before linking what is indexed so far
HOOK_LOCK_TIMEOUT = 60.0  # seconds to wait for a memory another writer holds
HOOK_QUEUE_TIMEOUT = 600.0  # seconds to wait behind other hook workers of the repository


# -- hooks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class HooksReport:
    """The hooks of a code repository, and what they would link into."""

    worktree: Path
    hooks_dir: Path
    hooks: list[HookState]
    #: The memory commits here are linked into (None: no memory, the hook would warn).
    memory: Path | None
    #: The last line the detached hook work logged for this work tree.
    last_run: str | None = None


def _report(settings: Settings, code: CodeRepo, states: list[HookState]) -> HooksReport:
    try:
        memory: Path | None = Repository.discover(settings, code.worktree).path
    except FunesError:
        memory = None
    return HooksReport(code.worktree, hookinstall.hooks_dir(code), states, memory,
                       _last_run(settings, code))


def _last_run(settings: Settings, code: CodeRepo) -> str | None:
    try:
        text = log_path(settings).read_text("utf-8", errors="replace")
    except OSError:
        return None
    needle = f" in {code.worktree}"
    for line in reversed(text.splitlines()):
        if needle in line:
            return line
    return None


def hooks_install(settings: Settings, *, push: bool = False) -> HooksReport:
    """Install the post-commit hook (and pre-push with `push`) in the current repository."""
    code = find_code_repo(settings.cwd)
    return _report(settings, code, hookinstall.install(code, push=push))


def hooks_uninstall(settings: Settings) -> HooksReport:
    """Remove funes's hooks, restoring the hooks they chained byte for byte."""
    code = find_code_repo(settings.cwd)
    return _report(settings, code, hookinstall.uninstall(code))


def hooks_status(settings: Settings) -> HooksReport:
    """Which hooks are installed, what they chain, and where commits get linked."""
    code = find_code_repo(settings.cwd)
    return _report(settings, code, hookinstall.status(code))


# -- link -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkResult:
    """What `link` recorded."""

    sha: str
    worktree: Path
    link: Link
    link_id: ObjectId
    memory: Path
    memory_commit: ObjectId
    #: The notes commit under refs/notes/funes (None when the note could not be written).
    note: str | None
    index: IndexSummary | None
    #: Problems that did not stop the link (indexing cut short, note not written).
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line: what was linked to what (the human output, and the hook log's line)."""
        link = self.link
        branch = f" ({link.branch})" if link.branch else ""
        sessions = ""
        if link.turns:
            sessions = ": " + ", ".join(f"{h} {s[:8]} ({n})" for (h, s), n in link.sessions.items())
        return (
            f"linked {self.sha[:12]}{branch} to {len(link.turns)} turns from "
            f"{len(link.sessions)} session(s){sessions} in memory commit "
            f"{self.memory_commit[:12]}"
        )


def _index_within(settings: Settings, budget: float | None) -> tuple[IndexSummary | None, str]:
    """Index the default sources (routing rules), giving up waiting after `budget` seconds.

    The indexing thread is not stopped: it finishes (and commits) in the background while the
    link is made from what is indexed so far, and the process exits when it is done.
    """
    outcome: dict[str, IndexSummary | str] = {}

    def run() -> None:
        try:
            outcome["summary"] = _index(settings)
        except FunesError as exc:
            outcome["error"] = exc.message

    worker = threading.Thread(target=run, name="funes-link-index")
    worker.start()
    worker.join(budget)
    if worker.is_alive():
        return None, f"indexing took over {budget:g}s; linked the turns indexed so far"
    summary = outcome.get("summary")
    if isinstance(summary, IndexSummary):
        return summary, ""
    return None, f"indexing failed: {outcome.get('error', 'see the log')}"


def link_commit(
    settings: Settings,
    rev: str = "HEAD",
    *,
    memory: str | None = None,
    index: bool = True,
    hook: bool = False,
) -> LinkResult:
    """Link a code commit to the agent turns behind it (what the post-commit hook runs).

    Indexes new turns first (unless `index=False`), picks the repository's turns since its
    previous linked commit (funes.gitlink.links), records the link in the memory and writes
    the `refs/notes/funes` note. Linking a commit again records a fresh link; `why` shows the
    union.

    Args:
        settings: The environment; `settings.cwd` is inside the code repository.
        rev: The commit to link (a commit-ish).
        memory: The memory to link into (default: the one found from the work tree).
        index: Index the agents' default sources first.
        hook: Run as the post-commit hook's detached process: indexing is waited for at most
            `HOOK_INDEX_BUDGET` seconds, and busy locks are waited for longer than a person
            at a prompt would want (nobody is waiting on this process).
    """
    code = find_code_repo(settings.cwd)
    sha = resolve(code, rev)
    repo = open_memory(settings, memory) if memory else Repository.discover(settings, code.worktree)
    warnings: list[str] = []
    summary = None
    index_budget = HOOK_INDEX_BUDGET if hook else None
    lock_timeout = HOOK_LOCK_TIMEOUT if hook else None
    with link_lock(code, HOOK_QUEUE_TIMEOUT if hook else 30.0):
        if index:
            summary, problem = _index_within(settings, index_budget)
            if problem:
                warnings.append(problem)
        info = commit_info(code, sha)
        parent_time = commit_time(code, info.parents[0]) if info.parents else None
        since, until = window(repo, code, info, parent_time=parent_time)
        turns = select_turns(
            repo, identity=code.identity, worktree=code.worktree, since=since, until=until
        )
        link = make_link(info, code.identity, turns, since, until)
        committed = record(repo, link, lock_timeout=lock_timeout)
    assert committed.commit is not None  # a link is always something new to commit
    link_id, _ = encode(link)
    note = None
    try:
        note = write_note(code, sha, note_text(link, link_id, committed.commit))
    except (FunesError, OSError) as exc:
        warnings.append(f"note not written: {exc}")
    return LinkResult(sha, code.worktree, link, link_id, repo.path, committed.commit, note,
                      summary, warnings)


def link_commit_for_hook(
    settings: Settings, rev: str, *, say: Callable[[str], None], memory: str | None = None,
    index: bool = True,
) -> int:
    """`link_commit` as the post-commit hook's detached process runs it; its exit code.

    Nobody reads this process's output but the hook log (`$FUNES_HOME/logs/git-hooks.log`, its
    stdout), so it reports in dated lines (funes.process.utc_stamp), each naming the work tree:
    `funes hooks status` finds the last line for a repository by that. A failure is one line
    with its hint, and its exit code is returned rather than raised.
    """
    where = f" in {settings.cwd}"
    try:
        result = link_commit(settings, rev, memory=memory, index=index, hook=True)
    except FunesError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        say(f"{utc_stamp()} link {rev[:12]}{where} failed: {exc.message}{hint}")
        return exc.exit_code
    for warning in result.warnings:
        say(f"{utc_stamp()} link {result.sha[:12]}{where}: warning: {warning}")
    say(f"{utc_stamp()} {result.summary()}{where}")
    return 0


# -- why, blame, linked turns ---------------------------------------------------------------

_HEX = re.compile(r"^[0-9a-fA-F]{4,64}$")


def _code_repo(repo: Repository) -> CodeRepo | None:
    try:
        return find_code_repo(repo.settings.cwd)
    except NotAGitRepositoryError:
        return None


def _linked(repo: Repository, rev: str) -> tuple[str, CodeCommit | None, list[FoundLink]]:
    """Resolve `rev` and find its links.

    In the code repository when there is one; else (a memory cloned elsewhere) by matching
    `rev` as a commit id prefix against the links themselves.
    """
    code = _code_repo(repo)
    if code is not None:
        try:
            sha = resolve(code, rev)
        except BadCommitError:
            if not _HEX.match(rev):
                raise
        else:
            info = commit_info(code, sha)
            when = datetime.fromtimestamp(info.timestamp, UTC)
            found = links_for(repo, [sha], not_before=when)[sha]
            if not found:
                raise NotLinkedError(rev)
            return sha, info, found
    if not _HEX.match(rev):
        raise NotAGitRepositoryError(repo.settings.cwd)
    sha, found = links_by_prefix(repo, rev)
    return sha, None, found


@dataclass(frozen=True)
class WhyResult:
    """A code commit, its links and the turns they name."""

    rev: str
    sha: str
    #: The code commit as git has it (None when the code repository is not at hand: the
    #: links still carry its author, time and message).
    commit: CodeCommit | None
    links: list[FoundLink]
    turns: list[TurnText]  # oldest first (newest last)
    linked: int  # distinct turns the links name; more than len(turns) if some are not here


def why(repo: Repository, rev: str = "HEAD") -> WhyResult:
    """The agent turns linked to a code commit, with their text, newest last.

    Raises:
        NotLinkedError: The commit has no link in this memory.
    """
    sha, info, found = _linked(repo, rev)
    keys = union_turns(found)
    return WhyResult(rev, sha, info, found, load_turns(repo, keys), len(keys))


def linked_turns(repo: Repository, rev: str) -> set[tuple[str, str]]:
    """(session_id, turn_id) of every turn linked to a code commit (`recall --commit`).

    Raises:
        NotLinkedError: The commit has no link in this memory.
    """
    _, _, found = _linked(repo, rev)
    return union_turns(found)


@dataclass(frozen=True)
class BlameCommit:
    """A code commit that last changed some of the blamed lines, and its links."""

    sha: str
    commit: CodeCommit
    lines: list[int]
    links: list[FoundLink]
    turns: list[TurnText]
    linked: int


@dataclass(frozen=True)
class BlameResult:
    """Lines of a file with the commits that last changed them, and those commits' turns."""

    path: str  # inside the work tree
    rev: str  # the commit whose version of the file was annotated
    lines: list[BlameLine]
    commits: list[BlameCommit]  # in order of first appearance in `lines`


_SPEC = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")


def parse_blame_spec(spec: str) -> tuple[str, int | None, int | None]:
    """`file`, `file:12` or `file:12-20` as (path, first line, last line)."""
    m = _SPEC.match(spec)
    if not m:
        return spec, None, None
    start = int(m.group("start"))
    end = int(m.group("end")) if m.group("end") else start
    if start < 1 or end < start:
        raise UsageError(f"bad line range in {spec!r}", hint="lines count from 1: FILE:12-20")
    return m.group("path"), start, end


def blame(repo: Repository, spec: str, rev: str = "HEAD") -> BlameResult:
    """Who last changed each line of `spec` (`file[:line[-line]]`), and why (their links).

    Annotates the committed version of the file at `rev`, like `git blame REV -- FILE`.
    """
    code = _code_repo(repo)
    if code is None:
        raise NotAGitRepositoryError(repo.settings.cwd)
    raw_path, start, end = parse_blame_spec(spec)
    path = repo_path(code, raw_path, repo.settings.cwd)
    sha = resolve(code, rev)
    lines = _blame(code, sha, path)
    if start is not None and end is not None:
        if end > len(lines):
            raise UsageError(
                f"{path} has {len(lines)} lines at {rev}, not {end}",
                hint=f"name lines 1-{len(lines)}",
            )
        lines = lines[start - 1 : end]
    order = list(dict.fromkeys(line.sha for line in lines))
    infos = {s: commit_info(code, s) for s in order}
    oldest = min((i.timestamp for i in infos.values()), default=None)
    found = links_for(
        repo, order,
        not_before=datetime.fromtimestamp(oldest, UTC) if oldest is not None else None,
    )
    keys = union_turns(item for items in found.values() for item in items)
    texts = {(t.session_id, t.turn_id): t for t in load_turns(repo, keys)}
    commits = []
    for s in order:
        own = union_turns(found[s])
        commits.append(
            BlameCommit(
                s,
                infos[s],
                [line.number for line in lines if line.sha == s],
                found[s],
                [t for k, t in texts.items() if k in own],
                len(own),
            )
        )
    return BlameResult(path, sha, lines, commits)
