"""The `funes ui` web application: state, routes, static files, live updates, timing.

The application is Starlette (it comes with the MCP SDK) with Jinja2 templates, wrapped in
funes.ui.guard. Routes are stable (docs/ui.md): `/` timeline, `/search`, `/session/<id>`,
`/commits`, `/memory`, the confirmation and action routes under them, `/events` (the live
timeline) and `/static/…` (this package's own CSS and JavaScript; nothing from the network).

Library calls are serialised by one lock: the pages are for one person, and the memory's
objects (a Lance dataset, model handles) are then never used from two threads at once.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TypeVar

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse

from funes import api
from funes.api import overview
from funes.errors import FunesError
from funes.ui import text

T = TypeVar("T")

#: Seconds between two looks at HEAD for the live timeline (one ref read each).
POLL_SECONDS = 1.0
_STATIC = {"ui.css": "text/css; charset=utf-8", "ui.js": "text/javascript; charset=utf-8"}


@dataclass
class UiState:
    """What every request of one `funes ui` run shares."""

    settings: api.Settings
    #: The memories given (`--memory`, in order; None: the one found from the directory).
    memories: list[str | None]
    port: int
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    _opened: dict[str | None, api.MemoryChoice] = field(default_factory=dict)
    #: Each open memory's HEAD (by label) once the watcher has warmed its listing for it.
    heads: dict[str, str | None] = field(default_factory=dict)

    def choice(self, label: str | None) -> api.MemoryChoice:
        """The memory a page reads: one of those `funes ui` was started with, never another.

        Raises:
            UnknownMemoryError: `label` names none of them.
        """
        if label is not None and label not in self.labels():
            raise UnknownMemoryError(label)
        return self._open(self.memories[0] if label is None else self._key_of(label))

    def _open(self, key: str | None) -> api.MemoryChoice:
        if key not in self._opened:
            self._opened[key] = api.choose_memory(self.settings, key)
        return self._opened[key]

    def opened(self) -> list[api.MemoryChoice]:
        """The memories pages have opened so far (what the HEAD watcher keeps warm)."""
        return list(self._opened.values())

    def _key_of(self, label: str) -> str | None:
        for key in self.memories:
            if key == label or (key in self._opened and self._opened[key].label == label):
                return key
        return self.memories[0]

    def labels(self) -> list[str]:
        """How the page names each memory it can show (what `?memory=` takes)."""
        return [self._open(key).label for key in self.memories]


class UnknownMemoryError(FunesError):
    """A page asked for a memory `funes ui` was not started with."""

    exit_code = 2

    def __init__(self, label: str) -> None:
        super().__init__(f"funes ui was not started with the memory {label}",
                         hint="start it with `funes ui --memory …` for each memory to show")


class Timer:
    """Milliseconds spent in the library and in rendering: the page's `Server-Timing`."""

    def __init__(self) -> None:
        self.lib = 0.0
        self.render = 0.0
        self.started = time.perf_counter()
        self.cpu = time.process_time()

    def header(self) -> str:
        """The `Server-Timing` value for the bench and browser tools.

        `lib` (the library), `render` (templates) and `total` are wall times; `cpu` is the
        CPU time the whole server process spent meanwhile (all its threads: llama.cpp and
        Lance work in their own), which a busy machine does not inflate the way it does wall
        time.
        """
        total = (time.perf_counter() - self.started) * 1000
        cpu = (time.process_time() - self.cpu) * 1000
        return (f"lib;dur={self.lib:.1f};desc=\"library\", render;dur={self.render:.1f}, "
                f"total;dur={total:.1f}, cpu;dur={cpu:.1f}")


