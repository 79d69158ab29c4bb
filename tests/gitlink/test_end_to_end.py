"""The acceptance flow: hooks installed in a real repository, commits through dulwich and
through the git binary, and `why`/`blame`/notes reaching the agent turns behind them."""

from __future__ import annotations

import re
from pathlib import Path

from funes import api
from funes.storage.fsck import fsck
from funes.storage.repo import Repository
from tests.gitlink.conftest import (
    CLAUDE_A,
    CLAUDE_B,
    CODEX,
    PI,
    T0,
    dulwich_commit,
    git,
    git_commit,
    hook_log,
    needs_git,
    needs_traces,
    session_at,
    settings_at,
    wait_for_note,
)

pytestmark = needs_traces

GET_RE = re.compile(r"^→ funes get (\S+) (\S+)$", re.M)


def _sessions_in(repo: Repository) -> dict[str, set[str]]:
    table = repo.chunks.dataset().to_table(columns=["harness", "session_id"]).to_pylist()
    out: dict[str, set[str]] = {}
    for row in table:
        out.setdefault(row["harness"], set()).add(row["session_id"])
    return out


def _turns_of(repo: Repository, sessions: set[str]) -> set[tuple[str, str]]:
    rows = repo.chunks.dataset().to_table(columns=["session_id", "turn_id", "time"]).to_pylist()
    return {(r["session_id"], r["turn_id"]) for r in rows
            if r["session_id"] in sessions and r["time"] is not None}


@needs_git
def test_hooks_link_commits_to_the_turns_behind_them(
    code_repo: Path, agents_env: dict[str, Path], run  # type: ignore[no-untyped-def]
) -> None:
    settings = settings_at(code_repo)
    api.init(settings)
    (code_repo / ".gitignore").write_text(".funes/\n")
    # Three agents worked in the repository before the first commit (pi in a subdirectory).
    session_at(CLAUDE_A, agents_env["claude"] / "projects" / "p" / "a.jsonl", code_repo,
               T0 - 600, T0 - 30)
    session_at(CODEX, agents_env["codex"] / "sessions" / "2026" / "rollout-x.jsonl", code_repo,
               T0 - 500, T0 - 20)
    session_at(PI, agents_env["pi"] / "sessions" / "p" / "s.jsonl", code_repo / "src",
               T0 - 400, T0 - 10)
    (code_repo / "src").mkdir()

    installed = run("hooks", "install")
    assert installed.exit_code == 0, installed.stderr
    assert "post-commit funes" in installed.stdout

    # 1. a commit through dulwich (which runs the hooks itself)
    sha1 = dulwich_commit(code_repo, {"parser.py": "def parse():\n    return 1\n"},
                          "Add the parser", T0)
    note1 = wait_for_note(code_repo, sha1, hook_log())
    memory = Repository.open(code_repo, settings)
    by_harness = _sessions_in(memory)
    assert set(by_harness) == {"claude", "codex", "pi"}
    first_sessions = set().union(*by_harness.values())
    first_turns = _turns_of(memory, first_sessions)

    why1 = run("why", "HEAD", "--limit", "0", "--full")
    assert why1.exit_code == 0, why1.stderr
    assert set(GET_RE.findall(why1.stdout)) == first_turns
    assert "Add the parser" in why1.stdout
    default = GET_RE.findall(run("why", "HEAD").stdout)  # the newest 20 that have words
    assert 0 < len(default) <= 20 and set(default) < first_turns
    assert api.linked_turns(memory, sha1[:10]) == first_turns
    assert f"memory-commit: {memory.head()}" in note1

    # 2. the agent works on; a commit through the git binary (independent check)
    session_at(CLAUDE_B, agents_env["claude"] / "projects" / "p" / "b.jsonl", code_repo,
               T0 + 60, T0 + 200)
    committed = git_commit(code_repo, {"parser.py": "def parse():\n    return 2\n"},
                           "Fix the parser", T0 + 300)
    assert committed.returncode == 0
    sha2 = git(code_repo, "rev-parse", "HEAD").stdout.strip()
    wait_for_note(code_repo, sha2, hook_log())
    second_turns = api.linked_turns(memory, "HEAD")
    b_session = {s for s, _ in second_turns}
    assert len(b_session) == 1 and not b_session & first_sessions
    assert second_turns == _turns_of(memory, b_session)

    why2 = run("why", "HEAD", "--limit", "0", "--full")
    shown = GET_RE.findall(why2.stdout)
    assert set(shown) == second_turns
    times = re.findall(r"^\[(\S+)\] claude ", why2.stdout, re.M)
    assert times == sorted(times)  # newest last

    notes = git(code_repo, "log", "--notes=funes", "-2").stdout
    assert notes.count("Notes (funes):") == 2
    assert f"funes why {sha2[:12]}" in notes

    # 3. blame on the changed line reaches the same turns
    blamed = api.blame(memory, "parser.py:2")
    assert [c.sha for c in blamed.commits] == [sha2]
    assert {(t.session_id, t.turn_id) for t in blamed.commits[0].turns} == second_turns
    cli_blame = run("blame", "parser.py:2", "--limit", "0", "--full")
    assert cli_blame.exit_code == 0, cli_blame.stderr
    assert set(GET_RE.findall(cli_blame.stdout)) == second_turns
    line1 = api.blame(memory, "parser.py:1")
    assert [c.sha for c in line1.commits] == [sha1]

    # 4. memory history shows the code commits next to the memory commits
    log = run("log", "--links")
    assert f"code {sha2[:12]} (master) " in log.stdout  # dulwich's default branch
    assert f"code {sha1[:12]} (master) " in log.stdout
    assert fsck(memory).ok


def test_a_commit_with_no_agent_session_gets_an_empty_link(
    code_repo: Path, agents_env: dict[str, Path], run  # type: ignore[no-untyped-def]
) -> None:
    settings = settings_at(code_repo)
    Repository.init(settings.home, settings, is_global=True)  # the global memory this time
    assert run("hooks", "install").exit_code == 0
    sha = dulwich_commit(code_repo, {"README": "hello\n"}, "Initial commit", T0)
    note = wait_for_note(code_repo, sha, hook_log())
    assert note.startswith("funes: no agent session took part in this commit")
    why = run("why", sha[:8])
    assert why.exit_code == 0, why.stderr
    assert "no agent session took part in this commit" in why.stdout
    memory = Repository.open(settings.home, settings)
    assert api.linked_turns(memory, "HEAD") == set()
