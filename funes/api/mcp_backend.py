"""The MCP tools' work: every read verb, rendered in the agent format.

`funes mcp` serves these tools from the per-user warm server when it can (funes.api.serve
runs one MCP session per agent connection there, on the memories it holds open) and from its
own process otherwise; both use `Backend`, so a tool answers the same bytes either way, and the
same bytes as the CLI (`funes <verb> --format agent`).

`Reader` is where the two differ: how a memory is read for one call (a fresh snapshot here, the
server's open memory with its warm caches there) and how a recall is run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.api.agent_format import status_text
from funes.api.memory import MemoryChoice, choose_memory, is_remote_memory
from funes.api.pool import pool_choices, recall_pooled
from funes.api.printed import browse_output, run_browse
from funes.api.render import get_output, output_note, recall_output
from funes.api.repo import status
from funes.api.search import (
    BLOCK_TYPES,
    HARNESSES,
    ROLES,
    RecallRequest,
    RecallResult,
    get,
    is_harness,
    is_role,
    recall_in_process,
    search_status,
)
from funes.errors import UsageError
from funes.storage.repo import Repository
from funes.storage.snapshot import snapshot

__all__ = ["Backend", "Reader", "mcp_serve", "memory_arg", "serve_local"]


class Reader:
    """How one tool call reads a memory: in this process, on a snapshot made for it."""

    @contextlib.contextmanager
    def view(self, repo: Repository) -> Iterator[Repository]:
        """`repo` pinned for one call."""
        yield snapshot(repo)

    def recall(self, settings: Settings, repo: Repository, request: RecallRequest) -> RecallResult:
        """One memory's recall."""
        return recall_in_process(settings, repo, request)

    def pooled(self, settings: Settings, choices: Sequence[MemoryChoice],
               request: RecallRequest) -> RecallResult:
        """A recall over several memories (funes.api.pool)."""
        return recall_pooled(settings, choices, request)


def _choices(kind: str, values: Sequence[str], allowed: Sequence[str]) -> tuple[str, ...]:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise UsageError(f"unknown {kind} {', '.join(map(repr, bad))}",
                         hint=f"use one of: {', '.join(allowed)}")
    return tuple(values)


def _harnesses(values: Sequence[str]) -> tuple[str, ...]:
    """Harness filters: a known agent, or any name a turn file's producer may carry."""
    bad = [v for v in values if not is_harness(v)]
    if bad:
        raise UsageError(f"invalid harness {', '.join(map(repr, bad))}",
                         hint=f"an agent ({', '.join(HARNESSES)}) or a turn file's producer "
                         "name: lowercase letters, digits, '_' and '-'")
    return tuple(values)


def _roles(values: Sequence[str]) -> tuple[str, ...]:
    """Role filters: user, assistant, system, tool, or a role a turn file's producer uses."""
    bad = [v for v in values if not is_role(v)]
    if bad:
        raise UsageError(f"invalid role {', '.join(map(repr, bad))}",
                         hint=f"use one of: {', '.join(ROLES)} (or a producer's own role)")
    return tuple(values)


def memory_arg(settings: Settings, memory: str | None) -> str | None:
    """`funes mcp MEMORY` as the CLI reads it: a remote name as given, a path made absolute."""
    if not memory or is_remote_memory(memory, settings.cwd):
        return memory
    return str((settings.cwd / Path(memory).expanduser()).resolve())


