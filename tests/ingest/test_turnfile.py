"""Turn files (`.funes.jsonl` v1) as a source, and the turn contract every parser meets.

The rules are the Rust funes' (huggingface/funes docs/funes-jsonl.md): each is checked to refuse
the read and name the line and the field. A spool is indexed like any agent, incrementally;
a bad file is refused alone. And our own transcripts, written out as turn files, give exactly
the chunk ids their native parse gives: the two paths produce the same turn records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.ingest.chunking import chunk_turn
from funes.ingest.parsers import parse_file
from funes.ingest.parsers.turnfile import TurnFileError, to_record
from funes.ingest.sources import explicit_sources
from funes.model.turns import contract_problems
from funes.storage.repo import Repository
from tests.conftest import FIXTURES, OWN_FIXTURES

LINE = ('{"session_id":"s","turn_uuid":"t-1","seq":0,"ts":"2026-09-18T09:41:07Z","role":"user",'
        '"harness":"opencode","cwd":"/nonexistent/x","blocks":[{"block_type":"text","text":"hi"}]}')


def _turn(i: int, text: str, **fields: Any) -> str:
    record = {"format": 1, "session_id": "b3f2e0c4", "turn_uuid": f"t-{i:04d}", "seq": i,
              "ts": f"2026-09-18T09:41:{i:02d}Z", "role": "user" if i % 2 == 0 else "assistant",
              "harness": "opencode", "cwd": "/nonexistent/x",
              "blocks": [{"block_type": "text", "text": text}], **fields}
    return json.dumps(record) + "\n"


def _write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    return path


# The Rust funes' own cases (src/traces/funes_jsonl.rs), then funes's stricter ones.
BAD = [
    ('"session_id":"s"', '"session_id":"a:b"', "'session_id'", "contains ':'"),
    ('"turn_uuid":"t-1"', '"turn_uuid":"a:b"', "'turn_uuid'", "contains ':'"),
    ('"harness":"opencode"', '"harness":"OpenCode"', "'harness'", "[a-z0-9_-]"),
    ('"harness":"opencode"', '"harness":""', "'harness'", "[a-z0-9_-]"),
    ('"ts":"2026-09-18T09:41:07Z"', '"ts":"2026-09-18T09:41:07+00:00"', "'ts'", "RFC 3339"),
    ('"ts":"2026-09-18T09:41:07Z"', '"ts":"yesterdayZ"', "'ts'", "RFC 3339"),
    ('"ts":"2026-09-18T09:41:07Z"', '"ts":"2026-13-18T09:41:07Z"', "'ts'", "RFC 3339"),
    ('"block_type":"text"', '"block_type":"image"', "block_type", "unknown"),
    ('"seq":0,', "", "'seq'", "missing field"),
    ('"seq":0,', '"seq":0,"extra":1,', "'extra'", "unknown field"),
    ('"seq":0,', '"seq":0,"format":2,', "'format'", "unknown"),
    ('"seq":0,', '"seq":"0",', "'seq'", "must be an integer"),
    ('"seq":0,', '"seq":true,', "'seq'", "must be an integer"),
    ('"seq":0,', '"seq":-1,', "'seq'", "negative"),
    ('"cwd":"/nonexistent/x",', '"cwd":null,', "'cwd'", "not null"),
    ('"text":"hi"', '"text":"hi","source_path":"/x"', "'source_path'", "unknown field"),
    ('"text":"hi"}', '"text":"hi","text":"ho"}', "'text'", "twice"),
    ('"role":"user"', '"role":""', "'role'", "short printable"),
    ('"turn_uuid":"t-1"', '"turn_uuid":""', "'turn_uuid'", "empty"),
    ('{"session_id"', '["session_id"', "", "not JSON"),
]


@pytest.mark.parametrize(("old", "new", "field", "why"), BAD, ids=[b[1][:30] for b in BAD])
def test_every_rule_refuses_the_read_and_names_the_line(
    tmp_path: Path, old: str, new: str, field: str, why: str
) -> None:
    bad = LINE.replace(old, new, 1)
    assert bad != LINE, "the substitution changed nothing"
    path = _write(tmp_path / "t.funes.jsonl", LINE, bad)
    with pytest.raises(TurnFileError) as err:
        parse_file(path, None)
    assert err.value.line == 2
    assert field in err.value.problem and why in err.value.problem, err.value.problem


def test_a_blank_line_or_bytes_not_utf8_are_refused_too(tmp_path: Path) -> None:
    for middle, why in ((b"\n", "blank"), (b'{"x": "\xff"}\n', "not UTF-8")):
        path = tmp_path / "t.funes.jsonl"
        path.write_bytes((LINE + "\n").encode() + middle + (LINE + "\n").encode())
        with pytest.raises(TurnFileError, match=f"line 2: .*{why}"):
            parse_file(path, None)


def test_fields_map_onto_turns(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "t.funes.jsonl",
        _turn(0, "why does the build fail on arm64?", harness="claude_code"),
        _turn(1, "", parent_uuid="t-0000", blocks=[
            {"block_type": "thinking", "text": "check the triple"},
            {"block_type": "text", "text": "  "},
            {"block_type": "tool_use", "text": '{"command":"ls"}', "tool_name": "bash",
             "tool_use_id": "call_7"}]),
        _turn(1, "the same id again: dropped"),
    )
    result = parse_file(path, None)
    first, second = result.turns
    assert first.harness == "claude"  # the Rust funes' name for Claude Code
    assert (first.session_id, first.turn_id, first.seq, first.ts) == (
        "b3f2e0c4", "t-0000", 0, "2026-09-18T09:41:00Z")
    assert first.workdir == "/nonexistent/x" and first.source is not None
    assert second.parent_turn_id == "t-0000"
    assert [(b.type, b.tool_name, b.tool_call_id) for b in second.blocks] == [
        ("thinking", None, None), ("tool_use", "bash", "call_7")]  # the blank block is empty
    assert result.skipped == {"duplicate": 1}
    assert all(contract_problems(t) == [] for t in result.turns)


def test_a_spool_indexes_incrementally_and_refuses_a_bad_file_alone(settings) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(settings.home, settings, is_global=True)
    spool = settings.home / "spool" / "opencode"
    good = _write(spool / "a.funes.jsonl", _turn(0, "why does the build fail on arm64?"),
                  _turn(1, "the target triple is wrong"))
    bad = _write(spool / "b.funes.jsonl", _turn(0, "fine", session_id="other"),
                 _turn(1, "late", session_id="other", ts="2026-09-18T09:41:12+00:00"))
    first = api.index(settings)
    assert first.turns == 2 and first.added == 2 and first.by_harness == {"opencode": 1}
    assert len(first.errors) == 1 and str(bad) in first.errors[0]
    assert "line 2" in first.errors[0] and "'ts'" in first.errors[0]

    again = api.index(settings)
    assert again.added == 0 and again.files_unchanged == 1

    with good.open("a") as f:
        f.write(_turn(2, "fixed: build for aarch64-unknown-linux-gnu"))
    grown = api.index(settings)
    assert grown.turns == 1 and grown.added == 1

    _write(bad, _turn(0, "fine", session_id="other"), _turn(1, "late", session_id="other"))
    fixed = api.index(settings)
    assert fixed.errors == [] and fixed.added == 2
    hits = api.recall(settings, repo, "aarch64 target triple", harness=["opencode"],
                      rerank=False).hits
    assert hits and {h.row["harness"] for h in hits} == {"opencode"}


def test_index_check_validates_without_writing(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    good = _write(tmp_path / "exports" / "a.funes.jsonl", _turn(0, "hi"), _turn(1, "hello"),
                  _turn(1, "again"))
    ok = run("index", "--check", str(good), "--format", "human")
    assert ok.exit_code == 0, ok.stderr
    assert ok.stdout.strip() == f"ok {good}: 2 turns, 2 chunks, 1 sessions, 1 duplicate turns " \
        "dropped"
    _write(tmp_path / "exports" / "b.funes.jsonl", _turn(0, "hi", extra=1))
    both = run("index", "--check", str(tmp_path / "exports"), "--format", "json")
    assert both.exit_code == 1
    report = {Path(r["path"]).name: r for r in json.loads(both.stdout)}
    assert report["a.funes.jsonl"]["ok"] and report["a.funes.jsonl"]["chunks"] == 2
    assert report["b.funes.jsonl"]["error"].endswith("b.funes.jsonl:1: unknown field 'extra'")
    assert not (tmp_path / "exports" / ".funes").exists()
    assert run("index", "--check").exit_code == 2


def test_recall_takes_a_producers_harness_and_refuses_a_malformed_one(run) -> None:  # type: ignore[no-untyped-def]
    assert run("recall", "x", "--harness", "Not Valid").exit_code == 2
    assert "not a harness" in run("recall", "x", "--harness", "Not Valid").stderr


def _own_and_shared() -> list[Path]:
    roots = [OWN_FIXTURES]
    if (FIXTURES / "traces").is_dir():
        roots.append(FIXTURES / "traces")
    return roots


def test_our_transcripts_as_turn_files_give_the_same_chunk_ids(tmp_path: Path) -> None:
    """The native parse and its turn file are one record: same turns, same chunk ids."""
    compared = 0
    for source in explicit_sources([OWN_FIXTURES]):
        turns = [t for t in parse_file(source.path, source.harness).turns
                 if t.ts and ":" not in t.session_id + t.turn_id]  # what the format can carry
        if not turns:
            continue
        path = tmp_path / f"{source.path.stem}-{source.harness}.funes.jsonl"
        path.write_text("".join(json.dumps(to_record(t)) + "\n" for t in turns))
        back = parse_file(path, "funes-jsonl").turns
        native = [c.id for t in turns for c in chunk_turn(t)]
        assert [c.id for t in back for c in chunk_turn(t)] == native, source.path
        compared += len(native)
    assert compared > 100


def _fixtures() -> list[tuple[Path, str]]:
    """Every fixture with the parser that reads it: as sniffed, or as its folder names it."""
    out = {(s.path, s.harness) for s in explicit_sources(_own_and_shared())}
    for path in OWN_FIXTURES.glob("agents/cursor/**/*.jsonl"):  # outside agent-transcripts/
        out.add((path, "cursor"))
    return sorted(out)


def test_every_parser_meets_the_turn_contract() -> None:
    seen = set()
    for path, harness in _fixtures():
        for turn in parse_file(path, harness).turns:
            assert contract_problems(turn) == [], (path, turn.turn_id)
            seen.add(harness)
    assert {"claude", "codex", "pi", "hermes", "gemini", "cursor", "copilot", "opencode"} <= seen
