"""Agent verbs: add, remove, mcp, ask, and the detached work of the agent hooks.

- `agents_add` / `agents_remove` wire funes into an agent (funes.agents.<agent> knows where
  and how) and undo it exactly; the global memory is created when there is none, as
  `funes init --global` would, so `funes add claude` is a complete first step.
- `mcp_serve` runs `funes mcp`: the MCP server whose tools print the agent format.
- `ask` recalls in-process, then hands the passages to `claude -p` or `codex exec` with their
  tools off and returns the answer.
- `hook_run` is `funes hook run`, started detached by the hook script: it drains the queue of
  agent events, indexes the transcripts they name (routed like `funes index`, or into the
  memory `funes add <agent> MEMORY` bound), embeds a little of the backlog, and pushes a memory
  with a remote at a session end. One runs at a time (a lock, taken without waiting); a busy
  memory is skipped, never waited for: the next turn's hook, or `funes index`, catches up.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from funes._env import Settings
from funes.agents import AGENTS, claude, codex, copilot, cursor, gemini, hermes, opencode, pi
from funes.agents import ask as _ask
from funes.agents.hook import lock_path, queue_dir
from funes.agents.wiring import (
    HOOK_NAME,
    Edits,
    Record,
    agents_dir,
    bound_memory,
    hook_path,
    package_text,
    read_bytes,
    replace_file,
    which,
)
from funes.api.agent_format import recall_text, status_text, turns_text
from funes.api.ingest import IndexSummary, _ProjectRouter, index
from funes.api.recall import embed, get, memory_label, owned, recall, search_status
from funes.api.repo import init, open_memory, status
from funes.errors import FunesError, UsageError
from funes.ingest.run import index_sources
from funes.ingest.sources import explicit_sources
from funes.ingest.state import SourceStates
from funes.model.turns import HARNESSES as _HARNESSES
from funes.storage.lock import RepositoryBusyError, WriteLock
from funes.storage.repo import Repository

__all__ = ["AskResult", "WiringResult", "agents_add", "agents_remove", "ask", "hook_run",
           "mcp_serve"]

MODULES: dict[str, ModuleType] = {
    "claude": claude, "codex": codex, "pi": pi, "hermes": hermes, "opencode": opencode,
    "gemini": gemini, "cursor": cursor, "copilot": copilot,
}
HARNESSES = _HARNESSES
BLOCK_TYPES = ("text", "thinking", "tool_use", "tool_result")

#: Seconds a detached hook run may take in all (then it is stopped; crash-safe storage).
HOOK_DEADLINE = 600
#: Seconds of embedding after each hook's indexing (the rest waits for the next hook).
EMBED_BUDGET = 20.0
#: Seconds a session-end push may take.
PUSH_TIMEOUT = 60.0
#: Agents without a session-end event push after a turn at most this often (seconds).
PUSH_INTERVAL = 900.0
#: Agents whose hooks never report a session end.
NO_SESSION_END = ("codex", "opencode")


def _module(agent: str) -> ModuleType:
    if agent not in MODULES:
        raise UsageError(f"unknown agent {agent!r}", hint=f"use one of: {', '.join(AGENTS)}")
    return MODULES[agent]


# -- add / remove ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WiringResult:
    """What `add` or `remove` did to one agent's configuration."""

    agent: str
    memory: str | None
    #: One line per file changed (with its backup), empty when nothing had to change.
    changed: list[str]
    #: What the user should do next (restart the agent, approve hooks).
    notes: list[str] = field(default_factory=list)
    #: The command that indexes the agent's existing sessions.
    index_command: str = ""
    #: The global memory, when `add` had to create it.
    created_memory: str | None = None
    #: The first index, when `add(index=True)` ran it.
    indexed: IndexSummary | None = None


def _install_hook_script(settings: Settings) -> None:
    """$FUNES_HOME/agents/agent-turn-end, pointing at this Python."""
    import shlex

    text = package_text(HOOK_NAME).replace("@PYTHON@", shlex.quote(sys.executable))
    path = hook_path(settings)
    if read_bytes(path) != text.encode("utf-8"):
        replace_file(path, text.encode("utf-8"), 0o755)


