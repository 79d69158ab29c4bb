"""The warm path's client: ask a running `funes serve`, else do the work in this process.

A cold `funes recall` pays for importing Lance and llama.cpp, loading the embedding model and
reading the search indexes before it can answer; `funes serve` (funes.api.serve) pays that
once and then answers over a Unix socket. `recall` and `get` here have the same parameters and
results as `funes.api.recall`'s; they return what the server computed when one answers, and
compute it here when none does (no socket, nobody listening, an old server, a crash, a
timeout). Errors funes raises on purpose (`FunesError`) come back from the server as the same
type with the same message, hint and exit code, so a caller cannot tell the two paths apart,
except by the time taken.

**Where.** One server per repository, on `/tmp/funes-<uid>/<hash>.sock`, `<hash>` naming the
repository's resolved path. A fixed directory rather than `$XDG_RUNTIME_DIR`: hooks and agents
often run with a trimmed environment, and a client that looked elsewhere than the server
would never find it (and would start a second one). The directory must be ours and mode 0700,
the socket is 0600: only the user can talk to their server. Next to the socket, `<hash>.lock`
(held by the live server: one server per repository, and a "starting" signal for clients) and
`<hash>.log` (the stderr of a server started on demand) and `<hash>.spawned` (when a client
last started one).

**Protocol** (version `PROTOCOL`). One request per connection: a JSON object on one line,
`{"v", "funes", "op", "repo", "home", "args"}`; one JSON line back, `{"v", "ok": true,
"result"}`, or `{"v", "ok": false, "error": {"type", "message", "hint", "exit_code",
"attrs"}}` for a FunesError, or `{"v", "ok": false, "refused": reason}` when the server will
not answer (another protocol or funes version, another repository or `$FUNES_HOME`, an
internal crash): the client then works alone. Operations: `ping`, `status`, `recall`, `get`,
`stop`. Results are the library's dataclasses as JSON (datetimes tagged), rebuilt here into the
same dataclasses, so the CLI renders them with the same code whichever path produced them.

**On demand** (`FUNES_SERVE=auto`, the default). When `recall` finds no server, it starts one
detached in the background (a new session, output to the log) and answers this query itself
without waiting: the next recall is warm. It does not start one while a server holds the lock
(starting up), nor within `RESPAWN_AFTER` seconds of the last attempt (a server that cannot
start must not be respawned by every query). `FUNES_SERVE=use` uses a running server but never
starts one; `FUNES_SERVE=off` never connects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import importlib
import inspect
import json
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from funes import __version__
from funes._env import Settings
from funes.api.recall import get as _local_get
from funes.api.recall import recall as _local_recall
from funes.errors import FunesError
from funes.retrieval.get import BlockView, TurnView
from funes.retrieval.recall import Hit, RecallResult
from funes.storage.repo import Repository

__all__ = [
    "DEFAULT_IDLE",
    "PROTOCOL",
    "Endpoint",
    "ServerStatus",
    "ServerUnavailable",
    "endpoint",
    "get",
    "recall",
    "server_status",
    "start_server",
    "stop_server",
]

#: Version of the wire protocol; a server refuses requests of another version.
PROTOCOL = 1
#: Seconds a server started on demand stays up without requests.
DEFAULT_IDLE = 600.0
#: Seconds after a start attempt during which no client starts another.
RESPAWN_AFTER = 60.0
#: Largest request a server reads and largest answer a client reads, in bytes.
MAX_REQUEST = 1 << 20
MAX_RESPONSE = 64 << 20
#: The keyword parameters of `funes.api.recall.recall`, which a request may carry: read from
#: its signature, so a parameter added there travels without a change here.
RECALL_ARGS = frozenset(
    name for name, p in inspect.signature(_local_recall).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
)


#: Servers this process started: kept so the `Popen` objects are not collected while the
#: child runs (which warns), and reaped by `subprocess` once they exit.
_STARTED: list[subprocess.Popen[bytes]] = []


class ServerUnavailable(Exception):
    """No server answered (absent, stale, refused, crashed or too slow); work in-process."""


class ServerOutdated(ServerUnavailable):
    """The server runs another funes version (an upgrade happened while it ran)."""


@dataclass(frozen=True)
class Endpoint:
    """Where the server of one repository listens, and its companion files."""

    repo: Path
    socket: Path
    lock: Path
    log: Path
    spawned: Path  # touched when a client starts a server on demand (see RESPAWN_AFTER)


@dataclass(frozen=True)
class ServerStatus:
    """What a running server says about itself (`funes serve --status`)."""

    pid: int
    repo: str
    socket: str
    version: str
    protocol: int
    uptime: float  # seconds since it started
    idle_timeout: float  # seconds without requests before it exits (0: never)
    idle_for: float  # seconds since the last request ended
    requests: dict[str, int]  # recall and get requests answered (errors included)
    embedder_loads: int  # embedding models loaded since start (stays 1 when warm)
    models: list[str]  # models loaded in the process


# -- where -------------------------------------------------------------------------------------


def _runtime_dir() -> Path:
    """`/tmp/funes-<uid>`, created 0700; refused when someone else owns it or can enter it."""
    path = Path("/tmp") / f"funes-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or stat.S_IMODE(info.st_mode) & 0o077):
        # Another user could have made it to read our recalls or impersonate our server.
        raise ServerUnavailable(f"{path} is not a private directory of this user")
    return path


def endpoint(repo_path: Path) -> Endpoint:
    """The socket, lock and log paths of the server for the repository at `repo_path`.

    The hash keeps the socket path short (AF_UNIX allows about 107 bytes) whatever the depth
    of the repository, and stable for every client that opens the same repository.

    Raises:
        ServerUnavailable: the runtime directory is not private to this user.
    """
    resolved = repo_path.resolve()
    digest = hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:20]
    base = _runtime_dir() / digest
    return Endpoint(resolved, base.with_suffix(".sock"), base.with_suffix(".lock"),
                    base.with_suffix(".log"), base.with_suffix(".spawned"))


def lock_held(ep: Endpoint) -> bool:
    """Whether a server holds the repository's server lock (running, or starting up)."""
    try:
        fd = os.open(ep.lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)  # closing drops the shared lock at once
    return False


