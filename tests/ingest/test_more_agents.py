"""OpenCode, Gemini CLI, Cursor and Copilot CLI: parsing their real files into turns.

The fixtures in tests/fixtures/agents are copies of files from jazzyalex/agent-sessions
(MIT, see tests/fixtures/agents/README.md): real formats, trimmed or anonymised by their
owners. Counts are pinned per fixture; the ones marked "by hand" were counted line by line
from the file (the comment says how).
"""

from __future__ import annotations

import collections
import json
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from funes.ingest.parsers import cursor_kind, detect_harness, parse_file
from tests.ingest.conftest import comparable, line_ends, parse_growing

FIXTURES = Path(__file__).parents[1] / "fixtures" / "agents"


def counts(rel: str, harness: str) -> tuple[int, dict[str, int], dict[str, int], dict[str, int]]:
    result = parse_file(FIXTURES / rel, harness)
    blocks = collections.Counter(b.type for t in result.turns for b in t.blocks)
    roles = collections.Counter(t.role for t in result.turns)
    return len(result.turns), dict(blocks), dict(roles), dict(result.skipped)


# -- Copilot CLI ---------------------------------------------------------------------------------


def test_copilot_small_hand_count() -> None:
    # By hand, 32 lines: turns are system.message (5), user.message (6, 29), assistant.message
    # (8, 11, 18, 24, 31), tool.execution_complete (10, 16, 20, 25), system.notification (22)
    # and assistant.reasoning (30) = 14; the 18 other events are lifecycle/telemetry.
    turns, blocks, roles, skipped = counts("copilot/small.jsonl", "copilot")
    assert turns == 14
    assert roles == {"system": 2, "user": 2, "assistant": 6, "tool": 4}
    assert sum(skipped.values()) == 18
    assert all(k.startswith("ignored:") for k in skipped), skipped
    # tool_use: one request on lines 8, 18, 24, 31; results: 4; thinking: line 18's
    # reasoningText and line 30's reasoning event.
    assert blocks["tool_use"] == 4
    assert blocks["tool_result"] == 4
    assert blocks["thinking"] == 2


def test_copilot_session_cwd_tools_and_links() -> None:
    result = parse_file(FIXTURES / "copilot/small.jsonl", "copilot")
    user = next(t for t in result.turns if t.role == "user")
    assert user.session_id == "copilot_stage0_small"
    assert user.workdir == "/tmp/repo"
    assert user.ts == "2025-12-18T21:32:11.000Z"
    # the user's prompt follows system.message e6, its parent
    assert user.parent_turn_id == "e6"
    answer = next(t for t in result.turns if t.turn_id == "e9")
    assert answer.parent_turn_id == "e7"  # through assistant.turn_start e8
    call = next(b for b in answer.blocks if b.type == "tool_use")
    assert call.tool_name == "shell" and json.loads(call.text) == {"command": "ls"}
    output = next(t for t in result.turns if t.turn_id == "e11")
    assert output.blocks[0].tool_name == "shell" and output.blocks[0].text == "a.txt\nb.txt\n"
    ids = [t.turn_id for t in result.turns]
    assert len(ids) == len(set(ids))  # anonymised repeated ids stay unique


def test_copilot_per_session_directory_layout() -> None:
    rel = "copilot/subdir_v1/aaaabbbb-1111-2222-3333-ccccddddeeee/events.jsonl"
    result = parse_file(FIXTURES / rel, "copilot")
    assert {t.session_id for t in result.turns} == {"aaaabbbb-1111-2222-3333-ccccddddeeee"}
    assert [t.role for t in result.turns] == ["user", "assistant", "tool", "assistant"]
    assert detect_harness(FIXTURES / rel) == "copilot"


# -- Gemini CLI ----------------------------------------------------------------------------------


def test_gemini_jsonl_hand_count() -> None:
    # By hand, 5 lines: metadata, a user message, $set, two model messages (the first with
    # one tool call and its result) = 3 turns; blocks: text 1 + tool_use 1 + tool_result 1 +
    # text 1.
    turns, blocks, roles, skipped = counts("gemini/jsonl_v040.jsonl", "gemini")
    assert turns == 3
    assert roles == {"user": 1, "assistant": 2}
    assert blocks == {"text": 2, "tool_use": 1, "tool_result": 1}
    assert skipped == {"ignored:metadata": 1, "ignored:$set": 1}


