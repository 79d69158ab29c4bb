"""Every command the browsing output prints opens what it says: `→` lines and `# next:` lines.

An agent follows these lines as printed (docs/agents.md): each is run here through the real
CLI and must show the passage, turn or page it points at.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from funes.model.chunk import Chunk
from funes.storage.repo import Repository


def _c(session: str, seq: int, text: str, role: str, day: int) -> Chunk:
    return Chunk(text=text, harness="claude", session_id=session, turn_id=f"{session}-t{seq}",
                 seq=seq, ts=f"2026-04-{day:02d}T08:{seq:02d}:00Z", role=role,
                 block_type="text", block_idx=0, split_idx=0, workdir="/src/app",
                 project="github.com/acme/app")


@pytest.fixture
def memory(tmp_path: Path, settings: Any) -> Path:
    repo = Repository.init(tmp_path / "app" / ".funes", settings)
    chunks = []
    for day, session in enumerate(("alpha", "beta", "gamma"), start=1):
        for seq in range(12):
            role = "user" if seq % 2 == 0 else "assistant"
            chunks.append(_c(session, seq, f"{session} turn {seq}: the flaky deploy retries "
                             f"{'timeout ' * (seq * 9)}end of {session} {seq}.", role, day))
    repo.commit_chunks(chunks, "seed")
    return repo.path


def _commands(out: str, mark: str) -> list[list[str]]:
    found = []
    for line in out.splitlines():
        if line.lstrip().startswith(mark):
            text = line.lstrip()[len(mark):].strip().split(" (", 1)[0]
            found.append(shlex.split(text)[1:])  # without `funes`
    return found


def test_every_printed_command_opens_what_it_names(memory: Path, run: Any) -> None:
    mem = str(memory)
    listing = run("--format", "agent", "sessions", "--limit", "2", "--memory", mem)
    assert listing.exit_code == 0, listing.stderr
    page = listing.stdout
    nexts = _commands(page, "# next:")
    assert nexts and nexts[0][:3] == ["sessions", "--offset", "2"]
    rest = run("--format", "agent", *nexts[0])
    assert "alpha" not in page and "alpha" in rest.stdout  # newest first, then the rest
    for argv in _commands(page, "→"):
        assert argv[0] == "sketch"
        sketch = run("--format", "agent", *argv)
        assert sketch.exit_code == 0 and sketch.stdout.startswith(f"# sketch of {argv[1]}")
        for get in _commands(sketch.stdout, "→"):
            opened = run("--format", "agent", *get)
            turn = get[2]
            assert opened.exit_code == 0 and f"turn {turn}" in opened.stdout
        whole = _commands(sketch.stdout, "# next:")
        if whole:
            first = run("--format", "agent", *whole[0])
            assert first.exit_code == 0 and "turns seq 0–" in first.stdout
    scan = run("--format", "agent", "scan", "FLAKY DEPLOY", "--limit", "3", "--memory", mem)
    assert "36 blocks in 3 sessions; shown 1–3" in scan.stdout
    for get in _commands(scan.stdout, "→"):
        opened = run("--format", "agent", *get)
        assert "the flaky deploy retries" in opened.stdout
    more = _commands(scan.stdout, "# next:")
    assert run("--format", "agent", *more[0]).stdout.count("→ funes get") == 3


def test_a_range_pages_through_the_whole_session(memory: Path, run: Any) -> None:
    argv = ["get", "beta", "--from", "0", "--max-chars", "600", "--memory", str(memory)]
    seen: list[int] = []
    for _ in range(20):
        out = run("--format", "agent", *argv)
        assert out.exit_code == 0, out.stderr
        seen += [int(line.split(" seq", 1)[1].split()[0]) for line in out.stdout.splitlines()
                 if line.startswith("   [")]
        nexts = _commands(out.stdout, "# next:")
        if not nexts:
            break
        argv = nexts[0]
    assert seen == list(range(12))  # every turn once, in order


def test_bad_ranges_and_unknown_sessions_say_what_to_do(memory: Path, run: Any) -> None:
    mem = str(memory)
    both = run("get", "beta", "beta-t1", "--from", "1", "--memory", mem)
    assert both.exit_code == 2 and "not both" in both.stderr
    unknown = run("sketch", "nope", "--memory", mem)
    assert unknown.exit_code == 1 and "funes sessions" in unknown.stderr
    inverted = run("get", "beta", "--from", "5", "--to", "2", "--memory", mem)
    assert inverted.exit_code == 2 and "--from 5 is after --to 2" in inverted.stderr
    empty = run("scan", "", "--memory", mem)
    assert empty.exit_code == 2
