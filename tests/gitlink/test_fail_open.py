"""The hooks never break git: no memory, a broken one or a locked one, a slow push."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from funes import api
from funes.gitlink.coderepo import find_code_repo
from funes.gitlink.hookinstall import install
from funes.storage.lock import WriteLock
from funes.storage.repo import Repository
from tests.gitlink.conftest import (
    CLAUDE_A,
    T0,
    git,
    git_commit,
    hook_log,
    needs_git,
    needs_traces,
    session_at,
    settings_at,
    wait_for_note,
)

pytestmark = needs_git


def _funes_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("funes:")]


def test_no_memory_means_one_warning_and_a_commit(code_repo: Path) -> None:
    install(find_code_repo(code_repo))
    done = git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    assert done.returncode == 0
    lines = _funes_lines(done.stderr)
    assert len(lines) == 1 and "no funes memory" in lines[0]
    assert git(code_repo, "rev-list", "--count", "HEAD").stdout.strip() == "1"


@pytest.mark.parametrize(
    "damage",
    [
        lambda m: (m / "FORMAT").write_text("something else\n"),
        lambda m: (m / "refs" / "heads" / "main").write_text("not a commit id\n"),
        lambda m: (m / "FORMAT").write_text("funes-repository 99\n"),
    ],
    ids=["format", "head-ref", "newer-format"],
)
def test_a_broken_memory_means_one_warning_and_a_commit(code_repo: Path, damage) -> None:  # type: ignore[no-untyped-def]
    memory = api.init(settings_at(code_repo)).repo.path
    damage(memory)
    install(find_code_repo(code_repo))
    done = git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    assert done.returncode == 0
    lines = _funes_lines(done.stderr)
    assert len(lines) == 1 and "not linked" in lines[0], done.stderr


@needs_traces
def test_a_locked_memory_delays_the_link_but_not_the_commit(
    code_repo: Path, agents_env: dict[str, Path]
) -> None:
    settings = settings_at(code_repo)
    memory = api.init(settings).repo
    (code_repo / ".gitignore").write_text(".funes/\n")
    session_at(CLAUDE_A, agents_env["claude"] / "projects" / "p" / "a.jsonl", code_repo,
               T0 - 300, T0 - 10)
    install(find_code_repo(code_repo))
    with WriteLock(memory.path / "lock", 0):  # another funes is writing
        started = time.monotonic()
        # captured through pipes, as an agent runs git: the detached worker must not hold them
        done = git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
        elapsed = time.monotonic() - started
        assert done.returncode == 0
        assert len(_funes_lines(done.stderr)) <= 1
        assert elapsed < 5, f"git commit took {elapsed:.1f}s with the memory locked"
        time.sleep(0.5)
    sha = git(code_repo, "rev-parse", "HEAD").stdout.strip()
    wait_for_note(code_repo, sha, hook_log())  # linked once the lock was free
    reopened = Repository.open(memory.path, settings)
    assert api.linked_turns(reopened, "HEAD")


def test_pre_push_never_stops_the_push(tmp_path: Path, code_repo: Path) -> None:
    api.init(settings_at(code_repo))
    (code_repo / ".gitignore").write_text(".funes/\n")
    install(find_code_repo(code_repo), push=True)
    git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(code_repo, "remote", "add", "origin", str(remote))
    pushed = git(code_repo, "push", "-q", "origin", "HEAD:refs/heads/main", check=False)
    assert pushed.returncode == 0, pushed.stderr
    # this memory has no remote, so `funes push` cannot succeed: one warning, push done
    lines = _funes_lines(pushed.stderr)
    assert len(lines) == 1 and "memory was not pushed" in lines[0], pushed.stderr
    assert git(remote, "rev-parse", "main").stdout.strip() == git(
        code_repo, "rev-parse", "HEAD").stdout.strip()


@pytest.mark.parametrize("python", ["traceback", "missing"])
def test_a_broken_funes_install_still_prints_one_line(tmp_path: Path, code_repo: Path,
                                                       python: str) -> None:
    fake = tmp_path / "venv" / "bin" / "python"
    if python == "traceback":
        fake.parent.mkdir(parents=True)
        fake.write_text(
            "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n"
            "echo '  File \"<frozen runpy>\", line 1' >&2\n"
            "echo \"ModuleNotFoundError: No module named 'funes'\" >&2\nexit 1\n"
        )
        fake.chmod(0o755)
    install(find_code_repo(code_repo), python=str(fake))
    done = git_commit(code_repo, {"a.txt": "a\n"}, "one", T0)
    assert done.returncode == 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("funes: ")
