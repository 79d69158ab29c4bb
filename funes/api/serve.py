"""`funes serve`: one warm process per repository that answers recall and get over a socket.

Why a server: a cold recall spends most of its time before the search starts (importing Lance
and llama.cpp, loading the embedding model, reading the index files). The server does that
once, keeps the repository open and a Lance session whose caches hold the indexes, and answers
each request in the time the search itself takes. The client side, the protocol and the socket
location are described in funes.api.warm.

Lifecycle:

- **One per repository.** The server takes `<hash>.lock` (flock) before anything else and holds
  it until it has removed its socket (then it deletes the lock file too). A second `serve` for
  the same repository finds the lock held and returns at once (`ServeResult.started` False):
  starting one on demand from several clients at the same moment is harmless.
- **Stale sockets.** A server killed with SIGKILL leaves its socket file behind; clients get
  "connection refused" and work alone, and the next server (it holds the lock, so no live
  server owns that file) removes it and binds a fresh one.
- **Idle exit.** After `idle` seconds without a request (none in flight either) the server
  removes its socket and exits. It also exits when its repository disappears, when its socket
  file is removed or replaced, on `stop`, and on SIGTERM or SIGINT.

Each request runs in its own thread on a `Snapshot` of the repository (funes.storage.snapshot):
HEAD and each Lance table pinned when the request starts, so a recall that overlaps an index
run's commit sees one consistent state. Models are loaded once per process (funes.inference);
the server records which embedder objects served its recalls, so `status` can show that the
model stayed loaded (`embedder_loads` stays 1).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from funes import __version__
from funes._env import Settings
from funes.api import warm
from funes.api.recall import get as _get
from funes.api.recall import recall as _recall
from funes.errors import FunesError, UsageError
from funes.retrieval import indexes
from funes.storage.repo import Repository
from funes.storage.snapshot import Snapshot

__all__ = ["ServeError", "ServeResult", "serve"]

#: Seconds between checks of the idle timer and of the socket and repository still existing.
TICK = 0.25
#: Seconds a connection may take to send its request.
READ_TIMEOUT = 10.0
#: Seconds a stopping server waits for requests in flight to finish.
DRAIN = 30.0
#: How long a new server tries to take the lock before deciding another one has it (a client
#: probing the lock holds it shared for a moment).
LOCK_RETRIES = 10


class ServeError(FunesError):
    """The server cannot start (its socket directory is unsafe)."""


@dataclass(frozen=True)
class ServeResult:
    """How a `serve` ended."""

    started: bool  # False: another server already serves this repository
    pid: int | None  # the serving process (this one, or the other)
    socket: Path
    requests: int  # requests answered
    reason: str  # "idle", "stopped", "signal", "repository removed", "socket removed",
    #              or "already running"


def serve(
    settings: Settings,
    repo: Repository,
    *,
    idle: float = warm.DEFAULT_IDLE,
    warm_up: bool = True,
    ready: Callable[[Path], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> ServeResult:
    """Serve recall and get for `repo` until idle for `idle` seconds (0: until stopped).

    Args:
        settings: The environment; requests from clients with another `$FUNES_HOME` (other
            models, another global memory) are refused and those clients work alone.
        repo: The repository to serve.
        idle: Seconds without requests before exiting; 0 never exits for idleness.
        warm_up: Load the models and read the indexes before the first request asks.
        ready: Called with the socket path once it accepts connections.
        log: Receives one line per event worth a log (start, failed warm-up, the traceback
            of a request that crashed); the CLI writes them to stderr.

    Raises:
        UsageError: a negative `idle`.
        ServeError: the socket directory is not private to this user.
    """
    if idle < 0:
        raise UsageError(f"--idle must be ≥ 0 seconds, not {idle}")
    try:
        ep = warm.endpoint(repo.path)
    except warm.ServerUnavailable as exc:
        raise ServeError(
            f"cannot serve: {exc}", hint="fix that directory: it must be yours, mode 0700"
        ) from None
    with _server_lock(ep) as holder:
        if holder is not None:
            return ServeResult(False, holder, ep.socket, 0, "already running")
        server = _Server(settings, repo, ep, idle, log or (lambda line: None))
        return server.run(warm_up=warm_up, ready=ready)


@contextlib.contextmanager
def _server_lock(ep: warm.Endpoint) -> Iterator[int | None]:
    """Hold the server lock; yields None when taken, else the pid of the server holding it.

    The holder deletes the lock file when it is done, so finished servers leave nothing
    behind. That is safe because a new holder checks, once locked, that the file it locked is
    still the one at that path; if not, it locked a file that has just been deleted, and it
    tries again.
    """
    holder = ""
    for _ in range(LOCK_RETRIES):
        fd = os.open(ep.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            time.sleep(0.02)  # perhaps only a client probing it (warm.lock_held): try again
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(ep.lock).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield None
        finally:
            with contextlib.suppress(FileNotFoundError):
                ep.lock.unlink()  # while still holding it: see the docstring
            os.close(fd)
        return
    yield int(holder) if holder.isdigit() else 0


class _Server:
    def __init__(self, settings: Settings, repo: Repository, ep: warm.Endpoint,
                 idle: float, log: Callable[[str], None]) -> None:
        self.settings = settings
        self.log = log
        self.repo = repo
        self.ep = ep
        self.idle = idle
        self.home = str(settings.home.expanduser().resolve())
        self.started = time.time()
        self.last = time.monotonic()
        self.active = 0
        self.counts: dict[str, int] = {}
        self.embedders: dict[int, str] = {}
        self.guard = threading.Lock()
        self.stopping = threading.Event()
        self.reason = "stopped"
        import lance

        # One Lance session for every snapshot: index and metadata caches outlive a request.
        self.session = lance.Session()  # type: ignore[attr-defined]

    # -- lifecycle -------------------------------------------------------------------------

    def run(self, *, warm_up: bool, ready: Callable[[Path], None] | None) -> ServeResult:
        listener = self._bind()
        inode = os.stat(self.ep.socket).st_ino
        with contextlib.suppress(FileNotFoundError):
            self.ep.spawned.unlink()  # it came up: clients may start the next one at once
        restore = self._signals()
        try:
            self.log(f"serving {self.repo.path} on {self.ep.socket} (pid {os.getpid()})")
            if warm_up:
                with self.guard:
                    self.active += 1  # counts as a request: no idle exit in the middle of it
                threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()
            if ready is not None:
                ready(self.ep.socket)
            self._loop(listener, inode)
        finally:
            listener.close()
            with contextlib.suppress(OSError):
                if os.stat(self.ep.socket).st_ino == inode:
                    self.ep.socket.unlink()
            restore()
            self._drain()
        with self.guard:
            total = sum(self.counts.values())
        return ServeResult(True, os.getpid(), self.ep.socket, total, self.reason)

    def _bind(self) -> socket.socket:
        # We hold the lock, so a socket file here belongs to a dead server: replace it.
        with contextlib.suppress(FileNotFoundError):
            self.ep.socket.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is created 0600: never briefly open to others
        try:
            listener.bind(str(self.ep.socket))
        finally:
            os.umask(old)
        listener.listen(64)
        listener.settimeout(TICK)
        return listener

    def _signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def stop(signum: int, frame: FrameType | None) -> None:
            self.reason = "signal"
            self.stopping.set()

        before = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for s, handler in before.items():
                signal.signal(s, handler)

        return restore

    def _loop(self, listener: socket.socket, inode: int) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                self._check(inode)
                continue
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            with self.guard:
                self.active += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _check(self, inode: int) -> None:
        """Decide whether to exit: idle, repository gone, socket gone or replaced."""
        with self.guard:
            idle_for = time.monotonic() - self.last if self.active == 0 else 0.0
        if self.idle and idle_for >= self.idle:
            self.reason = "idle"
        elif not (self.repo.path / "FORMAT").exists():
            self.reason = "repository removed"
        else:
            try:
                if os.stat(self.ep.socket).st_ino == inode:
                    return
            except OSError:
                pass
            self.reason = "socket removed"
        self.stopping.set()

    def _drain(self) -> None:
        deadline = time.monotonic() + DRAIN
        while time.monotonic() < deadline:
            with self.guard:
                if self.active == 0:
                    return
            time.sleep(0.01)

    def _warm_up(self) -> None:
        """Load the models and the indexes now rather than during the first request."""
        try:
            self._recall({"query": "warm up", "k": 1, "neighbors": 0})
        except Exception as exc:  # a failed warm-up only means the first request is slower
            self.log(f"warm-up failed: {exc}")
        finally:
            with self.guard:
                self.active -= 1
                self.last = time.monotonic()

    # -- requests --------------------------------------------------------------------------

    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(READ_TIMEOUT)
                try:
                    line = _read_request(conn)
                    request = warm.loads(line)
                except (OSError, ValueError):
                    return  # a client that went away or sent garbage gets nothing
                reply = self._answer(request)
                with contextlib.suppress(OSError):
                    conn.sendall(warm.dumps(reply))
        finally:
            with self.guard:
                self.active -= 1
                self.last = time.monotonic()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if request.get("v") != warm.PROTOCOL:
            return self._refuse(f"protocol {request.get('v')!r}, this server speaks "
                                f"{warm.PROTOCOL}")
        if request.get("repo") != str(self.ep.repo):
            return self._refuse("another repository")
        if op not in ("ping", "status", "stop"):
            # Answers that depend on the code or the models must come from the same funes and
            # the same $FUNES_HOME as the client's own in-process answer would.
            if request.get("funes") != __version__:
                return self._refuse(f"funes {__version__}")
            if request.get("home") != self.home:
                return self._refuse("another FUNES_HOME")
        args = request.get("args") or {}
        try:
            if op == "ping":
                result: Any = {"pid": os.getpid()}
            elif op == "status":
                result = asdict(self._status())
            elif op == "stop":
                self.reason = "stopped"
                self.stopping.set()
                result = {"pid": os.getpid()}
            elif op == "recall":
                result = self._recall(dict(args))
            elif op == "get":
                view = Snapshot(self.repo, session=self.session)
                turns = _get(view, str(args["session_id"]), str(args["turn_id"]),
                                    int(args.get("window", 0)))
                result = warm.encode_turns(turns)
            else:
                return self._refuse(f"unknown operation {op!r}")
        except FunesError as exc:
            self._count(str(op))
            return {"v": warm.PROTOCOL, "ok": False, "error": warm.encode_error(exc)}
        except Exception:  # a bug: the client redoes the work in-process, where it will show
            self.log(traceback.format_exc().rstrip())
            return self._refuse("internal error")
        self._count(str(op))
        return {"v": warm.PROTOCOL, "ok": True, "result": result}

    def _recall(self, args: dict[str, Any]) -> dict[str, Any]:
        query = args.pop("query")
        unknown = set(args) - warm.RECALL_ARGS
        if unknown:
            raise TypeError(f"unexpected recall arguments {sorted(unknown)}")
        if args.get("turns") is not None:
            args["turns"] = frozenset(tuple(pair) for pair in args["turns"])
        if isinstance(args.get("now"), str):
            args["now"] = datetime.fromisoformat(args["now"])
        if args.get("bm25", True) and self.repo.chunks.exists():
            indexes.ensure(self.repo)  # writes: on the live repository, before pinning
        view = Snapshot(self.repo, session=self.session)
        if args.get("vector", True):
            self._note_models(view)
        result = _recall(self.settings, view, str(query), **args)
        return warm.encode_recall(result)

    def _note_models(self, view: Repository) -> None:
        """Record the embedder object recall will use (load_embedder caches it per process)."""
        stamp = view.model_stamp()
        if stamp is None or not view.vectors.exists():
            return
        from funes.inference.embedder import load_embedder

        embedder = load_embedder(self.settings, stamp.name)
        with self.guard:
            self.embedders.setdefault(id(embedder), stamp.name)

    def _count(self, op: str) -> None:
        if op in ("ping", "status", "stop"):
            return  # `requests` counts work done for clients, not questions about the server
        with self.guard:
            self.counts[op] = self.counts.get(op, 0) + 1

    def _refuse(self, reason: str) -> dict[str, Any]:
        return {"v": warm.PROTOCOL, "ok": False, "refused": reason, "funes": __version__}

    def _status(self) -> warm.ServerStatus:
        with self.guard:
            idle_for = time.monotonic() - self.last if self.active <= 1 else 0.0
            return warm.ServerStatus(
                pid=os.getpid(), repo=str(self.repo.path), socket=str(self.ep.socket),
                version=__version__, protocol=warm.PROTOCOL,
                uptime=time.time() - self.started, idle_timeout=self.idle, idle_for=idle_for,
                requests=dict(self.counts), embedder_loads=len(self.embedders),
                models=sorted(set(self.embedders.values())),
            )


def _read_request(conn: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        data = conn.recv(1 << 16)
        if not data:
            if chunks:
                return b"".join(chunks)  # a request without its newline, then EOF: accept it
            raise ConnectionResetError("empty request")
        newline = data.find(b"\n")
        if newline >= 0:
            chunks.append(data[:newline])
            return b"".join(chunks)
        chunks.append(data)
        size += len(data)
        if size > warm.MAX_REQUEST:
            raise ValueError("request too large")