def agents_add(
    settings: Settings,
    agent: str,
    memory: str | None = None,
    *,
    index_now: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> WiringResult:
    """Register `funes mcp [memory]` and the hooks with `agent`; idempotent.

    Args:
        settings: The environment.
        agent: claude, codex, pi or hermes.
        memory: Bind the agent to this memory (MCP server and hooks); None routes each session
            to its project memory or the global one, like `funes index`.
        index_now: Also index the agent's existing sessions (`funes add --index`).
        progress: Progress callback for that first index.
    """
    module = _module(agent)
    created: str | None = None
    if memory:
        memory = str(open_memory(settings, memory).path)
    elif not (settings.home / "FORMAT").is_file():
        created = str(init(settings, is_global=True).repo.path)
    _install_hook_script(settings)
    edits = Edits(settings, agent)
    edits.record.memory = memory
    notes = list(module.add(edits, memory))
    edits.save()
    command = f"funes index --agent {agent}" + (f" --memory {memory}" if memory else "")
    indexed = index(settings, memory=memory, agents=[agent], progress=progress) \
        if index_now else None
    return WiringResult(agent, memory, edits.changed, notes if edits.changed else [], command,
                        created, indexed)


def agents_remove(settings: Settings, agent: str) -> WiringResult:
    """Take funes out of `agent`'s configuration, restoring what was there."""
    module = _module(agent)
    edits = Edits(settings, agent)
    memory = edits.record.memory
    module.remove(edits)
    edits.forget()
    if not any(Record.path(settings, a).exists() for a in AGENTS):
        with contextlib.suppress(FileNotFoundError):
            hook_path(settings).unlink()
    return WiringResult(agent, memory, edits.changed)


# -- the MCP server ----------------------------------------------------------------------------


def _choices(kind: str, values: Sequence[str], allowed: Sequence[str]) -> tuple[str, ...]:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise UsageError(f"unknown {kind} {', '.join(map(repr, bad))}",
                         hint=f"use one of: {', '.join(allowed)}")
    return tuple(values)


class _Backend:
    """The MCP tools' work: the CLI's verbs, rendered in the agent format."""

    def __init__(self, settings: Settings, memory: str | None) -> None:
        self.settings = settings
        self.memory = memory

    def _open(self, memory: str | None) -> Repository:
        if memory:
            path = Path(memory).expanduser()
            return open_memory(self.settings, str(path if path.is_absolute()
                                                  else self.settings.cwd / path))
        return open_memory(self.settings, self.memory)

    def recall(self, query: str, *, k: int | None, harness: list[str], block_type: list[str],
               project: list[str], since: str | None, memory: str | None) -> str:
        agents = _choices("harness", harness, HARNESSES)
        types = _choices("type", block_type, BLOCK_TYPES)
        repo = self._open(memory)
        result = recall(self.settings, repo, query, k=k, harness=agents, block_type=types,
                        project=project, since=since)
        return recall_text(result, memory_label(repo), owned(repo))

    def get(self, session_id: str, turn_id: str, *, window: int, memory: str | None) -> str:
        return turns_text(get(self._open(memory), session_id, turn_id, window))

    def status(self, *, memory: str | None) -> str:
        repo = self._open(memory)
        return status_text(status(repo), search_status(self.settings, repo))


def mcp_serve(settings: Settings, memory: str | None = None) -> None:
    """Serve `funes mcp` on stdin/stdout until the client disconnects."""
    from funes.agents.mcp_server import serve

    serve(_Backend(settings, memory))


# -- ask ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AskResult:
    """An agent's answer and what it was grounded on."""

    agent: str
    answer: str
    memory: str
    #: The sessions the passages came from, in recall order.
    sessions: list[str]
    #: The agent's command line (the prompt went on stdin).
    argv: list[str]
    prompt: str


def ask(
    settings: Settings,
    agent: str,
    question: str,
    *,
    memory: str | None = None,
    k: int | None = None,
    timeout: float = _ask.DEFAULT_TIMEOUT,
) -> AskResult:
    """Recall, then have `agent` answer from the passages alone (flow 6).

    Raises, before any agent is started: UsageError (agent that cannot answer),
    AgentNotFoundError (its CLI is not on PATH), NotARepositoryError and other storage errors
    (the memory cannot be read), NothingRecalledError (no passage matched).
    """
    if agent not in _ask.ASK_AGENTS:
        raise UsageError(f"funes ask cannot run {agent!r}",
                         hint=f"use one of: {', '.join(_ask.ASK_AGENTS)}")
    exe = which(_ask.ASK_AGENTS[agent])
    if exe is None:
        raise _ask.AgentNotFoundError(agent, _ask.ASK_AGENTS[agent])
    if not question.strip():
        raise UsageError("the question is empty")
    repo = open_memory(settings, memory)
    label = memory_label(repo)
    result = recall(settings, repo, question, k=k)
    if not result.hits:
        raise _ask.NothingRecalledError(label)
    passages = [_ask.Passage.from_row(hit.row) for hit in result.hits]
    prompt = _ask.build_prompt(question, passages, label, owned(repo))
    argv = _module(agent).ask_command(exe)
    # A scratch directory: no project file (CLAUDE.md, AGENTS.md) leaks into the answer.
    with tempfile.TemporaryDirectory(prefix="funes-ask-") as scratch:
        answer = _ask.run_agent(agent, argv, prompt, timeout=timeout, cwd=scratch)
    sessions = list(dict.fromkeys(p.session_id for p in passages))
    return AskResult(agent, answer, label, sessions, argv, prompt)


# -- the detached hook run ---------------------------------------------------------------------


@dataclass
class _Request:
    agent: str
    event: str
    payload: dict[str, Any]
    cwd: str
    ident: str


def _take_queue(settings: Settings) -> list[_Request]:
    """Every queued event (oldest first), removed from the queue."""
    import json

    out = []
    for path in sorted(queue_dir(settings).glob("*.json")):
        try:
            body = json.loads(path.read_text("utf-8"))
            path.unlink()
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        if isinstance(body, dict) and body.get("agent") in MODULES:
            payload = body.get("payload")
            out.append(_Request(str(body["agent"]), str(body.get("event") or "turn-end"),
                                payload if isinstance(payload, dict) else {},
                                str(body.get("cwd") or ""), str(body.get("id") or path.stem)))
    return out


def _index_agent(settings: Settings, agent: str, requests: list[_Request],
                 say: Callable[[str], None]) -> dict[Path, Repository]:
    """Index the transcripts the agent's events name; the memories that got new chunks."""
    module = MODULES[agent]
    paths: list[Path] = []
    for r in requests:
        paths += [p for p in module.transcripts(settings, r.payload) if p not in paths]
    if not paths:
        say(f"{agent}: no transcript found for {len(requests)} event(s)")
        return {}
    memory = bound_memory(settings, agent)
    repos: dict[Path, Repository] = {}
    router: Callable[[Any], Repository | None]
    if memory:
        repo = open_memory(settings, memory)
        repos[repo.path] = repo
        router = lambda _turn: repo  # noqa: E731
        states = SourceStates(repo.path / "index" / "sources.json")
    else:
        routed = _ProjectRouter(settings)
        router = routed
        states = SourceStates(settings.home / "state" / "sources.json")
    summary = index_sources(explicit_sources(paths, harness=agent), router, states,
                            lock_timeout=0)
    if not memory:
        repos.update(routed._repos)
    for path, committed in summary.commits.items():
        say(f"{agent}: {summary.turns} turns, {committed.added} new chunks in {path}")
    if not summary.commits:
        say(f"{agent}: {len(paths)} transcript(s), nothing new")
    if summary.unroutable:
        say(f"{agent}: {summary.unroutable} turns outside any memory "
            "(run `funes init --global` to keep them)")
    for error in summary.errors:
        say(f"{agent}: unreadable: {error}")
    return {Path(p): repos[Path(p)] for p, c in summary.commits.items()
            if c.added and Path(p) in repos}


def _embed_some(settings: Settings, repo: Repository, say: Callable[[str], None]) -> None:
    """Drain a little of the embedding backlog, if a model is installed (never installs one)."""
    from funes.inference import models

    stamp = repo.model_stamp()
    name = stamp.name if stamp else repo.config.get("model.embed") or models.DEFAULT_EMBED_MODEL
    if models.installed(settings, name) is None:
        say(f"embed: model {name} is not installed; `funes embed` installs it and catches up")
        return
    from funes.inference.embedder import default_threads

    # One CPU is left to the agent and the user: llama.cpp's threads spin-wait, and with every
    # core taken by a busy machine 2 threads ran 6-12× slower than 1 here (bench/results/
    # recall.md, build notes).
    done = embed(settings, repo, budget=EMBED_BUDGET, lock_timeout=0,
                 n_threads=max(1, default_threads() - 1))
    say(f"embed: {done.embedded} chunks in {done.seconds:.1f}s ({done.threads} llama.cpp "
        f"thread{'s' if done.threads > 1 else ''}), {done.remaining} waiting in {repo.path}")


def maintain(repo: Repository, say: Callable[[str], None]) -> None:
    """Pack the memory and fold new rows into its indexes when due; never fails the hook."""
    from funes.retrieval.indexes import maintain as upkeep

    try:
        done = upkeep(repo)
    except (FunesError, OSError, RuntimeError, ValueError) as exc:  # Lance errors too
        say(f"pack: {repo.path}: {exc}")
        return
    if done.packed is not None and done.packed.did_pack:
        say(f"pack: {sum(done.packed.packed.values())} fragments packed in "
            f"{done.packed.seconds:.1f}s in {repo.path}")
    if done.folded:
        say(f"index: {done.folded} rows folded into the search indexes of {repo.path}")


def _push(settings: Settings, repo: Repository, say: Callable[[str], None]) -> None:
    """`funes push` for a memory with a remote, bounded in time, never failing the hook."""
    from funes.gitlink.hook import run_bounded

    if not repo.config.subsections("remote"):
        return
    stamp = repo.path / "index" / "last-hook-push"
    ok, detail = run_bounded(
        [sys.executable, "-m", "funes", "--format", "agent", "--memory", str(repo.path), "push"],
        cwd=repo.path, timeout=PUSH_TIMEOUT)
    if ok:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        say(f"push: {repo.path}: {detail or 'done'}")
    elif "No such command" in detail:
        say("push: this funes has no `push` command yet; the memory stays local")
    else:
        say(f"push: {repo.path} not pushed ({detail}); run `funes push`")


def _push_due(repo: Repository) -> bool:
    stamp = repo.path / "index" / "last-hook-push"
    try:
        return time.time() - stamp.stat().st_mtime >= PUSH_INTERVAL
    except FileNotFoundError:
        return True


def _session_memory(settings: Settings, agent: str, request: _Request) -> Repository | None:
    memory = bound_memory(settings, agent)
    if memory:
        return open_memory(settings, memory)
    cwd = request.payload.get("cwd") or request.cwd
    with contextlib.suppress(FunesError, OSError):
        return Repository.discover(settings, Path(str(cwd))) if cwd else None
    return None


def _handle(settings: Settings, requests: list[_Request], say: Callable[[str], None]) -> None:
    touched: dict[Path, Repository] = {}
    for agent in dict.fromkeys(r.agent for r in requests):
        mine = [r for r in requests if r.agent == agent]
        try:
            touched.update(_index_agent(settings, agent, mine, say))
        except RepositoryBusyError:
            say(f"{agent}: the memory is busy (another writer); the next hook or "
                "`funes index` picks these turns up")
        except FunesError as exc:
            say(f"{agent}: not indexed: {exc}")
    for repo in touched.values():
        try:
            _embed_some(settings, repo, say)
        except RepositoryBusyError:
            say(f"embed: {repo.path} is busy; the next hook continues")
        except FunesError as exc:
            say(f"embed: {repo.path}: {exc}")
        maintain(repo, say)
    pushed: set[Path] = set()
    for r in requests:
        due = r.event == "session-end" or r.agent in NO_SESSION_END
        target = _session_memory(settings, r.agent, r) if due else None
        if target is None or target.path in pushed:
            continue
        if r.event != "session-end" and not _push_due(target):
            continue
        pushed.add(target.path)
        _push(settings, target, say)


def hook_run(settings: Settings, say: Callable[[str], None]) -> int:
    """Drain the hook queue (`funes hook run`); the number of events handled.

    Returns at once, handling nothing, when another hook run holds the lock: that run looks at
    the queue again before it stops. The whole run is bounded by `HOOK_DEADLINE` seconds.
    """
    signal.alarm(HOOK_DEADLINE)
    try:
        return _drain(settings, say)
    finally:
        signal.alarm(0)


def _drain(settings: Settings, say: Callable[[str], None]) -> int:
    handled = 0
    agents_dir(settings).mkdir(parents=True, exist_ok=True)
    while True:
        lock = WriteLock(lock_path(settings), 0)
        try:
            lock.acquire()
        except RepositoryBusyError:
            say("another hook run is indexing; it takes these events too")
            return handled
        try:
            while requests := _take_queue(settings):
                handled += len(requests)
                _handle(settings, requests, say)
                say(f"done {' '.join(r.ident for r in requests)}")
        finally:
            lock.release()
        # an event queued between the last look and the release would wait for the next turn
        if not any(queue_dir(settings).glob("*.json")):
            return handled