def test_gemini_tool_call_and_output() -> None:
    result = parse_file(FIXTURES / "gemini/jsonl_v040.jsonl", "gemini")
    call = result.turns[1]
    assert call.session_id == "gemini_stage0_jsonl"
    use, out = call.blocks
    assert use.tool_name == "run_shell_command" and json.loads(use.text)["command"] == "ls -F"
    assert out.type == "tool_result" and out.text.startswith("Output: AgentSessions/")
    assert call.parent_turn_id == "g-user-1"
    assert call.extra["model"] == "gemini-3-flash-preview"


@pytest.mark.parametrize(("rel", "expected"), [
    ("gemini/small.json", ["user", "assistant"]),
    # large.json: user, gemini, gemini, info (a CLI notice), model, user, model
    ("gemini/large.json", ["user", "assistant", "assistant", "system", "assistant", "user",
                           "assistant"]),
    ("gemini/schema_drift.json", ["user", "assistant"]),
])
def test_gemini_json_sessions(rel: str, expected: list[str]) -> None:
    assert cursor_kind(FIXTURES / rel, "gemini") == "rows"
    assert detect_harness(FIXTURES / rel) == "gemini"
    result = parse_file(FIXTURES / rel, "gemini")
    assert [t.role for t in result.turns] == expected


def _gemini_line(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode() + b"\n"


def test_gemini_message_rewritten_in_place_is_read_once_whole(tmp_path: Path) -> None:
    chats = tmp_path / ".gemini" / "tmp" / "proj" / "chats"
    chats.mkdir(parents=True)
    (chats.parent / ".project_root").write_text(str(tmp_path))
    log = chats / "session-2026-05-01T10-00-abcd1234.jsonl"
    head = {"sessionId": "abcd1234-0000", "projectHash": "x" * 64,
            "startTime": "2026-05-01T10:00:00.000Z", "kind": "main"}
    user = {"id": "u1", "timestamp": "2026-05-01T10:00:01.000Z", "type": "user",
            "content": [{"text": "why did we drop the streaming parser"}]}
    model = {"id": "m1", "timestamp": "2026-05-01T10:00:02.000Z", "type": "gemini",
             "content": "Because", "model": "gemini-x"}
    log.write_bytes(_gemini_line(head) + _gemini_line(user) + _gemini_line(model))
    first = parse_file(log, "gemini")
    # the model message has no token counts yet: it may still change, so it waits
    assert [t.turn_id for t in first.turns] == ["u1"]
    assert first.turns[0].workdir == str(tmp_path)
    done = {**model, "content": "Because it lost data on reconnect.",
            "tokens": {"input": 1, "output": 2}}
    with open(log, "ab") as fh:
        fh.write(_gemini_line({"$set": {"lastUpdated": "x"}}) + _gemini_line(done))
    second = parse_file(log, "gemini", start_offset=first.end_offset,
                        state=json.loads(json.dumps(first.state)))
    assert [t.turn_id for t in second.turns] == ["m1"]
    assert second.turns[0].blocks[0].text == "Because it lost data on reconnect."
    assert second.end_offset == log.stat().st_size
    whole = parse_file(log, "gemini")
    assert [t.turn_id for t in whole.turns] == ["u1", "m1"]
    assert sum(second.skipped.values()) + sum(first.skipped.values()) == sum(
        whole.skipped.values())


def test_gemini_workdir_from_registry_hash(tmp_path: Path) -> None:
    import hashlib

    root = "/srv/project-a"
    digest = hashlib.sha256(root.encode()).hexdigest()
    gemini = tmp_path / ".gemini"
    chats = gemini / "tmp" / digest / "chats"
    chats.mkdir(parents=True)
    (gemini / "projects.json").write_text(json.dumps({"projects": {root: "project-a"}}))
    shutil.copy(FIXTURES / "gemini/small.json", chats / "session-x.json")
    result = parse_file(chats / "session-x.json", "gemini")
    assert {t.workdir for t in result.turns} == {root}


# -- OpenCode ------------------------------------------------------------------------------------

SCHEMA = """
CREATE TABLE project (id text PRIMARY KEY, worktree text NOT NULL);
CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, workspace_id text,
  parent_id text, slug text NOT NULL, directory text NOT NULL, path text, title text NOT NULL,
  version text NOT NULL, time_created integer NOT NULL, time_updated integer NOT NULL);
CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
  time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
"""


def build_opencode_db(path: Path, storage: Path) -> None:
    """An ``opencode.db`` with OpenCode 1.2's schema, filled from a JSON storage tree.

    This is what OpenCode's own migration does: session, message and part rows whose ``data``
    is the stored JSON without its ids.
    """
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA)
    for session_file in sorted((storage / "session").glob("*/*.json")):
        s = json.loads(session_file.read_text())
        conn.execute("INSERT OR IGNORE INTO project VALUES (?, ?)", (s["projectID"], "/"))
        conn.execute(
            "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version,"
            " time_created, time_updated) VALUES (?,?,?,?,?,?,?,?,?)",
            (s["id"], s["projectID"], s.get("parentID"), s["id"], s["directory"], s["title"],
             s["version"], s["time"]["created"], s["time"]["updated"]))
        messages = [json.loads(p.read_text())
                    for p in sorted((storage / "message" / s["id"]).glob("*.json"))]
        for m in sorted(messages, key=lambda m: (m["time"]["created"], m["id"])):
            data = {k: v for k, v in m.items() if k not in ("id", "sessionID")}
            conn.execute("INSERT INTO message VALUES (?,?,?,?,?)",
                         (m["id"], s["id"], m["time"]["created"], m["time"]["created"],
                          json.dumps(data)))
            for p in sorted((storage / "part" / m["id"]).glob("*.json")):
                part = json.loads(p.read_text())
                pdata = {k: v for k, v in part.items()
                         if k not in ("id", "sessionID", "messageID")}
                conn.execute("INSERT INTO part VALUES (?,?,?,?,?,?)",
                             (part["id"], m["id"], s["id"], 0, 0, json.dumps(pdata)))
    conn.commit()
    conn.close()


