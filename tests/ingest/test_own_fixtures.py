"""The repository's own small fixtures (tests/fixtures/traces) through the real ingest path.

These run in a plain clone, without ../shared: one real transcript or more per agent format,
parsed, indexed into a real memory, indexed again (nothing added) and recalled by words.
"""

from __future__ import annotations

from pathlib import Path

from funes import api
from funes.ingest.parsers import parse_file
from funes.storage.fsck import fsck
from funes.storage.repo import Repository
from tests.conftest import OWN_FIXTURES

TRACES = OWN_FIXTURES / "traces"


def test_every_own_fixture_has_its_licence_noted() -> None:
    readme = (OWN_FIXTURES / "README.md").read_text("utf-8")
    files = sorted(TRACES.rglob("*.jsonl"))
    assert {p.parent.name for p in files} == {"claude", "codex", "pi", "hermes"}
    for path in files:
        assert f"`traces/{path.parent.name}/{path.name}`" in readme, path.name
    assert sum(p.stat().st_size for p in files) < 64 * 1024  # small, by design


def test_hermes_gateway_transcript_parses_into_turns_and_blocks() -> None:
    result = parse_file(TRACES / "hermes" / "funes__backup-disk-full.jsonl", "hermes")
    assert dict(result.skipped) == {"ignored:session_meta": 1}
    shape = [(t.role, [b.type for b in t.blocks]) for t in result.turns]
    assert shape == [
        ("user", ["text"]),
        ("assistant", ["thinking", "text", "tool_use"]),
        ("tool", ["tool_result"]),
        ("assistant", ["text"]),
        ("user", ["text"]),
    ]
    assert {t.session_id for t in result.turns} == {"funes__backup-disk-full"}


def test_own_fixtures_index_recall_and_index_again(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / "m" / ".funes", settings)
    first = api.index(settings, memory=str(repo.path), paths=[str(TRACES)])
    assert first.errors == [] and first.added > 20
    assert set(first.by_harness) == {"claude", "codex", "pi", "hermes"}
    assert first.sessions == len(list(TRACES.rglob("*.jsonl")))
    again = api.index(settings, memory=str(repo.path), paths=[str(TRACES)])
    assert again.added == 0
    assert fsck(repo).ok

    found = api.recall(settings, repo, "No space left on device", k=3)
    top = found.hits[0].row
    assert top["harness"] == "hermes" and "No space left on device" in top["text"]
    assert found.signals[0] == "bm25" and found.backlog == first.added  # nothing embedded
