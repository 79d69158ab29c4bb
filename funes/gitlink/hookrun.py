"""What the git hook scripts run: `python -m funes.gitlink.hookrun post-commit|pre-push`.

Both fail open: whatever happens, the git command goes on, and funes prints at most one line.

- **post-commit** does only the cheap checks in the foreground (is there a usable memory for
  this work tree?) and hands the commit id to a detached `funes link <sha> --hook` process,
  which indexes the new turns, records the link and writes the note. `git commit` waits for
  none of that (bench/bench_git_hook.py measures what it does wait for). The detached
  process writes to `$FUNES_HOME/logs/git-hooks.log`, never to git's output: a caller that
  reads `git commit`'s output through a pipe must see it close when git exits.
- **pre-push** runs `funes push` for the memory, bounded by `PUSH_TIMEOUT` seconds; a failure
  or a timeout is one warning, and the git push proceeds.

Imports stay light (no click, no dulwich, no lance): this runs on every commit.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from funes import process
from funes._env import Settings
from funes._env import settings as load_settings
from funes.errors import FunesError
from funes.gitlink.coderepo import CodeRepo, NotAGitRepositoryError, find_code_repo, read_head

#: Seconds the pre-push hook gives `funes push` before it stops waiting and lets git push.
PUSH_TIMEOUT = 30.0
#: The log of detached hook work (kept small: funes.process.open_log).
LOG_NAME = "git-hooks.log"


def warn(message: str) -> None:
    """The one line a hook may print (stderr; git shows it under the command's output)."""
    print(f"funes: {message}", file=sys.stderr, flush=True)


def log_path(settings: Settings) -> Path:
    """Where detached hook work reports (`funes hooks status` shows the last line)."""
    return settings.home / "logs" / LOG_NAME


def _memory_for(
    settings: Settings, code: CodeRepo, consequence: str
) -> tuple[Path | None, str | None]:
    """(memory path, None) when usable; (None, warning) when the hook should stop here.

    `consequence` says what did not happen ("this commit is not linked"), for the warning.
    """
    from funes.errors import NotARepositoryError
    from funes.storage.repo import Repository

    try:
        repo = Repository.discover(settings, code.worktree)
        repo.head()  # a damaged HEAD ref shows here, not later in the detached process
    except NotARepositoryError:
        return None, (
            f"no funes memory for {code.worktree}, so {consequence} "
            "(run `funes init` here or `funes init --global`; `funes hooks uninstall` "
            "removes the hook)"
        )
    except FunesError as exc:
        return None, f"{consequence}: {exc.message} (run `funes fsck`)"
    return repo.path, None


def post_commit(settings: Settings) -> None:
    """Check quickly, then link the new commit in a detached process."""
    try:
        code = find_code_repo(settings.cwd)
    except NotAGitRepositoryError:
        return
    sha = read_head(code) or "HEAD"
    memory, problem = _memory_for(settings, code, "this commit is not linked")
    if memory is None:
        warn(problem or "this commit is not linked")
        return
    fd = process.open_log(log_path(settings))
    try:
        process.append_stamped(fd, f"post-commit {sha[:12]} in {code.worktree}")
        process.detach(  # survives the hook and git's Ctrl-C; never holds git's output open
            [sys.executable, "-m", "funes", "--format", "agent", "--memory", str(memory),
             "link", sha, "--hook"],
            cwd=code.worktree, stdout=fd, stderr=fd,
        )
    finally:
        os.close(fd)


def pre_push(settings: Settings, timeout: float = PUSH_TIMEOUT) -> None:
    """Push the memory of this work tree, within `timeout` seconds, never failing."""
    try:
        code = find_code_repo(settings.cwd)
    except NotAGitRepositoryError:
        return
    memory, problem = _memory_for(settings, code, "the memory was not pushed")
    if memory is None:
        warn(problem or "the memory was not pushed")
        return
    ok, detail = process.run_funes(["--format", "agent", "--memory", str(memory), "push"],
                                   cwd=code.worktree, timeout=timeout)
    if ok:
        warn(f"memory pushed{': ' + detail if detail else ''}")
    else:
        warn(f"the memory was not pushed ({detail}); the git push goes on (run `funes push`)")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the hook scripts; always returns 0."""
    args = sys.argv[1:] if argv is None else argv
    try:
        settings = load_settings()
        if args and args[0] == "post-commit":
            post_commit(settings)
        elif args and args[0] == "pre-push":
            pre_push(settings)
        else:
            warn(f"unknown hook {' '.join(args)!r} (reinstall with `funes hooks install`)")
    except Exception as exc:  # a hook must never break the git command, whatever happened
        warn(f"hook failed ({exc.__class__.__name__}: {exc}); the git command goes on")
    return 0


if __name__ == "__main__":
    sys.exit(main())
