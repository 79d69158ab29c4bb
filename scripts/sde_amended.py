"""Generate the supersession bench's data from sde-bench's "amended" tasks.

sde-bench (github.com/vectorize-io/sde-bench, MIT, © 2026 Vectorize, Inc.) has six
`conversation-amended` tasks: a project decision settled in one developer chat and amended in
a later one, where only the amended rule is right. Its 140 decoy chats (policy-free developer
conversations about the same code base) are the noise retrieval competes against.

This script reads a clone of that repository at a pinned commit (`git show`, so the working tree
does not matter) and writes `bench/data/sde-amended.json.gz`: the six tasks (id, function,
bug report, policy, the two chats in order) and the decoys, with the source commit and licence.
Nothing is edited by hand; run it again to check the checked-in file:

    python scripts/sde_amended.py /path/to/sde-bench           # writes the data file
    python scripts/sde_amended.py /path/to/sde-bench --check   # exit 1 if it differs
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

#: The sde-bench commit the data is generated from.
COMMIT = "afcce15c1f608242e28e48832c301f39c5aed708"
REPO = "vectorize-io/sde-bench"
OUT = Path(__file__).resolve().parents[1] / "bench" / "data" / "sde-amended.json.gz"


def _show(repo: Path, path: str) -> str:
    return subprocess.run(["git", f"--git-dir={repo}", "show", f"{COMMIT}:{path}"],
                          check=True, capture_output=True, text=True).stdout


def _git_dir(path: Path) -> Path:
    return path / ".git" if (path / ".git").exists() else path


def generate(repo: Path) -> dict[str, Any]:
    """The bench data, from the repository at COMMIT."""
    git = _git_dir(repo)
    names = subprocess.run(["git", f"--git-dir={git}", "ls-tree", "--name-only", COMMIT],
                           check=True, capture_output=True, text=True).stdout.split()
    tasks = []
    for name in sorted(n for n in names if n.endswith("-amended")):
        task = json.loads(_show(git, f"{name}/tasks/main/task.json"))
        if task.get("source") != "conversation-amended" or len(task["conversations"]) != 2:
            raise SystemExit(f"{name}: not a two-chat amended task")
        tasks.append({
            "task_id": task["task_id"],
            "codebase": task["codebase"],
            "module": task["module"],
            "function": task["function"],
            "bug_report": task["bug_report"],
            "policy": task["policy"],
            # chat A (the decision, later superseded), then chat B (the amendment)
            "chats": task["conversations"],
        })
    decoys = json.loads(_show(git, "gen/decoy_conversations.json"))
    return {
        "source": {"repository": REPO, "commit": COMMIT, "license": "MIT",
                   "copyright": "Copyright (c) 2026 Vectorize, Inc.",
                   "files": ["*-amended/tasks/main/task.json", "gen/decoy_conversations.json"]},
        "tasks": tasks,
        "decoys": [{"id": d["id"], "topic": d["topic"], "turns": d["turns"]} for d in decoys],
    }


def encode(data: dict[str, Any]) -> bytes:
    """Deterministic bytes: sorted keys, no gzip timestamp."""
    raw = json.dumps(data, ensure_ascii=False, sort_keys=True, indent=0).encode()
    return gzip.compress(raw, mtime=0)


def main(argv: list[str] | None = None) -> int:
    """Write (or check) the data file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repo", type=Path, help="a clone (or bare git directory) of sde-bench")
    parser.add_argument("--check", action="store_true", help="compare with the checked-in file")
    args = parser.parse_args(argv)
    data = encode(generate(args.repo))
    if args.check:
        same = OUT.is_file() and OUT.read_bytes() == data
        print("up to date" if same else f"{OUT} differs from the generated data")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_bytes(data)
    print(f"wrote {OUT} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
