"""The warm server's wire protocol: where the socket is, and one request/answer exchange.

Standard library only, on purpose: the thin client (funes.cli.thin) imports this module and
nothing else of funes beyond `funes._env`, so a `funes recall` answered by a running server
costs an interpreter start and a socket round trip, not the click command tree or the library.
The server (funes.api.serve) and the library's own client (funes.api.warm) build on it.

**Where.** One server per user and funes home, on `/tmp/funes-<uid>/<hash>.sock`, `<hash>`
naming the resolved `$FUNES_HOME` (its models and its global memory). A fixed directory rather
than `$XDG_RUNTIME_DIR`: hooks and agents often run with a trimmed environment, and a client
that looked elsewhere than the server would never find it (and would start a second one). The
directory must be ours and mode 0700, the socket is 0600: only the user can talk to their
server. Next to the socket, `<hash>.lock` (held by the live server: one server per home, and a
"starting" signal for clients), `<hash>.log` (the stderr of a server started on demand) and
`<hash>.spawned` (when a client last started one).

**Messages** (version `PROTOCOL`). One request per connection: a JSON object on one line,
`{"v", "funes", "op", "home", "repo", "args"}`; one JSON line back, `{"v", "ok": true,
"result"}`, or `{"v", "ok": false, "error": {"type", "message", "hint", "exit_code",
"attrs"}}` for a FunesError, or `{"v", "ok": false, "refused": reason, "funes"}` when the
server will not answer (another protocol or funes version, another `$FUNES_HOME`, an internal
crash): the client then works alone. Operations: `ping`, `status`, `stop`, `recall` and `get`
(the library's results as JSON, datetimes tagged), and `run` (the thin client's: a whole
`recall` or `get` command answered as the bytes to print and the exit code).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path

from funes import __version__

TYPE_CHECKING = False  # typing's constant without typing: see Endpoint
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "MAX_REQUEST",
    "MAX_RESPONSE",
    "PROTOCOL",
    "Endpoint",
    "Unavailable",
    "dumps",
    "endpoint",
    "exchange",
    "loads",
    "lock_held",
    "message",
    "note_failure",
    "read_line",
    "recent_failure",
    "spawn",
]

#: Version of the wire protocol; a server refuses requests of another version.
PROTOCOL = 2
#: Seconds after a start attempt during which no client starts another server.
RESPAWN_AFTER = 60.0
#: Largest request a server reads and largest answer a client reads, in bytes.
MAX_REQUEST = 1 << 20
MAX_RESPONSE = 64 << 20

_DATETIME = "$datetime"


class Unavailable(Exception):
    """No server answered (absent, stale, refused, crashed or too slow); work in-process."""


#: Why the server did not answer this process's thin client, if it did not: the full CLI
#: that runs next then does not wait for the same server a second time.
_failure: list[Unavailable] = []


def note_failure(exc: Unavailable | None) -> None:
    """Remember that the server did not answer (see `recent_failure`); None forgets it."""
    _failure[:] = [exc] if exc is not None else []


def recent_failure() -> Unavailable | None:
    """The failure `note_failure` remembered, if any."""
    return _failure[0] if _failure else None


class Outdated(Unavailable):
    """The server runs another funes version (an upgrade happened while it ran)."""


class Endpoint:
    """Where the server of one funes home listens, and its companion files.

    A plain class (and no `typing` or `funes.process` at import) because every agent's
    `funes mcp` relay and every thin client imports this module: `dataclasses` with `inspect`
    and `typing` are 1.8 MB of resident memory in each (eight agents: 15 MB).
    """

    __slots__ = ("home", "lock", "log", "socket", "spawned")

    def __init__(self, home: Path, socket: Path, lock: Path, log: Path, spawned: Path) -> None:
        self.home = home
        self.socket = socket
        self.lock = lock
        self.log = log
        self.spawned = spawned  # touched when a client starts a server on demand

    def _fields(self) -> tuple[Path, ...]:
        return (self.home, self.socket, self.lock, self.log, self.spawned)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Endpoint) and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Endpoint(home={self.home!r}, socket={self.socket!r})"


def runtime_dir() -> Path:
    """`/tmp/funes-<uid>`, created 0700; refused when someone else owns it or can enter it."""
    path = Path("/tmp") / f"funes-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or stat.S_IMODE(info.st_mode) & 0o077):
        # Another user could have made it to read our recalls or impersonate our server.
        raise Unavailable(f"{path} is not a private directory of this user")
    return path


def endpoint(home: Path) -> Endpoint:
    """The socket, lock and log paths of the server for the funes home `home`.

    The hash keeps the socket path short (AF_UNIX allows about 107 bytes) and the same for
    every client of that home.

    Raises:
        Unavailable: the runtime directory is not private to this user.
    """
    resolved = home.expanduser().resolve()
    digest = _sha256(str(resolved).encode("utf-8", "surrogateescape"))[:20]
    base = runtime_dir() / digest
    return Endpoint(resolved, base.with_suffix(".sock"), base.with_suffix(".lock"),
                    base.with_suffix(".log"), base.with_suffix(".spawned"))


def _sha256(data: bytes) -> str:
    """SHA-256 in hex, from CPython's own implementation when it has one.

    `hashlib` loads OpenSSL's libcrypto, 3.8 MB of resident memory in every `funes mcp`
    relay and thin client (eight agents: 30 MB) for one hash of a path; the built-in module
    gives the same digest.
    """
    import importlib

    for name in ("_sha2", "_sha256"):  # Python 3.12+, 3.11
        try:
            return str(importlib.import_module(name).sha256(data).hexdigest())
        except (ImportError, AttributeError):
            continue
    import hashlib

    return hashlib.sha256(data).hexdigest()


def lock_held(ep: Endpoint) -> bool:
    """Whether a server holds the home's server lock (running, or starting up)."""
    from funes import process

    return process.lock_held(ep.lock)


