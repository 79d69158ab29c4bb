"""Parsers on real transcripts: counts, content, noise, resume.

The transcripts come from tests/fixtures/traces (small, shipped) or ../shared/fixtures/traces
(large, optional); a test whose file is in neither skips (tests/ingest/conftest.py `trace`).
"""

from __future__ import annotations

import collections
import itertools
import json
import re
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from funes.ingest import noise
from funes.ingest.parsers import (
    ParseError,
    SourceTruncatedError,
    UnknownHarnessError,
    cursor_kind,
    detect_harness,
    parse_file,
)
from funes.model.turns import Turn
from tests.ingest.conftest import (
    TRACES,
    all_traces,
    comparable,
    line_ends,
    needs_traces,
    parse_growing,
    trace,
)

TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@dataclass(frozen=True)
class Expect:
    harness: str
    sessions: int
    turns: int
    blocks: dict[str, int]
    skipped: dict[str, int]
    noise: dict[str, int]


# Pinned per fixture: any change here is a behaviour change to review, not noise.
EXPECTED: dict[str, Expect] = {
    "claude/codemie-ai__codemie-code__incremental-subagents__turn-2.jsonl": Expect(
        "claude", sessions=1, turns=44,
        blocks={"text": 10, "thinking": 11, "tool_result": 13, "tool_use": 14},
        skipped={"empty": 1, "ignored:file-history-snapshot": 2, "ignored:summary": 1,
                 "ignored:system": 2},
        noise={"system-reminder": 4},
    ),
    "claude/codemie-ai__codemie-code__incremental-subagents__turn-2__subagents__agent-a485154.jsonl":
    Expect(
        "claude", sessions=1, turns=44,
        blocks={"text": 14, "tool_result": 20, "tool_use": 20},
        skipped={"ignored:progress": 1},
        noise={"system-reminder": 10},
    ),
    "claude/codemie-ai__codemie-code__session-9eda1058.jsonl": Expect(
        "claude", sessions=1, turns=19,
        blocks={"text": 9, "thinking": 4, "tool_result": 3, "tool_use": 3},
        skipped={"ignored:file-history-snapshot": 3, "ignored:summary": 16, "ignored:system": 2},
        noise={"interrupt": 1},
    ),
    "claude/daaain__claude-code-log__edge_cases.jsonl": Expect(
        "claude", sessions=2, turns=12,
        blocks={"text": 9, "tool_result": 1, "tool_use": 3},
        skipped={"missing-field": 3, "not-an-object": 3},
        noise={"command": 2, "command-output": 1},
    ),
    "claude/huggingface__funes__claude_session.jsonl": Expect(
        "claude", sessions=1, turns=3,
        blocks={"text": 1, "tool_result": 1, "tool_use": 1},
        skipped={"ignored:queue-operation": 1},
        noise={},
    ),
    "claude/jazzyalex__agent-sessions__stage0__claude__small.jsonl": Expect(
        "claude", sessions=2, turns=19,
        blocks={"text": 14, "thinking": 6, "tool_result": 3, "tool_use": 3},
        skipped={"empty": 1, "ignored:attachment": 38, "ignored:file-history-snapshot": 1,
                 "ignored:progress": 1, "ignored:queue-operation": 1, "ignored:summary": 1,
                 "ignored:system": 12, "unknown-type:agent-name": 1, "unknown-type:ai-title": 1,
                 "unknown-type:atis-latch": 1, "unknown-type:bridge-session": 1,
                 "unknown-type:custom-title": 1, "unknown-type:frame-link": 1,
                 "unknown-type:last-prompt": 1, "unknown-type:mode": 1,
                 "unknown-type:permission-mode": 1, "unknown-type:pr-link": 1,
                 "unknown-type:relocated": 1, "unknown-type:result": 1,
                 "unknown-type:started": 1, "unknown-type:worktree-state": 2},
        noise={"compaction": 1, "image": 1},
    ),
    "claude/marot__spotter__short.jsonl": Expect(
        "claude", sessions=1, turns=8,
        blocks={"text": 3, "thinking": 1, "tool_result": 2, "tool_use": 2},
        skipped={"empty": 1, "ignored:file-history-snapshot": 1, "ignored:progress": 3,
                 "ignored:system": 2},
        noise={"interrupt": 1},
    ),
    "claude/marot__spotter__subagent.jsonl": Expect(
        "claude", sessions=1, turns=47,
        blocks={"text": 12, "thinking": 4, "tool_result": 16, "tool_use": 16},
        skipped={"empty": 1, "ignored:file-history-snapshot": 3, "ignored:progress": 44,
                 "ignored:system": 1},
        noise={"command": 1, "interrupt": 1, "meta": 1, "system-reminder": 1},
    ),
    "claude/marot__spotter__tool_heavy.jsonl": Expect(
        "claude", sessions=1, turns=21,
        blocks={"text": 9, "thinking": 1, "tool_result": 6, "tool_use": 6},
        skipped={"empty": 1, "ignored:file-history-snapshot": 3, "ignored:progress": 10,
                 "ignored:queue-operation": 2, "ignored:system": 2},
        noise={"command": 1, "command-output": 1, "interrupt": 2, "meta": 1,
               "system-reminder": 1},
    ),
    "claude/simonw__claude-code-transcripts__sample_session.jsonl": Expect(
        "claude", sessions=1, turns=7,
        blocks={"text": 4, "tool_result": 2, "tool_use": 2},
        skipped={"ignored:summary": 1},
        noise={},
    ),
    "codex/JaydenXsoe__ocodex__rollout-2025-08-30T12-52-41-9aa0221f-be4a-424a-8633-55496d1e2dc3.jsonl":
    Expect(
        "codex", sessions=1, turns=8,
        blocks={"text": 4, "thinking": 2, "tool_result": 1, "tool_use": 1},
        skipped={"ignored:legacy-meta": 1, "ignored:record_type:state": 6},
        noise={"agents-md": 1, "environment": 1},
    ),
    "codex/codemie-ai__codemie-code__codex__turn-2.jsonl": Expect(
        "codex", sessions=1, turns=8,
        blocks={"text": 8},
        skipped={"duplicate": 4, "empty": 2, "ignored:event_msg:task_complete": 2,
                 "ignored:event_msg:task_started": 2, "ignored:event_msg:token_count": 4,
                 "ignored:session_meta": 1, "ignored:turn_context": 2},
        noise={"environment": 2, "instructions": 2},
    ),
    "codex/codemie-ai__codemie-code__rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl":
    Expect(
        "codex", sessions=1, turns=224,
        blocks={"text": 21, "tool_result": 102, "tool_use": 105},
        skipped={"duplicate": 15, "empty": 25, "ignored:event_msg:exec_command_end": 43,
                 "ignored:event_msg:patch_apply_end": 3, "ignored:event_msg:task_complete": 2,
                 "ignored:event_msg:task_started": 2, "ignored:event_msg:token_count": 66,
                 "ignored:event_msg:web_search_end": 3, "ignored:session_meta": 1,
                 "ignored:turn_context": 2},
        noise={"agents-md": 1, "environment": 1, "instructions": 4},
    ),
    "codex/huggingface__funes__codex_session.jsonl": Expect(
        "codex", sessions=1, turns=7,
        blocks={"text": 2, "thinking": 1, "tool_result": 2, "tool_use": 2},
        skipped={"ignored:session_meta": 1},
        noise={},
    ),
    "codex/jazzyalex__agent-sessions__codex_050_legacy.jsonl": Expect(
        "codex", sessions=0, turns=0,
        blocks={},
        skipped={"ignored:event_msg:token_count": 2, "ignored:event_msg:turn.completed": 2,
                 "ignored:session_meta": 1},
        noise={},
    ),
    "codex/jazzyalex__agent-sessions__stage0__codex__small.jsonl": Expect(
        "codex", sessions=1, turns=24,
        blocks={"text": 19, "thinking": 1, "tool_result": 5, "tool_use": 6},
        skipped={
            "duplicate": 3, "empty": 2, "ignored:compacted": 1,
            "ignored:event_msg:collab_agent_interaction_end": 2,
            "ignored:event_msg:collab_agent_spawn_end": 1,
            "ignored:event_msg:collab_close_end": 1, "ignored:event_msg:collab_waiting_end": 1,
            "ignored:event_msg:context_compacted": 1,
            "ignored:event_msg:dynamic_tool_call_request": 1,
            "ignored:event_msg:dynamic_tool_call_response": 1,
            "ignored:event_msg:entered_review_mode": 6, "ignored:event_msg:error": 1,
            "ignored:event_msg:exec_command_end": 3, "ignored:event_msg:exited_review_mode": 3,
            "ignored:event_msg:guardian_assessment": 4,
            "ignored:event_msg:image_generation_end": 2, "ignored:event_msg:item_completed": 13,
            "ignored:event_msg:mcp_tool_call_end": 6, "ignored:event_msg:patch_apply_end": 1,
            "ignored:event_msg:sub_agent_activity": 1, "ignored:event_msg:task_complete": 2,
            "ignored:event_msg:task_started": 2, "ignored:event_msg:thread_goal_updated": 2,
            "ignored:event_msg:thread_name_updated": 1,
            "ignored:event_msg:thread_settings_applied": 1, "ignored:event_msg:token_count": 3,
            "ignored:event_msg:turn_aborted": 1, "ignored:event_msg:undo_completed": 1,
            "ignored:event_msg:view_image_tool_call": 1, "ignored:event_msg:web_search_end": 1,
            "ignored:response_item:ghost_snapshot": 1,
            "ignored:response_item:image_generation_call": 1,
            "ignored:response_item:tool_search_output": 1, "ignored:session_meta": 1,
            "ignored:session_meta-repeat": 6, "ignored:turn_context": 9,
            "unknown-type:inter_agent_communication_metadata": 1,
            "unknown-type:world_state": 5,
        },
        noise={"compaction": 5, "image": 1, "instructions": 7},
    ),
    "codex/supermaciz__sessions-chronicle__rollout-2026-01-18T02-01-28-019bce9f-0a40-79e2-8351-8818e8487fb6.jsonl":
    Expect(
        "codex", sessions=1, turns=2,
        blocks={"text": 2},
        skipped={"ignored:session_meta": 1},
        noise={},
    ),
    "hermes/Gabrie-yx__lucifexia__trajectory_samples.jsonl": Expect(
        "hermes", sessions=1, turns=2,
        blocks={"text": 2, "thinking": 1},
        skipped={"ignored:system-prompt": 1},
        noise={},
    ),
    "hermes/eriktobben__hermes-backup__20260429_081038_cece0a7d.jsonl": Expect(
        "hermes", sessions=1, turns=2,
        blocks={"text": 2},
        skipped={"ignored:session_meta": 1},
        noise={},
    ),
    "pi/badlogic__pi-mono__large-session.jsonl": Expect(
        "pi", sessions=1, turns=900,
        blocks={"text": 332, "thinking": 1, "tool_result": 373, "tool_use": 391},
        skipped={"empty": 14, "ignored:model_change": 1, "ignored:session": 1,
                 "ignored:thinking_level_change": 103},
        noise={},
    ),
    "pi/huggingface__funes__pi_session.jsonl": Expect(
        "pi", sessions=1, turns=3,
        blocks={"text": 1, "thinking": 1, "tool_result": 1, "tool_use": 1},
        skipped={"ignored:session": 1},
        noise={},
    ),
    "pi/jazzyalex__agent-sessions__stage0__pi__small.jsonl": Expect(
        "pi", sessions=1, turns=6,
        blocks={"text": 6},
        skipped={"ignored:model_change": 1, "ignored:session": 1,
                 "ignored:thinking_level_change": 1},
        noise={"compaction": 2},
    ),
}

