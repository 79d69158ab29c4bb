"""Helpers for the warm-server tests: transcripts, subprocess environments, server processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from funes.api import warm
from funes.storage.repo import Repository
from tests.conftest import REPO_ROOT

#: Bound on how long a server may take to answer its first ping (imports, model load).
START_TIMEOUT = 60.0

#: Sessions of the seed memory: (session id, workdir, [(role, text, ISO time)]).
SESSIONS: list[tuple[str, str, list[tuple[str, str, str]]]] = [
    ("sess-parser", "/src/app", [
        ("user", "Why does the importer choke on large transcripts?", "2026-09-01T10:00:00Z"),
        ("assistant", "The streaming JSON parser buffered every record and leaked memory, so "
         "we replaced it with a line reader.", "2026-09-01T10:01:00Z"),
        ("user", "Great, the line reader fixed the large-file import.", "2026-09-01T10:05:00Z"),
    ]),
    ("sess-ci", "/src/app", [
        ("user", "CI failed with ERR_MODULE_NOT_FOUND when importing the config loader.",
         "2026-10-02T09:00:00Z"),
        ("assistant", "The loader used a relative import; switching to the package path "
         "fixed ERR_MODULE_NOT_FOUND.", "2026-10-02T09:02:00Z"),
    ]),
    ("sess-cache", "/src/tools", [
        ("user", "Startup is slow because embeddings are recomputed.", "2026-10-20T15:00:00Z"),
        ("assistant", "Decided to cache the embeddings on disk so restarts are fast.",
         "2026-10-20T15:03:00Z"),
        ("user", "Also rename the helper to isValidUuidFilename.", "2026-10-20T15:10:00Z"),
    ]),
]


def write_session(path: Path, session_id: str, workdir: str,
                  messages: list[tuple[str, str, str]]) -> Path:
    """A generic-import transcript (docs/import.md), one message per line."""
    with open(path, "w", encoding="utf-8") as fh:
        for i, (role, text, ts) in enumerate(messages):
            fh.write(json.dumps({"session_id": session_id, "id": f"{session_id}-m{i}",
                                 "role": role, "content": text, "cwd": workdir,
                                 "timestamp": ts}) + "\n")
    return path


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a funes subprocess: this test's, running this checkout's code."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"]
                                          if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


def funes_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "funes", *args]


class ServerProcess:
    """A `funes serve` subprocess (this user's server), started with `repo` to warm up."""

    def __init__(self, repo: Repository, log: Path, *args: str) -> None:
        self.repo = repo
        self.log = log
        self._log = open(log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            funes_cmd("--memory", str(repo.path), "serve", *args),
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env=child_env(),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, settings: Any, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}: {self.output()}")
            try:
                warm.request(settings, "ping", timeout=2)
                return
            except warm.ServerUnavailable:
                time.sleep(0.05)
        raise AssertionError(f"server did not answer within {timeout}s: {self.output()}")

    def status(self, settings: Any) -> warm.ServerStatus:
        found = warm.server_status(settings)
        assert found is not None, self.output()
        return found

    def wait_exit(self, timeout: float = 20.0) -> int:
        return self.proc.wait(timeout)

    def output(self) -> str:
        self._log.flush()
        return self.log.read_text("utf-8", "replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)  # a test may have stopped it
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def kill_pid(pid: int) -> None:
    """SIGKILL a server this test started indirectly (on demand), reaping it if it is ours."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                return
        except ChildProcessError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.02)