class Pages:
    """The shared machinery every page uses: the library under the lock, templates, errors."""

    def __init__(self, state: UiState) -> None:
        self.state = state
        self.env = Environment(loader=PackageLoader("funes.ui", "templates"),
                               autoescape=select_autoescape(["html"]), trim_blocks=True,
                               lstrip_blocks=True)
        self.env.filters.update(rich=text.rich, when=text.when, short=text.short,
                                clip=text.clip, day=text.day_of)

    @contextmanager
    def library(self, timer: Timer) -> Iterator[None]:
        """Hold the library lock for a block of calls, counting its time."""
        start = time.perf_counter()
        with self.state.lock:
            yield
        timer.lib += (time.perf_counter() - start) * 1000

    def call(self, timer: Timer, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """One library call under the lock."""
        with self.library(timer):
            return fn(*args, **kwargs)

    def render(self, request: Request, timer: Timer, name: str, http_status: int = 200,
               **context: Any) -> HTMLResponse:
        """A page from its template, with what the layout needs."""
        start = time.perf_counter()
        memory = request.query_params.get("memory")
        try:
            labels = self.state.labels()
        except FunesError:
            labels = []
        body = self.env.get_template(name).render(
            request=request, token=self.state.token, memories=labels,
            memory_param=memory, path=request.url.path, **context)
        timer.render += (time.perf_counter() - start) * 1000
        response = HTMLResponse(body, status_code=http_status)
        response.headers["Server-Timing"] = timer.header()
        return response

    def error(self, request: Request, timer: Timer, exc: FunesError) -> HTMLResponse:
        """A library refusal as a page: the message and the command or step that fixes it."""
        status = 404 if type(exc).__name__.endswith("NotFoundError") else 400
        return self.render(request, timer, "error.html", http_status=status, title="Error",
                           message=exc.message, hint=exc.hint)

    def choice(self, request: Request, timer: Timer) -> api.MemoryChoice:
        """The memory this request reads (`?memory=`, else the first one given)."""
        with self.library(timer):
            return self.state.choice(request.query_params.get("memory") or None)


def static(request: Request) -> Response:
    """This package's CSS and JavaScript (the only assets a page loads)."""
    name = request.path_params["name"]
    if name not in _STATIC:
        return Response("not found\n", status_code=404, media_type="text/plain")
    data = resources.files("funes.ui").joinpath("static", name).read_bytes()
    return Response(data, media_type=_STATIC[name],
                    headers={"Cache-Control": "no-store"})


def watch(state: UiState) -> None:
    """Follow each open memory's HEAD; when it moves, warm the listing, then tell the pages.

    One look at HEAD a second for all pages (a ref read). A new HEAD (a hook indexed a turn,
    an index run, a pull) makes the session catalogue stale: it is rebuilt here, once, before
    `heads` moves and the live pages ask for the timeline again, so neither they nor the next
    person opening `/` wait for it.
    """
    while not state.stopping.is_set():
        for choice in state.opened():
            try:
                with state.lock:
                    head = overview.head_id(choice.repo)
                if choice.label in state.heads and head == state.heads[choice.label]:
                    continue
                with state.lock:
                    api.sessions(choice.repo, limit=1)
                    overview.session_origins(choice.repo)
            except (FunesError, OSError):
                head = None  # a page shows the error; keep watching
            state.heads[choice.label] = head
        state.stopping.wait(POLL_SECONDS)


def events(state: UiState) -> Callable[[Request], Any]:
    """Server-sent events: `head` whenever the memory's HEAD moves (a hook indexed a turn)."""

    async def events(request: Request) -> Response:
        label = request.query_params.get("memory") or None

        def resolve() -> tuple[str, str | None]:
            with state.lock:
                choice = state.choice(label)
                known = state.heads.get(choice.label)
                return choice.label, known if choice.label in state.heads \
                    else overview.head_id(choice.repo)

        name, last = await asyncio.to_thread(resolve)

        async def stream() -> AsyncIterator[bytes]:
            nonlocal last
            yield b"retry: 2000\n\n"
            quiet = 0.0
            while not state.stopping.is_set():
                await asyncio.sleep(POLL_SECONDS / 2)
                if await request.is_disconnected():
                    return
                now = state.heads.get(name, last)
                if now != last:
                    last = now
                    quiet = 0.0
                    yield f"event: head\ndata: {now or ''}\n\n".encode()
                else:
                    quiet += POLL_SECONDS / 2
                    if quiet >= 15:
                        quiet = 0.0
                        yield b": still here\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"X-Accel-Buffering": "no"})

    return events