SUBAGENT_REL = (
    "claude/codemie-ai__codemie-code__incremental-subagents__turn-2__subagents__agent-a485154.jsonl"
)

#: Formats where every line is one record (so lines = lines with turns + skipped).
ONE_RECORD_PER_LINE = {"claude", "codex", "pi"}


def _rel(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _parse(rel: str) -> list[Turn]:
    return parse_file(trace(rel), EXPECTED[rel].harness).turns


def _texts(turns: list[Turn]) -> list[str]:
    return [b.text for t in turns for b in t.blocks]


@needs_traces
def test_every_fixture_is_pinned() -> None:
    assert sorted(_rel(p) for p in all_traces()) == sorted(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_fixture_counts(rel: str) -> None:
    exp = EXPECTED[rel]
    path = trace(rel)
    assert detect_harness(path) == exp.harness
    result = parse_file(path, exp.harness)
    turns = result.turns
    assert len({t.session_id for t in turns}) == exp.sessions
    assert len(turns) == exp.turns
    assert dict(collections.Counter(b.type for t in turns for b in t.blocks)) == exp.blocks
    assert dict(result.skipped) == exp.skipped
    noise_counts = collections.Counter(b.noise for t in turns for b in t.blocks if b.noise)
    assert dict(noise_counts) == exp.noise
    assert "malformed-record" not in result.skipped
    assert result.end_offset == line_ends(path)[-1]


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_fixture_invariants(rel: str) -> None:
    exp = EXPECTED[rel]
    path = trace(rel)
    result = parse_file(path, exp.harness)
    size = path.stat().st_size
    ends = set(line_ends(path))
    seen: set[tuple[str, str]] = set()
    by_session: dict[str, list[int]] = collections.defaultdict(list)
    for t in result.turns:
        assert t.harness == exp.harness
        assert (t.session_id, t.turn_id) not in seen, t.turn_id
        seen.add((t.session_id, t.turn_id))
        by_session[t.session_id].append(t.seq)
        assert t.ts == "" or TS_RE.match(t.ts), t.ts
        assert t.role in ("user", "assistant", "system", "tool")
        assert t.blocks
        assert t.parent_turn_id != t.turn_id
        assert t.source is not None
        assert 0 <= t.source.start < t.source.end <= size
        assert t.source.end in ends
        for b in t.blocks:
            assert b.text.strip()
            assert b.noise is None or re.fullmatch(r"[a-z-]+", b.noise)
            if b.type == "tool_use":
                assert b.tool_name is not None or exp.harness == "claude"
    for seqs in by_session.values():
        assert seqs == list(range(len(seqs)))
    if exp.harness in ONE_RECORD_PER_LINE:
        lines_with_turns = len({t.source.start for t in result.turns if t.source})
        assert lines_with_turns + sum(result.skipped.values()) == len(ends)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_split_resume_determinism(rel: str, tmp_path: Path) -> None:
    """Whole-file parse == parses of the file growing line by line, and at assorted cuts."""
    exp = EXPECTED[rel]
    source = trace(rel)
    whole_copy = tmp_path / "whole" / source.name
    whole_copy.parent.mkdir()
    shutil.copy(source, whole_copy)
    whole = parse_file(whole_copy, exp.harness)
    ends = line_ends(source)

    # Every line its own piece: state crosses every line boundary once.
    pieces, skipped, offset = parse_growing(source, exp.harness, ends, _fresh(tmp_path, "each"))
    assert comparable(pieces) == comparable(whole.turns)
    assert skipped == dict(whole.skipped)
    assert offset == whole.end_offset

    # Two pieces at a spread of line boundaries, plus cuts in the middle of lines.
    step = max(1, len(ends) // 12)
    for i, cut in enumerate(ends[::step]):
        turns, skipped, _ = parse_growing(source, exp.harness, [cut], _fresh(tmp_path, f"two{i}"))
        assert comparable(turns) == comparable(whole.turns), cut
        assert skipped == dict(whole.skipped)
    mid = [e - 3 for e in ends[1::max(1, len(ends) // 5)] if e > 3]
    turns, skipped, _ = parse_growing(source, exp.harness, mid, _fresh(tmp_path, "mid"))
    assert comparable(turns) == comparable(whole.turns)
    assert skipped == dict(whole.skipped)


def _fresh(root: Path, name: str) -> Path:
    path = root / name
    path.mkdir()
    return path


# --------------------------------------------------------------------------------------------
# Spot checks of real content
# --------------------------------------------------------------------------------------------


def test_claude_content_and_tool_names() -> None:
    turns = _parse("claude/huggingface__funes__claude_session.jsonl")
    assert turns[0].role == "user"
    assert turns[0].blocks[0].text.startswith(
        "Build me a photo-realistic, highly interactive 3D digital twin of Earth."
    )
    assert turns[0].session_id == "06ec42c3-2184-40c5-b0ee-98c3235b4c4c"
    assert turns[0].turn_id == "d753fba5-0c26-437f-82df-ba98aa773943"
    assert turns[0].ts == "2026-06-12T21:21:57.939Z"
    assert turns[0].workdir == "D:\\physics\\earth"
    call, result = turns[1].blocks[0], turns[2].blocks[0]
    assert (call.type, call.tool_name) == ("tool_use", "PowerShell")
    assert json.loads(call.text)["command"].startswith("Get-ChildItem -Force")
    assert not call.text.startswith("[tool_use")  # the chunker adds the prefix, not us
    assert (result.type, result.tool_name, result.tool_call_id) == (
        "tool_result", "PowerShell", "toolu_01Btocnn4TwfUjkFfby8AdEu"
    )
    assert turns[2].role == "tool"
    assert turns[2].parent_turn_id == turns[1].turn_id


def test_claude_parent_resolves_through_skipped_records() -> None:
    turns = _parse("claude/codemie-ai__codemie-code__session-9eda1058.jsonl")
    by_id = {t.turn_id: t for t in turns}
    # "what else?" points at a system turn_duration record, whose parent is the last reply.
    what_else = by_id["a29e96ee-000b-40c6-8e45-bab99806a37b"]
    assert what_else.blocks[0].text == "what else?"
    assert what_else.parent_turn_id == "507fd9bb-41f1-453c-87f4-06468e039a76"
    assert all(t.parent_turn_id is None or t.parent_turn_id in by_id for t in turns)


def test_claude_subagent_linked_to_parent_session() -> None:
    rel = SUBAGENT_REL
    turns = _parse(rel)
    parent = "e9fb405b-169f-40eb-9396-7e75076f045d"
    assert {t.session_id for t in turns} == {f"{parent}:agent-a485154"}
    assert {t.parent_session_id for t in turns} == {parent}
    assert turns[0].blocks[0].text.startswith("Analyze the existing CLI command structure")
    assert turns[0].extra["agent_id"] == "a485154"


def test_claude_subagent_parent_turn_from_disk_layout(tmp_path: Path) -> None:
    """In the real layout the spawning Task call is found in the parent transcript."""
    session = "e9fb405b-169f-40eb-9396-7e75076f045d"
    project = tmp_path / "projects" / "-Users-User-repo"
    (project / session / "subagents").mkdir(parents=True)
    shutil.copy(
        trace("claude/codemie-ai__codemie-code__incremental-subagents__turn-2.jsonl"),
        project / f"{session}.jsonl",
    )
    sub = project / session / "subagents" / "agent-a485154.jsonl"
    shutil.copy(
        trace(
            "claude/codemie-ai__codemie-code__incremental-subagents__turn-2__subagents__"
            "agent-a485154.jsonl"
        ),
        sub,
    )
    turns = parse_file(sub, "claude").turns
    spawner = "3f27e204-c8a8-4d42-80e3-a2264a7fd647"  # the Task tool_use turn
    assert turns[0].parent_turn_id == spawner
    assert all(t.extra["spawned_by_turn"] == spawner for t in turns)
    assert turns[1].parent_turn_id == turns[0].turn_id
    main = {t.turn_id: t for t in parse_file(project / f"{session}.jsonl", "claude").turns}
    assert main[spawner].blocks[0].tool_name == "Task"


def test_claude_subagent_found_by_prompt_before_it_finishes(tmp_path: Path) -> None:
    """While the subagent runs, its result is not in the parent yet: match the Task prompt."""
    session = "e9fb405b-169f-40eb-9396-7e75076f045d"
    project = tmp_path / "p"
    (project / session / "subagents").mkdir(parents=True)
    lines = trace(
        "claude/codemie-ai__codemie-code__incremental-subagents__turn-2.jsonl"
    ).read_bytes().splitlines(keepends=True)
    (project / f"{session}.jsonl").write_bytes(b"".join(lines[:6]))  # up to the Task call
    sub = project / session / "subagents" / "agent-a485154.jsonl"
    shutil.copy(
        trace(
            "claude/codemie-ai__codemie-code__incremental-subagents__turn-2__subagents__"
            "agent-a485154.jsonl"
        ),
        sub,
    )
    turns = parse_file(sub, "claude").turns
    assert turns[0].parent_turn_id == "3f27e204-c8a8-4d42-80e3-a2264a7fd647"


def test_claude_repeated_uuids_stay_unique() -> None:
    turns = _parse("claude/jazzyalex__agent-sessions__stage0__claude__small.jsonl")
    ids = [t.turn_id for t in turns]
    assert len(ids) == len(set(ids))
    assert "[trimmed for fixture]#48" in ids


def test_codex_current_format() -> None:
    rel = (
        "codex/codemie-ai__codemie-code__rollout-2026-05-11T11-26-55-"
        "019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
    )
    turns = _parse(rel)
    session = "019e1625-789d-76c0-80ab-3724b5ddb799"
    assert {t.session_id for t in turns} == {session}
    assert all(t.turn_id.startswith(f"{session}#") for t in turns)
    assert all(t.workdir == "/Users/Sample_User/repos/codemie-ai/codemie-code" for t in turns)
    user = [t for t in turns if t.role == "user" and not t.blocks[0].noise]
    assert [t.blocks[0].text for t in user] == [
        "show tools",
        "let's update the defailt context compart to 90 in env var",
    ]
    names = collections.Counter(
        b.tool_name for t in turns for b in t.blocks if b.type == "tool_use"
    )
    assert names == {"write_stdin": 54, "exec_command": 43, "web_search": 3, "apply_patch": 3,
                     "update_plan": 2}
    results = [b for t in turns for b in t.blocks if b.type == "tool_result"]
    assert all(b.tool_name for b in results)
    for prev, turn in itertools.pairwise(turns):
        assert turn.parent_turn_id == prev.turn_id


def test_codex_event_and_response_duplicates_collapse() -> None:
    turns = _parse("codex/codemie-ai__codemie-code__codex__turn-2.jsonl")
    texts = [t.blocks[0].text for t in turns]
    assert texts.count("Hello, Codex! Please explain what you do.") == 1
    assert texts.count("I am Codex, an AI coding assistant by OpenAI.") == 1
    # The event arrives first for the reply: it is the one kept, in file order.
    reply = next(t for t in turns if t.blocks[0].text.startswith("I am Codex"))
    assert reply.turn_id.endswith("#9")


def test_codex_event_only_rollout() -> None:
    rel = (
        "codex/supermaciz__sessions-chronicle__rollout-2026-01-18T02-01-28-"
        "019bce9f-0a40-79e2-8351-8818e8487fb6.jsonl"
    )
    turns = _parse(rel)
    assert [(t.role, t.blocks[0].text) for t in turns] == [
        ("user", "Summarize the repo"),
        ("assistant", "Here is the summary"),
    ]


def test_codex_legacy_format() -> None:
    rel = (
        "codex/JaydenXsoe__ocodex__rollout-2025-08-30T12-52-41-"
        "9aa0221f-be4a-424a-8633-55496d1e2dc3.jsonl"
    )
    turns = _parse(rel)
    assert {t.session_id for t in turns} == {"9aa0221f-be4a-424a-8633-55496d1e2dc3"}
    call = next(b for t in turns for b in t.blocks if b.type == "tool_use")
    result = next(b for t in turns for b in t.blocks if b.type == "tool_result")
    assert call.tool_name == result.tool_name == "web_search"
    assert json.loads(call.text)["query"] == "Google's latest AI worlds model"
    assert "Genie 3" in result.text
    # The cwd comes from the <environment_context> block: legacy files have no session_meta.
    assert turns[-1].workdir == "/Users/kobra/Dev/Chatgpt-Apps/ocodex-labs/ocodex/codex-rs"
    assert turns[-1].ts == "2025-08-30T12:52:41.218Z"  # carried forward from the first line


def test_pi_v3_tree() -> None:
    turns = _parse("pi/jazzyalex__agent-sessions__stage0__pi__small.jsonl")
    assert turns[0].turn_id == "30c6a75f"
    # Its parentId is a thinking_level_change whose parent is a model_change: no turn above.
    assert turns[0].parent_turn_id is None
    assert turns[1].parent_turn_id == "30c6a75f"
    compaction = turns[2]
    assert (compaction.role, compaction.blocks[0].noise) == ("system", "compaction")
    assert turns[3].parent_turn_id == compaction.turn_id
    assert turns[0].blocks[0].text == (
        "Read hello.py and summarize what it prints without editing files."
    )


def test_pi_v1_linear() -> None:
    turns = _parse("pi/badlogic__pi-mono__large-session.jsonl")
    session = "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
    assert turns[0].turn_id == f"{session}#1"
    assert turns[1].parent_turn_id == turns[0].turn_id
    angry = "you fucked thet component up REAL fucking good"
    assert any(t.startswith(angry) for t in _texts(turns))
    results = [b for t in turns for b in t.blocks if b.type == "tool_result"]
    assert {b.tool_name for b in results} >= {"read", "bash", "edit"}
    assert all(t.workdir == "/Users/badlogic/workspaces/pi-mono" for t in turns)


def test_hermes_gateway_transcript() -> None:
    turns = _parse("hermes/eriktobben__hermes-backup__20260429_081038_cece0a7d.jsonl")
    assert [t.session_id for t in turns] == ["20260429_081038_cece0a7d"] * 2
    assert turns[0].blocks[0].text == "[Tobben] Hei"
    assert turns[1].role == "assistant"
    assert turns[1].ts == "2026-04-29T08:10:43.401Z"


def test_hermes_trajectory() -> None:
    turns = _parse("hermes/Gabrie-yx__lucifexia__trajectory_samples.jsonl")
    assert turns[0].session_id.startswith("traj-")
    assert turns[0].blocks[0].text.startswith("respond only with: Hello! I am Lucifex Agent.")
    reply = turns[1]
    assert [b.type for b in reply.blocks] == ["thinking", "text"]
    assert reply.blocks[1].text == "Hello! I am Lucifex Agent. How can I help you today?"
    assert "<think>" not in reply.blocks[0].text


# --------------------------------------------------------------------------------------------
# Noise decisions, each on real fixture content
# --------------------------------------------------------------------------------------------


def test_noise_system_reminder_split_from_tool_result() -> None:
    rel = SUBAGENT_REL
    turns = _parse(rel)
    reminders = [b for t in turns for b in t.blocks if b.noise == noise.SYSTEM_REMINDER]
    assert len(reminders) == 10
    assert all(b.text.startswith("<system-reminder>") for b in reminders)
    assert "considered malware" in reminders[0].text
    results = [b for t in turns for b in t.blocks if b.type == "tool_result"]
    assert not any("<system-reminder>" in b.text for b in results)
    assert any("Initialize provider plugins" in b.text for b in results)


def test_noise_slash_command_wrappers() -> None:
    turns = _parse("claude/marot__spotter__tool_heavy.jsonl")
    blocks = [b for t in turns for b in t.blocks]
    command = next(b for b in blocks if b.noise == noise.COMMAND)
    assert command.text.startswith("<command-name>/mcp</command-name>")
    assert "<command-args></command-args>" in command.text  # one block for the whole wrapper
    output = next(b for b in blocks if b.noise == noise.COMMAND_OUTPUT)
    assert "Reconnected to tidewave." in output.text
    caveat = next(b for b in blocks if b.noise == noise.META)
    assert "<local-command-caveat>" in caveat.text
    interrupts = [b for b in blocks if b.noise == noise.INTERRUPT]
    assert [b.text for b in interrupts] == ["[Request interrupted by user]"] * 2
    # The user's own prompt next to them is untouched.
    assert any(b.text == "start phoenix in background" and b.noise is None for b in blocks)


def test_noise_caveat_without_tags() -> None:
    turns = _parse("claude/daaain__claude-code-log__edge_cases.jsonl")
    caveat = next(t for t in turns if t.turn_id == "edge_006")
    assert caveat.blocks[0].noise == noise.COMMAND
    stdout = next(t for t in turns if t.turn_id == "edge_008")
    assert stdout.blocks[0].noise == noise.COMMAND_OUTPUT


def test_noise_compaction_summary_and_image() -> None:
    turns = _parse("claude/jazzyalex__agent-sessions__stage0__claude__small.jsonl")
    summary = next(t for t in turns if t.turn_id == "u3")
    assert summary.blocks[0].noise == noise.COMPACTION
    image = next(b for t in turns for b in t.blocks if b.noise == noise.IMAGE)
    assert re.fullmatch(r"\[[^\]]* base64, \d+ KB elided\]", image.text)
    assert "trimmed for fixture" not in image.text.split("base64")[1]


def test_noise_task_notification_record_is_not_conversation() -> None:
    result = parse_file(trace("claude/huggingface__funes__claude_session.jsonl"), "claude")
    assert result.skipped["ignored:queue-operation"] == 1
    assert not any("<task-notification>" in t for t in _texts(result.turns))
    segs = noise.claude_user_text(
        json.loads(trace("claude/huggingface__funes__claude_session.jsonl").read_text()
                   .splitlines()[0])["content"]
    )
    assert [r for _, r in segs] == [noise.TASK_NOTIFICATION]


def test_noise_codex_injected_context() -> None:
    rel = (
        "codex/codemie-ai__codemie-code__rollout-2026-05-11T11-26-55-"
        "019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
    )
    turns = _parse(rel)
    developer = turns[0]
    assert developer.role == "system"
    assert [b.noise for b in developer.blocks] == [noise.INSTRUCTIONS] * 4
    assert developer.blocks[0].text.startswith("<permissions instructions>")
    injected = turns[1]
    assert [b.noise for b in injected.blocks] == [noise.AGENTS_MD, noise.ENVIRONMENT]
    assert injected.blocks[0].text.startswith("# AGENTS.md instructions for")
    # Tags inside tool output are code the agent read, not scaffolding.
    outputs = [b for t in turns for b in t.blocks if b.type == "tool_result"]
    assert any("<command-name>" in b.text and b.noise is None for b in outputs)


def test_noise_codex_legacy_user_instructions() -> None:
    rel = (
        "codex/JaydenXsoe__ocodex__rollout-2025-08-30T12-52-41-"
        "9aa0221f-be4a-424a-8633-55496d1e2dc3.jsonl"
    )
    turns = _parse(rel)
    assert turns[0].blocks[0].noise == noise.AGENTS_MD
    assert turns[1].blocks[0].noise == noise.ENVIRONMENT
    assert turns[2].blocks[0].noise is None


def test_noise_codex_compacted_summary() -> None:
    turns = _parse("codex/jazzyalex__agent-sessions__stage0__codex__small.jsonl")
    compactions = [t for t in turns if t.blocks[0].noise == noise.COMPACTION]
    assert len(compactions) == 5
    assert all(t.role == "system" for t in compactions)


def test_noise_pi_compaction() -> None:
    turns = _parse("pi/jazzyalex__agent-sessions__stage0__pi__small.jsonl")
    assert [t.blocks[0].noise for t in turns] == [
        None, None, noise.COMPACTION, None, None, noise.COMPACTION
    ]


def test_noise_hermes_system_prompt_dropped() -> None:
    result = parse_file(trace("hermes/Gabrie-yx__lucifexia__trajectory_samples.jsonl"), "hermes")
    assert result.skipped["ignored:system-prompt"] == 1
    assert not any("<tools>" in t for t in _texts(result.turns))


def test_noise_base64_in_real_record_elided(tmp_path: Path) -> None:
    """A real Claude user record with a real-sized PNG pasted in: the payload is elided."""
    import base64
    import zlib

    lines = trace("claude/simonw__claude-code-transcripts__sample_session.jsonl").read_text()
    record = json.loads(lines.splitlines()[1])
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + zlib.compress(bytes(range(256)) * 400)).decode()
    record["message"]["content"] = [
        {"type": "text", "text": "Create a hello world function, like this mockup"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}},
        {"type": "text", "text": f"inline: data:image/png;base64,{png} end"},
    ]
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(record) + "\n")
    blocks = parse_file(path, "claude").turns[0].blocks
    kb = len(png) * 3 // 4 // 1024 + 1
    assert blocks[0].text == "Create a hello world function, like this mockup"
    assert (blocks[1].text, blocks[1].noise) == (f"[image/png base64, {kb} KB elided]", "image")
    assert blocks[2].text == f"inline: [image/png base64, {kb} KB elided] end"
    assert all(png[:100] not in b.text for b in blocks)


def test_base64_elision_leaves_code_and_hashes_alone() -> None:
    sha = "a" * 40 + "0123456789abcdef" * 10
    code = "const x = foo(bar, baz);\n" * 100
    assert noise.elide_base64(sha) == sha
    assert noise.elide_base64(code) == code
    assert noise.elide_base64("A" * 2000) == "A" * 2000


# --------------------------------------------------------------------------------------------
# API edges
# --------------------------------------------------------------------------------------------


def test_incomplete_last_line_is_not_consumed(tmp_path: Path) -> None:
    src = trace("claude/simonw__claude-code-transcripts__sample_session.jsonl").read_bytes()
    cut = src.rstrip(b"\n").rfind(b"\n") + 1
    path = tmp_path / "live.jsonl"
    path.write_bytes(src[: cut + 40])  # half of the last record
    first = parse_file(path, "claude")
    assert first.end_offset == cut
    assert len(first.turns) == 6
    path.write_bytes(src)
    rest = parse_file(path, "claude", start_offset=first.end_offset, state=first.state)
    assert [t.blocks[0].text for t in rest.turns] == ["Done! The hello function is ready."]
    assert rest.turns[0].seq == 6


def test_final_consumes_a_last_line_without_newline() -> None:
    path = trace("claude/daaain__claude-code-log__edge_cases.jsonl")
    assert not path.read_bytes().endswith(b"\n")
    live = parse_file(path, "claude")
    done = parse_file(path, "claude", final=True)
    assert live.end_offset < done.end_offset == path.stat().st_size
    assert done.skipped["ignored:summary"] == live.skipped["ignored:summary"] + 1
    assert comparable(done.turns) == comparable(live.turns)


def test_state_is_json_and_bounded() -> None:
    path = trace("pi/badlogic__pi-mono__large-session.jsonl")
    result = parse_file(path, "pi")
    encoded = json.dumps(result.state)
    assert json.loads(encoded) == result.state
    assert len(encoded) < 64_000
    for rel in EXPECTED:
        state = parse_file(trace(rel), EXPECTED[rel].harness).state
        assert len(json.dumps(state)) < 200_000


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(UnknownHarnessError):
        parse_file(trace("pi/huggingface__funes__pi_session.jsonl"), "windsurf")
    with pytest.raises(ParseError):
        parse_file(tmp_path / "missing.jsonl", "claude")
    small = tmp_path / "small.jsonl"
    small.write_text('{"type": "summary"}\n')
    with pytest.raises(SourceTruncatedError):
        parse_file(small, "claude", start_offset=10_000)
    state = parse_file(small, "claude").state
    with pytest.raises(ParseError):
        parse_file(small, "codex", state=state)
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\nworld\n")
    assert detect_harness(junk) is None
    with pytest.raises(UnknownHarnessError):
        parse_file(junk, None)
    assert parse_file(trace("pi/huggingface__funes__pi_session.jsonl"), None).turns


def test_cursor_kinds(tmp_path: Path) -> None:
    assert cursor_kind(trace("pi/huggingface__funes__pi_session.jsonl"), "pi") == "bytes"
    db = tmp_path / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
    conn.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT)")
    conn.commit()
    conn.close()
    assert cursor_kind(db, "hermes") == "rowid"
    assert detect_harness(db) == "hermes"


def test_fixture_folder_location() -> None:
    assert TRACES.name == "traces" and TRACES.parent.name == "fixtures"


# --------------------------------------------------------------------------------------------
# Hermes state.db (schema of NousResearch/hermes-agent hermes_state, current and early)
# --------------------------------------------------------------------------------------------

#: The columns of the current schema (SCHEMA_VERSION 30) that the parser may touch, plus a
#: few it must ignore.
HERMES_SCHEMA_CURRENT = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
    end_reason TEXT, message_count INTEGER DEFAULT 0, cwd TEXT, git_branch TEXT, title TEXT,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT, reasoning TEXT,
    reasoning_content TEXT, reasoning_details TEXT, codex_reasoning_items TEXT,
    _compressed_summary INTEGER NOT NULL DEFAULT 0, active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0, display_kind TEXT
);
CREATE INDEX idx_messages_session_id ON messages(session_id, id);
"""

#: An early schema: no cwd, no reasoning, no compression flags.
HERMES_SCHEMA_EARLY = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT, model_config TEXT,
    system_prompt TEXT, parent_session_id TEXT, started_at REAL NOT NULL, ended_at REAL,
    end_reason TEXT, message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
    timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT
);
"""

T0 = 1777450243.401  # 2026-04-29T08:10:43.401Z


def _hermes_db(path: Path, schema: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(schema)
    return conn


def _add(conn: sqlite3.Connection, session: str, role: str, content: str | None, ts: float,
         **cols: object) -> None:
    names = ["session_id", "role", "content", "timestamp", *cols]
    marks = ", ".join("?" for _ in names)
    conn.execute(
        f"INSERT INTO messages ({', '.join(names)}) VALUES ({marks})",
        (session, role, content, ts, *cols.values()),
    )


def _fake_repo(root: Path, url: str) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {url}\n')
    return root


def test_hermes_state_db_current_schema(tmp_path: Path) -> None:
    repo = _fake_repo(tmp_path / "work", "git@github.com:acme/widget.git")
    db = tmp_path / "state.db"
    conn = _hermes_db(db, HERMES_SCHEMA_CURRENT)
    conn.execute(
        "INSERT INTO sessions (id, source, started_at, cwd) VALUES (?, 'cli', ?, ?)",
        ("20260429_081038_cece0a7d", T0, str(repo)),
    )
    conn.execute(
        "INSERT INTO sessions (id, source, started_at, parent_session_id) "
        "VALUES ('child', 'tool', ?, '20260429_081038_cece0a7d')",
        (T0,),
    )
    s = "20260429_081038_cece0a7d"
    calls = json.dumps([{"id": "call_1", "type": "function",
                         "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}])
    _add(conn, s, "system", "You are Hermes.", T0)
    _add(conn, s, "user", "why did we drop the streaming parser?", T0 + 1)
    _add(conn, s, "assistant", None, T0 + 2, tool_calls=calls, reasoning="Look at the repo.")
    _add(conn, "child", "user", "subagent task", T0 + 2.5)
    _add(conn, s, "tool", "a.txt\nb.txt", T0 + 3, tool_call_id="call_1")
    _add(conn, s, "assistant", "Because it could not resume.", T0 + 1.5)  # clock went back
    _add(conn, s, "user", "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns…", T0 + 4)
    _add(conn, s, "user", "summary row", T0 + 5, _compressed_summary=1)
    _add(conn, s, "user", '[IMPORTANT: The user has invoked the "work" skill…', T0 + 6)
    _add(conn, s, "user", "hidden scaffolding", T0 + 7, display_kind="hidden")
    _add(conn, s, "assistant", "", T0 + 8)
    conn.commit()

    result = parse_file(db, "hermes")
    assert detect_harness(db) == "hermes"
    turns = result.turns
    assert result.end_offset == 11 and result.state["last_id"] == 11
    assert dict(result.skipped) == {"empty": 1}
    main = [t for t in turns if t.session_id == s]
    assert [t.seq for t in main] == [1, 2, 3, 5, 6, 7, 8, 9, 10]  # message ids, in id order
    assert [t.turn_id for t in main][:2] == [f"{s}#1", f"{s}#2"]
    assert all(t.parent_turn_id == p.turn_id for p, t in itertools.pairwise(main))
    assert main[0].blocks[0].noise == "system"
    assert main[1].blocks[0].text == "why did we drop the streaming parser?"
    assert main[1].ts == "2026-04-29T08:10:44.401Z"
    assert main[1].workdir == str(repo)
    assert main[1].project == "github.com/acme/widget"
    assert main[1].extra == {"platform": "cli"}
    call = main[2]
    assert [b.type for b in call.blocks] == ["thinking", "tool_use"]
    assert (call.blocks[1].tool_name, call.blocks[1].text) == ("terminal", '{"command": "ls"}')
    assert main[3].role == "tool"
    assert (main[3].blocks[0].tool_name, main[3].blocks[0].tool_call_id) == ("terminal", "call_1")
    assert main[4].blocks[0].text == "Because it could not resume."
    assert [t.blocks[0].noise for t in main[5:]] == ["compaction", "compaction", "skill", "hidden"]
    child = next(t for t in turns if t.session_id == "child")
    assert child.parent_session_id == s and child.workdir is None
    assert main[3].source is not None and (main[3].source.start, main[3].source.end) == (5, 6)
    conn.close()


def test_hermes_state_db_early_schema_and_incremental(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    writer = _hermes_db(db, HERMES_SCHEMA_EARLY)
    writer.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s1', 'telegram', ?)",
                   (T0,))
    for i in range(5):
        _add(writer, "s1", "user" if i % 2 == 0 else "assistant", f"message {i}", T0 + i)
    writer.commit()
    first = parse_file(db, "hermes")
    assert [t.blocks[0].text for t in first.turns] == [f"message {i}" for i in range(5)]
    assert all(t.workdir is None for t in first.turns)
    assert cursor_kind(db, "hermes") == "rowid"

    # The agent keeps writing (WAL): uncommitted rows are invisible, committed ones resume.
    for i in range(5, 8):
        _add(writer, "s1", "user", f"message {i}", T0 + i)
    pending = parse_file(db, "hermes", start_offset=first.end_offset,
                         state=json.loads(json.dumps(first.state)))
    assert pending.turns == [] and pending.end_offset == first.end_offset
    writer.commit()
    second = parse_file(db, "hermes", start_offset=first.end_offset,
                        state=json.loads(json.dumps(first.state)))
    assert [t.blocks[0].text for t in second.turns] == ["message 5", "message 6", "message 7"]
    assert second.turns[0].parent_turn_id == first.turns[-1].turn_id
    whole = parse_file(db, "hermes")
    assert comparable(first.turns + second.turns) == comparable(whole.turns)
    writer.close()


def test_hermes_state_db_is_opened_read_only(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    conn = sqlite3.connect(db)
    conn.executescript(HERMES_SCHEMA_EARLY)
    conn.execute("INSERT INTO sessions (id, source, started_at) VALUES ('s', 'cli', 0)")
    _add(conn, "s", "user", "hello", T0)
    conn.commit()
    conn.close()
    before = (db.read_bytes(), db.stat().st_mtime_ns, sorted(p.name for p in tmp_path.iterdir()))
    db.chmod(0o444)
    try:
        assert parse_file(db, "hermes").turns[0].blocks[0].text == "hello"
    finally:
        db.chmod(0o644)
    after = (db.read_bytes(), db.stat().st_mtime_ns, sorted(p.name for p in tmp_path.iterdir()))
    assert before == after


def test_sqlite_that_is_not_hermes(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE things (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    assert detect_harness(db) is None
    with pytest.raises(ParseError):
        parse_file(db, "hermes")


# --------------------------------------------------------------------------------------------
# Generic import (docs/import.md)
# --------------------------------------------------------------------------------------------

IMPORT_MESSAGES: list[dict[str, Any]] = [
    {"session_id": "conv-1", "role": "system", "content": "You are a helpful agent.",
     "cwd": "/nonexistent/project", "timestamp": "2026-03-01T10:00:00Z"},
    {"session_id": "conv-1", "role": "user", "content": "Why is the parser streaming?",
     "timestamp": 1772359260},
    {"session_id": "conv-1", "role": "assistant", "content": None,
     "reasoning": "Check the design notes first.",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "read_file", "arguments": "{\"path\": \"DESIGN.md\"}"}}]},
    {"session_id": "conv-1", "role": "tool", "tool_call_id": "c1", "content": "# Design"},
    {"session_id": "conv-1", "role": "assistant",
     "content": [{"type": "text", "text": "Because files grow while agents write them."}]},
]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_import_message_per_line(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "agent.jsonl", IMPORT_MESSAGES)
    assert detect_harness(path) == "import"
    turns = parse_file(path, "import").turns
    assert [t.role for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert {t.session_id for t in turns} == {"conv-1"}
    assert [t.turn_id for t in turns] == [f"conv-1#{i}" for i in range(5)]
    assert turns[0].blocks[0].noise == "system"
    assert turns[1].ts == "2026-03-01T10:01:00.000Z"
    assert [b.type for b in turns[2].blocks] == ["thinking", "tool_use"]
    assert turns[2].blocks[1].text == '{"path": "DESIGN.md"}'
    assert (turns[3].blocks[0].tool_name, turns[3].blocks[0].tool_call_id) == ("read_file", "c1")
    assert turns[4].blocks[0].text == "Because files grow while agents write them."
    assert all(t.workdir == "/nonexistent/project" for t in turns)
    assert turns[4].parent_turn_id == turns[3].turn_id


def test_import_default_session_follows_content_not_name(tmp_path: Path) -> None:
    rows = [{k: v for k, v in m.items() if k != "session_id"} for m in IMPORT_MESSAGES]
    a = parse_file(_jsonl(tmp_path / "a.jsonl", rows), "import").turns
    b = parse_file(_jsonl(tmp_path / "renamed.jsonl", rows), "import").turns
    assert {t.session_id for t in a} == {t.session_id for t in b}
    assert a[0].session_id.startswith("import-")
    other = parse_file(_jsonl(tmp_path / "c.jsonl", rows[1:]), "import").turns
    assert other[0].session_id != a[0].session_id


def test_import_conversation_per_line_and_sharegpt(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"id": "chat-42", "cwd": "/repo", "timestamp": "2026-03-02T09:00:00+01:00",
         "messages": [{k: v for k, v in m.items() if k != "session_id"}
                      for m in IMPORT_MESSAGES[1:]]},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
    ]
    path = _jsonl(tmp_path / "convs.jsonl", rows)
    assert detect_harness(path) == "import"
    turns = parse_file(path, "import").turns
    chat = [t for t in turns if t.session_id == "chat-42"]
    assert [t.turn_id for t in chat] == [f"chat-42#{i}" for i in range(4)]
    assert chat[0].ts == "2026-03-01T10:01:00.000Z"  # the message's own time wins
    assert chat[1].ts == "2026-03-02T08:00:00.000Z"  # else the conversation's, in UTC
    assert chat[2].blocks[0].tool_name == "read_file"
    assert chat[0].workdir == "/repo"
    share = [t for t in turns if t.session_id != "chat-42"]
    assert [(t.role, t.blocks[0].text) for t in share] == [("user", "hi"), ("assistant", "hello")]
    assert share[0].session_id.startswith("import-")


def test_import_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = [
        {"session_id": m["session_id"], "role": m["role"],
         "content": m["content"] if isinstance(m.get("content"), str) else json.dumps(m["content"])
         if m.get("content") is not None else None,
         "tool_calls": json.dumps(m["tool_calls"]) if "tool_calls" in m else None,
         "tool_call_id": m.get("tool_call_id"), "timestamp": str(m.get("timestamp", ""))}
        for m in IMPORT_MESSAGES
    ]
    path = tmp_path / "agent.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert detect_harness(path) == "import"
    assert cursor_kind(path, "import") == "rows"
    result = parse_file(path, "import")
    assert [t.role for t in result.turns] == ["system", "user", "assistant", "tool", "assistant"]
    assert result.turns[2].blocks[0].tool_name == "read_file"
    assert result.turns[3].blocks[0].tool_name == "read_file"
    assert result.end_offset == 5
    assert result.turns[1].source is not None and result.turns[1].source.start == 1
    # A Parquet export that is rewritten with more rows resumes at the row cursor.
    grown = tmp_path / "grown.parquet"
    pq.write_table(pa.Table.from_pylist(rows[:3]), grown)
    head = parse_file(grown, "import")
    assert head.end_offset == 3
    pq.write_table(pa.Table.from_pylist(rows), grown)
    tail = parse_file(grown, "import", start_offset=3, state=json.loads(json.dumps(head.state)))
    whole = parse_file(grown, "import")
    assert comparable(head.turns + tail.turns) == comparable(whole.turns)


def test_import_parquet_timestamp_column(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    import pyarrow as pa
    import pyarrow.parquet as pq
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist([
        {"role": "user", "content": "hi", "timestamp": datetime(2026, 3, 1, 10, tzinfo=UTC)},
    ]), path)
    turn = parse_file(path, "import").turns[0]
    assert turn.ts == "2026-03-01T10:00:00.000Z"


# --------------------------------------------------------------------------------------------
# Documented shapes the fixtures do not happen to contain
# --------------------------------------------------------------------------------------------


def test_hermes_trajectory_tool_calls(tmp_path: Path) -> None:
    convo = {
        "conversations": [
            {"from": "system", "value": "You are a function calling AI model. <tools>[]</tools>"},
            {"from": "human", "value": "list files"},
            {"from": "gpt", "value": "<think>\nuse the terminal\n</think>\n<tool_call>\n"
                                     '{"name": "terminal", "arguments": {"command": "ls"}}\n'
                                     "</tool_call>"},
            {"from": "tool", "value": '<tool_response>\n{"tool_call_id": "t1", "name": '
                                      '"terminal", "content": "a.txt"}\n</tool_response>'},
            {"from": "gpt", "value": "There is one file, a.txt."},
        ],
        "timestamp": "2026-07-10T09:15:24.298255", "model": "m", "completed": True,
    }
    path = _jsonl(tmp_path / "trajectories.jsonl", [convo])
    assert detect_harness(path) == "hermes"
    result = parse_file(path, "hermes")
    turns = result.turns
    assert [t.role for t in turns] == ["user", "assistant", "tool", "assistant"]
    assert [b.type for b in turns[1].blocks] == ["thinking", "tool_use"]
    assert (turns[1].blocks[1].tool_name, turns[1].blocks[1].text) == (
        "terminal", '{"command": "ls"}'
    )
    result_block = turns[2].blocks[0]
    assert (result_block.tool_name, result_block.tool_call_id, result_block.text) == (
        "terminal", "t1", "a.txt"
    )
    assert result.skipped == {"ignored:system-prompt": 1}


def test_hermes_gateway_tool_messages(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {"role": "session_meta", "tools": "[]", "model": "m", "platform": "cli",
         "timestamp": "2026-04-29T08:10:43.401215"},
        {"role": "user", "content": "list files", "timestamp": "2026-04-29T08:10:44"},
        {"role": "assistant", "content": "", "reasoning": "Use the terminal.",
         "tool_calls": [{"id": "call_9", "type": "function",
                         "function": {"name": "terminal", "arguments": "{\"command\":\"ls\"}"}}],
         "timestamp": "2026-04-29T08:10:45"},
        {"role": "tool", "tool_call_id": "call_9", "content": "a.txt",
         "timestamp": "2026-04-29T08:10:46"},
    ]
    path = _jsonl(tmp_path / "20260429_081038_cece0a7d.jsonl", rows)
    assert detect_harness(path) == "hermes"
    turns = parse_file(path, "hermes").turns
    assert [t.turn_id for t in turns] == [f"20260429_081038_cece0a7d#{i}" for i in (1, 2, 3)]
    assert [b.type for b in turns[1].blocks] == ["thinking", "tool_use"]
    assert turns[2].blocks[0].tool_name == "terminal"


def test_pi_extended_messages(tmp_path: Path) -> None:
    png = "iVBORw0KGgoAAAANSUhEUgAA" * 40
    rows: list[dict[str, Any]] = [
        {"type": "session", "version": 3, "id": "sess-1", "timestamp": "2026-01-01T00:00:00Z",
         "cwd": "/w", "parentSession": "/x/2025-12-31T00-00-00-000Z_" + "0" * 8 + "-"
         + "0" * 4 + "-" + "0" * 4 + "-" + "0" * 4 + "-" + "1" * 12 + ".jsonl"},
        {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:01Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "look"},
                                                 {"type": "image", "data": png,
                                                  "mimeType": "image/png"}]}},
        {"type": "message", "id": "b", "parentId": "a", "timestamp": "2026-01-01T00:00:02Z",
         "message": {"role": "bashExecution", "command": "make test", "output": "ok",
                     "exitCode": 0}},
        {"type": "label", "id": "c", "parentId": "b", "targetId": "a", "label": "x"},
        {"type": "branch_summary", "id": "d", "parentId": "c", "fromId": "b",
         "summary": "Tried approach A."},
        {"type": "custom_message", "id": "e", "parentId": "d", "customType": "ext",
         "content": "Injected context", "display": False},
    ]
    path = _jsonl(tmp_path / "s.jsonl", rows)
    turns = parse_file(path, "pi").turns
    assert all(t.parent_session_id == "00000000-0000-0000-0000-111111111111" for t in turns)
    assert [b.noise for b in turns[0].blocks] == [None, "image"]
    assert turns[0].blocks[1].text.startswith("[image/png base64, ")
    assert [(b.type, b.tool_name) for b in turns[1].blocks] == [
        ("tool_use", "bash"), ("tool_result", "bash")
    ]
    assert turns[2].parent_turn_id == "b"  # through the label entry
    assert [t.blocks[0].noise for t in turns[2:]] == ["branch-summary", "extension"]


def test_codex_shapes(tmp_path: Path) -> None:
    env = {"timestamp": "2026-01-01T00:00:00Z"}
    rows: list[dict[str, Any]] = [
        {**env, "type": "session_meta", "payload": {"id": "s", "cwd": "/w",
                                                    "parent_thread_id": "p"}},
        {**env, "type": "response_item", "payload": {
            "type": "local_shell_call", "call_id": "c1",
            "action": {"type": "exec", "command": ["ls"]}}},
        {**env, "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "c1",
            "output": "{\"output\": \"a.txt\\n\", \"metadata\": {\"exit_code\": 0}}"}},
        {**env, "type": "compacted", "payload": {"message": "We listed files.",
                                                 "replacement_history": []}},
        {**env, "type": "response_item", "payload": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "<turn_aborted>\n</turn_aborted>"}]}},
    ]
    turns = parse_file(_jsonl(tmp_path / "rollout-x.jsonl", rows), "codex").turns
    assert turns[0].blocks[0].tool_name == "local_shell"
    assert (turns[1].blocks[0].tool_name, turns[1].blocks[0].text) == ("local_shell", "a.txt\n")
    assert (turns[2].role, turns[2].blocks[0].noise) == ("system", "compaction")
    assert turns[3].blocks[0].noise == "interrupt"
    assert all(t.parent_session_id == "p" for t in turns)