def test_opencode_tree_hand_count() -> None:
    # By hand: storage_v2 session s_stage0_small has two messages; the user's has one text
    # part ("Hello"), the assistant's a completed bash tool part and a text part = 2 turns,
    # blocks text 2, tool_use 1, tool_result 1.
    rel = "opencode/storage_v2/session/proj_test/ses_s_stage0_small.json"
    turns, blocks, roles, skipped = counts(rel, "opencode")
    assert turns == 2
    assert roles == {"user": 1, "assistant": 1}
    assert blocks == {"text": 2, "tool_use": 1, "tool_result": 1}
    assert skipped == {}
    result = parse_file(FIXTURES / rel, "opencode")
    assert {t.workdir for t in result.turns} == {"/tmp/repo"}
    assert result.turns[1].parent_turn_id == "m_user_small"


def test_opencode_legacy_flat_parts() -> None:
    rel = "opencode/storage_legacy/session/proj_test/ses_s_stage0_drift.json"
    result = parse_file(FIXTURES / rel, "opencode")
    # the user message of this trimmed file has no part left: nothing to keep, counted
    assert [t.role for t in result.turns] == ["assistant"]
    assert result.skipped == {"empty": 1}
    assert any(b.type == "tool_result" and "# Title" in b.text for b in result.turns[0].blocks)


