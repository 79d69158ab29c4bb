"""Without a working server the CLI answers by itself; with FUNES_SERVE=auto it starts one."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from typing import Any

import pytest

from funes import api, protocol
from funes.api import warm
from funes.storage.repo import Repository
from tests.serve.helpers import START_TIMEOUT, kill_pid

QUERY = ("--format", "agent", "recall", "streaming parser leaked memory")


def _in_process(run: Any, monkeypatch: pytest.MonkeyPatch, memory: Repository) -> Any:
    monkeypatch.setenv("FUNES_SERVE", "off")
    return run("--memory", str(memory.path), *QUERY)


def test_no_server_means_in_process_work_and_no_server_started(
    memory: Repository, run: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FUNES_SERVE", "use")
    alone = run("--memory", str(memory.path), *QUERY)
    assert alone == _in_process(run, monkeypatch, memory)
    assert alone.exit_code == 0 and "line reader" in alone.stdout
    ep = warm.endpoint(warm_settings())
    assert not ep.socket.exists() and not warm.lock_held(ep)


def test_server_killed_mid_request(memory: Repository, settings: Any, start_server: Any,
                                   run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _in_process(run, monkeypatch, memory)
    server = start_server(memory)
    monkeypatch.setenv("FUNES_SERVE", "use")
    os.kill(server.pid, signal.SIGSTOP)  # it can take the connection but never answer
    answers: list[Any] = []
    asker = threading.Thread(target=lambda: answers.append(
        api.recall(warm_settings(), memory, "streaming parser leaked memory",
                   via_server=True)))
    asker.start()
    time.sleep(0.5)  # the request is sent and waiting for its answer
    assert not answers
    os.kill(server.pid, signal.SIGKILL)
    asker.join(60)
    assert answers and [h.row["text"] for h in answers[0].hits]
    server.wait_exit()
    # The dead server left its socket behind: a stale socket, and the CLI still answers.
    assert warm.endpoint(warm_settings()).socket.exists()
    assert run("--memory", str(memory.path), *QUERY) == expected


def warm_settings() -> Any:
    from funes._env import settings

    return settings()


def test_server_too_slow_times_out(memory: Repository, settings: Any, start_server: Any,
                                   run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _in_process(run, monkeypatch, memory)
    server = start_server(memory)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        monkeypatch.setenv("FUNES_SERVE", "use")
        monkeypatch.setenv("FUNES_SERVE_TIMEOUT", "0.5")
        started = time.monotonic()
        assert run("--memory", str(memory.path), *QUERY) == expected
        assert time.monotonic() - started < 30
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert server.status(settings).requests.get("recall", 0) <= 1  # it answered nobody in time


def test_recall_starts_a_server_on_demand(memory: Repository, settings: Any, run: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _in_process(run, monkeypatch, memory)
    monkeypatch.setenv("FUNES_SERVE", "auto")
    started = time.monotonic()
    first = run("--memory", str(memory.path), *QUERY)  # answered here, a server starts
    assert first == expected
    status = None
    try:
        while time.monotonic() - started < START_TIMEOUT:
            status = warm.server_status(warm_settings())
            if status is not None:
                break
            time.sleep(0.1)
        assert status is not None, warm.endpoint(warm_settings()).log.read_text()
        assert status.idle_timeout == warm.DEFAULT_IDLE
        second = run("--memory", str(memory.path), *QUERY)
        assert second == expected
        after = warm.server_status(warm_settings())
        assert after is not None and after.requests.get("recall") == 1
        # Another recall while it runs starts nothing new: still the same server.
        assert after.pid == status.pid
        got = run("--memory", str(memory.path), "get", "sess-parser", "sess-parser-m1")
        assert got.exit_code == 0
        assert warm.stop_server(warm_settings())
    finally:
        if status is not None:
            kill_pid(status.pid)


def test_auto_start_is_not_retried_while_a_start_is_recent(
    memory: Repository, settings: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    ep = warm.endpoint(settings)
    ep.spawned.touch()  # a start attempt a moment ago, whose server never came up
    # Within RESPAWN_AFTER of the last attempt: no second start.
    assert not warm.start_server(settings, warm=memory.path)
    assert not warm.lock_held(ep)


def test_a_server_of_another_version_is_asked_to_stop(
    memory: Repository, run: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = _in_process(run, monkeypatch, memory)
    ep = warm.endpoint(warm_settings())
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(ep.socket))
    listener.listen(4)
    listener.settimeout(30)
    ops: list[str] = []

    def old_server() -> None:  # what a funes from before an upgrade answers
        for _ in range(2):
            conn, _ = listener.accept()
            with conn:
                ops.append(protocol.loads(conn.makefile("rb").readline())["op"])
                conn.sendall(protocol.dumps({"v": warm.PROTOCOL, "ok": False,
                                         "refused": "funes 0.0.1", "funes": "0.0.1"}))

    thread = threading.Thread(target=old_server)
    thread.start()
    try:
        monkeypatch.setenv("FUNES_SERVE", "auto")
        assert run("--memory", str(memory.path), *QUERY) == expected
        thread.join(30)
    finally:
        listener.close()
        ep.socket.unlink()
    # The thin client asked first (`run`); the CLI then stopped it without asking again.
    assert ops == ["run", "stop"]