def test_claude_isMeta_skill_and_acompact(tmp_path: Path) -> None:
    base = {"sessionId": "s", "cwd": "/w", "timestamp": "2026-01-01T00:00:00Z"}
    rows: list[dict[str, Any]] = [
        {**base, "type": "user", "uuid": "u1", "parentUuid": None, "isMeta": True,
         "message": {"role": "user", "content": [
             {"type": "text", "text": "Base directory for this skill: /skills/pdf\n\n# PDF"}]}},
        {**base, "type": "user", "uuid": "u2", "parentUuid": "u1",
         "message": {"role": "user", "content": "fix it <system-reminder>todo list empty"
                                                "</system-reminder>"}},
        {**base, "type": "assistant", "uuid": "a1", "parentUuid": "u2",
         "isApiErrorMessage": True,
         "message": {"role": "assistant", "content": [{"type": "text", "text": "API Error"}]}},
    ]
    turns = parse_file(_jsonl(tmp_path / "s.jsonl", rows), "claude").turns
    assert turns[0].blocks[0].noise == "skill"
    assert [(b.text, b.noise) for b in turns[1].blocks] == [
        ("fix it", None), ("<system-reminder>todo list empty</system-reminder>", "system-reminder")
    ]
    assert turns[2].blocks[0].noise == "api-error"
    compact = tmp_path / "s" / "subagents" / "agent-acompact-1a2b.jsonl"
    compact.parent.mkdir(parents=True)
    _jsonl(compact, [{**base, "type": "user", "uuid": "x", "isSidechain": True,
                      "agentId": "acompact-1a2b",
                      "message": {"role": "user", "content": "Summarize the conversation"}}])
    sub = parse_file(compact, "claude").turns
    assert sub[0].session_id == "s:agent-acompact-1a2b"
    assert sub[0].blocks[0].noise == "compaction"