def test_opencode_database_incremental(tmp_path: Path) -> None:
    db = tmp_path / "opencode.db"
    build_opencode_db(db, FIXTURES / "opencode" / "storage_v2")
    assert detect_harness(db) == "opencode" and cursor_kind(db, "opencode") == "rowid"
    first = parse_file(db, "opencode")
    tree = [t for rel in ("ses_s_stage0_large.json", "ses_s_stage0_small.json")
            for t in parse_file(FIXTURES / "opencode/storage_v2/session/proj_test" / rel,
                                "opencode").turns]
    assert len(first.turns) == len(tree) > 0
    assert sorted(t.turn_id for t in first.turns) == sorted(t.turn_id for t in tree)
    assert sorted(b.text for t in first.turns for b in t.blocks) == sorted(
        b.text for t in tree for b in t.blocks)
    again = parse_file(db, "opencode", start_offset=first.end_offset, state=first.state)
    assert again.turns == [] and again.end_offset == first.end_offset
    # a new answer being streamed right now waits; once completed it is read
    now = int(time.time() * 1000)
    conn = sqlite3.connect(db)
    info = {"role": "assistant", "time": {"created": now}, "parentID": "m_user_small"}
    conn.execute("INSERT INTO message VALUES ('m_new', 's_stage0_small', ?, ?, ?)",
                 (now, now, json.dumps(info)))
    conn.execute("INSERT INTO part VALUES ('p_new', 'm_new', 's_stage0_small', ?, ?, ?)",
                 (now, now, json.dumps({"type": "text", "text": "Half an ans"})))
    conn.commit()
    waiting = parse_file(db, "opencode", start_offset=first.end_offset, state=first.state)
    assert waiting.turns == [] and waiting.end_offset == first.end_offset
    info["time"]["completed"] = now + 1
    conn.execute("UPDATE message SET data = ? WHERE id = 'm_new'", (json.dumps(info),))
    conn.execute("UPDATE part SET data = ? WHERE id = 'p_new'",
                 (json.dumps({"type": "text", "text": "Half an answer, now whole."}),))
    conn.commit()
    conn.close()
    done = parse_file(db, "opencode", start_offset=first.end_offset, state=first.state)
    assert [t.turn_id for t in done.turns] == ["m_new"]
    assert done.turns[0].blocks[0].text == "Half an answer, now whole."
    assert done.turns[0].parent_turn_id == "m_user_small"


# -- Cursor --------------------------------------------------------------------------------------


def test_cursor_hand_count() -> None:
    # By hand, test-session.jsonl: 6 lines, 2 user and 4 assistant messages; blocks: user text
    # 2, assistant text 4 and Shell tool_use 2.
    turns, blocks, roles, skipped = counts("cursor/test-session.jsonl", "cursor")
    assert turns == 6
    assert roles == {"user": 2, "assistant": 4}
    assert blocks == {"text": 6, "tool_use": 2}
    assert skipped == {}
    result = parse_file(FIXTURES / "cursor/test-session.jsonl", "cursor")
    assert result.turns[0].blocks[0].text == "run ls command"  # <user_query> unwrapped


def test_cursor_markers_and_drift() -> None:
    turns, blocks, _roles, skipped = counts("cursor/small.jsonl", "cursor")
    assert turns == 4 and skipped == {"ignored:turn_ended": 1}
    turns, blocks, _roles, skipped = counts("cursor/schema_drift.jsonl", "cursor")
    # thinking, a tool_call, an unknown block with text, a tool-result
    assert turns == 4
    assert blocks == {"text": 3, "thinking": 1, "tool_use": 1, "tool_result": 1}


def _cursor_home(tmp_path: Path) -> tuple[Path, Path, str]:
    """A ~/.cursor with one project (whose directory exists) and one conversation."""
    import hashlib

    project = tmp_path / "work" / "my-app"
    project.mkdir(parents=True)
    slug = str(project).strip("/").replace("/", "-")
    home = tmp_path / ".cursor"
    convo = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"  # the agentId in test-store.db
    target = home / "projects" / slug / "agent-transcripts" / convo / f"{convo}.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "cursor/test-session.jsonl", target)
    digest = hashlib.md5(str(project).encode()).hexdigest()
    store = home / "chats" / digest / convo / "store.db"
    store.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "cursor/test-store.db", store)
    return home, target, str(project)


