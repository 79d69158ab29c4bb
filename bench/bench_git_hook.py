"""Git hook benchmark: what the post-commit hook adds to `git commit`, and how long the link takes.

Run: python bench/bench_git_hook.py [--commits 15]
In a temporary repository with a project memory and a real Claude session whose working
directory is that repository (re-timed to the commits), it measures with the git binary:

- `git commit` without hooks, and with the funes hook installed (median and p90 of N each),
  so the difference is what the hook costs the person committing;
- the hook script alone (the foreground checks and the detached spawn);
- the time from `git commit` returning to the `refs/notes/funes` note being written, i.e. the
  detached `funes link` (index the new turns, pick them, commit the link, write the note),
  for a commit with agent turns and for one with none.

Writes bench/results/git_hook.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRACES = ROOT.parent / "shared" / "fixtures" / "traces"
SESSION = TRACES / "claude" / "marot__spotter__tool_heavy.jsonl"
GIT = shutil.which("git") or "git"


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def write_session(dest: Path, cwd: Path, start: float, end: float, tag: str) -> None:
    lines = SESSION.read_text("utf-8").splitlines()
    step = (end - start) / max(1, len(lines) - 1)
    out = []
    for i, line in enumerate(lines):
        record = json.loads(line)
        if "cwd" in record:
            record["cwd"] = str(cwd)
        if "timestamp" in record:
            record["timestamp"] = iso(start + i * step)
        if "sessionId" in record:
            record["sessionId"] = f"bench-{tag}"
        if "uuid" in record:
            record["uuid"] = f"{record['uuid']}-{tag}"
        if record.get("parentUuid"):
            record["parentUuid"] = f"{record['parentUuid']}-{tag}"
        out.append(json.dumps(record))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(out) + "\n", "utf-8")


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run([GIT, *args], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, **(env or {})})
    return time.perf_counter() - t0


def commit(repo: Path, n: int, when: int) -> float:
    (repo / "file.txt").write_text(f"line {n}\n")
    git(repo, "add", "file.txt")
    date = f"@{when} +0000"
    return git(repo, "commit", "-q", "-m", f"change {n}",
               env={"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date})


def head(repo: Path) -> str:
    out = subprocess.run([GIT, "rev-parse", "HEAD"], cwd=repo, check=True,
                         capture_output=True, text=True)
    return out.stdout.strip()


def wait_note(repo: Path, sha: str, timeout: float = 120) -> float:
    from funes.gitlink.coderepo import find_code_repo
    from funes.gitlink.notes import read_note

    code = find_code_repo(repo)
    t0 = time.perf_counter()
    while read_note(code, sha) is None:
        if time.perf_counter() - t0 > timeout:
            raise SystemExit(f"no note on {sha} after {timeout}s")
        time.sleep(0.02)
    return time.perf_counter() - t0


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"{statistics.median(values) * 1000:.0f} ms (p90 {p90 * 1000:.0f} ms)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=15)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="funes-bench-hook-"))
    os.environ.update({
        "HOME": str(tmp / "home"), "FUNES_HOME": str(tmp / "home" / ".funes"),
        "CLAUDE_CONFIG_DIR": str(tmp / "claude"), "CODEX_HOME": str(tmp / "codex"),
        "PI_CODING_AGENT_DIR": str(tmp / "pi"), "HERMES_HOME": str(tmp / "hermes"),
    })
    from funes import api
    from funes._env import settings as load_settings
    from funes.gitlink.coderepo import find_code_repo
    from funes.gitlink.hookinstall import install

    repo = tmp / "code"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Bench")
    git(repo, "config", "user.email", "bench@example.org")
    (repo / ".gitignore").write_text(".funes/\n")
    os.chdir(repo)
    api.init(load_settings())
    base = int(time.time()) - 100_000

    plain = [commit(repo, n, base + n) for n in range(args.commits)]
    install(find_code_repo(repo))
    hook = repo / ".git" / "hooks" / "post-commit"
    with_hook = []
    for n in range(args.commits):
        with_hook.append(commit(repo, 100 + n, base + 100 + n))
        wait_note(repo, head(repo))  # one worker at a time: measure the hook, not contention
    alone = []
    for _ in range(args.commits):
        t0 = time.perf_counter()
        subprocess.run([str(hook)], cwd=repo, check=True, capture_output=True)
        alone.append(time.perf_counter() - t0)
        time.sleep(0.05)
    time.sleep(3)  # let the workers those runs started finish

    empty, linked, turns = [], [], []
    for n in range(5):
        when = base + 1000 + n * 1000
        commit(repo, 200 + n, when)
        empty.append(wait_note(repo, head(repo)))
        write_session(tmp / "claude" / "projects" / "p" / f"s{n}.jsonl", repo,
                      when + 100, when + 900, str(n))
        commit(repo, 300 + n, when + 950)
        linked.append(wait_note(repo, head(repo)))
        memory = api.open_memory(load_settings())
        turns.append(len(api.linked_turns(memory, "HEAD")))

    cost = statistics.median(with_hook) - statistics.median(plain)
    out = ROOT / "bench" / "results" / "git_hook.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "# Git hook benchmark\n\n"
        f"`python bench/bench_git_hook.py --commits {args.commits}` on {platform.machine()}, "
        f"Python {platform.python_version()}, {os.cpu_count()} cores, "
        f"{datetime.now(UTC).date()}, load average {os.getloadavg()[0]:.1f}. "
        "git binary, a project memory, one real Claude session per linked commit.\n\n"
        "| measure | value |\n|---|---|\n"
        f"| `git commit`, no hooks (median of {args.commits}) | {ms(plain)} |\n"
        f"| `git commit` with the funes post-commit hook | {ms(with_hook)} |\n"
        f"| **added to `git commit` by the hook** | **{cost * 1000:.0f} ms** |\n"
        f"| the hook script alone (checks + detached spawn) | {ms(alone)} |\n"
        f"| commit → note written, no agent session (median of 5) | {ms(empty)} |\n"
        f"| commit → note written, one new session of {statistics.median(turns):.0f} turns "
        f"(index + link + note, median of 5) | {ms(linked)} |\n\n"
        "The second part runs in a detached `funes link --hook` process: `git commit` has "
        "returned long before. Its cost is mostly starting the CLI and indexing the new turns.\n",
        "utf-8",
    )
    print(out.read_text())
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
