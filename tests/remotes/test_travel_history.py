"""Day zero on two machines: `funes add claude REMOTE` carries each one's earlier history.

Each machine already has Claude Code sessions when funes arrives. Both run `funes add claude
REMOTE` (the real entry point, each in its own HOME), then only Claude's hooks run (a turn
end, a session end): every session of both machines, those from before `add` included, must
be recalled on both. The remote is a directory or the loopback Hub (tests/remotes/
test_travel.py has the rest of that flow: races, outages, revoked tokens).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.remotes.test_travel import Machine, shared  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow


class ClaudeMachine(Machine):
    """A machine whose agent is Claude Code (its transcripts under ~/.claude)."""

    def env(self) -> dict[str, str]:
        return {**super().env(), "CLAUDE_CONFIG_DIR": str(self.home / ".claude")}

    def transcript(self, session: str) -> Path:
        return self.home / ".claude" / "projects" / "-work-app" / f"{session}.jsonl"

    def say(self, session: str, text: str) -> Path:
        """Claude writes one exchange of `session` (its transcript grows)."""
        path = self.transcript(session)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.turns += 1
        records = []
        for role, body in (("user", f"question about {text}"),
                           ("assistant", f"The answer is {text}, settled.")):
            records.append({"type": role, "sessionId": session, "cwd": "/work/app",
                            "uuid": f"{session[:8]}-{self.turns:04d}-4000-8000-{role:0>12}",
                            "timestamp": f"2026-03-0{1 + self.turns % 9}T10:00:00.000Z",
                            "message": {"role": role, "content": body if role == "user"
                                        else [{"type": "text", "text": body}]}})
        with path.open("a") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in records)
        return path

    def finds(self, text: str) -> bool:
        """Whether a recall on this machine's memory brings `text` (in-process: cheaper)."""
        from dataclasses import replace

        from funes import api
        from funes._env import settings as load_settings

        settings = replace(load_settings(), home=self.funes_home)
        repo = api.open_memory(settings, str(self.funes_home))
        hits = api.recall(settings, repo, text, vector=False, neighbors=0).hits
        return any(text in h.row["text"] for h in hits)

    def hook(self, session: str, event: str) -> None:
        """Claude's hook for `event` (turn-end or session-end), waited for."""
        payload = {"session_id": session, "transcript_path": str(self.transcript(session)),
                   "cwd": "/work/app",
                   "hook_event_name": "Stop" if event == "turn-end" else "SessionEnd"}
        before = self.log().count(" done ")
        script = self.funes_home / "agents" / "agent-turn-end"
        done = subprocess.run([str(script), "claude", event], input=json.dumps(payload),
                              env=self.env(), capture_output=True, text=True, timeout=30,
                              check=False)
        assert done.returncode == 0
        self.wait_done(before)


def test_each_machines_history_from_before_add_reaches_the_other(shared, tmp_path: Path) -> None:  # noqa: F811
    url, extra, _ = shared
    a = ClaudeMachine("ada", tmp_path / "ada", dict(extra))
    b = ClaudeMachine("bob", tmp_path / "bob", dict(extra))
    for m in (a, b):
        m.home.mkdir()
    # months of work before funes: on each machine, a session nobody indexed yet
    a.say("aaaaaaaa-0000-4000-8000-00000000000a", "the ancient walrus migration")
    b.say("bbbbbbbb-0000-4000-8000-00000000000b", "the elderly narwhal schema")

    out_a = a.funes("add", "claude", url).stdout
    assert "created the remote" in out_a and "indexed 1 sessions" in out_a, out_a
    out_b = b.funes("add", "claude", url).stdout
    assert "cloned" in out_b and "indexed 1 sessions" in out_b, out_b
    # a indexed before it created the remote: b's `add` brought a's history
    assert b.finds("ancient walrus migration")

    # from now on only the hooks: a new turn on each machine, each session ending
    a.say("aaaaaaaa-0000-4000-8000-0000000000a2", "the fresh albatross deploy")
    a.hook("aaaaaaaa-0000-4000-8000-0000000000a2", "turn-end")
    b.say("bbbbbbbb-0000-4000-8000-0000000000b2", "the fresh barracuda rollout")
    b.hook("bbbbbbbb-0000-4000-8000-0000000000b2", "turn-end")
    b.hook("bbbbbbbb-0000-4000-8000-0000000000b2", "session-end")
    a.hook("aaaaaaaa-0000-4000-8000-0000000000a2", "session-end")
    b.hook("bbbbbbbb-0000-4000-8000-0000000000b2", "session-end")  # brings a's new turn

    for m in (a, b):
        assert "not synced" not in m.log(), m.log()
        for text in ("ancient walrus migration", "elderly narwhal schema",
                     "fresh albatross deploy", "fresh barracuda rollout"):
            assert m.finds(text), (m.name, text)
    assert "elderly narwhal schema" in a.recall("elderly narwhal schema")  # and via the CLI
