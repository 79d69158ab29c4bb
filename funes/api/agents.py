"""Agent verbs: add, remove, mcp and ask.

- `agents_add` / `agents_remove` wire funes into an agent (funes.agents.<agent> knows where
  and how) and undo it exactly; the global memory is created when there is none, as
  `funes init --global` would, so `funes add claude` is a complete first step.
- `funes mcp` lives in funes.api.mcp_backend (its tools) and funes.cli.mcprelay.
- `ask` recalls in-process, then hands the passages to `claude -p` or `codex exec` with their
  tools off and returns the answer.

The detached work of the agent hooks (`funes hook run`) lives in funes.api.hookworker.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from funes._env import Settings
from funes.agents import AGENTS, claude, codex, copilot, cursor, gemini, hermes, opencode, pi
from funes.agents import ask as _ask
from funes.agents.wiring import (
    HOOK_NAME,
    Edits,
    Record,
    hook_path,
    package_text,
    read_bytes,
    replace_file,
    which,
)
from funes.api.agentsetup import (
    binding,
    ensure_embedder,
    index_scope,
    mcp_memory,
    undo_on_failure,
)
from funes.api.backfill import BackfillStart, start_backfill
from funes.api.ingest import IndexSummary, index
from funes.api.memory import choose_memory, is_remote_memory, writable_memory
from funes.api.repo import init
from funes.api.routing import project_root
from funes.api.search import recall
from funes.api.share import AttachResult, attach_remote, attach_target, is_directory_remote
from funes.errors import UsageError
from funes.storage.repo import Repository

__all__ = ["MODULES", "AskResult", "WiringResult", "agents_add", "agents_remove", "ask"]

MODULES: dict[str, ModuleType] = {
    "claude": claude, "codex": codex, "pi": pi, "hermes": hermes, "opencode": opencode,
    "gemini": gemini, "cursor": cursor, "copilot": copilot,
}

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
    #: The first index of the agent's existing sessions (None with `--no-index`).
    indexed: IndexSummary | None = None
    #: What happened with a remote MEMORY (cloned, created, synced), when one was named.
    attached: AttachResult | None = None
    #: The background embedding of what the first index stored, per memory it went to.
    backfill: list[BackfillStart] = field(default_factory=list)


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
    project: bool = False,
    index_now: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
    install_model: bool = True,
) -> WiringResult:
    """Register `funes mcp [memory]` and the hooks with `agent`; idempotent.

    Args:
        settings: The environment.
        agent: claude, codex, pi or hermes.
        memory: Bind the agent to this memory (MCP server and hooks); None routes each session
            to its project memory or the global one, like `funes index`. A remote (`org/name`,
            `hf://datasets/…`, `file://…` or a directory remote) is first made this machine's
            memory (funes.api.share.attach_remote: cloned, created or synced), and the agent is
            bound to that local memory, whose hooks then keep it in sync. A project memory
            (`<project>/.funes`) is bound to its project only: it receives the sessions inside
            the project, and the agent's other sessions keep going where they went
            (funes.api.routing).
        project: With a remote `memory`, keep it in the project memory `./.funes`.
        index_now: Index the agent's existing sessions, those the binding receives
            (`--no-index` turns it off): every turn lexically now, newest first and
            searchable from the first batch on (funes.api.ingest), then their vectors in the
            detached backfill (funes.api.backfill). With a remote `memory`, before anything
            is pushed, so the remote gets this machine's history. On a memory that holds them
            already this adds nothing (each file's read position is remembered).
        progress: Progress callback for that first index.
        install_model: Install the embedding model the hooks use when it is missing.

    A failure leaves the machine as it was (funes.api.agentsetup.undo_on_failure).

    Raises:
        ReadOnlyMemoryError: `memory` is the read-only copy of a remote (`--memory org/name`).
    """
    module = _module(agent)
    remote = bool(memory) and (is_remote_memory(str(memory), settings.cwd)
                               or is_directory_remote(str(memory), settings.cwd))
    if project and not remote:
        raise UsageError("`--project` goes with a remote MEMORY",
                         hint=f"`funes add {agent} ORG/NAME --project`")
    at_stake = [settings.home] + ([attach_target(settings, project)] if remote else [])
    indexed: IndexSummary | None = None

    def first_index(repo: Repository) -> int:
        """The attached memory's first index, before its first push: what it will receive."""
        nonlocal indexed
        root = project_root(settings, repo.path)
        indexed = index(settings, agents=[agent], progress=progress,
                        memory=None if root else str(repo.path),
                        workdir=str(root) if root else None)
        return indexed.added

    with undo_on_failure(settings, at_stake) as undo:
        created, attached, memory = _memory_for(settings, agent, memory, remote, project,
                                                progress, first_index if index_now else None)
        _install_hook_script(settings)
        edits = Edits(settings, agent)
        undo.append(edits)
        bound = binding(settings, edits, memory)
        notes = list(module.add(edits, mcp_memory(bound, memory, remote)))
        edits.save()
    notes = notes if edits.changed else []
    scope = index_scope(agent, bound, memory)
    if bound.project is not None and edits.changed:
        notes.append(f"{bound.project}/.funes receives the sessions inside {bound.project} "
                     "only; the agent's other sessions go where they went")
    if index_now and indexed is None:
        indexed = index(settings, agents=[agent], progress=progress, memory=scope.memory,
                        workdir=scope.workdir)
    # the model before the backfill: the backfill embeds with it
    model_note = ensure_embedder(settings, memory) if install_model else None
    if model_note:
        notes.append(model_note)
    backfill = _backfill(settings, memory, indexed) if indexed is not None else []
    return WiringResult(agent, bound.memory, edits.changed, notes, scope.command, created,
                        indexed, attached, backfill)


def _memory_for(settings: Settings, agent: str, memory: str | None, remote: bool,
                project: bool, progress: Callable[[int, int, str], None] | None,
                fill: Callable[[Repository], int] | None,
                ) -> tuple[str | None, AttachResult | None, str | None]:
    """(the global memory if `add` made it, what attaching a remote did, the local memory)."""
    if remote:
        attached = attach_remote(settings, str(memory), project=project, progress=progress,
                                 fill=fill)
        return None, attached, str(attached.path)
    if memory:
        return None, None, str(writable_memory(settings, memory, command=f"add {agent}").path)
    if not (settings.home / "FORMAT").is_file():
        return str(init(settings, is_global=True).repo.path), None, None
    return None, None, None


def _backfill(settings: Settings, memory: str | None,
              indexed: IndexSummary) -> list[BackfillStart]:
    """Start the background embedding of each memory the first index wrote to.

    Also of the agent's memory when the index added nothing there but a backfill was stopped
    (a reboot): it resumes with the next `funes add`. A memory whose backfill is done or never
    ran is not even looked at then: counting its backlog opens its tables, most of what an
    `add` that adds nothing would cost.
    """
    from funes.api.backfill import backfill_status

    paths = [Path(p) for p, c in indexed.commits.items() if c.added]
    if not paths:
        for path in [Path(memory)] if memory else (
                [settings.home] if (settings.home / "FORMAT").is_file() else []):
            last = backfill_status(Repository.open(path, settings))
            if last is not None and last.state in ("stopped", "failed"):
                paths.append(path)
    return [start_backfill(settings, Repository.open(p, settings)) for p in paths]


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
        raise _ask.CannotAskError(agent)
    exe = which(_ask.ASK_AGENTS[agent])
    if exe is None:
        raise _ask.AgentNotFoundError(agent, _ask.ASK_AGENTS[agent])
    if not question.strip():
        raise UsageError("the question is empty")
    choice = choose_memory(settings, memory)
    label = choice.label
    result = recall(settings, choice.repo, question, k=k)
    if not result.hits:
        raise _ask.NothingRecalledError(label)
    passages = [_ask.Passage.from_row(hit.row) for hit in result.hits]
    prompt = _ask.build_prompt(question, passages, label, choice.owned, choice.warning)
    argv = _module(agent).ask_command(exe)
    # A scratch directory: no project file (CLAUDE.md, AGENTS.md) leaks into the answer.
    with tempfile.TemporaryDirectory(prefix="funes-ask-") as scratch:
        answer = _ask.run_agent(agent, argv, prompt, timeout=timeout, cwd=scratch)
    sessions = list(dict.fromkeys(p.session_id for p in passages))
    return AskResult(agent, answer, label, sessions, argv, prompt)
