"""MCP sessions inside the warm server: one per agent, all sharing one model load.

Each agent session starts its own `funes mcp`. Loaded in every one of them, the embedding
model, the reranker and the open datasets cost hundreds of MB per agent (funes#155: 16 stdio
MCP servers took 25 GiB). So `funes mcp` is a relay (funes.cli.mcprelay) that hands its stdin
and stdout to this user's warm server: it sends one protocol line (op `mcp`, with its working
directory and MEMORY), the server answers one line, and from then on the connection carries
the MCP session itself, served here by the official SDK (funes.agents.mcp_server.serve_socket)
on the memories the server holds open, with the models it has loaded.

The session's connection counts as a request in flight, so the server does not exit for
idleness while an agent is connected; when the server stops (`funes serve --stop`, an
upgrade), it shuts the connections down and each relay carries on (a new server, or in its own
process).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes import protocol
from funes._env import Settings
from funes.api.mcp_backend import Backend, Reader, memory_arg
from funes.api.memory import MemoryChoice
from funes.api.pool import recall_pooled
from funes.api.search import RecallRequest, RecallResult
from funes.retrieval import indexes
from funes.storage.repo import Repository

if TYPE_CHECKING:
    from funes.api.serve import _Server

__all__ = ["ServedReader", "serve_mcp"]


class ServedReader(Reader):
    """Tool calls read the server's open memories (their Lance sessions keep caches warm)."""

    def __init__(self, server: _Server) -> None:
        self.server = server

    @contextlib.contextmanager
    def view(self, repo: Repository) -> Iterator[Repository]:
        """The server's open memory at `repo`, pinned for this call."""
        with self.server._memory(repo.path) as memory:
            yield memory.view()

    def recall(self, settings: Settings, repo: Repository, request: RecallRequest) -> RecallResult:
        """The recall the server runs for `funes recall` (its pinned, warm view)."""
        result: RecallResult = self.server._recall(repo.path, request)
        return result

    def pooled(self, settings: Settings, choices: Sequence[MemoryChoice],
               request: RecallRequest) -> RecallResult:
        """A pooled recall over the server's open memories."""
        with contextlib.ExitStack() as held:
            views = []
            for choice in choices:
                memory = held.enter_context(self.server._memory(choice.repo.path))
                if request.bm25 and memory.repo.chunks.exists():
                    indexes.retokenize(memory.repo)  # writes: on the live repository, first
                view = memory.view()
                if request.vector:
                    self.server._note_models(view)
                views.append(dataclasses.replace(choice, repo=view))
            return recall_pooled(settings, views, request)


def serve_mcp(server: _Server, conn: socket.socket, args: dict[str, Any]) -> None:
    """Answer the relay's opening line, then serve its MCP session until it hangs up."""
    from funes.agents.mcp_server import serve_socket

    settings = dataclasses.replace(server.settings, cwd=Path(str(args["cwd"])))
    backend = Backend(settings, memory_arg(settings, args.get("memory")), ServedReader(server),
                      count=lambda tool: server._count(f"mcp {tool}"))
    conn.settimeout(None)
    conn.sendall(protocol.dumps({"v": protocol.PROTOCOL, "ok": True,
                                 "result": {"mcp": True, "pid": os.getpid()}}))
    server._count("mcp")
    serve_socket(backend, conn)
