"""Running `funes ui`: the routes, a loopback socket, uvicorn, and the browser.

The socket is bound here, on 127.0.0.1 only, before the server starts: the port (random and
free unless `--port` names one) is then known for the Host and Origin checks
(funes.ui.guard) and for the address printed or opened.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Route

from funes import api
from funes._env import display_available
from funes.errors import FunesError
from funes.ui import pages
from funes.ui.app import Pages, UiState, events, static, watch
from funes.ui.guard import Guard

__all__ = ["HOST", "PortInUseError", "UiServer", "build_app", "serve_ui"]

#: The only address `funes ui` listens on.
HOST = "127.0.0.1"


class PortInUseError(FunesError):
    """The port asked for is taken (or not ours to take)."""

    exit_code = 2

    def __init__(self, port: int, detail: str) -> None:
        super().__init__(f"cannot listen on {HOST}:{port}: {detail}",
                         hint="pick another with --port N, or leave --port out for a free one")


def build_app(state: UiState) -> Guard:
    """The whole application, guarded (funes.ui.guard)."""
    handlers = pages.Handlers(Pages(state))
    routes = [
        Route("/", handlers.timeline),
        Route("/search", handlers.search),
        Route("/session/{session_id:path}/forget", handlers.forget, methods=["GET", "POST"]),
        Route("/session/{session_id:path}", handlers.session),
        Route("/commits", handlers.commits),
        Route("/memory", handlers.memory),
        Route("/memory/{action:str}", handlers.remote_action, methods=["GET", "POST"]),
        Route("/events", events(state)),
        Route("/static/{name:str}", static),
    ]
    return Guard(Starlette(routes=routes), port=state.port, token=state.token)


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        raise PortInUseError(port, exc.strerror or str(exc)) from None
    sock.set_inheritable(True)
    return sock


@dataclass
class UiServer:
    """One running `funes ui`: its address, state and uvicorn server."""

    state: UiState
    sock: socket.socket
    server: Any
    thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The address to open."""
        return f"http://{HOST}:{self.state.port}/"

    @classmethod
    def make(cls, settings: api.Settings, memories: list[str | None], port: int = 0) -> UiServer:
        """Open the memories, bind the socket and prepare the server (not started).

        Raises:
            PortInUseError: the port cannot be bound.
            FunesError: a memory cannot be opened (the first is opened now, so a wrong
                `--memory` fails here and not on the first page).
        """
        import uvicorn

        sock = _bind(port)
        state = UiState(settings, memories or [None], sock.getsockname()[1])
        try:
            state.labels()
        except BaseException:
            sock.close()
            raise
        config = uvicorn.Config(build_app(state), log_level="warning", access_log=False,
                                lifespan="off", timeout_graceful_shutdown=2)
        return cls(state, sock, uvicorn.Server(config))

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C) or `stop`."""
        watcher = threading.Thread(target=watch, args=(self.state,), name="funes-ui-watch",
                                   daemon=True)
        watcher.start()
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.state.stopping.set()
            self.sock.close()
            watcher.join(30)

    def start(self) -> UiServer:
        """Serve from a background thread (tests, the bench); returns once it answers."""
        import time

        self.thread = threading.Thread(target=self.run, name="funes-ui", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            if not self.thread.is_alive():
                raise RuntimeError("funes ui stopped while starting")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Ask the server to finish its requests and exit; wait for it."""
        self.state.stopping.set()
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(15)


def serve_ui(settings: api.Settings, memories: list[str | None], *, port: int = 0,
             open_browser: bool = True, say: Callable[[str], None] = print) -> str:
    """`funes ui`: serve the pages on 127.0.0.1 until interrupted; returns the address.

    The browser is opened only when asked and a display exists; the address is always said.
    """
    ui = UiServer.make(settings, memories, port)
    say(f"funes ui: serving {', '.join(ui.state.labels())} at {ui.url} (Ctrl-C stops)")
    if open_browser and display_available():
        import webbrowser

        threading.Timer(0.5, lambda: webbrowser.open(ui.url)).start()
    ui.run()
    return ui.url