def _default(value: Any) -> Any:
    # No datetime exists in a process that never imported the module (a relay, where it
    # would be 0.6 MB of every agent's `funes mcp`).
    clock = sys.modules.get("datetime")
    if clock is not None and isinstance(value, clock.datetime):
        return {_DATETIME: value.isoformat()}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot send a {type(value).__name__}")


def _hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and _DATETIME in obj:
        from datetime import datetime

        return datetime.fromisoformat(obj[_DATETIME])
    return obj


def dumps(value: dict[str, Any]) -> bytes:
    """One protocol message as a JSON line (floats keep every bit: repr round-trips)."""
    return json.dumps(value, default=_default, ensure_ascii=False).encode("utf-8") + b"\n"


def loads(line: bytes) -> dict[str, Any]:
    """Parse one protocol message."""
    value = json.loads(line.decode("utf-8"), object_hook=_hook)
    if not isinstance(value, dict):
        raise ValueError("a protocol message is a JSON object")
    return value


def message(op: str, home: Path, repo: str | None, args: dict[str, Any]) -> dict[str, Any]:
    """A request of this client's protocol and funes version."""
    return {"v": PROTOCOL, "funes": __version__, "op": op,
            "home": str(home.expanduser().resolve()), "repo": repo, "args": args}


def read_line(sock: socket.socket, limit: int, *, eof_ends: bool = False) -> bytes:
    """Read up to the first newline; EOF before it means the peer died mid-message.

    With `eof_ends` (the server reading a request), EOF after some bytes ends the message
    instead: a client may close its side without the newline.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        data = sock.recv(1 << 16)
        if not data:
            if eof_ends and chunks:
                return b"".join(chunks)
            raise ConnectionResetError("the peer closed the connection before the end")
        newline = data.find(b"\n")
        if newline >= 0:
            chunks.append(data[:newline])
            return b"".join(chunks)
        chunks.append(data)
        size += len(data)
        if size > limit:
            raise ValueError("message too large")


def exchange(ep: Endpoint, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Send one request and return the server's answer when it ran the operation.

    Returns `{"ok": True, "result": …}` or `{"ok": False, "error": {…}}` (a FunesError the
    caller re-raises or prints).

    Raises:
        Unavailable: no answer, or a refusal (`Outdated` when the server runs another funes).
    """
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(ep.socket))
            sock.sendall(dumps(request))
            sock.shutdown(socket.SHUT_WR)
            reply = read_line(sock, MAX_RESPONSE)
    except (OSError, ValueError) as exc:  # absent, stale, killed, too slow, truncated
        raise Unavailable(f"{type(exc).__name__}: {exc}") from exc
    try:
        answer = loads(reply)
    except ValueError as exc:
        raise Unavailable(f"unreadable answer: {exc}") from exc
    if answer.get("v") != PROTOCOL:
        raise Unavailable(f"protocol {answer.get('v')!r}")
    if answer.get("ok") or isinstance(answer.get("error"), dict):
        return answer
    reason = str(answer.get("refused"))
    if answer.get("funes") not in (None, __version__):
        raise Outdated(f"refused: {reason}")
    raise Unavailable(f"refused: {reason}")


def spawn(ep: Endpoint, argv: list[str]) -> bool:
    """Start the server command `argv`, detached, unless one runs or one was just attempted.

    Returns at once (the server warms up on its own); True when a process was started. Its
    stderr goes to `ep.log` (this run's). Never raises: the warm path is an optimisation,
    and the caller is about to work alone anyway. Shared by the library's client
    (funes.api.warm) and the thin `funes mcp` relay (funes.cli.mcprelay).
    """
    try:
        if lock_held(ep):
            return False  # a server is running or starting; it will answer soon
        with contextlib.suppress(FileNotFoundError):
            if time.time() - ep.spawned.stat().st_mtime < RESPAWN_AFTER:
                return False
        ep.spawned.touch(mode=0o600)
        os.utime(ep.spawned)
        fd = os.open(ep.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # this run's log
        from funes import process

        try:
            process.detach(argv, cwd="/", stderr=fd)
        finally:
            os.close(fd)
    except OSError:
        return False
    return True
