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
from funes.api.ingest import IndexSummary, index
from funes.api.memory import choose_memory, is_remote_memory, writable_memory
from funes.api.repo import init
from funes.api.search import recall
from funes.api.share import AttachResult, attach_remote, is_directory_remote
from funes.errors import UsageError

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
    #: The first index, when `add(index=True)` ran it.
    indexed: IndexSummary | None = None
    #: What happened with a remote MEMORY (cloned, created, synced), when one was named.
    attached: AttachResult | None = None


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
    index_now: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> WiringResult:
    """Register `funes mcp [memory]` and the hooks with `agent`; idempotent.

    Args:
        settings: The environment.
        agent: claude, codex, pi or hermes.
        memory: Bind the agent to this memory (MCP server and hooks); None routes each session
            to its project memory or the global one, like `funes index`. A remote (`org/name`,
            `hf://datasets/…`, `file://…` or a directory remote) is first made this machine's
            memory (funes.api.share.attach_remote: cloned, created or synced), and the agent is
            bound to that local memory, whose hooks then keep it in sync.
        project: With a remote `memory`, keep it in the project memory `./.funes`.
        index_now: Also index the agent's existing sessions (`funes add --index`).
        progress: Progress callback for that first index.

    Raises:
        ReadOnlyMemoryError: `memory` is the read-only copy of a remote (`--memory org/name`).
    """
    module = _module(agent)
    created: str | None = None
    attached: AttachResult | None = None
    if memory and (is_remote_memory(memory, settings.cwd)
                   or is_directory_remote(memory, settings.cwd)):
        attached = attach_remote(settings, memory, project=project, progress=progress)
        memory = str(attached.path)
    elif memory:
        memory = str(writable_memory(settings, memory, command=f"add {agent}").path)
    elif project:
        raise UsageError("`--project` goes with a remote MEMORY",
                         hint=f"`funes add {agent} ORG/NAME --project`")
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
                        created, indexed, attached)


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
    choice = choose_memory(settings, memory, fallback=False)
    label = choice.label
    result = recall(settings, choice.repo, question, k=k)
    if not result.hits:
        raise _ask.NothingRecalledError(label)
    passages = [_ask.Passage.from_row(hit.row) for hit in result.hits]
    prompt = _ask.build_prompt(question, passages, label, choice.owned)
    argv = _module(agent).ask_command(exe)
    # A scratch directory: no project file (CLAUDE.md, AGENTS.md) leaks into the answer.
    with tempfile.TemporaryDirectory(prefix="funes-ask-") as scratch:
        answer = _ask.run_agent(agent, argv, prompt, timeout=timeout, cwd=scratch)
    sessions = list(dict.fromkeys(p.session_id for p in passages))
    return AskResult(agent, answer, label, sessions, argv, prompt)
