from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from funes.storage.repo import Repository
from tests.builders import make_batch


def test_log_outside_a_repository_exits_3(run, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    result = run("log")
    assert result.exit_code == 3
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "not a funes repository" in lines[0] and "(run `funes init`" in lines[0]


def test_init_log_show_status_fsck(run, project_dir: Path, settings) -> None:  # type: ignore[no-untyped-def]
    assert run("init").exit_code == 0
    assert (project_dir / ".funes" / "FORMAT").exists()
    repo = Repository.open(project_dir, settings)
    first = repo.commit_chunks(make_batch(0, 4), "index: claude 1 sessions, 4 chunks").commit
    second = repo.commit_chunks(
        make_batch(0, 3, session="s2", harness="codex"), "index: codex"
    ).commit
    assert first and second

    log = run("--format", "agent", "log")
    assert log.exit_code == 0
    lines = log.stdout.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(second[:12]) and lines[0].endswith("index: codex (main)")
    assert lines[1].startswith(first[:12])

    as_json = json.loads(run("--format", "json", "log").stdout)
    assert [e["id"] for e in as_json] == [second, first]
    assert as_json[1]["message"] == "index: claude 1 sessions, 4 chunks"
    assert as_json[0]["parents"] == [first]

    assert run("log", "-n", "1").stdout.count("\n") == 1

    shown = run("--format", "human", "show", first[:10])
    assert shown.exit_code == 0
    assert f"commit {first}" in shown.stdout and "adds   4 chunks rows" in shown.stdout

    status = json.loads(run("--format", "json", "status").stdout)
    assert status["chunks"] == 7 and status["sessions"] == 2
    assert status["by_harness"]["codex"] == {"chunks": 3, "sessions": 1}
    assert status["head"] == second and status["kind"] == "project"

    fsck = run("fsck")
    assert fsck.exit_code == 0 and ": ok" in fsck.stdout


def test_fsck_exits_nonzero_on_damage(run, project_dir: Path, settings) -> None:  # type: ignore[no-untyped-def]
    run("init")
    repo = Repository.open(project_dir, settings)
    oid = repo.commit_chunks(make_batch(0, 2), "x").commit
    assert oid
    path = repo.objects.path_of(oid)
    path.write_bytes(path.read_bytes().replace(b'"x"', b'"y"'))
    result = run("fsck")
    assert result.exit_code == 1
    assert oid in result.stdout


def test_show_unknown_revision_and_corrupt_object(run, project_dir: Path, settings) -> None:  # type: ignore[no-untyped-def]
    run("init")
    bad = run("show", "nope")
    assert bad.exit_code == 2 and "unknown revision 'nope'" in bad.stderr
    assert "Traceback" not in bad.stderr
    repo = Repository.open(project_dir, settings)
    oid = repo.commit_chunks(make_batch(0, 2), "x").commit
    assert oid
    path = repo.objects.path_of(oid)
    path.write_bytes(path.read_bytes()[:-3])
    broken = run("show")
    assert broken.exit_code == 1 and oid in broken.stderr and "corrupt" in broken.stderr


def test_malformed_ref_gives_a_clear_error(run, project_dir: Path) -> None:  # type: ignore[no-untyped-def]
    run("init")
    (project_dir / ".funes/refs/heads/main").write_text("garbage\n")
    result = run("log")
    assert result.exit_code == 1
    assert "ref refs/heads/main is damaged" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    (project_dir / ".funes/HEAD").write_text("ref: ../../escape\n")
    result = run("status")
    assert result.exit_code == 1 and "HEAD is damaged" in result.stderr


def test_config_get_set_and_errors(run, project_dir: Path) -> None:  # type: ignore[no-untyped-def]
    run("init")
    assert run("config", "get", "recall.k").stdout == "8\n"  # default
    assert run("config", "set", "recall.k", "12").exit_code == 0
    assert run("config", "get", "recall.k").stdout == "12\n"
    assert run("config", "set", "remote.origin.url", "acme/memory").exit_code == 0
    assert "remote.origin.url=acme/memory" in run("config", "list").stdout
    unknown = run("config", "set", "recall.kk", "1")
    assert unknown.exit_code == 2 and "unknown config key 'recall.kk'" in unknown.stderr
    assert "recall.k" in unknown.stderr
    bad = run("config", "set", "recall.k", "0")
    assert bad.exit_code == 2 and "bad value for recall.k" in bad.stderr
    assert run("config", "get", "user.name").exit_code == 1  # unset, no default
    assert run("config", "unset", "recall.k").exit_code == 0
    assert run("config", "get", "recall.k").stdout == "8\n"


def test_unreadable_config_is_a_clear_error(run, project_dir: Path) -> None:  # type: ignore[no-untyped-def]
    run("init")
    config = project_dir / ".funes" / "config"
    config.write_text("[core\nbroken")
    result = run("config", "get", "recall.k")
    assert result.exit_code == 1 and "cannot parse" in result.stderr
    config.unlink()
    config.mkdir()
    result = run("config", "get", "recall.k")
    assert result.exit_code == 1 and "cannot read" in result.stderr
    assert "Traceback" not in result.stderr


def test_memory_and_chdir_options(run, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "elsewhere"
    target.mkdir()
    monkeypatch.chdir(tmp_path)
    assert run("init", str(target)).exit_code == 0
    assert run("--memory", str(target), "status").exit_code == 0
    assert run("--memory", str(target / ".funes"), "status").exit_code == 0
    assert run("-C", str(target), "status").exit_code == 0
    monkeypatch.chdir(tmp_path)  # -C changed this process's directory
    assert run("status").exit_code == 3


def test_global_memory(run, tmp_path: Path, monkeypatch, isolated_env: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert run("init", "--global").exit_code == 0
    assert (isolated_env / ".funes" / "FORMAT").exists()
    status = json.loads(run("--format", "json", "status").stdout)
    assert status["kind"] == "global"


def test_usage_errors_exit_2(run) -> None:  # type: ignore[no-untyped-def]
    result = run("--format", "yaml", "status")
    assert result.exit_code == 2 and "Invalid value" in result.stderr
    assert run("no-such-command").exit_code == 2


def test_version_and_debug_tracebacks(tmp_path: Path) -> None:
    env = {**os.environ, "FUNES_HOME": str(tmp_path / "h")}
    out = subprocess.run(
        [sys.executable, "-m", "funes", "--version"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert out.stdout.startswith("funes, version ")
    plain = subprocess.run(
        [sys.executable, "-m", "funes", "log"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert plain.returncode == 3 and "Traceback" not in plain.stderr
    debug = subprocess.run(
        [sys.executable, "-m", "funes", "log"],
        capture_output=True,
        text=True,
        env={**env, "FUNES_DEBUG": "1"},
        cwd=tmp_path,
    )
    assert debug.returncode == 3 and "Traceback" in debug.stderr


def test_broken_pipe_is_silent(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / ".funes", settings)
    for i in range(40):
        repo.commit_chunks(make_batch(i * 2, 2), f"commit {i} " + "x" * 2000)
    proc = subprocess.run(
        f"{sys.executable} -m funes -C {tmp_path} log | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        env={**os.environ, "FUNES_HOME": str(tmp_path)},
    )
    assert "Traceback" not in proc.stderr and "Broken pipe" not in proc.stderr


def test_init_twice_succeeds_and_changes_nothing(run, project_dir: Path, settings) -> None:  # type: ignore[no-untyped-def]
    assert run("init").exit_code == 0
    repo = Repository.open(project_dir, settings)
    oid = repo.commit_chunks(make_batch(0, 2), "x").commit
    again = run("init")
    assert again.exit_code == 0 and "Found existing project funes memory" in again.stdout
    assert Repository.open(project_dir, settings).head() == oid