def _memories(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


class Backend:
    """Every MCP tool, each returning what `funes <verb> --format agent` prints.

    recall (one memory or several), get (a turn or a range), sessions, scan, sketch, status.
    A call's `memory` (a path, relative to the agent's working directory, or a remote) else
    the server's MEMORY, else discovery from the working directory, picks what it reads.
    """

    def __init__(self, settings: Settings, memory: str | None, reader: Reader | None = None,
                 count: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self.memory = memory
        self.reader = reader or Reader()
        self.count = count or (lambda tool: None)

    def _choose(self, memory: str | None) -> MemoryChoice:
        if memory and not is_remote_memory(memory, self.settings.cwd):
            path = Path(memory).expanduser()
            memory = str(path if path.is_absolute() else self.settings.cwd / path)
        return choose_memory(self.settings, memory or self.memory)

    def _open(self, memory: str | None) -> Repository:
        return self._choose(memory).repo

    def recall(self, query: str, *, k: int | None = None, harness: Sequence[str] = (),
               block_type: Sequence[str] = (), project: Sequence[str] = (),
               since: str | None = None, until: str | None = None, role: Sequence[str] = (),
               fresh: str = "mark", memory: str | list[str] | None = None) -> str:
        """Agent-format recall: one memory, or several ranked together."""
        self.count("recall")
        request = RecallRequest(
            query, k=k, harness=_harnesses(harness),
            block_type=_choices("type", block_type, BLOCK_TYPES), project=tuple(project),
            since=since, until=until, role=_roles(role), fresh=fresh,
            code=str(self.settings.cwd))
        named = [self._choose(m) for m in _memories(memory)]
        if len(named) > 1 or not named:
            # Several memories, or the server's own and those its recall.pool lists.
            choices = named or pool_choices(self.settings, [], default=self.memory)
            if len(choices) > 1:
                result = self.reader.pooled(self.settings, choices, request)
                return recall_output("agent", result, choices[0].label, choices[0].owned,
                                     output_note(choices[0]),
                                     {c.label: c.owned for c in choices})
        choice = named[0] if named else self._choose(None)
        result = self.reader.recall(self.settings, choice.repo, request)
        return recall_output("agent", result, choice.label, choice.owned, output_note(choice))

    def get(self, session_id: str, turn_id: str | None = None, *, window: int = 0,
            first: int | None = None, last: int | None = None, max_chars: int | None = None,
            memory: str | None = None) -> str:
        """Agent-format `get`: one turn, or a range of turns."""
        self.count("get")
        if turn_id is not None:
            if first is not None or last is not None or max_chars is not None:
                raise UsageError("give turn_id, or from_seq/to_seq (a range), not both")
            choice = self._choose(memory)
            with self.reader.view(choice.repo) as view:
                return get_output("agent", get(view, session_id, turn_id, window), choice)
        fields: dict[str, Any] = {"session_id": session_id, "first": first, "last": last}
        if max_chars is not None:
            fields["max_chars"] = max_chars
        return self._browse("get-range", fields, memory)

    def sessions(self, *, project: Sequence[str] = (), harness: Sequence[str] = (),
                 since: str | None = None, until: str | None = None, limit: int = 20,
                 offset: int = 0, memory: str | None = None) -> str:
        """Agent-format `sessions`."""
        self.count("sessions")
        return self._browse("sessions", {
            "project": tuple(project), "harness": _harnesses(harness),
            "since": since, "until": until, "limit": limit, "offset": offset}, memory)

    def scan(self, needle: str, *, sessions: Sequence[str] = (), limit: int = 20,
             offset: int = 0, memory: str | None = None) -> str:
        """Agent-format `scan`."""
        self.count("scan")
        return self._browse("scan", {"needle": needle, "sessions": tuple(sessions),
                                     "limit": limit, "offset": offset}, memory)

    def sketch(self, session_id: str, *, max_chars: int | None = None,
               memory: str | None = None) -> str:
        """Agent-format `sketch`."""
        self.count("sketch")
        fields: dict[str, Any] = {"session_id": session_id}
        if max_chars is not None:
            fields["max_chars"] = max_chars
        return self._browse("sketch", fields, memory)

    def status(self, *, memory: str | None = None) -> str:
        """Agent-format `status`."""
        self.count("status")
        choice = self._choose(memory)
        text = status_text(status(choice.repo, refresh=True),
                           search_status(self.settings, choice.repo))
        return f"# note: {choice.warning}\n{text}" if choice.warning else text

    def _browse(self, command: str, fields: dict[str, Any], memory: str | None) -> str:
        choice = self._choose(memory)
        with self.reader.view(choice.repo) as view:
            text = browse_output("agent", run_browse(view, command, fields))
        note = output_note(choice)
        return f"{note}\n{text}" if note else text


def mcp_serve(settings: Settings, memory: str | None = None) -> None:
    """Serve `funes mcp` on stdin/stdout, in this process, until the client disconnects.

    `funes mcp` itself first tries the warm server (funes.cli.mcprelay); this is its
    fallback, and what runs with `FUNES_SERVE=off`.
    """
    from funes.agents.mcp_server import serve

    serve(Backend(settings, memory))


def serve_local(settings: Settings, memory: str | None, sock: Any) -> None:
    """Serve an MCP session over `sock` in this process (the relay's last resort)."""
    from funes.agents.mcp_server import serve_socket

    serve_socket(Backend(settings, memory_arg(settings, memory)), sock)
