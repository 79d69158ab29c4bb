"""One memory on every machine: `funes add codex REMOTE` on two machines, then only hooks.

Each machine is its own HOME (FUNES_HOME, CODEX_HOME, HF_HOME) and runs the real `funes`
entry point and the real hook script in child processes; the remote is a directory or the
loopback Hub driven by the real huggingface_hub client.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.hubserver import HubServer

pytestmark = pytest.mark.slow


@dataclass
class Machine:
    """One user's machine: a HOME of its own, the funes CLI, and a Codex that writes turns."""

    name: str
    home: Path
    extra: dict[str, str] = field(default_factory=dict)
    turns: int = 0

    @property
    def funes_home(self) -> Path:
        return self.home / ".funes"

    def env(self) -> dict[str, str]:
        env = {"HOME": str(self.home), "FUNES_HOME": str(self.funes_home),
               "CODEX_HOME": str(self.home / ".codex"), "PATH": os.environ.get("PATH", ""),
               "FUNES_SERVE": "off", "FUNES_AUTHOR_NAME": self.name,
               "FUNES_AUTHOR_EMAIL": f"{self.name}@example.org",
               "HF_HOME": str(self.home / ".hf"), "HF_HUB_DISABLE_XET": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
        env.update(self.extra)
        return env

    def funes(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "funes", *args], cwd=self.home,
                              env=self.env(), capture_output=True, text=True, timeout=120,
                              check=False)
        if ok:
            assert done.returncode == 0, f"{self.name}: funes {' '.join(args)}: {done.stderr}"
        return done

    def recall(self, query: str) -> str:
        return self.funes("--format", "agent", "recall", query).stdout

    def log(self) -> str:
        try:
            return (self.funes_home / "logs" / "agent-hooks.log").read_text()
        except FileNotFoundError:
            return ""

    def codex_turn(self, thread: str, text: str) -> None:
        """Codex finishes a turn: its rollout grows, then it runs `notify` (our hook)."""
        day = self.home / ".codex" / "sessions" / "2026" / "11" / "01"
        day.mkdir(parents=True, exist_ok=True)
        rollout = day / f"rollout-2026-11-01T10-00-00-{thread}.jsonl"
        lines = []
        if not rollout.exists():
            lines.append({"type": "session_meta", "timestamp": "2026-11-01T10:00:00.000Z",
                          "payload": {"id": thread, "timestamp": "2026-11-01T10:00:00.000Z",
                                      "cwd": str(self.home), "cli_version": "0.141.0"}})
        self.turns += 1
        stamp = f"2026-11-01T10:{self.turns:02d}:00.000Z"
        lines.append({"timestamp": stamp, "type": "response_item", "payload": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": f"question about {text}"}]}})
        lines.append({"timestamp": stamp, "type": "response_item", "payload": {
            "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": f"The answer is {text}, settled."}]}})
        with rollout.open("a") as fh:
            fh.writelines(json.dumps(line) + "\n" for line in lines)
        self.notify(thread)

    def notify(self, thread: str) -> None:
        """What Codex runs after a turn (the `notify` program `funes add codex` set)."""
        event = json.dumps({"type": "agent-turn-complete", "thread-id": thread,
                            "cwd": str(self.home)})
        before = self.log().count(" done ")
        hook = self.funes_home / "agents" / "agent-turn-end"
        done = subprocess.run([str(hook), "codex", "turn-end", event], env=self.env(),
                              capture_output=True, text=True, timeout=30, check=False)
        assert done.returncode == 0
        self.wait_done(before)

    def wait_done(self, before: int, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        queue = self.funes_home / "agents" / "queue"
        while time.monotonic() < end:
            queued = any(queue.glob("*.json")) if queue.exists() else False
            if not queued and self.log().count(" done ") > before:
                return
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: the hook run did not finish:\n{self.log()}")


def _machines(tmp_path: Path, extra: dict[str, str] | None = None) -> tuple[Machine, Machine]:
    a = Machine("ada", tmp_path / "ada", dict(extra or {}))
    b = Machine("bob", tmp_path / "bob", dict(extra or {}))
    for m in (a, b):
        m.home.mkdir()
    return a, b


@pytest.fixture(params=["dir", "hf"])
def shared(request: pytest.FixtureRequest,
           tmp_path: Path) -> tuple[str, dict[str, str], HubServer | None]:
    """The remote both machines name (URL), the environment that reaches it, the Hub."""
    if request.param == "dir":
        return f"file://{tmp_path / 'shared-memory'}", {}, None
    hub = request.getfixturevalue("hub")
    token = hub.add_token("hf_ada_team_write", "ada", orgs=("team",))
    return "team/memory", {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": token}, hub


def _wire(m: Machine, url: str) -> str:
    out = m.funes("add", "codex", url).stdout
    # codex has no session end: the test makes every turn a sync point
    m.funes("config", "set", "sync.interval", "0")
    return out


def test_two_machines_share_one_memory_through_hooks(shared, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url, extra, _ = shared
    a, b = _machines(tmp_path, extra)
    assert "created the remote" in _wire(a, url)
    assert "cloned" in _wire(b, url)
    # the same command again changes nothing and succeeds (idempotent)
    again = a.funes("add", "codex", url).stdout
    assert "already wired" in again and "syncs with" in again

    a.codex_turn("019e0000-0000-7000-8000-00000000000a", "azimuthal quokka")
    b.codex_turn("019e0000-0000-7000-8000-00000000000b", "brackish pangolin")
    a.codex_turn("019e0000-0000-7000-8000-00000000000a", "another quokka remark")
    for m in (a, b):
        assert "not synced" not in m.log(), m.log()
    b.notify("019e0000-0000-7000-8000-00000000000b")  # one more sync point on b

    for m in (a, b):
        assert "azimuthal quokka" in m.recall("azimuthal quokka"), m.name
        assert "brackish pangolin" in m.recall("brackish pangolin"), m.name
        assert "another quokka remark" in m.recall("another quokka remark"), m.name
        status = m.funes("status").stdout
        assert "up to date" in status and " ok (" in status, status


def test_a_push_race_converges_with_no_lost_commit(shared, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url, extra, _ = shared
    a, b = _machines(tmp_path, extra)
    _wire(a, url)
    _wire(b, url)
    a.codex_turn("019e0000-0000-7000-8000-0000000000a1", "first harbour")
    b.codex_turn("019e0000-0000-7000-8000-0000000000b1", "first lighthouse")
    a.codex_turn("019e0000-0000-7000-8000-0000000000a1", "a catches up")

    # both write a turn and sync at the same moment: one loses the compare-and-swap
    threads = [threading.Thread(target=m.codex_turn, args=(t, text)) for m, t, text in (
        (a, "019e0000-0000-7000-8000-0000000000a1", "racing albatross"),
        (b, "019e0000-0000-7000-8000-0000000000b1", "racing barracuda"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for m in (a, b):
        assert "not synced" not in m.log(), m.log()
    # the next sync point on each brings the other's side (no manual step)
    a.notify("019e0000-0000-7000-8000-0000000000a1")
    b.notify("019e0000-0000-7000-8000-0000000000b1")
    a.notify("019e0000-0000-7000-8000-0000000000a1")
    for m in (a, b):
        for text in ("first harbour", "first lighthouse", "racing albatross",
                     "racing barracuda"):
            assert text in m.recall(text), (m.name, text)
    heads = {m.funes("--format", "json", "log", "--limit", "1").stdout for m in (a, b)}
    assert len(heads) == 1  # converged on one commit


def test_a_persistent_failure_is_visible_and_loses_nothing(shared, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url, extra, hub = shared
    a, _ = _machines(tmp_path, extra)
    _wire(a, url)
    a.codex_turn("019e0000-0000-7000-8000-0000000000c1", "before the outage")
    if hub is not None:
        hub.stop()  # the server is down
    else:
        path = Path(url.removeprefix("file://"))
        shutil.move(path, tmp_path / "moved-away")
        path.write_text("not a memory any more\n")
    a.codex_turn("019e0000-0000-7000-8000-0000000000c1", "during the outage")
    assert "not synced" in a.log()

    status = a.funes("status").stdout
    assert "FAILED" in status and "fix: `funes sync origin`" in status, status
    pushed = a.funes("push", ok=False)
    assert pushed.returncode == 5, pushed.stderr
    assert "during the outage" in a.recall("during the outage")  # nothing lost locally
    # agent output says so once the failure has lasted (here: at once)
    a.funes("config", "set", "sync.staleAfter", "0")
    note = a.recall("during the outage").splitlines()[0]
    assert note.startswith("# note: this memory has not synced with origin"), note


def test_a_revoked_token_is_visible(hub: HubServer, tmp_path: Path) -> None:
    token = hub.add_token("hf_ada_revocable", "ada", orgs=("team",))
    a, _ = _machines(tmp_path, {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": token})
    _wire(a, "team/memory")
    a.codex_turn("019e0000-0000-7000-8000-0000000000d1", "token still good")
    del hub.tokens[token]  # revoked on the Hub
    a.codex_turn("019e0000-0000-7000-8000-0000000000d1", "token revoked now")
    status = a.funes("status").stdout
    assert "FAILED" in status and "fix: `hf auth login && funes sync origin`" in status, status
    assert a.funes("push", ok=False).returncode == 5
    assert "token revoked now" in a.recall("token revoked now")
