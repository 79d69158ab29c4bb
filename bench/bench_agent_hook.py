"""Agent hook benchmark: what a Claude Code Stop hook costs the agent, and when the turn is in.

Run: python bench/bench_agent_hook.py [--turns 20]
In a temporary HOME with a global memory and `funes add claude`, a real session transcript
grows one record at a time; after each, the installed hook runs with the Stop event on stdin,
as Claude Code runs it. Measured:

- the hook's wall time as the agent sees it (median, p90, max), with the memory free and with
  the repository lock held by another writer (the hook must still return at once);
- the time from the hook returning to the detached `funes hook run` logging `done` (the turn is
  searchable then).

Writes bench/results/agent_hook.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRACES = ROOT.parent / "shared" / "fixtures" / "traces"
SESSION = TRACES / "claude" / "marot__spotter__tool_heavy.jsonl"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="funes-hook-bench-"))
    env = {**os.environ, "HOME": str(home), "FUNES_HOME": str(home / ".funes"),
           "FUNES_SERVE": "off"}
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "HERMES_HOME", "PI_CODING_AGENT_DIR"):
        env.pop(var, None)
    funes = [sys.executable, "-m", "funes"]
    subprocess.run([*funes, "add", "claude"], env=env, check=True, capture_output=True)
    hook = home / ".funes" / "agents" / "agent-turn-end"
    log = home / ".funes" / "logs" / "agent-hooks.log"
    project = home / ".claude" / "projects" / "-bench"
    project.mkdir(parents=True)
    transcript = project / "bench-session.jsonl"
    lines = SESSION.read_text().splitlines(keepends=True)
    event = json.dumps({"session_id": "bench-session", "transcript_path": str(transcript),
                        "cwd": str(home), "hook_event_name": "Stop"})

    def fire() -> float:
        start = time.monotonic()
        subprocess.run([str(hook), "claude", "turn-end"], input=event, text=True, env=env,
                       check=True)
        return time.monotonic() - start

    def wait_done(count: int) -> None:
        while (log.read_text().count(" done ") if log.exists() else 0) < count:
            time.sleep(0.02)

    free, indexed = [], []
    for turn in range(min(args.turns, len(lines))):
        with transcript.open("a") as fh:
            fh.write(lines[turn])
        free.append(fire())
        returned = time.monotonic()
        wait_done(turn + 1)
        indexed.append(time.monotonic() - returned)

    from funes._env import settings as load
    from funes.storage.lock import WriteLock

    os.environ.update({"HOME": env["HOME"], "FUNES_HOME": env["FUNES_HOME"]})
    lock = WriteLock(load().home / "lock", 0)
    lock.acquire()
    locked = []
    try:
        for _ in range(10):
            locked.append(fire())
    finally:
        lock.release()

    load1 = os.getloadavg()[0]
    rows = [("hook, memory free", free), ("hook, repository locked", locked),
            ("hook return → turn indexed", indexed)]
    out = [
        "# Agent hook (Claude Code Stop)",
        "",
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load {load1:.1f} while measuring; Python {platform.python_version()}.",
        "`python bench/bench_agent_hook.py` (a real transcript growing one record per turn).",
        "",
        "| what | n | median ms | p90 ms | max ms |",
        "|---|---|---|---|---|",
    ]
    for name, values in rows:
        out.append(f"| {name} | {len(values)} | {statistics.median(values) * 1000:.0f} | "
                   f"{_pct(values, 0.9) * 1000:.0f} | {max(values) * 1000:.0f} |")
    text = "\n".join(out) + "\n"
    (ROOT / "bench" / "results" / "agent_hook.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
