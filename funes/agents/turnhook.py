"""The foreground half of every agent hook: `python -m funes.agents.turnhook <agent> <event> …`.

The hook script (`funes/hooks/agent-turn-end`) runs this on every finished turn, so it must be
quick and must never fail: it reads the agent's event (JSON on stdin, or the last argument for
Codex `notify` and the pi extension), writes it to the queue `$FUNES_HOME/agents/queue/`,
starts one detached `funes hook run` unless one is already working (it drains the queue before
it stops), and exits 0. It imports only the standard library and `funes._env`; a timer ends it
after `DEADLINE` seconds whatever happens, well inside the one second an agent may wait.

Codex has a single `notify` program: when the user had one before funes, `funes add codex`
keeps it after ours (`notify = [hook, "codex", "turn-end", <theirs>…]`) and this module runs it
with the event appended, detached, exactly as Codex would have.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

from funes import process
from funes._env import Settings
from funes._env import settings as load_settings

#: Seconds after which the foreground gives up, whatever it was doing.
DEADLINE = 0.8
#: Largest event read from stdin (Claude Code sends a few hundred bytes).
MAX_PAYLOAD = 1 << 20
#: The log of hook work, foreground and detached (`funes hook run` writes here too).
LOG_NAME = "agent-hooks.log"
EVENTS = ("turn-end", "session-end", "session-start")
#: Agents whose event arrives as the last argument instead of on stdin.
ARGV_PAYLOAD = ("codex", "pi")


def queue_dir(settings: Settings) -> Path:
    """Events waiting for the detached indexer."""
    return settings.home / "agents" / "queue"


def lock_path(settings: Settings) -> Path:
    """Held by the one running `funes hook run`."""
    return settings.home / "agents" / "hook.lock"


def log_path(settings: Settings) -> Path:
    """Where hook work reports (kept small: funes.process.open_log)."""
    return settings.home / "logs" / LOG_NAME


def log(settings: Settings, message: str) -> None:
    """One timestamped line in the hook log (never raises)."""
    process.log_line(log_path(settings), message)


def _read_stdin(deadline: float) -> bytes:
    """Whatever the agent wrote on stdin, until EOF, `MAX_PAYLOAD` or the deadline."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):
        return b""
    if os.isatty(fd):
        return b""
    chunks: list[bytes] = []
    size = 0
    while size < MAX_PAYLOAD:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        block = os.read(fd, 65536)
        if not block:
            break
        chunks.append(block)
        size += len(block)
    return b"".join(chunks)


def _parse(raw: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def worker_running(settings: Settings) -> bool:
    """Whether a `funes hook run` holds the hook lock right now."""
    return process.lock_held(lock_path(settings))


def enqueue(settings: Settings, agent: str, event: str, payload: dict[str, Any]) -> str:
    """Write one event to the queue (atomically: the worker never sees half a file)."""
    queue = queue_dir(settings)
    queue.mkdir(parents=True, exist_ok=True)
    ident = f"{time.time_ns()}-{os.getpid()}"
    body = {"id": ident, "agent": agent, "event": event, "payload": payload,
            "cwd": os.getcwd(), "time": time.time()}
    tmp = queue / f".{ident}.tmp"
    tmp.write_text(json.dumps(body), "utf-8")
    os.replace(tmp, queue / f"{ident}.json")
    return ident


def start_worker(settings: Settings) -> None:
    """Start `funes hook run` detached, its output going to the hook log."""
    fd = process.open_log(log_path(settings))
    try:
        process.detach([sys.executable, "-m", "funes", "--format", "agent", "hook", "run"],
                       cwd=settings.home, stdout=fd, stderr=fd)
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    """Queue the event and hand it to a detached worker; always 0."""
    start = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, DEADLINE)  # the default SIGALRM action ends us
    settings: Settings | None = None
    try:
        settings = load_settings()
        agent = argv[0] if argv else "unknown"
        event = argv[1] if len(argv) > 1 and argv[1] in EVENTS else "turn-end"
        rest = argv[2:] if len(argv) > 1 and argv[1] in EVENTS else argv[1:]
        if agent in ARGV_PAYLOAD:
            raw: bytes | str = rest[-1] if rest else ""
            chain = rest[:-1]
        else:
            raw = _read_stdin(start + DEADLINE / 2)
            chain = []
        if chain and isinstance(raw, str):
            process.detach([*chain, raw])  # the user's own notify program, as Codex runs it
        enqueue(settings, agent, event, _parse(raw))
        if not worker_running(settings):
            start_worker(settings)
    except Exception as exc:  # a hook never fails the agent's turn
        if settings is not None:
            log(settings, f"hook {' '.join(argv[:2])}: {exc.__class__.__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
