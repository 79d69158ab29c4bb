"""The distribution commands through the real CLI entry point (exit codes, output)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from funes.storage.repo import Repository
from tests.builders import make_batch


def _memory(path: Path, settings: Any, start: int, session: str = "s1") -> Repository:
    repo = Repository.init(path / ".funes", settings)
    repo.commit_chunks(make_batch(start, 5, session=session), "index")
    return repo


def test_remote_commands(run: Any, tmp_path: Path, settings: Any) -> None:
    a = _memory(tmp_path / "a", settings, 0)
    m = ["--memory", str(a.path)]
    assert run(*m, "remote", "add", "origin", str(tmp_path / "r")).exit_code == 0
    assert run(*m, "remote", "add", "origin", str(tmp_path / "r")).exit_code == 2
    assert run(*m, "remote", "add", "../bad", "x").exit_code == 2
    listed = run(*m, "--format", "agent", "remote", "list")
    assert listed.stdout.strip() == f"origin\t{tmp_path / 'r'}"
    assert run(*m, "remote", "set-url", "origin", "org/mem").exit_code == 0
    data = json.loads(run(*m, "--format", "json", "remote", "list").stdout)
    assert data == [{"name": "origin", "url": "hf://datasets/org/mem", "kind": "hf"}]
    assert run(*m, "remote", "remove", "origin").exit_code == 0
    assert run(*m, "remote", "list").stdout.strip() == ""
    missing = run(*m, "push", "nowhere")
    assert missing.exit_code == 2 and "funes remote add nowhere" in missing.stderr


def test_push_refused_pull_merge_clone(
    run: Any, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = tmp_path / "r"
    a = _memory(tmp_path / "a", settings, 0)
    ma = ["--memory", str(a.path)]
    run(*ma, "remote", "add", "origin", str(remote))
    first = run(*ma, "--format", "human", "push")
    assert first.exit_code == 0 and "new branch: main" in first.stdout
    again = run(*ma, "--format", "human", "push")
    assert again.exit_code == 0 and "everything up to date" in again.stdout

    monkeypatch.chdir(tmp_path)
    cloned = run("--format", "human", "clone", str(remote), "b")
    assert cloned.exit_code == 0 and "5 chunks" in cloned.stdout
    b = Repository.open(tmp_path / "b", settings)
    mb = ["--memory", str(b.path)]

    a.commit_chunks(make_batch(10, 3), "index: a")
    b.commit_chunks(make_batch(20, 3, session="s2"), "index: b")
    assert run(*ma, "push").exit_code == 0
    refused = run(*mb, "push")
    assert refused.exit_code == 4 and "fetch first" in refused.stderr

    fetched = run(*mb, "--format", "json", "fetch")
    assert fetched.exit_code == 0
    assert json.loads(fetched.stdout)["updated"][0]["ref"] == "refs/remotes/origin/main"
    merged = run(*mb, "--format", "human", "merge", "origin/main")
    assert merged.exit_code == 0 and "merge commit" in merged.stdout
    assert "11 chunks" in merged.stdout
    assert run(*mb, "--format", "human", "merge", "origin/main").stdout.startswith(
        "already up to date"
    )
    assert run(*mb, "push").exit_code == 0
    pulled = run(*ma, "--format", "human", "pull")
    assert pulled.exit_code == 0 and "fast-forward" in pulled.stdout

    log = run(*ma, "--format", "agent", "log", "-n", "1")
    assert "merge origin/main into main" in log.stdout
    assert run(*ma, "fsck").exit_code == 0 and run(*mb, "fsck").exit_code == 0


def test_unreachable_hub_exits_5(run: Any, tmp_path: Path, settings: Any,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on port 9
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    a = _memory(tmp_path / "a", settings, 0)
    m = ["--memory", str(a.path)]
    run(*m, "remote", "add", "origin", "org/mem")
    failed = run(*m, "push")
    assert failed.exit_code == 5 and "org/mem" in failed.stderr and "cannot reach" in failed.stderr
    assert run(*m, "fsck").exit_code == 0


def test_encrypted_remote_fails_closed(run: Any, tmp_path: Path, settings: Any) -> None:
    a = _memory(tmp_path / "a", settings, 0)
    m = ["--memory", str(a.path)]
    run(*m, "remote", "add", "origin", str(tmp_path / "r"))
    run(*m, "config", "set", "remote.origin.encrypt", "true")
    refused = run(*m, "push")  # encrypted, and no memory key on this machine: exit 5
    assert refused.exit_code == 5 and "encrypted" in refused.stderr
    assert not (tmp_path / "r").exists()


def test_first_push_says_what_it_created(run, tmp_path, settings) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / "a" / ".funes", settings)
    repo.commit_chunks(make_batch(0, 3), "seed")
    target = tmp_path / "remote"
    assert run("--memory", str(repo.path), "remote", "add", "origin", str(target)).exit_code == 0
    pushed = run("--memory", str(repo.path), "--format", "human", "push")
    assert pushed.exit_code == 0, pushed.stderr
    assert f"created the remote at {target}" in pushed.stdout
    assert "Hub" not in pushed.stdout