def test_cursor_time_and_workdir_from_beside_the_transcript(tmp_path: Path) -> None:
    _home, target, project = _cursor_home(tmp_path)
    assert detect_harness(target) == "cursor"
    result = parse_file(target, "cursor")
    assert {t.workdir for t in result.turns} == {project}  # "my-app" keeps its dash
    assert {t.ts for t in result.turns} == {"2026-04-07T00:43:10.321Z"}  # store.db createdAt
    assert result.turns[0].extra["title"] == "Test Session"


# -- every new fixture: resumable, never crashing -----------------------------------------------

JSONL = [
    ("copilot", "copilot/small.jsonl"), ("copilot", "copilot/large.jsonl"),
    ("copilot", "copilot/schema_drift.jsonl"), ("gemini", "gemini/jsonl_v040.jsonl"),
    ("cursor", "cursor/large.jsonl"), ("cursor", "cursor/schema_drift.jsonl"),
    ("cursor", "cursor/small.jsonl"),
]


@pytest.mark.parametrize(("harness", "rel"), JSONL)
def test_split_resume_determinism(harness: str, rel: str, tmp_path: Path) -> None:
    source = FIXTURES / rel
    whole = parse_file(source, harness)
    assert whole.skipped.get("malformed-record", 0) == 0
    ends = line_ends(source)
    for cuts in ([e for e in ends[:-1]], [ends[len(ends) // 2] - 3]):
        work = tmp_path / f"pieces-{len(cuts)}"
        work.mkdir()
        turns, skipped, offset = parse_growing(source, harness, cuts, work)
        assert comparable(turns) == comparable(whole.turns)
        assert skipped == dict(whole.skipped)
        assert offset == whole.end_offset == source.stat().st_size


REAL_LINES = [(h, line) for h, rel in JSONL for line in (FIXTURES / rel).read_bytes().splitlines()]
REPLACEMENTS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.none(), max_size=2),
)


def _mutate(value: Any, path: list[int], replacement: Any) -> Any:
    if not path or not isinstance(value, dict | list) or not value:
        return replacement
    if isinstance(value, dict):
        key = list(value)[path[0] % len(value)]
        return {**value, key: _mutate(value[key], path[1:], replacement)}
    i = path[0] % len(value)
    return [*value[:i], _mutate(value[i], path[1:], replacement), *value[i + 1:]]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(picks=st.lists(st.tuples(
    st.integers(min_value=0), st.lists(st.integers(min_value=0, max_value=40), min_size=1,
                                        max_size=5), REPLACEMENTS), min_size=1, max_size=8),
       harness=st.sampled_from(["copilot", "gemini", "cursor"]))
def test_mutated_real_records_never_crash(picks: list[Any], harness: str) -> None:
    out = []
    for index, path, replacement in picks:
        record = json.loads(REAL_LINES[index % len(REAL_LINES)][1])
        out.append(json.dumps(_mutate(record, path, replacement)).encode())
    data = b"\n".join(out) + b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "events.jsonl"
        file.write_bytes(data)
        result = parse_file(file, harness, final=True)
    assert result.skipped.get("malformed-record", 0) == 0
    assert result.end_offset == len(data)
    for turn in result.turns:
        assert turn.blocks and all(b.text.strip() for b in turn.blocks)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.sampled_from(["user", "assistant", "system", 3, None]),
                               st.one_of(st.text(max_size=30), st.just("{"), st.none())),
                     max_size=6))
def test_opencode_database_with_hostile_rows_never_crashes(rows: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "opencode.db"
        conn = sqlite3.connect(db)
        conn.executescript(SCHEMA)
        for i, (role, text) in enumerate(rows):
            data = "{" if text == "{" else json.dumps({"role": role, "time": {"created": i}})
            conn.execute("INSERT INTO message VALUES (?, 's', 0, 0, ?)", (f"m{i}", data))
            part = "{" if text == "{" else json.dumps({"type": "text", "text": text})
            conn.execute("INSERT INTO part VALUES (?, ?, 's', 0, 0, ?)", (f"p{i}", f"m{i}", part))
        conn.commit()
        conn.close()
        result = parse_file(db, "opencode")
    assert result.end_offset == len(rows)
    assert len(result.turns) + sum(result.skipped.values()) >= len(rows)
