"""Fixtures for the warm server: a small embedded memory and real `funes serve` processes.

The memory is built once per test session (embedding is the slow part) and copied into each
test's own directory, so every test has a private repository and therefore its own socket.
Servers are real subprocesses running this checkout's code; every one a test starts is
stopped (SIGTERM, then SIGKILL) when the test ends, whatever happened.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from funes.api import warm
from funes.storage.repo import Repository
from tests.conftest import REPO_ROOT
from tests.serve.helpers import SESSIONS, ServerProcess, write_session


@pytest.fixture(scope="session")
def seed_memory(tmp_path_factory: pytest.TempPathFactory, shared_models: Path) -> Path:
    """A small memory, indexed through the real import path and fully embedded (built once)."""
    from funes import api
    from funes._env import settings as load

    base = tmp_path_factory.mktemp("seed")
    home = base / "home"
    home.mkdir()
    (home / "models").symlink_to(shared_models, target_is_directory=True)
    settings = replace(load(), home=home, cwd=base)
    repo = Repository.init(base / "mem" / ".funes", settings)
    sources = base / "sources"
    sources.mkdir()
    for sid, workdir, messages in SESSIONS:
        write_session(sources / f"{sid}.jsonl", sid, workdir, messages)
    api.index(settings, memory=str(repo.path), paths=[str(sources)], agents=["import"])
    drained = api.embed(settings, repo)
    assert drained.remaining == 0 and drained.embedded > 0
    # No rerank deadline: the server and the process must rank alike on a loaded machine.
    repo.config.set("recall.budget", "0")
    return repo.path


@pytest.fixture
def memory(seed_memory: Path, tmp_path: Path, settings: Any, with_models: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Repository]:
    """This test's own copy of the seed memory; recall in this process never auto-starts."""
    target = tmp_path / "mem" / ".funes"
    shutil.copytree(seed_memory, target, symlinks=True)
    monkeypatch.setenv("FUNES_SERVE", "use")
    # A server started on demand runs this checkout's code too.
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    yield Repository.open(target, settings)
    ep = warm.endpoint(settings)
    if not warm.lock_held(ep):  # servers are gone by now; leave nothing in /tmp/funes-<uid>
        for path in (ep.socket, ep.lock, ep.log, ep.spawned):
            path.unlink(missing_ok=True)


@pytest.fixture
def start_server(tmp_path: Path, settings: Any) -> Iterator[Any]:
    """Start `funes serve` subprocesses; `start_server(repo, "--idle", "5", ready=True)`."""
    started: list[ServerProcess] = []

    def _start(repo: Repository, *args: str, ready: bool = True) -> ServerProcess:
        server = ServerProcess(repo, tmp_path / f"server-{len(started)}.log", *args)
        started.append(server)
        if ready:
            server.wait_ready(settings)
        return server

    yield _start
    for server in started:
        server.stop()


