"""The warm path's library client: ask the running `funes serve`, else do the work here.

A cold `funes recall` pays for importing Lance and llama.cpp, loading the embedding model and
reading the search indexes before it can answer; `funes serve` (funes.api.serve) pays that
once and then answers over a Unix socket (where and how: funes.protocol). `recall` and `get`
here return what the server computed when one answers, and compute it here when none does (no
socket, nobody listening, an old server, a crash, a timeout). Errors funes raises on purpose
(`FunesError`) come back from the server as the same type with the same message, hint and
exit code, so a caller cannot tell the two paths apart, except by the time taken. The CLI's
`recall` and `get` reach this module through the porcelain (`api.recall(..., via_server=True)`
and `api.get(..., via_server=True)`); the thin client (funes.cli.thin) talks to the server
before the CLI is even imported.

**One server per user** (per funes home): it serves every memory it is asked about, opening
each on demand and closing it when idle (funes.api.serve).

**On demand** (`FUNES_SERVE=auto`, the default). When `recall` finds no server, it starts one
detached in the background (a new session, output to the log) and answers this query itself
without waiting: the next recall is warm. It does not start one while a server holds the lock
(starting up), nor within `RESPAWN_AFTER` seconds of the last attempt (a server that cannot
start must not be respawned by every query). `FUNES_SERVE=use` uses a running server but never
starts one; `FUNES_SERVE=off` never connects.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes import protocol
from funes._env import Settings
from funes.errors import FunesError
from funes.protocol import PROTOCOL, Endpoint, lock_held
from funes.retrieval.get import BlockView, TurnView
from funes.retrieval.recall import Hit, RecallResult
from funes.storage.repo import Repository

if TYPE_CHECKING:
    from funes.api.search import RecallRequest

__all__ = [
    "DEFAULT_IDLE",
    "PROTOCOL",
    "Endpoint",
    "MemoryStatus",
    "ServerOutdated",
    "ServerStatus",
    "ServerUnavailable",
    "endpoint",
    "get_via_server",
    "lock_held",
    "recall_via_server",
    "server_status",
    "start_server",
    "stop_server",
]

#: Seconds a server started on demand stays up without requests.
DEFAULT_IDLE = 600.0
#: Seconds after a start attempt during which no client starts another.
RESPAWN_AFTER = protocol.RESPAWN_AFTER

ServerUnavailable = protocol.Unavailable
ServerOutdated = protocol.Outdated


@dataclass(frozen=True)
class MemoryStatus:
    """One memory a server holds open."""

    path: str
    requests: int  # recall, get and run requests it answered for this memory
    idle_for: float  # seconds since its last request ended


@dataclass(frozen=True)
class ServerStatus:
    """What a running server says about itself (`funes serve --status`)."""

    pid: int
    home: str
    socket: str
    version: str
    protocol: int
    uptime: float  # seconds since it started
    idle_timeout: float  # seconds without requests before it exits (0: never)
    idle_for: float  # seconds since the last request ended
    requests: dict[str, int]  # requests answered by operation (errors included)
    embedder_loads: int  # embedding models loaded since start (stays 1 when warm)
    models: list[str]  # models loaded in the process
    memories: list[MemoryStatus]  # memories open now, most recently used first
    rss_mb: float | None = None  # resident memory of the server (None where unknown)
    memory_budget_mb: float = 0.0  # above this, the least recently used memories are closed


def endpoint(settings: Settings) -> Endpoint:
    """The socket, lock and log paths of this user's server for `settings.home`.

    Raises:
        ServerUnavailable: the runtime directory is not private to this user.
    """
    return protocol.endpoint(settings.home)


# -- the library's results on the wire ---------------------------------------------------------


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
        fields["ids"] = tuple(str(i) for i in t.get("ids", ()))
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


def request(settings: Settings, op: str, repo_path: Path | None = None,
            args: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
    """Send one request to this user's server and return its result.

    Raises:
        ServerUnavailable: no answer (see funes.protocol); the caller works alone.
        FunesError: the server ran the operation and it failed; the same error in-process.
    """
    ep = endpoint(settings)
    if op in ("recall", "get") and (failed := protocol.recent_failure()) is not None:
        raise failed  # the thin client found no server a moment ago: do not wait again
    repo = str(repo_path.resolve()) if repo_path is not None else None
    answer = protocol.exchange(ep, protocol.message(op, settings.home, repo, args or {}),
                               timeout if timeout is not None else settings.serve_timeout)
    if answer.get("ok"):
        return answer.get("result")
    raise decode_error(answer["error"])


def _enabled(settings: Settings) -> bool:
    return settings.serve in ("auto", "use")


def recall_via_server(settings: Settings, repo: Repository, query: RecallRequest,
                      local: Callable[[], RecallResult]) -> RecallResult:
    """A recall answered by the warm server when one runs, else by `local()` in-process.

    With `FUNES_SERVE=auto` and no server, starts one in the background for the next query
    and answers this one in-process. `local` is `funes.api.search.recall_in_process` bound to the
    request: passed in, so this client module needs nothing from the module that calls it.
    """
    if _enabled(settings):
        try:
            data = request(settings, "recall", repo.path, query.encode())
            return decode_recall(data)
        except (ServerUnavailable, TypeError, KeyError, ValueError) as exc:
            # TypeError, KeyError, ValueError: an argument that cannot travel, or an answer
            # this code cannot rebuild (a server running other code): either way, work alone.
            if isinstance(exc, ServerOutdated):
                stop_server(settings, wait=0)  # the next recall starts a current one
            elif settings.serve == "auto":
                start_server(settings, warm=repo.path)
    return local()


def get_via_server(settings: Settings, repo: Repository, session_id: str, turn_id: str,
                   window: int, local: Callable[[], list[TurnView]]) -> list[TurnView]:
    """`funes.api.search.get`, answered by the warm server when one runs (never starts one).

    `local` is the same `get` in this process (the server marks trust the same way).
    """
    if _enabled(settings):
        try:
            data = request(settings, "get", repo.path,
                           {"session_id": session_id, "turn_id": turn_id, "window": window})
            return decode_turns(data)
        except (ServerUnavailable, TypeError, KeyError, ValueError):
            pass
    return local()


def server_status(settings: Settings) -> ServerStatus | None:
    """The running server's status, or None when no server answers."""
    try:
        data = request(settings, "status", timeout=min(5.0, settings.serve_timeout))
        memories = [MemoryStatus(**m) for m in data.pop("memories")]
        return ServerStatus(**data, memories=memories)
    except (ServerUnavailable, TypeError, KeyError):
        return None


def stop_server(settings: Settings, *, wait: float = 5.0) -> bool:
    """Ask this user's server to exit; True when one was running (it has gone by now)."""
    try:
        request(settings, "stop", timeout=min(5.0, settings.serve_timeout))
    except ServerUnavailable:
        return False
    ep = endpoint(settings)
    deadline = time.monotonic() + wait
    while lock_held(ep) and time.monotonic() < deadline:
        time.sleep(0.02)
    return True


def start_server(settings: Settings, *, idle: float = DEFAULT_IDLE,
                 warm: Path | None = None) -> bool:
    """Start `funes serve`, detached, unless one runs or one was just attempted.

    `warm` names a memory the server opens (and whose models it loads) before the first
    request asks.

    Returns at once (the server warms up on its own); True when a process was started. Never
    raises: the warm path is an optimisation, and the caller is about to work alone anyway.
    """
    try:
        ep = endpoint(settings)
    except ServerUnavailable:
        return False
    return protocol.spawn(ep, [sys.executable, "-m", "funes",
                               *(["--memory", str(warm)] if warm is not None else []),
                               "serve", "--idle", repr(idle)])
