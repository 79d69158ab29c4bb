"""Agent hooks: exit 0 whatever happens, say nothing, index the new turn detached.

How fast the hook returns is measured by bench/bench_agent_hook.py (the target: under a
second); the tests here check behaviour, with time bounds only where a wrong behaviour would
show as waiting (for a held lock, for stdin that never closes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from funes.agents.turnhook import log_path, queue_dir
from funes.storage.lock import WriteLock
from tests.agents.conftest import child_env, wait_for
from tests.conftest import REPO_ROOT, SHARED_MISSING, trace_path

CLAUDE = trace_path("claude/marot__spotter__short.jsonl")
CODEX = trace_path("codex/huggingface__funes__codex_session.jsonl")
PI = trace_path("pi/huggingface__funes__pi_session.jsonl")
CODEX_THREAD = "019ef2fb-6574-7f83-bd99-9118713271f2"
needs_fixtures = pytest.mark.skipif(not CLAUDE.is_file(), reason=SHARED_MISSING)


def _hook(settings: Any) -> Path:
    return settings.home / "agents" / "agent-turn-end"


def _fire(settings: Any, args: list[str], stdin: str = "") -> int:
    """Run the installed hook script as the agent would; its exit code (it prints nothing)."""
    done = subprocess.run([str(_hook(settings)), *args], input=stdin, text=True,
                          capture_output=True, env=child_env(), timeout=30, check=False)
    assert done.stdout == "" and done.stderr == ""
    return done.returncode


def _log(settings: Any) -> str:
    try:
        return log_path(settings).read_text()
    except FileNotFoundError:
        return ""


def _settled(settings: Any, done_before: int) -> bool:
    """The detached run finished: the queue is empty and one more `done` line was logged."""
    queued = any(queue_dir(settings).glob("*.json")) if queue_dir(settings).exists() else False
    return not queued and _log(settings).count(" done ") > done_before


def _recall(run, query: str) -> str:  # type: ignore[no-untyped-def]
    out = run("--format", "agent", "recall", query)
    assert out.exit_code == 0, out.stderr
    return str(out.stdout)


@pytest.fixture
def claude_session(settings: Any, run) -> Path:  # type: ignore[no-untyped-def]
    """funes wired into Claude Code, and the first turns of a real session on disk."""
    assert run("add", "claude").exit_code == 0
    project = settings.claude_config_dir / "projects" / "-home-marco-projects-spotter"
    project.mkdir(parents=True)
    path = project / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl"
    lines = CLAUDE.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:7]))
    return path


def _stop_event(path: Path) -> str:
    return json.dumps({"session_id": "55604662-cf2a-4331-851a-ec234028f8ca",
                       "transcript_path": str(path), "cwd": "/home/marco/projects/spotter",
                       "hook_event_name": "Stop", "stop_hook_active": False})


def test_hook_scripts_ship_in_the_package_and_match() -> None:
    for name in ("agent-turn-end", "agent-pi-extension.ts"):
        top, packaged = REPO_ROOT / "hooks" / name, REPO_ROOT / "funes" / "hooks" / name
        assert top.read_bytes() == packaged.read_bytes(), f"hooks/{name} differs from the package"
    assert os.access(REPO_ROOT / "funes" / "hooks" / "agent-turn-end", os.X_OK)


@needs_fixtures
def test_hook_indexes_the_new_turn(settings: Any, claude_session: Path, run) -> None:  # type: ignore[no-untyped-def]
    code = _fire(settings, ["claude", "turn-end"], _stop_event(claude_session))
    assert code == 0
    wait_for(lambda: _settled(settings, 0), what="the first hook run")
    assert "tool use was rejected" not in _recall(run, "tool use was rejected")

    # the agent finishes another turn: the transcript grows, the Stop hook fires again
    lines = CLAUDE.read_text().splitlines(keepends=True)
    with claude_session.open("a") as fh:
        fh.write("".join(lines[7:]))
    code = _fire(settings, ["claude", "turn-end"], _stop_event(claude_session))
    assert code == 0
    wait_for(lambda: _settled(settings, 1), what="the second hook run")
    found = _recall(run, "tool use was rejected")
    assert "The tool use was rejected" in found
    assert "55604662-cf2a-4331-851a-ec234028f8ca" in found


@needs_fixtures
def test_a_script_installed_before_the_rename_still_indexes(settings: Any,
                                                            claude_session: Path) -> None:
    """Scripts `funes add` wrote earlier run `-m funes.agents.hook`: that name still works."""
    script = _hook(settings)
    text = script.read_text()
    assert "-m funes.agents.turnhook " in text
    script.write_text(text.replace("-m funes.agents.turnhook ", "-m funes.agents.hook "))
    assert _fire(settings, ["claude", "turn-end"], _stop_event(claude_session)) == 0
    wait_for(lambda: _settled(settings, 0), what="the hook run")
    assert "new chunks in" in _log(settings)


@needs_fixtures
def test_hook_with_the_repository_locked_returns_at_once(settings: Any, claude_session: Path,
                                                         run) -> None:  # type: ignore[no-untyped-def]
    lock = WriteLock(settings.home / "lock", 0)  # another writer holds the global memory
    lock.acquire()
    try:
        code = _fire(settings, ["claude", "turn-end"], _stop_event(claude_session))
        assert code == 0
        # Returned before anyone gave up on the lock (after its 5 s timeout): the foreground
        # never waits for it, the detached run does.
        assert "memory is busy" not in _log(settings)
        wait_for(lambda: _settled(settings, 0), what="the hook run to give up")
        assert "memory is busy" in _log(settings)
    finally:
        lock.release()
    assert "no results" in _recall(run, "phx server start")
    # nothing was lost: the next turn's hook indexes what the busy one skipped
    code = _fire(settings, ["claude", "turn-end"], _stop_event(claude_session))
    wait_for(lambda: _settled(settings, 1), what="the next hook run")
    assert "mix phx.server" in _recall(run, "phx server start")


def test_one_indexer_at_a_time(settings: Any, run) -> None:  # type: ignore[no-untyped-def]
    assert run("add", "claude").exit_code == 0
    busy = WriteLock(settings.home / "agents" / "hook.lock", 0)
    busy.acquire()
    try:
        queued = queue_dir(settings) / "1-1.json"
        queued.parent.mkdir(parents=True, exist_ok=True)
        queued.write_text(json.dumps({"id": "1-1", "agent": "claude", "event": "turn-end",
                                      "payload": {}}))
        start = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "funes", "hook", "run"], env=child_env(),
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0 and time.monotonic() - start < 10
        assert "another hook run is indexing" in out.stdout
        assert queued.exists()  # left for the run that holds the lock
    finally:
        busy.release()


def test_hook_never_fails_even_when_funes_is_broken(settings: Any, run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert run("add", "claude").exit_code == 0
    hook = _hook(settings)
    # FUNES_HOME is a file: the foreground cannot queue anything, and must still say nothing
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    done = subprocess.run([str(hook), "claude", "turn-end"], input="{not json", text=True,
                          capture_output=True, env=child_env({"FUNES_HOME": str(blocked)}),
                          timeout=30, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    # the Python it points at is gone (funes uninstalled): still exit 0, at once
    text = hook.read_text()
    hook.write_text(text.replace(f"FUNES_PYTHON={sys.executable}",
                                 "FUNES_PYTHON=/nonexistent/python"))
    code = _fire(settings, ["claude", "session-end"], "{}")
    assert code == 0
    # stdin never closes (a misbehaving caller): the foreground gives up on its own
    hook.write_text(text)
    proc = subprocess.Popen([str(hook), "claude", "turn-end"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
    assert proc.wait(timeout=10) == 0
    assert proc.stdin is not None
    proc.stdin.close()


@needs_fixtures
def test_codex_notify_indexes_and_runs_the_users_previous_program(settings: Any, run,  # type: ignore[no-untyped-def]
                                                                  tmp_path: Path) -> None:
    seen = tmp_path / "previous-notify.txt"
    previous = tmp_path / "their-notify"
    previous.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {seen}\n")
    previous.chmod(0o755)
    config = settings.codex_home / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'notify = ["{previous}", "--from-codex"]\n')
    rollout = (settings.codex_home / "sessions" / "2026" / "06" / "01" /
               f"rollout-2026-06-01T10-00-00-{CODEX_THREAD}.jsonl")
    rollout.parent.mkdir(parents=True)
    shutil.copy(CODEX, rollout)
    assert run("add", "codex").exit_code == 0

    import tomlkit

    notify = [str(v) for v in tomlkit.parse(config.read_text())["notify"]]
    event = json.dumps({"type": "agent-turn-complete", "thread-id": CODEX_THREAD,
                        "turn-id": "1", "cwd": "/home/user/portfolio",
                        "input-messages": ["make me a portfolio website"],
                        "last-assistant-message": "done"})
    done = subprocess.run([*notify, event], env=child_env(), timeout=30, check=False)
    assert done.returncode == 0
    wait_for(lambda: _settled(settings, 0), what="the codex hook run")
    wait_for(seen.exists, what="the previous notify program")
    assert seen.read_text().splitlines() == ["--from-codex", event]
    assert "portfolio website" in _recall(run, "portfolio website graphic designer")


@needs_fixtures
def test_session_end_syncs_a_memory_with_a_remote(settings: Any, claude_session: Path,
                                                   tmp_path: Path, run) -> None:  # type: ignore[no-untyped-def]
    remote = tmp_path / "remote"
    added = run("--memory", str(settings.home), "remote", "add", "origin", str(remote))
    assert added.exit_code == 0, added.stderr
    event = json.loads(_stop_event(claude_session))
    code = _fire(settings, ["claude", "session-end"],
                 json.dumps({**event, "hook_event_name": "SessionEnd"}))
    assert code == 0
    wait_for(lambda: _settled(settings, 0), what="the session-end hook run")
    assert "sync: " in _log(settings) and "not synced" not in _log(settings)
    clone = run("clone", str(remote), str(tmp_path / "copy"))
    assert clone.exit_code == 0, clone.stderr
    out = run("--format", "agent", "recall", "phx server start", "--memory",
              str(tmp_path / "copy"))
    assert "mix phx.server" in out.stdout


def test_session_start_brings_the_memory_up_to_date(settings: Any, tmp_path: Path,
                                                     run) -> None:  # type: ignore[no-untyped-def]
    from funes import api
    from funes.storage.repo import Repository
    from tests.builders import make_chunk

    assert run("add", "claude").exit_code == 0
    remote = tmp_path / "remote"
    other = Repository.init(tmp_path / "other-machine" / ".funes", settings)
    other.commit_chunks([make_chunk(1, text="written on the other machine")], "index")
    api.remote_add(other, "origin", str(remote))
    api.push(other)
    assert run("--memory", str(settings.home), "remote", "add", "origin",
               str(remote)).exit_code == 0
    event = {"session_id": "55604662-cf2a-4331-851a-ec234028f8ca", "cwd": str(tmp_path),
             "hook_event_name": "SessionStart", "source": "startup"}
    assert _fire(settings, ["claude", "session-start"], json.dumps(event)) == 0
    wait_for(lambda: _settled(settings, 0), what="the session-start hook run")
    assert "sync: " in _log(settings) and "no transcript" not in _log(settings)
    assert "written on the other machine" in _recall(run, "written on the other machine")


@needs_fixtures
def test_pi_extension_event_indexes_its_session(settings: Any, run) -> None:  # type: ignore[no-untyped-def]
    assert run("add", "pi").exit_code == 0
    session = settings.pi_home / "sessions" / "--home-user-earth--" / "2026_session.jsonl"
    session.parent.mkdir(parents=True)
    shutil.copy(PI, session)
    # what the extension runs on agent_end: the event as the last argument
    event = json.dumps({"session_file": str(session), "cwd": "/home/user/earth"})
    code = _fire(settings, ["pi", "turn-end", event])
    assert code == 0
    wait_for(lambda: _settled(settings, 0), what="the pi hook run")
    assert " pi: " in _log(settings) and "new chunks" in _log(settings)
    assert run("--format", "json", "status").stdout.count('"pi"') >= 1


@needs_fixtures
def test_hook_embeds_some_of_the_backlog(settings: Any, with_models: Path, claude_session: Path,
                                         run) -> None:  # type: ignore[no-untyped-def]
    code = _fire(settings, ["claude", "turn-end"], _stop_event(claude_session))
    assert code == 0
    wait_for(lambda: _settled(settings, 0), timeout=120, what="the hook run with embedding")
    assert "embed: 3 chunks" in _log(settings)
    from funes.inference.embedder import default_threads

    threads = max(1, default_threads() - 1)  # one CPU left to the agent
    assert f"({threads} llama.cpp thread{'s' if threads > 1 else ''})" in _log(settings)
    status = json.loads(run("--format", "json", "status").stdout)
    assert status["search"]["embedded"] == 3 and status["search"]["backlog"] == 0


@needs_fixtures
def test_add_index_runs_the_first_index(settings: Any, run) -> None:  # type: ignore[no-untyped-def]
    project = settings.claude_config_dir / "projects" / "-home-marco-projects-spotter"
    project.mkdir(parents=True)
    shutil.copy(CLAUDE, project / "55604662-cf2a-4331-851a-ec234028f8ca.jsonl")
    out = run("add", "claude", "--index")
    assert out.exit_code == 0, out.stderr
    assert "indexed 1 sessions" in out.stdout
    assert "mix phx.server" in _recall(run, "phx server start")


@needs_fixtures
def test_hook_worker_packs_the_memory_once_it_is_due(settings: Any, claude_session: Path,
                                                     run) -> None:  # type: ignore[no-untyped-def]
    from funes.storage.fsck import fsck
    from funes.storage.repo import Repository

    assert run("config", "set", "pack.threshold", "3").exit_code == 0
    lines = CLAUDE.read_text().splitlines(keepends=True)
    cuts = [*list(range(8, len(lines), max(1, (len(lines) - 8) // 5)))[:5], len(lines)]
    for done, cut in enumerate(cuts):
        claude_session.write_text("".join(lines[:cut]))  # the agent finished another turn
        code = _fire(settings, ["claude", "turn-end"], _stop_event(claude_session))
        assert code == 0
        wait_for(lambda done=done: _settled(settings, done), what=f"hook run {done + 1}")
    assert "pack: " in _log(settings)  # no command from the user
    repo = Repository.open(settings.home, settings)
    commits = len(list(repo.walk()))
    assert commits >= 4 and len(repo.chunks.dataset().get_fragments()) < commits
    assert fsck(repo).ok
