"""`funes serve`: one warm process per user that answers recall and get for every memory.

Why a server: a cold recall spends most of its time before the search starts (importing Lance
and llama.cpp, loading the embedding model, reading the index files). The server does that
once, keeps the memories it was asked about open with a Lance session each whose caches hold
the indexes, and answers each request in the time the search itself takes. The protocol and
the socket location are in funes.protocol; the library's client in funes.api.warm; the thin
client that hands the server a whole `funes recall`/`funes get` in funes.cli.thin.

Lifecycle:

- **One per user** (per funes home, whose models it loads). The server takes `<hash>.lock`
  (flock) before anything else and holds it until it has removed its socket (then it deletes
  the lock file too). A second `serve` finds the lock held and returns at once
  (`ServeResult.started` False): starting one on demand from several clients at the same
  moment is harmless.
- **Memories on demand.** A request names its memory; the server opens it on first use and
  keeps it (with its Lance session) while it is used. A memory idle for `MEMORY_IDLE` seconds,
  or removed from disk, is closed; when more than `MAX_OPEN` are open, or the process's
  resident memory passes the budget (`memory_budget_mb`), the least recently used are closed
  first. Models are shared by every memory (loaded once per process, funes.inference).
- **Stale sockets.** A server killed with SIGKILL leaves its socket file behind; clients get
  "connection refused" and work alone, and the next server (it holds the lock, so no live
  server owns that file) removes it and binds a fresh one.
- **Idle exit.** After `idle` seconds without a request (none in flight either) the server
  removes its socket and exits. It also exits when its socket file is removed or replaced, on
  `stop`, and on SIGTERM or SIGINT.

Each request runs in its own thread on a `Snapshot` of its memory (funes.storage.snapshot):
HEAD and each Lance table pinned when the request starts, so a recall that overlaps an index
run's commit sees one consistent state. The server records which embedder objects served its
recalls, so `status` can show that the model stayed loaded (`embedder_loads` stays 1).

One file because the server is one state machine: the socket loop, the open memories with
their idle and memory-budget eviction, and the handlers all read and change the same state
under one lock; the wire format lives in funes.protocol and the client in funes.api.warm.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import socket
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from funes import __version__, protocol
from funes._env import Settings
from funes.api import warm
from funes.api.memory import MemoryChoice, choose_memory
from funes.api.pool import pool_choices
from funes.api.printed import BROWSE_COMMANDS, browse_output, run_browse
from funes.api.render import get_output, recall_printed
from funes.api.search import (
    BLOCK_TYPES,
    RecallRequest,
    is_harness,
    is_role,
    preload_reranker,
    recall_in_process,
)
from funes.api.search import get as _get
from funes.api.serve_support import (
    OpenMemory,
    libc_malloc,
    limit_arenas,
    release,
    rss_mb,
    server_lock,
    trim,
)
from funes.errors import FunesError, UsageError, describe
from funes.retrieval import indexes
from funes.storage.repo import Repository

__all__ = ["MAX_OPEN", "MEMORY_BUDGET_MB", "MEMORY_IDLE", "ServeError", "ServeResult", "serve"]

#: Seconds between checks of the idle timers and of the socket still existing.
TICK = 0.25
#: Seconds a connection may take to send its request.
READ_TIMEOUT = 10.0
#: Seconds a stopping server waits for requests in flight to finish.
DRAIN = 30.0
#: Seconds an open memory may go unused before the server closes it.
MEMORY_IDLE = 300.0
#: Memories open at once, at most; the least recently used is closed to make room.
MAX_OPEN = 16
#: Resident memory (MB) above which the least recently used memories are closed (the models,
#: ≈ 150 MB, stay). Lance's per-memory caches are what grows with the memories held.
MEMORY_BUDGET_MB = 450.0
#: Operations that ask about the server rather than make it work.
_ADMIN = ("ping", "status", "stop")


class ServeError(FunesError):
    """The server cannot start (its socket directory is unsafe)."""


class _Decline(Exception):
    """A thin client's command the full CLI must answer (it reports usage errors itself)."""


