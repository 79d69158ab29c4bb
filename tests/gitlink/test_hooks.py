"""Installing the hooks: chaining, order, byte-for-byte uninstall, core.hooksPath, worktrees."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from funes import api
from funes.gitlink import hookinstall as hooks
from funes.gitlink.coderepo import find_code_repo
from tests.conftest import REPO_ROOT
from tests.gitlink.conftest import T0, dulwich_commit, git, git_commit, needs_git

USER_POST_COMMIT = (
    b"#!/bin/sh\n# someone's own hook\necho \"user post-commit $#\" >> order.txt\nexit 3\n"
)
USER_PRE_PUSH = (
    b"#!/bin/sh\nwhile read local_ref local_sha remote_ref remote_sha; do\n"
    b"  echo \"user pre-push $1 $remote_ref\" >> order.txt\ndone\n"
    b"[ -f block-push ] && exit 1\nexit 0\n"
)


def _fake_python(tmp_path: Path) -> str:
    """A stand-in for the interpreter the hook runs, recording the call in order.txt."""
    path = tmp_path / "bin" / "python"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho "funes $*" >> order.txt\n')
    path.chmod(0o755)
    return str(path)


def _write_hook(path: Path, data: bytes, mode: int = 0o755) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode)


def _snapshot(directory: Path) -> dict[str, tuple[bytes | str, int]]:
    out: dict[str, tuple[bytes | str, int]] = {}
    for entry in sorted(directory.iterdir()):
        if entry.is_symlink():
            out[entry.name] = (os.readlink(entry), 0)
        else:
            out[entry.name] = (entry.read_bytes(), stat.S_IMODE(entry.stat().st_mode))
    return out


def test_packaged_scripts_and_the_top_level_copies_are_identical() -> None:
    for name in hooks.HOOK_NAMES:
        packaged = (REPO_ROOT / "funes" / "hooks" / f"git-{name}").read_bytes()
        assert (REPO_ROOT / "hooks" / f"git-{name}").read_bytes() == packaged, name
        assert f"{hooks.MARKER}{name}".encode() in packaged
        assert b"FUNES_PYTHON=@PYTHON@\n" in packaged


@needs_git
def test_existing_hooks_still_run_first_and_uninstall_restores_them_exactly(
    tmp_path: Path, code_repo: Path
) -> None:
    hooks_dir = code_repo / ".git" / "hooks"
    _write_hook(hooks_dir / "post-commit", USER_POST_COMMIT, 0o750)
    _write_hook(hooks_dir / "pre-push", USER_PRE_PUSH)
    before = _snapshot(hooks_dir)
    code = find_code_repo(code_repo)

    states = hooks.install(code, push=True, python=_fake_python(tmp_path))
    assert [(s.name, s.state, s.chained is not None) for s in states] == [
        ("post-commit", "funes", True), ("pre-push", "funes", True)
    ]
    git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    assert (code_repo / "order.txt").read_text().splitlines() == [
        "user post-commit 0",
        "funes -m funes.gitlink.hookrun post-commit",
    ]

    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(code_repo, "remote", "add", "origin", str(remote))
    (code_repo / "order.txt").unlink()
    pushed = git(code_repo, "push", "-q", "origin", "HEAD:refs/heads/main")
    assert pushed.returncode == 0
    assert (code_repo / "order.txt").read_text().splitlines() == [
        "user pre-push origin refs/heads/main",  # the original still reads git's input
        "funes -m funes.gitlink.hookrun pre-push origin " + str(remote),
    ]
    # the original hook can still stop a push, and funes then does not run
    (code_repo / "order.txt").unlink()
    (code_repo / "block-push").touch()
    git_commit(code_repo, {"a.txt": "b\n"}, "two", T0 + 10)
    (code_repo / "order.txt").unlink()
    blocked = git(code_repo, "push", "-q", "origin", "HEAD:refs/heads/main", check=False)
    assert blocked.returncode != 0
    assert (code_repo / "order.txt").read_text().splitlines() == [
        "user pre-push origin refs/heads/main"
    ]

    after = hooks.uninstall(code)
    assert [s.state for s in after] == ["other", "other"]
    assert _snapshot(hooks_dir) == before


@needs_git
def test_dulwich_commits_run_the_chain_too(tmp_path: Path, code_repo: Path) -> None:
    _write_hook(code_repo / ".git" / "hooks" / "post-commit", USER_POST_COMMIT)
    hooks.install(find_code_repo(code_repo), python=_fake_python(tmp_path))
    # the chain keeps the original's exit status (dulwich reports it; the commit stands)
    with pytest.warns(UserWarning, match="non-zero status 3"):
        dulwich_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    # dulwich runs hooks from the git directory
    assert (code_repo / ".git" / "order.txt").read_text().splitlines() == [
        "user post-commit 0",
        "funes -m funes.gitlink.hookrun post-commit",
    ]


def test_a_symlinked_hook_is_chained_and_restored_as_a_symlink(code_repo: Path) -> None:
    hooks_dir = code_repo / ".git" / "hooks"
    target = code_repo / "tools" / "hook.sh"
    _write_hook(target, b"#!/bin/sh\nexit 0\n")
    hooks_dir.mkdir(parents=True, exist_ok=True)
    (hooks_dir / "post-commit").symlink_to(target)
    before = _snapshot(hooks_dir)
    code = find_code_repo(code_repo)
    hooks.install(code)
    assert (hooks_dir / "post-commit.pre-funes").is_symlink()
    hooks.uninstall(code)
    assert _snapshot(hooks_dir) == before


def test_install_is_idempotent_and_refreshes_the_interpreter(tmp_path: Path,
                                                              code_repo: Path) -> None:
    hooks_dir = code_repo / ".git" / "hooks"
    _write_hook(hooks_dir / "post-commit", USER_POST_COMMIT)
    code = find_code_repo(code_repo)
    hooks.install(code, python="/old/venv/bin/python")
    hooks.install(code)
    hooks.install(code)
    assert (hooks_dir / "post-commit.pre-funes").read_bytes() == USER_POST_COMMIT
    state = hooks.status(code)[0]
    assert state.state == "funes" and state.python and Path(state.python).exists()
    assert not list(hooks_dir.glob(".post-commit.funes-*"))  # no temporary files left
    hooks.uninstall(code)
    assert (hooks_dir / "post-commit").read_bytes() == USER_POST_COMMIT
    assert not (hooks_dir / "post-commit.pre-funes").exists()


def test_install_refuses_to_overwrite_an_earlier_backup(code_repo: Path) -> None:
    hooks_dir = code_repo / ".git" / "hooks"
    _write_hook(hooks_dir / "post-commit", b"#!/bin/sh\necho new\n")
    _write_hook(hooks_dir / "post-commit.pre-funes", b"#!/bin/sh\necho old\n")
    before = _snapshot(hooks_dir)
    with pytest.raises(hooks.HookConflictError, match="pre-funes already exists"):
        hooks.install(find_code_repo(code_repo))
    assert _snapshot(hooks_dir) == before


def test_uninstall_leaves_a_hook_that_replaced_ours_alone(code_repo: Path) -> None:
    code = find_code_repo(code_repo)
    hooks.install(code)
    theirs = b"#!/bin/sh\necho theirs\n"
    _write_hook(code_repo / ".git" / "hooks" / "post-commit", theirs)
    hooks.uninstall(code)
    assert (code_repo / ".git" / "hooks" / "post-commit").read_bytes() == theirs


@needs_git
def test_core_hooks_path_is_respected(tmp_path: Path, code_repo: Path) -> None:
    git(code_repo, "config", "core.hooksPath", "githooks")
    _write_hook(code_repo / "githooks" / "post-commit", USER_POST_COMMIT)
    code = find_code_repo(code_repo)
    assert hooks.hooks_dir(code) == code_repo / "githooks"
    hooks.install(code, python=_fake_python(tmp_path))
    assert not (code_repo / ".git" / "hooks" / "post-commit").exists()
    git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    assert (code_repo / "order.txt").read_text().splitlines() == [
        "user post-commit 0",
        "funes -m funes.gitlink.hookrun post-commit",
    ]
    hooks.uninstall(code)
    assert (code_repo / "githooks" / "post-commit").read_bytes() == USER_POST_COMMIT


@needs_git
def test_a_linked_worktree_shares_the_hooks_of_its_repository(tmp_path: Path,
                                                                code_repo: Path) -> None:
    git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    worktree = tmp_path / "wt"
    git(code_repo, "worktree", "add", "-q", str(worktree))
    code = find_code_repo(worktree)
    assert code.worktree == worktree.resolve()
    assert code.common_dir == (code_repo / ".git").resolve()
    hooks.install(code, python=_fake_python(tmp_path))
    assert hooks.status(find_code_repo(code_repo))[0].state == "funes"
    git_commit(worktree, {"b.txt": "b\n"}, "in the worktree", T0 + 10)
    assert (worktree / "order.txt").read_text().splitlines() == [
        "funes -m funes.gitlink.hookrun post-commit"
    ]


def test_hooks_commands(code_repo: Path, run) -> None:  # type: ignore[no-untyped-def]
    status = run("hooks", "status")
    assert status.exit_code == 0
    assert "post-commit absent" in status.stdout
    assert "memory      none" in status.stdout
    installed = run("--format", "json", "hooks", "install", "--push")
    assert installed.exit_code == 0, installed.stderr
    assert '"state": "funes"' in installed.stdout
    removed = run("hooks", "uninstall")
    assert removed.exit_code == 0 and "post-commit absent" in removed.stdout


def test_hooks_outside_a_git_repository_fail_clearly(tmp_path: Path, monkeypatch,  # type: ignore[no-untyped-def]
                                                       run) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("hooks", "install")
    assert result.exit_code == 1
    assert result.stderr.startswith("funes: not inside a git work tree")


def test_status_names_the_memory_and_the_last_run(code_repo: Path) -> None:
    settings = api.load_settings()
    api.init(settings)
    report = api.hooks_status(settings)
    assert report.memory == (code_repo / ".funes").resolve()
    assert report.last_run is None


@needs_git
def test_a_hook_installed_before_the_rename_still_runs(code_repo: Path) -> None:
    """Hooks `funes hooks install` wrote earlier run `-m funes.gitlink.hook`: still works."""
    states = hooks.install(find_code_repo(code_repo))
    script = states[0].path
    text = script.read_text()
    assert "-m funes.gitlink.hookrun post-commit" in text
    script.write_text(text.replace("-m funes.gitlink.hookrun ", "-m funes.gitlink.hook "))
    assert hooks.status(find_code_repo(code_repo))[0].state == "funes"
    done = git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    assert done.returncode == 0
    # the hook ran its checks (this work tree has no memory) and said so in its one line
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("funes:")]
    assert len(lines) == 1 and "no funes memory" in lines[0], done.stderr
