"""One server per user: every memory it is asked about, opened on demand, closed when gone."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from funes.cli import thin
from funes.storage.repo import Repository


def _copy(memory: Repository, target: Path, settings: Any) -> Repository:
    shutil.copytree(memory.path, target / ".funes", symlinks=True)
    return Repository.open(target / ".funes", settings)


def test_one_server_answers_every_memory(memory: Repository, settings: Any, start_server: Any,
                                         run: Any, monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    other = _copy(memory, tmp_path / "other", settings)
    server = start_server(memory)
    monkeypatch.setenv("FUNES_SERVE", "use")
    for repo in (memory, other, memory):
        found = run("--memory", str(repo.path), "--format", "agent", "recall", "line reader")
        assert found.exit_code == 0 and f"--memory {repo.path}" in found.stdout
    status = server.status(settings)
    assert status.pid == server.pid and status.requests == {"recall": 3}
    assert [m.path for m in status.memories] == [str(memory.path), str(other.path)]
    assert [m.requests for m in status.memories] == [3, 1]  # warm-up, then two recalls
    assert status.embedder_loads == 1  # one model for both memories

    shutil.rmtree(other.path)  # a memory deleted while open is closed on the next tick
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if [m.path for m in server.status(settings).memories] == [str(memory.path)]:
            break
        time.sleep(0.1)
    assert [m.path for m in server.status(settings).memories] == [str(memory.path)]
    gone = run("--memory", str(other.path), "recall", "line reader")
    assert gone.exit_code == 3 and gone.stderr.startswith("funes: not a funes repository")


def test_thin_client_answers_through_the_server(memory: Repository, settings: Any,
                                                start_server: Any, run: Any,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    start_server(memory)
    monkeypatch.setenv("FUNES_SERVE", "use")
    argv = ["recall", "why", "did", "the", "importer", "choke", "--memory", str(memory.path),
            "--format", "json", "-k", "2", "--half-life", "0"]  # no clock in the scores
    capsys.readouterr()
    assert thin.run(argv) == 0  # answered: the full CLI never ran
    served = capsys.readouterr()
    monkeypatch.setenv("FUNES_SERVE", "off")
    local = run(*argv)
    assert (served.out, served.err) == (local.stdout, local.stderr)
    assert '"query": "why did the importer choke"' in served.out
    # What it is not sure of goes to the full CLI.
    monkeypatch.setenv("FUNES_SERVE", "use")
    for unsure in (["recall", "x", "--help"], ["--version"], ["status"],
                   ["recall", "x", "--harness", "No Body"], ["recall", "x", "-k3"],
                   ["--format", "human", "recall", "x"], ["recall", "x", "--memory", "org/name"],
                   ["get"], ["get", "s", "t", "--from", "1"], ["sessions", "extra"],
                   ["sessions", "--harness", "No Body!"], ["sketch"], ["scan"],
                   ["recall", "x", "--role", "\x01"], ["scan", "x", "--memory", "a",
                                                         "--memory", "b"]):
        assert thin.run(unsure) is None, unsure
