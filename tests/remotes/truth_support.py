"""Machines for the shared-memory scenarios of tests/remotes/test_truth.py (issue #29).

Each `Machine` is a user on a computer of their own: a HOME, a FUNES_HOME, a Hub token. The
test switches between them (`use`), runs the real CLI in-process (`run`), and lets sessions
in only the way an agent does: it writes the agent's transcript where the agent keeps it and
fires the installed hook script with the agent's event. The hook's detached worker is kept
from starting (the hook lock is held while the script runs) and the queue is drained here
instead, so each scenario waits for nothing; the sync the worker runs is still a real
`funes sync` child process.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.agents.turnhook import lock_path
from funes.storage.lock import WriteLock
from tests.agents.conftest import funes_mcp, mcp_session


@dataclass
class Machine:
    """One user on one computer."""

    name: str
    home: Path
    token: str | None
    monkeypatch: pytest.MonkeyPatch
    runner: Callable[..., Any]
    log: list[str] = field(default_factory=list)

    @property
    def funes_home(self) -> Path:
        return self.home / ".funes"

    def use(self, cwd: Path | None = None) -> Machine:
        """Make this machine the current one (environment, and `cwd` or its HOME)."""
        self.monkeypatch.setenv("HOME", str(self.home))
        self.monkeypatch.setenv("FUNES_HOME", str(self.funes_home))
        if self.token is None:
            self.monkeypatch.delenv("HF_TOKEN", raising=False)
        else:
            self.monkeypatch.setenv("HF_TOKEN", self.token)
        self.monkeypatch.chdir(cwd or self.home)
        return self

    def run(self, *args: str, cwd: Path | None = None) -> Any:
        """`funes ARGS` on this machine (in `cwd`, default its HOME)."""
        self.use(cwd)
        return self.runner(*args)

    def settings(self) -> Any:
        self.use()
        return api.load_settings()

    def mcp(self, calls: list[tuple[str, dict[str, Any]]], *args: str,
            cwd: Path | None = None) -> list[tuple[bool, str]]:
        """Start `funes mcp ARGS` as an agent would (the real SDK client) and make `calls`."""
        self.use(cwd)
        env = {k: v for k, v in os.environ.items()
               if k.startswith(("HF_", "FUNES_")) or k in ("HOME", "PATH", "PYTHONPATH")}
        return mcp_session(funes_mcp(*args), calls, cwd=cwd or self.home, env=env)[2]

    # -- sessions, as the agents write them --------------------------------------------------

    def claude_session(self, session: str, cwd: Path, texts: list[str]) -> Path:
        """A Claude Code transcript of `session` in `cwd`: user/assistant turns of `texts`."""
        folder = self.home / ".claude" / "projects" / str(cwd).replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{session}.jsonl"
        lines = []
        parent = None
        for i, text in enumerate(texts):
            uid = f"{session[:8]}-{i}"
            role = "user" if i % 2 == 0 else "assistant"
            content: Any = text if role == "user" else [{"type": "text", "text": text}]
            lines.append(json.dumps({
                "type": role, "uuid": uid, "parentUuid": parent, "sessionId": session,
                "cwd": str(cwd), "timestamp": f"2026-10-01T10:{i:02d}:00Z",
                "message": {"role": role, "content": content}}))
            parent = uid
        path.write_text("\n".join(lines) + "\n")
        return path

    def codex_turn(self, thread: str, cwd: Path, text: str, n: int) -> None:
        """Append turn `n` (a user message) to the Codex rollout of `thread`."""
        folder = self.home / ".codex" / "sessions" / "2026" / "10" / "01"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rollout-2026-10-01T10-00-00-{thread}.jsonl"
        lines = [] if path.exists() else [json.dumps({
            "timestamp": "2026-10-01T10:00:00Z", "type": "session_meta",
            "payload": {"id": thread, "cwd": str(cwd)}})]
        lines.append(json.dumps({
            "timestamp": f"2026-10-01T10:{n:02d}:01Z", "type": "response_item",
            "payload": {"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": text}]}}))
        with path.open("a") as fh:
            fh.write("\n".join(lines) + "\n")

    # -- the hooks -----------------------------------------------------------------------------

    def fire(self, args: list[str], stdin: str = "", cwd: Path | None = None) -> None:
        """Run the installed hook script as the agent would, then drain its queue here."""
        settings = self.settings()
        hold = WriteLock(lock_path(settings), 0)
        hold.acquire()  # the script queues the event and leaves the work to the running "worker"
        try:
            done = subprocess.run([str(settings.home / "agents" / "agent-turn-end"), *args],
                                  input=stdin, text=True, capture_output=True, timeout=30,
                                  cwd=str(cwd or self.home), env=dict(os.environ), check=False)
        finally:
            hold.release()
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done
        self.use(cwd)
        api.hook_run(api.load_settings(), self.log.append)

    def end_claude_session(self, session: str, cwd: Path, texts: list[str]) -> None:
        """A Claude Code session in `cwd` that ends: its transcript, then its SessionEnd hook."""
        path = self.claude_session(session, cwd, texts)
        event = {"session_id": session, "transcript_path": str(path), "cwd": str(cwd),
                 "hook_event_name": "SessionEnd", "reason": "exit"}
        self.fire(["claude", "session-end"], json.dumps(event), cwd=cwd)

    def codex_turn_ends(self, thread: str, cwd: Path, text: str, n: int) -> None:
        """A Codex turn: the rollout grows, then `notify` runs with the event as its argument."""
        self.codex_turn(thread, cwd, text, n)
        event = {"type": "agent-turn-complete", "thread-id": thread, "cwd": str(cwd),
                 "turn-id": f"{thread[:8]}-{n}"}
        self.fire(["codex", "turn-end", json.dumps(event)], cwd=cwd)


def headers(text: str) -> list[str]:
    """The hit header lines of agent-format recall output."""
    return [line for line in text.splitlines() if "score=" in line]