# -- the wire ----------------------------------------------------------------------------------

_DATETIME = "$datetime"


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return {_DATETIME: value.isoformat()}
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"cannot send a {type(value).__name__}")


def _hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and _DATETIME in obj:
        return datetime.fromisoformat(obj[_DATETIME])
    return obj


def dumps(message: dict[str, Any]) -> bytes:
    """One protocol message as a JSON line (floats keep every bit: repr round-trips)."""
    return json.dumps(message, default=_default, ensure_ascii=False).encode("utf-8") + b"\n"


def loads(line: bytes) -> dict[str, Any]:
    """Parse one protocol message."""
    value = json.loads(line.decode("utf-8"), object_hook=_hook)
    if not isinstance(value, dict):
        raise ValueError("a protocol message is a JSON object")
    return value


def encode_recall(result: RecallResult) -> dict[str, Any]:
    """A RecallResult as JSON-able data (every field, so the client rebuilds it exactly)."""
    out = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    out["hits"] = [{f.name: getattr(h, f.name) for f in dataclasses.fields(h)}
                   for h in result.hits]
    return out


def decode_recall(data: dict[str, Any]) -> RecallResult:
    """The RecallResult `encode_recall` described."""
    fields = dict(data)
    fields["hits"] = [Hit(**hit) for hit in data["hits"]]
    return RecallResult(**fields)


def encode_turns(turns: Sequence[TurnView]) -> list[dict[str, Any]]:
    """`get`'s turns as JSON-able data."""
    return [dataclasses.asdict(t) for t in turns]


def decode_turns(data: Sequence[dict[str, Any]]) -> list[TurnView]:
    """The turns `encode_turns` described."""
    out = []
    for t in data:
        fields = dict(t)
        fields["blocks"] = tuple(BlockView(**b) for b in t["blocks"])
        out.append(TurnView(**fields))
    return out


def encode_error(exc: FunesError) -> dict[str, Any]:
    """A FunesError as its type, message, hint, exit code and simple attributes."""
    cls = type(exc)
    attrs = {k: v for k, v in vars(exc).items()
             if k not in ("message", "hint") and isinstance(v, str | int | float | bool | None)}
    return {"type": f"{cls.__module__}:{cls.__qualname__}", "message": exc.message,
            "hint": exc.hint, "exit_code": exc.exit_code, "attrs": attrs}


def decode_error(data: dict[str, Any]) -> FunesError:
    """The same FunesError the server raised (a plain FunesError if its type is unknown here).

    The instance is made without calling the subclass's constructor: constructors take
    different arguments, and message, hint and exit code are what callers use.
    """
    module, _, qualname = str(data.get("type", "")).partition(":")
    cls: type[FunesError] = FunesError
    if module == "funes" or module.startswith("funes."):
        try:
            found: Any = importlib.import_module(module)
            for part in qualname.split("."):
                found = getattr(found, part)
            if isinstance(found, type) and issubclass(found, FunesError):
                cls = found
        except (ImportError, AttributeError):
            pass
    exc = cls.__new__(cls)
    FunesError.__init__(exc, str(data.get("message", "")), hint=data.get("hint"))
    for key, value in (data.get("attrs") or {}).items():
        setattr(exc, key, value)
    code = data.get("exit_code")
    if isinstance(code, int) and code != exc.exit_code:
        exc.exit_code = code
    return exc


# -- asking ------------------------------------------------------------------------------------


