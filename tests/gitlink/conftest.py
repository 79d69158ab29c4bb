"""Helpers for the git-integration tests: real git repositories (dulwich, and the git binary
as an independent check), real agent sessions moved into them, and waiting for the hook's
detached process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED_MISSING, trace_path

CLAUDE_A = trace_path("claude/marot__spotter__tool_heavy.jsonl")
CLAUDE_B = trace_path("claude/marot__spotter__short.jsonl")
CODEX = trace_path("codex/huggingface__funes__codex_session.jsonl")
PI = trace_path("pi/huggingface__funes__pi_session.jsonl")
GIT = shutil.which("git")

needs_traces = pytest.mark.skipif(
    not (CLAUDE_A.is_file() and CLAUDE_B.is_file()), reason=SHARED_MISSING
)
needs_git = pytest.mark.skipif(GIT is None, reason="no git binary for the independent check")

#: A fixed moment well in the past, so commit and turn times never depend on the clock.
T0 = int(datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC).timestamp())


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


def _rewrite(value: Any, cwd: str, stamp: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "cwd" and isinstance(item, str):
                out[key] = cwd
            elif key == "timestamp" and isinstance(item, str):
                out[key] = stamp
            else:
                out[key] = _rewrite(item, cwd, stamp)
        return out
    if isinstance(value, list):
        return [_rewrite(v, cwd, stamp) for v in value]
    return value


def session_at(src: Path, dest: Path, cwd: Path, start: float, end: float) -> None:
    """Copy a real transcript, moving its working directory to `cwd` and spreading its
    records' times evenly over [start, end] (seconds since the epoch)."""
    lines = src.read_text("utf-8").splitlines()
    step = (end - start) / max(1, len(lines) - 1)
    out = []
    for i, line in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        out.append(json.dumps(_rewrite(record, str(cwd), iso(start + i * step))))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(out) + "\n", "utf-8")


def init_git(path: Path) -> Path:
    """A new git repository (made by dulwich) with a committer identity."""
    from dulwich import porcelain

    path.mkdir(parents=True, exist_ok=True)
    repo = porcelain.init(str(path))
    config = repo.get_config()
    config.set((b"user",), b"name", b"Ada Lovelace")
    config.set((b"user",), b"email", b"ada@example.org")
    config.write_to_path()
    repo.close()
    return path


def dulwich_commit(repo: Path, files: dict[str, str], message: str, when: int) -> str:
    """Write files, stage them and commit through dulwich (which runs the hooks)."""
    from dulwich import porcelain

    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, "utf-8")
    porcelain.add(str(repo), [str(repo / n) for n in files])
    sha = porcelain.commit(
        str(repo), message=message.encode(), commit_timestamp=when, author_timestamp=when,
        commit_timezone=0, author_timezone=0,
    )
    return sha.decode("ascii")


def git(repo: Path, *args: str, env: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    assert GIT is not None
    return subprocess.run([GIT, *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, check=check, timeout=60)


def git_commit(repo: Path, files: dict[str, str], message: str,
               when: int) -> subprocess.CompletedProcess[str]:
    """Write files and commit them with the git binary (its hooks run as git runs them)."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, "utf-8")
    git(repo, "add", *files)
    date = f"@{when} +0000"
    return git(repo, "commit", "-q", "-m", message,
               env={"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date})


def wait_for(predicate: Callable[[], Any], timeout: float = 90.0, what: str = "") -> Any:
    """Poll until `predicate()` is truthy (the hook links in a detached process)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.2)


def wait_for_note(repo: Path, sha: str, log: Path | None = None) -> str:
    from funes.gitlink.coderepo import find_code_repo
    from funes.gitlink.notes import read_note

    code = find_code_repo(repo)
    try:
        return str(wait_for(lambda: read_note(code, sha), what=f"the note on {sha[:12]}"))
    except AssertionError:
        detail = log.read_text() if log is not None and log.exists() else "(no log)"
        raise AssertionError(f"no note on {sha[:12]}; hook log:\n{detail}") from None


@pytest.fixture
def agents_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Agent homes in the temp dir, exported so the hook's processes see them too."""
    dirs = {
        "claude": tmp_path / "agents" / "claude",
        "codex": tmp_path / "agents" / "codex",
        "pi": tmp_path / "agents" / "pi",
        "hermes": tmp_path / "agents" / "hermes",
    }
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(dirs["claude"]))
    monkeypatch.setenv("CODEX_HOME", str(dirs["codex"]))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(dirs["pi"]))
    monkeypatch.setenv("HERMES_HOME", str(dirs["hermes"]))
    return dirs


@pytest.fixture
def code_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty git repository that is also the current directory."""
    repo = init_git(tmp_path / "code")
    monkeypatch.chdir(repo)
    return repo


def settings_at(path: Path) -> Any:
    from dataclasses import replace

    from funes._env import settings

    return replace(settings(), cwd=path)


def hook_log() -> Path:
    from funes._env import settings

    return settings().home / "logs" / "git-hooks.log"
