"""`funes mcp`: relay an agent's MCP session to the per-user warm server.

Every agent session starts its own `funes mcp`; if each loaded the models and opened the
datasets, eight agents would hold eight copies. This process holds none: it connects to the
user's warm server (starting it when none runs, `FUNES_SERVE=auto`), sends one line (op `mcp`,
its working directory and MEMORY), and then copies bytes: stdin to the server, the server's
answers to stdout. The MCP session itself runs in the server (funes.api.serve_mcp), on the
official SDK. Standard library only, like funes.cli.thin, until it has to work alone: eight
agents run eight relays, so what one imports counts eight times (no `typing`, no `dataclasses`:
it reads its environment with `funes._env.client_env`, not `Settings`).

**When the server cannot serve.** No server comes up within `START_WAIT` seconds, or it
refuses (another funes version), or `FUNES_SERVE` is `off` or `use` with none running: the
session runs in this process instead (funes.api.mcp_serve), as before the relay existed.

**When the server goes away mid-session** (stopped, upgraded, killed), the relay connects to
a new one (or, failing that, serves in this process) and replays what the agent's client sent
to open the session (`initialize` and `notifications/initialized`, whose answers it swallows),
then re-sends the requests that had no answer yet: every tool is read-only, so asking again is
safe, and the agent sees one uninterrupted session.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time

TYPE_CHECKING = False  # typing's constant, without importing typing
if TYPE_CHECKING:
    from typing import Any, BinaryIO

    from funes._env import ClientEnv

__all__ = ["run"]

#: Seconds to wait for a server started on demand to accept connections.
START_WAIT = 20.0
#: Largest MCP message relayed (a line of JSON).
MAX_LINE = 64 << 20


class _Lost(Exception):
    """The server end of the session went away."""


class _Relay:
    def __init__(self, memory: str | None, connect: Any) -> None:
        self.memory = memory
        self.connect = connect  # () -> socket.socket | None
        self.lock = threading.Lock()  # guards `conn` and writes to it
        self.conn: socket.socket | None = None
        self.opening: list[bytes] = []  # initialize and initialized, as the client sent them
        self.init_id: Any = None
        self.pending: dict[str, bytes] = {}  # request id → the request line
        self.swallow: set[str] = set()  # ids whose answers the client must not see twice
        self.stdin_done = threading.Event()
        self.out = sys.stdout.buffer

    # -- client → server ---------------------------------------------------------------------

    def pump_stdin(self, stdin: BinaryIO) -> None:
        try:
            while True:
                line = stdin.readline(MAX_LINE)
                if not line:
                    break
                self._note_request(line)
                self._send(line)
        finally:
            self.stdin_done.set()
            with self.lock, contextlib.suppress(OSError):
                if self.conn is not None:
                    self.conn.shutdown(socket.SHUT_WR)

    def _note_request(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or "method" not in message:
            return  # a response to a server request, or garbage: nothing to replay
        method = message["method"]
        if method == "initialize":
            self.opening = [line]
            self.init_id = message.get("id")
        elif method == "notifications/initialized":
            self.opening.append(line)
        elif "id" in message:
            with self.lock:
                self.pending[json.dumps(message["id"])] = line

    def _send(self, line: bytes) -> None:
        with self.lock:
            if self.conn is None:
                return
            # A failure here is noticed by the reading side, which reconnects and re-sends
            # the requests still waiting for an answer.
            with contextlib.suppress(OSError):
                self.conn.sendall(line if line.endswith(b"\n") else line + b"\n")

    # -- server → client ---------------------------------------------------------------------

    def pump_server(self) -> None:
        """Copy the server's lines to stdout until the session ends; reconnect when lost."""
        while True:
            assert self.conn is not None
            reader = self.conn.makefile("rb")
            try:
                for line in iter(lambda r=reader: r.readline(MAX_LINE), b""):  # type: ignore[misc]
                    self._deliver(line)
            except OSError:
                pass
            finally:
                reader.close()
            if self.stdin_done.is_set():
                return
            if not self._reconnect():
                return

    def _deliver(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if isinstance(message, dict) and "method" not in message and "id" in message:
            key = json.dumps(message["id"])
            if key in self.swallow:
                self.swallow.discard(key)
                return
            with self.lock:
                self.pending.pop(key, None)
        self.out.write(line)
        self.out.flush()

    def _reconnect(self) -> bool:
        """A new connection with the session replayed; False when none can be made."""
        conn = self.connect()
        if conn is None:
            return False
        with self.lock:
            old, self.conn = self.conn, conn
            if old is not None:
                with contextlib.suppress(OSError):
                    old.close()
            if self.init_id is not None:
                self.swallow.add(json.dumps(self.init_id))
            for line in [*self.opening, *self.pending.values()]:
                try:
                    conn.sendall(line if line.endswith(b"\n") else line + b"\n")
                except OSError:
                    break
        return True


def _open(settings: ClientEnv, memory: str | None, wait: float) -> socket.socket | None:
    """A connection to this user's server with the session opened; None if it cannot."""
    from funes import protocol

    try:
        ep = protocol.endpoint(settings.home)
    except protocol.Unavailable:
        return None
    deadline = time.monotonic() + wait
    warm = ["--memory", memory] if memory and memory.startswith("/") else []
    while True:
        conn = _handshake(ep, settings, memory)
        if conn is not None:
            return conn
        if settings.serve != "auto":
            return None
        # Starts one unless one runs, is starting, or was started a moment ago (protocol).
        protocol.spawn(ep, [sys.executable, "-m", "funes", *warm, "serve", "--idle", "600"])
        if time.monotonic() > deadline or not (protocol.lock_held(ep) or _starting(ep)):
            return None
        time.sleep(0.1)


def _starting(ep: Any) -> bool:
    """Whether a server was started a moment ago (its lock may not be taken yet)."""
    try:
        return bool(time.time() - ep.spawned.stat().st_mtime < 5)
    except OSError:
        return False


def _handshake(ep: Any, settings: ClientEnv, memory: str | None) -> socket.socket | None:
    from funes import protocol

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(settings.serve_timeout)
        sock.connect(str(ep.socket))
        sock.sendall(protocol.dumps(protocol.message(
            "mcp", settings.home, None, {"cwd": os.getcwd(), "memory": memory})))
        answer = protocol.loads(protocol.read_line(sock, protocol.MAX_RESPONSE))
    except (OSError, ValueError):
        sock.close()
        return None
    if not answer.get("ok"):
        sock.close()
        from funes import __version__

        if answer.get("funes") not in (None, __version__):
            with contextlib.suppress(protocol.Unavailable):
                protocol.exchange(ep, protocol.message("stop", settings.home, None, {}), 5)
        return None
    sock.settimeout(None)
    return sock


def _in_process(memory: str | None) -> socket.socket:
    """One end of a socket pair whose other end an MCP session in this process serves."""
    from funes._env import settings
    from funes.api.mcp_backend import serve_local

    ours, theirs = socket.socketpair()
    threading.Thread(target=serve_local, args=(settings(), memory, theirs), daemon=True,
                     name="mcp-local").start()
    return ours


def _alone(memory: str | None) -> None:
    """Serve the session in this process, on stdin and stdout (no server to relay to)."""
    from funes import api
    from funes._env import settings

    api.mcp_serve(settings(), memory)


def run(memory: str | None) -> None:
    """Serve `funes mcp [MEMORY]`: through the warm server when it can, else in-process."""
    from funes._env import client_env

    env = client_env()
    conn = None if env.serve == "off" else _open(env, memory, START_WAIT)
    if conn is None:
        _alone(memory)
        return

    def reconnect() -> socket.socket | None:
        return _open(env, memory, START_WAIT) or _in_process(memory)

    relay = _Relay(memory, reconnect)
    relay.conn = conn
    reader = threading.Thread(target=relay.pump_stdin, args=(sys.stdin.buffer,), daemon=True,
                              name="mcp-stdin")
    reader.start()
    relay.pump_server()