def request(settings: Settings, repo_path: Path, op: str, args: dict[str, Any] | None = None,
            *, timeout: float | None = None) -> Any:
    """Send one request to the repository's server and return its result.

    Raises:
        ServerUnavailable: no answer (see the module docstring); the caller works alone.
        FunesError: the server ran the operation and it failed; the same error in-process.
    """
    ep = endpoint(repo_path)
    message = {"v": PROTOCOL, "funes": __version__, "op": op, "repo": str(ep.repo),
               "home": str(settings.home.expanduser().resolve()), "args": args or {}}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout if timeout is not None else settings.serve_timeout)
            sock.connect(str(ep.socket))
            sock.sendall(dumps(message))
            sock.shutdown(socket.SHUT_WR)
            reply = _read_line(sock, MAX_RESPONSE)
    except (OSError, ValueError) as exc:  # absent, stale, killed, too slow, truncated
        raise ServerUnavailable(f"{type(exc).__name__}: {exc}") from exc
    try:
        answer = loads(reply)
    except ValueError as exc:
        raise ServerUnavailable(f"unreadable answer: {exc}") from exc
    if answer.get("v") != PROTOCOL:
        raise ServerUnavailable(f"protocol {answer.get('v')!r}")
    if answer.get("ok"):
        return answer.get("result")
    if isinstance(answer.get("error"), dict):
        raise decode_error(answer["error"])
    reason = str(answer.get("refused"))
    if answer.get("funes") not in (None, __version__):
        raise ServerOutdated(f"refused: {reason}")
    raise ServerUnavailable(f"refused: {reason}")


def _read_line(sock: socket.socket, limit: int) -> bytes:
    """Read up to the first newline; EOF before it means the peer died mid-answer."""
    chunks: list[bytes] = []
    size = 0
    while True:
        data = sock.recv(1 << 16)
        if not data:
            raise ConnectionResetError("the server closed the connection before answering")
        newline = data.find(b"\n")
        if newline >= 0:
            chunks.append(data[:newline])
            return b"".join(chunks)
        chunks.append(data)
        size += len(data)
        if size > limit:
            raise ValueError("answer too large")


def _enabled(settings: Settings) -> bool:
    return settings.serve in ("auto", "use")


def recall(settings: Settings, repo: Repository, query: str, **kwargs: Any) -> RecallResult:
    """`funes.api.recall.recall`, answered by the warm server when one runs.

    Takes the same keyword arguments. With `FUNES_SERVE=auto` and no server, starts one in
    the background for the next query and answers this one in-process.
    """
    if _enabled(settings):
        try:
            data = request(settings, repo.path, "recall", {"query": query, **kwargs})
            return decode_recall(data)
        except (ServerUnavailable, TypeError, KeyError, ValueError) as exc:
            # TypeError, KeyError, ValueError: an argument that cannot travel, or an answer
            # this code cannot rebuild (a server running other code): either way, work alone.
            if isinstance(exc, ServerOutdated):
                stop_server(settings, repo, wait=0)  # the next recall starts a current one
            elif settings.serve == "auto":
                start_server(settings, repo)
    return _local_recall(settings, repo, query, **kwargs)


def get(settings: Settings, repo: Repository, session_id: str, turn_id: str,
        window: int = 0) -> list[TurnView]:
    """`funes.api.recall.get`, answered by the warm server when one runs (never starts one)."""
    if _enabled(settings):
        try:
            data = request(settings, repo.path, "get",
                           {"session_id": session_id, "turn_id": turn_id, "window": window})
            return decode_turns(data)
        except (ServerUnavailable, TypeError, KeyError, ValueError):
            pass
    return _local_get(repo, session_id, turn_id, window)


def server_status(settings: Settings, repo: Repository) -> ServerStatus | None:
    """The running server's status, or None when no server answers."""
    try:
        data = request(settings, repo.path, "status", timeout=min(5.0, settings.serve_timeout))
        return ServerStatus(**data)
    except (ServerUnavailable, TypeError):
        return None


def stop_server(settings: Settings, repo: Repository, *, wait: float = 5.0) -> bool:
    """Ask the repository's server to exit; True when one was running (it has gone by now)."""
    try:
        request(settings, repo.path, "stop", timeout=min(5.0, settings.serve_timeout))
    except ServerUnavailable:
        return False
    ep = endpoint(repo.path)
    deadline = time.monotonic() + wait
    while lock_held(ep) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True


def start_server(settings: Settings, repo: Repository, *, idle: float = DEFAULT_IDLE) -> bool:
    """Start `funes serve` for `repo`, detached, unless one runs or one was just attempted.

    Returns at once (the server warms up on its own); True when a process was started. Never
    raises: the warm path is an optimisation, and the caller is about to work alone anyway.
    """
    try:
        ep = endpoint(repo.path)
        if lock_held(ep):
            return False  # a server is running or starting; it will answer soon
        with contextlib.suppress(FileNotFoundError):
            if time.time() - ep.spawned.stat().st_mtime < RESPAWN_AFTER:
                return False
        ep.spawned.touch(mode=0o600)
        os.utime(ep.spawned)
        fd = os.open(ep.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _STARTED.append(subprocess.Popen(
                [sys.executable, "-m", "funes", "--memory", str(ep.repo), "serve",
                 "--idle", repr(idle)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd,
                cwd="/", start_new_session=True, close_fds=True,
            ))
        finally:
            os.close(fd)
    except (OSError, ServerUnavailable):
        return False
    return True
