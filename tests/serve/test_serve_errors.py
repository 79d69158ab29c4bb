"""The warm server's error paths: an unsafe socket directory, bad requests and answers, another
protocol, a crashing handler, and a server whose memory or socket disappears.

The rule they all check: the warm path is an optimisation, so whatever goes wrong, `funes
recall` still answers (in-process), nothing is written where another user could read it, and a
server never dies of a bad request nor outlives its memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from funes import __version__, protocol
from funes.api import warm
from funes.storage.repo import Repository

#: A uid no real account has, so its runtime directory is this test's alone.
FAKE_UID = 3_900_000 + os.getpid() % 50_000


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


@pytest.fixture
def fake_uid(memory: Repository) -> Iterator[Path]:
    """Run this process as if it were user FAKE_UID: its `/tmp/funes-<uid>` is a fresh path.

    Depends on `memory` so that the memory's own teardown runs as the real user again.
    """
    runtime = Path("/tmp") / f"funes-{FAKE_UID}"
    _remove(runtime)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "getuid", lambda: FAKE_UID)
        yield runtime
    _remove(runtime)


def _entries(path: Path) -> list[str]:
    return sorted(os.listdir(path)) if path.is_dir() and not path.is_symlink() else []


def _unsafe(runtime: Path, how: str, elsewhere: Path) -> None:
    if how == "owned by another user":
        runtime.mkdir(mode=0o700)  # owned by the real uid, which is not FAKE_UID
    elif how == "open to others":
        runtime.mkdir()
        if os.geteuid() != 0:
            pytest.skip("giving the directory to another uid needs root (CI runs as root)")
        os.chown(runtime, FAKE_UID, -1)
        runtime.chmod(0o755)
    elif how == "a symlink":
        elsewhere.mkdir(mode=0o700)
        runtime.symlink_to(elsewhere, target_is_directory=True)
    else:
        runtime.write_text("")


@pytest.mark.parametrize("how", ["owned by another user", "open to others", "a symlink",
                                 "a file"])
def test_an_unsafe_runtime_directory_is_never_used(
    how: str, fake_uid: Path, memory: Repository, run: Any, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another local user who prepared /tmp/funes-<uid> must get nothing: no socket, no log,
    no server; recall still answers, in-process."""
    elsewhere = tmp_path / "elsewhere"
    _unsafe(fake_uid, how, elsewhere)
    before = (_entries(fake_uid), _entries(elsewhere))
    served = run("--memory", str(memory.path), "serve", "--idle", "1")
    assert served.exit_code == 1, served.stderr
    assert "not a private directory" in served.stderr
    monkeypatch.setenv("FUNES_SERVE", "auto")  # would start a server if it could
    answered = run("--memory", str(memory.path), "--format", "agent", "recall", "line reader")
    assert answered.exit_code == 0, answered.stderr
    assert "line reader" in answered.stdout
    assert (_entries(fake_uid), _entries(elsewhere)) == before


def _ask_raw(ep: warm.Endpoint, payload: bytes, *, shut: bool = True) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(ep.socket))
        try:
            sock.sendall(payload)
            if shut:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: what an oversized request should get
        chunks = []
        try:
            while data := sock.recv(1 << 16):
                chunks.append(data)
        except ConnectionResetError:
            pass
        return b"".join(chunks)


def _message(settings: Any, repo: Repository, **fields: Any) -> bytes:
    message = {"v": warm.PROTOCOL, "funes": __version__, "op": "recall", "repo": str(repo.path),
               "home": str(settings.home.resolve()), "args": {"query": "line reader"}}
    return protocol.dumps({**message, **fields})


def test_bad_requests_get_nothing_and_the_server_lives_on(
    memory: Repository, settings: Any, start_server: Any
) -> None:
    server = start_server(memory)
    ep = warm.endpoint(settings)
    assert b'"ok": true' in _ask_raw(ep, _message(settings, memory))
    oversized = b"x" * (protocol.MAX_REQUEST + (1 << 17))  # no newline: it never ends
    for bad in (oversized, b"[1, 2, 3]\n", b'"just a string"\n', b"\xff\xfe\n", b"{\n"):
        assert _ask_raw(ep, bad) == b"", bad[:20]
    no_version = json.loads(_ask_raw(ep, _message(settings, memory, v=None)))
    assert no_version["ok"] is False and no_version["refused"].startswith("protocol None")
    assert server.proc.poll() is None
    assert b'"ok": true' in _ask_raw(ep, _message(settings, memory))