@dataclass(frozen=True)
class ServeResult:
    """How a `serve` ended."""

    started: bool  # False: another server already serves this user's funes home
    pid: int | None  # the serving process (this one, or the other)
    socket: Path
    requests: int  # requests answered
    reason: str  # "idle", "stopped", "signal", "socket removed", or "already running"


def serve(
    settings: Settings,
    *,
    idle: float = warm.DEFAULT_IDLE,
    warm_up: Repository | None = None,
    memory_budget_mb: float = MEMORY_BUDGET_MB,
    ready: Callable[[Path], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> ServeResult:
    """Serve recall and get for every memory of this user until idle for `idle` seconds.

    Args:
        settings: The environment; requests from clients with another `$FUNES_HOME` (other
            models, another global memory) are refused and those clients work alone.
        idle: Seconds without requests before exiting; 0 never exits for idleness.
        warm_up: A memory to open, and whose models to load, before the first request asks.
        memory_budget_mb: Resident memory above which idle memories are closed, least
            recently used first.
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
        ep = warm.endpoint(settings)
    except warm.ServerUnavailable as exc:
        raise ServeError(
            f"cannot serve: {exc}", hint="fix that directory: it must be yours, mode 0700"
        ) from None
    with server_lock(ep) as holder:
        if holder is not None:
            return ServeResult(False, holder, ep.socket, 0, "already running")
        server = _Server(settings, ep, idle, memory_budget_mb, log or (lambda line: None))
        return server.run(warm_up=warm_up, ready=ready)


class _Server:
    def __init__(self, settings: Settings, ep: protocol.Endpoint, idle: float,
                 budget_mb: float, log: Callable[[str], None]) -> None:
        self.settings = settings
        self.log = log
        self.ep = ep
        self.idle = idle
        self.budget_mb = budget_mb
        self.home = str(ep.home)
        self.started = time.time()
        self.last = time.monotonic()
        self.active = 0
        self.counts: dict[str, int] = {}
        self.embedders: dict[int, str] = {}
        self.memories: OrderedDict[Path, OpenMemory] = OrderedDict()  # least recent first
        self.sessions: set[socket.socket] = set()  # agents' MCP sessions (funes.api.serve_mcp)
        self.release_due = False  # a request ended since memory was last given back
        self.guard = threading.Lock()
        self.stopping = threading.Event()
        self.reason = "stopped"
        self.libc = libc_malloc()
        limit_arenas(self.libc)

    # -- lifecycle -------------------------------------------------------------------------

    def run(self, *, warm_up: Repository | None,
            ready: Callable[[Path], None] | None) -> ServeResult:
        listener = self._bind()
        inode = os.stat(self.ep.socket).st_ino
        with contextlib.suppress(FileNotFoundError):
            self.ep.spawned.unlink()  # it came up: clients may start the next one at once
        restore = self._signals()
        try:
            self.log(f"serving {self.home} on {self.ep.socket} (pid {os.getpid()})")
            if warm_up is not None:
                self._open(warm_up.path.resolve())  # listed by `status` from the start
                with self.guard:
                    self.active += 1  # counts as a request: no idle exit in the middle of it
                threading.Thread(target=self._warm_up, args=(warm_up,), name="warm-up",
                                 daemon=True).start()
            if ready is not None:
                ready(self.ep.socket)
            self._loop(listener, inode)
        finally:
            listener.close()
            with contextlib.suppress(OSError):
                if os.stat(self.ep.socket).st_ino == inode:
                    self.ep.socket.unlink()
            restore()
            self._hang_up()
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
        checked = time.monotonic()
        while not self.stopping.is_set():
            if time.monotonic() - checked >= TICK:  # also while requests keep arriving
                self._check(inode)
                checked = time.monotonic()
                if self.stopping.is_set():
                    break
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            with self.guard:
                self.active += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _check(self, inode: int) -> None:
        """Close idle or removed memories, give freed memory back; exit when idle or gone."""
        self._close_idle()
        with self.guard:
            due = self.release_due and all(m.active == 0 for m in self.memories.values())
            if due:
                self.release_due = False
        if due:
            release(self.libc)  # here, not in a request: it can take tens of ms
        with self.guard:
            idle_for = time.monotonic() - self.last if self.active == 0 else 0.0
        if self.idle and idle_for >= self.idle:
            self.reason = "idle"
        else:
            try:
                if os.stat(self.ep.socket).st_ino == inode:
                    return
            except OSError:
                pass
            self.reason = "socket removed"
        self.stopping.set()

    def _hang_up(self) -> None:
        """End the agents' MCP sessions: their relays carry on without this server."""
        with self.guard:
            open_sessions = list(self.sessions)
        for conn in open_sessions:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def _drain(self) -> None:
        deadline = time.monotonic() + DRAIN
        while time.monotonic() < deadline:
            with self.guard:
                if self.active == 0:
                    return
            time.sleep(0.01)

    def _warm_up(self, repo: Repository) -> None:
        """Load the models and the memory's indexes now rather than during the first request."""
        try:
            self._recall(repo.path, RecallRequest("warm up", k=1, neighbors=0))
            preload_reranker(self.settings, repo)  # recall loads it only when it reranks
        except Exception as exc:  # a failed warm-up only means the first request is slower
            self.log(f"warm-up failed: {exc}")
        finally:
            with self.guard:
                self.active -= 1
                self.last = time.monotonic()

    # -- memories --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _memory(self, path: Path) -> Iterator[OpenMemory]:
        """The open memory at `path`, opened now if needed, in use while the block runs."""
        key = path.resolve()
        found = self._open(key)
        with self.guard:
            self.memories.move_to_end(key)
            found.active += 1
        try:
            yield found
        finally:
            with self.guard:
                found.active -= 1
                found.requests += 1
                found.last = time.monotonic()
                self.release_due = True  # by the accept loop, once no request runs
            self._make_room()

    def _open(self, key: Path) -> OpenMemory:
        """The open memory at the resolved path `key`, opened now if it is not yet."""
        with self.guard:
            found = self.memories.get(key)
        if found is None:
            opened = OpenMemory(Repository.open(key, self.settings))
            with self.guard:
                found = self.memories.setdefault(key, opened)
        return found

    def _close(self, key: Path) -> None:
        """Forget a memory (the caller holds the guard); its caches go with it."""
        memory = self.memories.pop(key)
        memory.session = None  # type: ignore[assignment]
        trim(self.libc)

    def _close_idle(self) -> None:
        now = time.monotonic()
        with self.guard:
            for key, memory in list(self.memories.items()):
                gone = not (key / "FORMAT").exists()
                if memory.active == 0 and (gone or now - memory.last >= MEMORY_IDLE):
                    self._close(key)

    def _make_room(self) -> None:
        """Close least recently used memories while too many are open or RSS is too high."""
        with self.guard:
            while len(self.memories) > MAX_OPEN:
                if not self._close_lru():
                    return
        rss = rss_mb()
        while rss is not None and rss > self.budget_mb:
            with self.guard:
                if len(self.memories) <= 1 or not self._close_lru():
                    return
            rss = rss_mb()

    def _close_lru(self) -> bool:
        for key, memory in self.memories.items():
            if memory.active == 0:
                self._close(key)
                return True
        return False

    # -- requests --------------------------------------------------------------------------

    def _handle(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(READ_TIMEOUT)
                try:
                    line = protocol.read_line(conn, protocol.MAX_REQUEST, eof_ends=True)
                    request = protocol.loads(line)
                except (OSError, ValueError):
                    return  # a client that went away or sent garbage gets nothing
                if request.get("op") == "mcp":  # the connection becomes the session
                    self._mcp(conn, request)
                    return
                reply = self._answer(request)
                with contextlib.suppress(OSError):
                    conn.sendall(protocol.dumps(reply))
        finally:
            with self.guard:
                self.active -= 1
                self.last = time.monotonic()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if request.get("v") != protocol.PROTOCOL:
            return self._refuse(f"protocol {request.get('v')!r}, this server speaks "
                                f"{protocol.PROTOCOL}")
        if op not in _ADMIN:
            # Answers that depend on the code or the models must come from the same funes and
            # the same $FUNES_HOME as the client's own in-process answer would.
            if request.get("funes") != __version__:
                return self._refuse(f"funes {__version__}")
            if request.get("home") != self.home:
                return self._refuse("another FUNES_HOME")
        args = request.get("args") or {}
        repo = request.get("repo")
        # A thin client's whole command counts as the command it is (`recall`, `get`).
        kind = str(args.get("command") if op == "run" else op)
        try:
            if op == "ping":
                result: Any = {"pid": os.getpid()}
            elif op == "status":
                result = asdict(self._status())
            elif op == "stop":
                self.reason = "stopped"
                self.stopping.set()
                result = {"pid": os.getpid()}
            elif op == "recall" and isinstance(repo, str):
                found = self._recall(Path(repo), RecallRequest.decode(dict(args)))
                result = warm.encode_recall(found)
            elif op == "get" and isinstance(repo, str):
                with self._memory(Path(repo)) as memory:
                    turns = _get(memory.view(), str(args["session_id"]),
                                 str(args["turn_id"]), int(args.get("window", 0)))
                result = warm.encode_turns(turns)
            elif op == "run":
                result = self._run(args)
            else:
                return self._refuse(f"unknown operation {op!r}")
        except FunesError as exc:
            self._count(kind)
            return {"v": protocol.PROTOCOL, "ok": False, "error": warm.encode_error(exc)}
        except _Decline as exc:
            return self._refuse(f"not for the server: {exc}")
        except Exception:  # a bug: the client redoes the work in-process, where it will show
            self.log(traceback.format_exc().rstrip())
            return self._refuse("internal error")
        self._count(kind)
        return {"v": protocol.PROTOCOL, "ok": True, "result": result}

    def _recall(self, path: Path, request: RecallRequest) -> Any:
        with self._memory(path) as memory:
            if request.bm25 and memory.repo.chunks.exists():
                indexes.retokenize(memory.repo)  # writes: on the live repository, before pinning
            view = memory.view()
            if request.vector:
                self._note_models(view)
            return recall_in_process(self.settings, view, request)

    def _run(self, args: dict[str, Any]) -> dict[str, Any]:
        """A whole `funes recall` or `funes get` for the thin client: what to print, the code.

        The memory is found the way the CLI finds it in the client's directory, and the output
        made by the same functions the CLI calls (funes.api.render), so the bytes are the
        same as the CLI's own. `strip` lists the streams that are not terminals, where the
        CLI (click) removes ANSI escapes (a passage may hold some).
        """
        settings = dataclasses.replace(self.settings, cwd=Path(str(args["cwd"])))
        fmt = str(args["fmt"])
        if fmt not in ("agent", "json"):
            raise _Decline(f"format {fmt!r}")
        command = args["command"]
        request = None
        if command == "recall":
            # Click checks choices before the command runs: so must this, before anything.
            request = RecallRequest.decode(dict(args["request"]))
            if not (all(is_harness(h) for h in request.harness)
                    and set(request.block_type) <= set(BLOCK_TYPES)
                    and all(is_role(r) for r in request.role)):
                raise _Decline("a --harness, --type or --role click refuses")
            if request.code is None:  # the CLI checks freshness against its directory
                request = dataclasses.replace(request, code=str(settings.cwd))
        elif command in BROWSE_COMMANDS:
            fields = dict(args["fields"])
            if not all(is_harness(h) for h in fields.get("harness") or ()):
                raise _Decline("a --harness click refuses")
        elif command != "get":
            raise _Decline(f"command {command!r}")
        out = err = ""
        code = 0
        try:
            # The same choice the CLI makes: that memory, or its error (never another one).
            choices = []
            if request is not None:
                given = args.get("memories") or ([args["memory"]] if args.get("memory") else [])
                choices = pool_choices(settings, list(given))
            if len(choices) > 1:  # several memories, or this memory's recall.pool
                assert request is not None
                out, err = self._pooled(settings, fmt, choices, request)
            elif command in BROWSE_COMMANDS:
                choice = choose_memory(settings, args.get("memory"))
                with self._memory(choice.repo.path) as memory:
                    page = run_browse(memory.view(), command, fields)
                out = browse_output(fmt, page) + "\n"
            else:
                choice = choices[0] if choices else choose_memory(settings, args.get("memory"))
                if request is not None:
                    found = self._recall(choice.repo.path, request)
                    out, err = recall_printed(fmt, choice, found, request)
                else:
                    with self._memory(choice.repo.path) as memory:
                        turns = _get(memory.view(), str(args["session_id"]),
                                     str(args["turn_id"]), int(args["window"]))
                    out = get_output(fmt, turns, choice) + "\n"
        except FunesError as exc:
            err = describe(exc) + "\n"
            code = exc.exit_code
        strip = args.get("strip") or ()
        if "stdout" in strip or "stderr" in strip:
            import click

            out = click.unstyle(out) if "stdout" in strip else out
            err = click.unstyle(err) if "stderr" in strip else err
        return {"stdout": out, "stderr": err, "exit": code}

    def _pooled(self, settings: Settings, fmt: str, choices: list[MemoryChoice],
                request: RecallRequest) -> tuple[str, str]:
        """A pooled recall (funes.api.pool) over memories this server holds open."""
        from funes.api.serve_mcp import ServedReader

        result = ServedReader(self).pooled(settings, choices, request)
        first = choices[0]
        return recall_printed(fmt, first, result, request,
                              memories={c.label: c.owned for c in choices})

    def _mcp(self, conn: socket.socket, request: dict[str, Any]) -> None:
        """An agent's MCP session (funes.api.serve_mcp), after the checks every request gets."""
        from funes.api.serve_mcp import serve_mcp

        if request.get("v") != protocol.PROTOCOL or request.get("funes") != __version__ \
                or request.get("home") != self.home:
            with contextlib.suppress(OSError):
                conn.sendall(protocol.dumps(self._refuse("another protocol, version or home")))
            return
        with self.guard:
            self.sessions.add(conn)
        try:
            serve_mcp(self, conn, dict(request.get("args") or {}))
        except Exception:  # a bug: the relay carries on in its own process, where it shows
            self.log(traceback.format_exc().rstrip())
        finally:
            with self.guard:
                self.sessions.discard(conn)

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
        if op in _ADMIN:
            return  # `requests` counts work done for clients, not questions about the server
        with self.guard:
            self.counts[op] = self.counts.get(op, 0) + 1

    def _refuse(self, reason: str) -> dict[str, Any]:
        return {"v": protocol.PROTOCOL, "ok": False, "refused": reason, "funes": __version__}

    def _status(self) -> warm.ServerStatus:
        now = time.monotonic()
        with self.guard:
            idle_for = now - self.last if self.active <= 1 else 0.0
            memories = [warm.MemoryStatus(str(key), m.requests,
                                          0.0 if m.active else now - m.last)
                        for key, m in reversed(self.memories.items())]
            return warm.ServerStatus(
                pid=os.getpid(), home=self.home, socket=str(self.ep.socket),
                version=__version__, protocol=protocol.PROTOCOL,
                uptime=time.time() - self.started, idle_timeout=self.idle, idle_for=idle_for,
                requests=dict(self.counts), embedder_loads=len(self.embedders),
                models=sorted(set(self.embedders.values())), memories=memories,
                rss_mb=rss_mb(), memory_budget_mb=self.budget_mb,
            )
