"""Source discovery: the agents' default locations, their variables, and explicit paths."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from funes._env import settings as load_settings
from funes.ingest.parsers import ParseError, UnknownHarnessError
from funes.ingest.sources import SourceFile, default_sources, explicit_sources
from tests.ingest.conftest import TRACES, needs_traces, trace

CLAUDE = "claude/huggingface__funes__claude_session.jsonl"
SUBAGENT = (
    "claude/codemie-ai__codemie-code__incremental-subagents__turn-2__subagents__agent-a485154.jsonl"
)
CODEX = "codex/huggingface__funes__codex_session.jsonl"
PI = "pi/huggingface__funes__pi_session.jsonl"
HERMES = "hermes/eriktobben__hermes-backup__20260429_081038_cece0a7d.jsonl"


def _put(rel: str, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if TRACES.is_dir():
        shutil.copy(trace(rel), dest)
    else:
        dest.write_text("{}\n")
    return dest


def _hermes_db(path: Path, sessions: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL)")
    conn.execute(
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
        "content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT, timestamp REAL)"
    )
    conn.executemany("INSERT INTO sessions VALUES (?, 'cli', 0)", [(s,) for s in sessions])
    conn.commit()
    conn.close()
    return path


def _layout(home: Path) -> dict[str, list[Path]]:
    claude = home / ".claude" / "projects" / "-home-me-proj"
    session = "06ec42c3-2184-40c5-b0ee-98c3235b4c4c"
    codex = home / ".codex" / "sessions" / "2026" / "06" / "23"
    pi = home / ".pi" / "agent" / "sessions" / "--home-me-proj--"
    hermes = home / ".hermes"
    files = {
        "claude": [
            _put(CLAUDE, claude / f"{session}.jsonl"),
            _put(SUBAGENT, claude / session / "subagents" / "agent-a485154.jsonl"),
            _put(SUBAGENT, claude / "agent-0ld5ty1e.jsonl"),
        ],
        "codex": [_put(CODEX, codex / "rollout-2026-06-23T05-37-02-019ef2fb.jsonl")],
        "pi": [_put(PI, pi / "2026-04-13T09-28-54-581Z_7028acdd.jsonl")],
        "hermes": [
            _hermes_db(hermes / "state.db", ["20260101_000000_aaaaaaaa"]),
            _put(HERMES, hermes / "sessions" / "20260429_081038_cece0a7d.jsonl"),
        ],
    }
    # Things that are not transcripts, or are already covered, and must not be listed.
    (claude / session / "tool-results").mkdir(parents=True)
    (claude / session / "tool-results" / "x.txt").write_text("big output")
    _put(CLAUDE, claude / session / "subagents" / "notes.jsonl")
    (codex / "history.jsonl").write_text("{}\n")
    (pi / "readme.md").write_text("no")
    _put(HERMES, hermes / "sessions" / "20260101_000000_aaaaaaaa.jsonl")  # already in state.db
    (hermes / "sessions" / "session_x.json").write_text("{}")
    return files


def test_default_sources(isolated_env: Path) -> None:
    files = _layout(isolated_env)
    found = default_sources(load_settings())
    expected = [SourceFile(p, "claude") for p in sorted(files["claude"])]
    expected += [SourceFile(p, h) for h in ("codex", "pi", "hermes") for p in files[h]]
    assert found == expected  # by harness, then path; the database before transcripts
    assert default_sources(load_settings(), harnesses=["pi"]) == [
        SourceFile(files["pi"][0], "pi")
    ]


def test_agent_variables_move_the_roots(
    isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alt = tmp_path / "alt"
    _put(CLAUDE, alt / "claude" / "projects" / "p" / "s.jsonl")
    _put(CODEX, alt / "codex" / "sessions" / "rollout-x.jsonl")
    _hermes_db(alt / "hermes" / "state.db", [])
    _put(PI, alt / "pi" / "sessions" / "x" / "s.jsonl")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(alt / "claude"))
    monkeypatch.setenv("CODEX_HOME", str(alt / "codex"))
    monkeypatch.setenv("HERMES_HOME", str(alt / "hermes"))
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(alt / "pi"))
    found = default_sources()
    assert [(s.harness, s.path.relative_to(alt).as_posix()) for s in found] == [
        ("claude", "claude/projects/p/s.jsonl"),
        ("codex", "codex/sessions/rollout-x.jsonl"),
        ("pi", "pi/sessions/x/s.jsonl"),
        ("hermes", "hermes/state.db"),
    ]


def test_nothing_installed(isolated_env: Path) -> None:
    assert default_sources(load_settings()) == []


def test_symlink_loops_are_not_followed(isolated_env: Path) -> None:
    root = isolated_env / ".codex" / "sessions"
    _put(CODEX, root / "a" / "rollout-1.jsonl")
    (root / "a" / "loop").symlink_to(root, target_is_directory=True)
    assert [s.path.name for s in default_sources(load_settings())] == ["rollout-1.jsonl"]


@needs_traces
def test_explicit_directory_sniffs_each_file(tmp_path: Path) -> None:
    found = explicit_sources([TRACES])
    by_dir = {(s.path.parent.name, s.harness) for s in found}
    assert by_dir == {("claude", "claude"), ("codex", "codex"), ("pi", "pi"),
                      ("hermes", "hermes")}
    assert len(found) == len(list(TRACES.glob("*/*.jsonl")))
    (tmp_path / "notes.jsonl").write_text("not json\n")
    (tmp_path / "x.txt").write_text("hello")
    _put(PI, tmp_path / "sub" / "s.jsonl")
    assert explicit_sources([tmp_path]) == [SourceFile(tmp_path / "sub" / "s.jsonl", "pi")]


@needs_traces
def test_explicit_files(tmp_path: Path) -> None:
    one = trace(CODEX)
    assert explicit_sources([one, str(one)]) == [SourceFile(one, "codex")]
    assert explicit_sources([one], harness="import") == [SourceFile(one, "import")]
    db = _hermes_db(tmp_path / "state.db", ["s"])
    assert explicit_sources([db]) == [SourceFile(db, "hermes")]
    junk = tmp_path / "junk.jsonl"
    junk.write_text("hello\n")
    with pytest.raises(UnknownHarnessError):
        explicit_sources([junk])
    with pytest.raises(ParseError):
        explicit_sources([tmp_path / "missing.jsonl"])
    with pytest.raises(UnknownHarnessError):
        explicit_sources([one], harness="windsurf")


def test_default_locations_of_the_newer_agents(tmp_path: Path) -> None:
    from dataclasses import replace

    from funes._env import settings as load
    from funes.ingest.sources import default_sources

    home = tmp_path / "home"
    (home / ".local/share/opencode/storage/session/p").mkdir(parents=True)
    (home / ".local/share/opencode/storage/session/p/ses_a.json").write_text("{}")
    chats = home / ".gemini/tmp/app/chats"
    (chats / "parent-session").mkdir(parents=True)
    for name in ("session-1.jsonl", "session-2.json", "session-2.jsonl", "session-3.json",
                 "parent-session/sub.jsonl", "notes.txt"):
        (chats / name).write_text("")
    (home / ".gemini/tmp/app/logs.json").write_text("[]")
    cursor = home / ".cursor/projects/Users-ada-app/agent-transcripts"
    (cursor / "c1").mkdir(parents=True)
    (cursor / "c1/c1.jsonl").write_text("")
    (cursor / "old.jsonl").write_text("")
    (home / ".cursor/projects/Users-ada-app/other.jsonl").write_text("")
    state = home / ".copilot/session-state"
    (state / "s1").mkdir(parents=True)
    (state / "s1/events.jsonl").write_text("")
    (state / "s1/workspace.yaml").write_text("")
    (state / "flat.jsonl").write_text("")
    settings = replace(load(), user_home=home, opencode_data=None, opencode_config=None,
                       gemini_home=None, cursor_home=None, copilot_home=None)
    found = {(s.harness, str(s.path.relative_to(home)))
             for s in default_sources(settings, harnesses=["opencode", "gemini", "cursor",
                                                           "copilot"])}
    assert found == {
        ("opencode", ".local/share/opencode/storage/session/p/ses_a.json"),
        ("gemini", ".gemini/tmp/app/chats/session-1.jsonl"),
        ("gemini", ".gemini/tmp/app/chats/session-2.jsonl"),  # its .json was migrated
        ("gemini", ".gemini/tmp/app/chats/session-3.json"),
        ("gemini", ".gemini/tmp/app/chats/parent-session/sub.jsonl"),
        ("cursor", ".cursor/projects/Users-ada-app/agent-transcripts/c1/c1.jsonl"),
        ("cursor", ".cursor/projects/Users-ada-app/agent-transcripts/old.jsonl"),
        ("copilot", ".copilot/session-state/s1/events.jsonl"),
        ("copilot", ".copilot/session-state/flat.jsonl"),
    }