def test_a_crashing_handler_is_refused_logged_and_survived(
    memory: Repository, settings: Any, start_server: Any
) -> None:
    server = start_server(memory)
    ep = warm.endpoint(settings)
    crash = _message(settings, memory, args={"query": "line reader", "no_such_argument": 1})
    answer = json.loads(_ask_raw(ep, crash))
    assert answer == {"v": warm.PROTOCOL, "ok": False, "refused": "internal error",
                      "funes": __version__}
    assert "Traceback" in server.output() and "no_such_argument" in server.output()
    assert server.proc.poll() is None
    assert json.loads(_ask_raw(ep, _message(settings, memory)))["ok"] is True


# -- the client against a server that answers badly ---------------------------------------------


@pytest.fixture
def fake_server(memory: Repository, settings: Any) -> Iterator[Callable[[bytes], list[bytes]]]:
    """Listen on the server's socket and answer every request with the given bytes."""
    ep = warm.endpoint(settings)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(ep.socket))
    listener.listen(8)
    listener.settimeout(0.2)
    reply: list[bytes] = [b""]
    seen: list[bytes] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                data = b""
                while b"\n" not in data and (more := conn.recv(1 << 16)):
                    data += more
                seen.append(data)
                with contextlib.suppress(OSError):
                    conn.sendall(reply[0])

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()

    def answer_with(raw: bytes) -> list[bytes]:
        reply[0] = raw
        seen.clear()
        return seen

    yield answer_with
    stop.set()
    thread.join(5)
    listener.close()
    ep.socket.unlink(missing_ok=True)


@pytest.mark.parametrize("reply", [
    b"",  # the server died before answering
    b"not json at all\n",
    b"[]\n",
    b'{"v": 99, "ok": true, "result": {}}\n',  # another protocol version
    b'{"v": 1, "ok": true, "result": {"hits": "not a list"}}\n',
    b'{"v": 1, "ok": true, "result": {"unexpected": 1}}\n',
    b'{"v": 1, "ok": true, "result": "a string"}\n',
    b'{"v": 1, "ok": false, "refused": "internal error"}\n',
    b"OVERSIZED",  # replaced below: more than the client reads
], ids=["eof", "garbage", "array", "protocol-99", "bad-hits", "unknown-fields",
        "string-result", "refused", "oversized"])
def test_the_client_works_alone_when_the_answer_is_bad(
    reply: bytes, fake_server: Callable[[bytes], list[bytes]], memory: Repository, run: Any
) -> None:
    expected = run("--memory", str(memory.path), "--format", "agent", "recall", "line reader")
    assert expected.exit_code == 0 and "line reader" in expected.stdout
    if reply == b"OVERSIZED":
        reply = (b'{"v": 1, "ok": true, "result": "' + b"x" * (protocol.MAX_RESPONSE + (1 << 20))
                 + b'"}\n')
    seen = fake_server(reply)
    got = run("--memory", str(memory.path), "--format", "agent", "recall", "line reader")
    assert len(seen) == 1, "the client asked the server first"
    assert (got.exit_code, got.stdout) == (0, expected.stdout), got.stderr


# -- exits -------------------------------------------------------------------------------------


def test_closes_a_memory_that_is_deleted_and_lives_on(memory: Repository, settings: Any,
                                                      start_server: Any) -> None:
    server = start_server(memory, "--idle", "0")
    assert [m.path for m in server.status(settings).memories] == [str(memory.path)]
    shutil.rmtree(memory.path)
    deadline = time.monotonic() + 30
    while server.status(settings).memories and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.status(settings).memories == []  # one server per user: it serves others
    assert server.proc.poll() is None and warm.endpoint(settings).socket.exists()


def test_exits_when_its_socket_is_removed(memory: Repository, settings: Any,
                                          start_server: Any) -> None:
    server = start_server(memory, "--idle", "0")
    warm.endpoint(settings).socket.unlink()
    assert server.wait_exit(30) == 0
    assert "exiting (socket removed)" in server.output()


def test_a_request_may_end_at_eof_but_an_answer_may_not() -> None:
    for eof_ends, expected in ((True, b'{"op": "x"}'), (False, None)):
        a, b = socket.socketpair()
        with a, b:
            a.sendall(b'{"op": "x"}')
            a.shutdown(socket.SHUT_WR)
            if expected is None:
                with pytest.raises(ConnectionResetError):
                    protocol.read_line(b, protocol.MAX_REQUEST, eof_ends=eof_ends)
            else:
                assert protocol.read_line(b, protocol.MAX_REQUEST, eof_ends=eof_ends) == expected
    a, b = socket.socketpair()
    with a, b:
        a.shutdown(socket.SHUT_WR)
        with pytest.raises(ConnectionResetError):  # nothing at all is no request
            protocol.read_line(b, protocol.MAX_REQUEST, eof_ends=True)
