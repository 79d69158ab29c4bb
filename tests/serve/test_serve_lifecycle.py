"""`funes serve` as a process: socket, status, stop, idle exit, signals, one per repository."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time
from typing import Any

import pytest

from funes import protocol
from funes.api import warm
from funes.storage.repo import Repository
from tests.serve.helpers import child_env, funes_cmd


def test_socket_is_private_short_and_removed_on_stop(memory: Repository, settings: Any,
                                                     start_server: Any, run: Any) -> None:
    server = start_server(memory)
    ep = warm.endpoint(settings)
    assert stat.S_IMODE(os.stat(ep.socket).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(ep.socket.parent).st_mode) == 0o700
    assert len(os.fsencode(ep.socket)) < 100  # AF_UNIX paths hold 107 bytes

    shown = run("--memory", str(memory.path), "--format", "json", "serve", "--status")
    assert shown.exit_code == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["pid"] == server.pid and status["home"] == str(settings.home.resolve())
    assert [m["path"] for m in status["memories"]] == [str(memory.path)]  # warmed up
    assert status["protocol"] == warm.PROTOCOL and status["idle_timeout"] == 600

    stopped = run("--memory", str(memory.path), "serve", "--stop")
    assert (stopped.exit_code, stopped.stdout) == (0, "stopped\n")
    assert server.wait_exit() == 0
    assert not ep.socket.exists() and not ep.lock.exists()
    assert "exiting (stopped)" in server.output()
    gone = run("--memory", str(memory.path), "serve", "--status")
    assert (gone.exit_code, gone.stdout) == (1, "not running\n")
    assert run("--memory", str(memory.path), "serve", "--stop").stdout == "not running\n"


def test_exits_when_idle(memory: Repository, settings: Any, start_server: Any) -> None:
    server = start_server(memory, "--idle", "1")
    warm.request(settings, "ping")  # a request restarts the idle clock
    assert server.wait_exit(30) == 0
    assert not warm.endpoint(settings).socket.exists()
    assert "exiting (idle)" in server.output()


def test_sigterm_removes_the_socket(memory: Repository, settings: Any,
                                   start_server: Any) -> None:
    server = start_server(memory)
    server.proc.terminate()
    assert server.wait_exit() == 0
    assert not warm.endpoint(settings).socket.exists()
    assert "exiting (signal)" in server.output()


def test_second_serve_for_the_same_user_exits_quietly(memory: Repository, settings: Any,
                                                        start_server: Any) -> None:
    first = start_server(memory)
    second = subprocess.run(funes_cmd("--memory", str(memory.path), "serve"),
                            capture_output=True, env=child_env(), timeout=60, check=False)
    assert (second.returncode, second.stdout, second.stderr) == (0, b"", b"")
    assert first.proc.poll() is None
    assert first.status(settings).pid == first.pid


def test_stale_socket_is_detected_and_replaced(memory: Repository, settings: Any,
                                               start_server: Any, run: Any) -> None:
    ep = warm.endpoint(settings)
    # What a server killed with SIGKILL leaves: the socket file, nobody listening.
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(ep.socket))
    stale.close()
    assert ep.socket.exists()
    with pytest.raises(warm.ServerUnavailable, match="ConnectionRefused"):
        warm.request(settings, "ping")
    answered = run("--memory", str(memory.path), "--format", "agent", "recall", "line reader")
    assert answered.exit_code == 0 and "line reader" in answered.stdout

    server = start_server(memory)
    assert server.status(settings).pid == server.pid


def test_refuses_requests_it_must_not_answer(memory: Repository, settings: Any,
                                             start_server: Any) -> None:
    start_server(memory)
    ep = warm.endpoint(settings)

    def ask(**fields: Any) -> dict[str, Any]:
        message = {"v": warm.PROTOCOL, "funes": __import__("funes").__version__, "op": "recall",
                   "repo": str(memory.path), "home": str(settings.home.resolve()),
                   "args": {"query": "line reader"}, **fields}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(ep.socket))
            sock.sendall(protocol.dumps(message))
            return protocol.loads(sock.makefile("rb").readline())

    assert ask()["ok"] is True
    assert ask(v=99)["refused"].startswith("protocol 99")
    elsewhere = ask(repo="/elsewhere/.funes")  # any memory may be asked about; this is none
    assert elsewhere["ok"] is False and elsewhere["error"]["exit_code"] == 3
    assert ask(home="/other/home")["refused"] == "another FUNES_HOME"
    assert ask(funes="0.0.0")["refused"].startswith("funes ")
    assert ask(op="explode")["refused"] == "unknown operation 'explode'"
    # Refusals and garbage do not kill it.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(ep.socket))
        sock.sendall(b"not json\n")
        assert sock.recv(100) == b""
    assert ask()["ok"] is True


def test_bad_idle_is_a_usage_error(memory: Repository, run: Any) -> None:
    result = run("--memory", str(memory.path), "serve", "--idle", "-1")
    assert result.exit_code == 2 and "--idle must be" in result.stderr


def test_simultaneous_starts_leave_exactly_one_server(memory: Repository, settings: Any,
                                                      start_server: Any) -> None:
    servers = [start_server(memory, ready=False) for _ in range(4)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        codes = [server.proc.poll() for server in servers]
        if codes.count(None) <= 1:
            break
        time.sleep(0.05)
    time.sleep(0.5)  # a second survivor would have had time to give up by now
    codes = [server.proc.poll() for server in servers]
    assert codes.count(None) == 1 and codes.count(0) == 3, codes
    winner = servers[codes.index(None)]
    winner.wait_ready(settings)
    assert winner.status(settings).pid == winner.pid
