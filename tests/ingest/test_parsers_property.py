"""Property tests: no input crashes a parser, and resuming never changes the result."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from funes.ingest.parsers import parse_file
from tests.ingest.conftest import all_traces, comparable, line_ends, parse_growing

HARNESSES = ("claude", "codex", "pi", "hermes", "copilot", "cursor", "import")
MAGIC = (b"SQLite format 3\x00", b"PAR1")
FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# Field names and values the real formats use, so generated records reach deep code paths
# with every wrong type imaginable.
KEYS = [
    "type", "role", "message", "content", "text", "thinking", "id", "uuid", "parentUuid",
    "parentId", "sessionId", "session_id", "agentId", "isSidechain", "isMeta",
    "isCompactSummary", "isApiErrorMessage", "cwd", "timestamp", "name", "input", "arguments",
    "tool_use_id", "toolCallId", "toolName", "tool_calls", "tool_call_id", "function",
    "payload", "summary", "call_id", "output", "source", "data", "media_type", "mimeType",
    "image_url", "messages", "conversations", "from", "value", "version", "subtype",
    "logicalParentUuid", "sourceToolUseID", "toolUseResult", "reasoning", "command",
    "instructions", "record_type", "phase", "namespace", "action", "parent_thread_id",
    "parentSession", "customType", "model", "completed", "display_kind",
]
VALUES = [
    "user", "assistant", "system", "tool", "developer", "toolResult", "bashExecution",
    "compactionSummary", "branchSummary", "custom", "text", "thinking", "tool_use",
    "tool_result", "image", "document", "server_tool_use", "input_text", "output_text",
    "input_image", "summary_text", "reasoning_text", "toolCall", "session", "message",
    "compaction", "branch_summary", "custom_message", "model_change", "session_meta",
    "response_item", "event_msg", "turn_context", "compacted", "function_call",
    "function_call_output", "custom_tool_call", "custom_tool_call_output", "local_shell_call",
    "web_search_call", "reasoning", "user_message", "agent_message", "agent_reasoning",
    "agent_message", "summary", "progress", "attachment", "compact_boundary", "human", "gpt",
    "session_meta", "u1", "u2", "u3", "call_1", "Bash", "state",
    "<system-reminder>remember</system-reminder> hi", "<command-name>/x</command-name>",
    "[Request interrupted by user]", "<environment_context><cwd>/tmp</cwd></environment_context>",
    "data:image/png;base64," + "iVBORw0KGgo" * 8, "<think>hm</think>ok<tool_call>{}</tool_call>",
    "<tool_response>{\"name\": 1}</tool_response>", "2026-01-01T00:00:00Z", "/tmp", "acompact",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**66), max_value=2**66)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(VALUES)
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), children, max_size=5),
    max_leaves=8,
)
HEADS: list[dict[str, Any]] = [
    {}, {"type": "user"}, {"type": "assistant"}, {"type": "system"}, {"type": "summary"},
    {"type": "session_meta"}, {"type": "response_item"}, {"type": "event_msg"},
    {"type": "compacted"}, {"type": "message"}, {"type": "session"}, {"type": "compaction"},
    {"type": "custom_message"}, {"type": "function_call"}, {"role": "user"},
    {"role": "assistant"}, {"role": "tool"}, {"role": "session_meta"},
    {"record_type": "state"}, {"id": "x", "instructions": "y"},
]
records = st.tuples(
    st.sampled_from(HEADS), st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6)
).map(lambda pair: {**pair[1], **pair[0]})
lines = st.one_of(
    records.map(lambda r: json.dumps(r).encode() + b"\n"),
    json_values.map(lambda v: json.dumps(v).encode() + b"\n"),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"") + b"\n"),
)


def _write(data: bytes) -> Path:
    fd, name = tempfile.mkstemp(suffix=".jsonl")
    with open(fd, "wb") as f:
        f.write(data)
    return Path(name)


@FAST
@given(data=st.binary(max_size=2000), harness=st.sampled_from(HARNESSES))
def test_arbitrary_bytes_never_crash(data: bytes, harness: str) -> None:
    assume(not data.startswith(MAGIC))
    path = _write(data)
    try:
        result = parse_file(path, harness)
    finally:
        path.unlink()
    last_newline = data.rfind(b"\n") + 1
    assert result.end_offset == last_newline
    json.dumps(result.state)


@FAST
@given(body=st.lists(lines, max_size=25), tail=st.binary(max_size=30),
       harness=st.sampled_from(HARNESSES))
def test_wrong_types_and_unknown_records_are_skipped_and_counted(
    body: list[bytes], tail: bytes, harness: str
) -> None:
    data = b"".join(body) + tail.replace(b"\n", b"")
    assume(not data.startswith(MAGIC))  # a database or Parquet file is not JSONL
    path = _write(data)
    try:
        result = parse_file(path, harness)
    finally:
        path.unlink()
    # Every complete line either yielded turns or was counted; none defeated the parser.
    assert result.skipped["malformed-record"] == 0
    assert result.end_offset == len(b"".join(body))
    if harness in ("claude", "codex", "pi"):
        with_turns = len({t.source.start for t in result.turns if t.source})
        assert with_turns + sum(result.skipped.values()) == len(body)
    for turn in result.turns:
        assert turn.blocks and all(b.text.strip() for b in turn.blocks)
    json.loads(json.dumps(result.state))


@FAST
@given(body=st.lists(lines, min_size=1, max_size=20), harness=st.sampled_from(HARNESSES),
       cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=4))
def test_resume_equals_whole_on_generated_files(
    body: list[bytes], harness: str, cuts: list[int]
) -> None:
    data = b"".join(body)
    assume(not data.startswith(MAGIC))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        source = root / "src.jsonl"
        source.write_bytes(data)
        (root / "whole").mkdir()
        (root / "pieces").mkdir()
        whole_path = root / "whole" / "src.jsonl"
        whole_path.write_bytes(data)
        whole = parse_file(whole_path, harness)
        points = sorted({c % (len(data) + 1) for c in cuts})
        turns, skipped, offset = parse_growing(source, harness, points, root / "pieces")
    assert comparable(turns) == comparable(whole.turns)
    assert skipped == dict(whole.skipped)
    assert offset == whole.end_offset


REAL_LINES = [
    (path.parent.name, line)
    for path in all_traces()
    for line in path.read_bytes().splitlines()[:40]
    if len(line) < 20_000
]


def _mutate(value: Any, path: list[int], replacement: Any) -> Any:
    """Replace the node reached by walking ``path`` (indexes mod fan-out) with ``replacement``."""
    if not path or not isinstance(value, dict | list) or not value:
        return replacement
    if isinstance(value, dict):
        keys = list(value)
        key = keys[path[0] % len(keys)]
        return {**value, key: _mutate(value[key], path[1:], replacement)}
    i = path[0] % len(value)
    return [*value[:i], _mutate(value[i], path[1:], replacement), *value[i + 1 :]]


@FAST
@given(
    picks=st.lists(
        st.tuples(
            st.integers(min_value=0),
            st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=5),
            json_values,
            st.integers(min_value=0, max_value=3),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_mutated_real_records_never_crash(picks: list[tuple[int, list[int], Any, int]]) -> None:
    assume(REAL_LINES)
    out: list[bytes] = []
    harness = REAL_LINES[picks[0][0] % len(REAL_LINES)][0]
    for index, path, replacement, mode in picks:
        _kind, raw = REAL_LINES[index % len(REAL_LINES)]
        if mode == 0:  # a line cut short (the rest of a crash-truncated write)
            out.append(raw[: len(raw) // 2])
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            out.append(raw)
            continue
        out.append(json.dumps(_mutate(record, path, replacement)).encode())
    data = b"\n".join(out) + b"\n"
    path_ = _write(data)
    try:
        result = parse_file(path_, harness)
    finally:
        path_.unlink()
    assert result.skipped["malformed-record"] == 0
    assert result.end_offset == len(data)


SMALL_TRACES = [p for p in all_traces() if p.stat().st_size < 200_000]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(which=st.integers(min_value=0), cut_picks=st.lists(st.integers(min_value=0), max_size=5),
       mid=st.booleans())
def test_fixture_resume_at_random_cuts(which: int, cut_picks: list[int], mid: bool) -> None:
    assume(SMALL_TRACES)
    from funes.ingest.parsers import detect_harness

    source = SMALL_TRACES[which % len(SMALL_TRACES)]
    harness = detect_harness(source)
    assert harness is not None
    ends = line_ends(source)
    cuts = sorted({ends[c % len(ends)] - (7 if mid else 0) for c in cut_picks})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "whole").mkdir()
        (root / "pieces").mkdir()
        whole_path = root / "whole" / source.name
        whole_path.write_bytes(source.read_bytes())
        whole = parse_file(whole_path, harness)
        turns, skipped, _ = parse_growing(source, harness, [c for c in cuts if c > 0],
                                          root / "pieces")
    assert comparable(turns) == comparable(whole.turns)
    assert skipped == dict(whole.skipped)
