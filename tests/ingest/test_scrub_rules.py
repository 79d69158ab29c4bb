"""Scrub catches up: memories indexed under older rules are told so, and scrub brings them up.

The chunk planted here holds a Databricks token: a format funes's own detectors never knew and
the vendored gitleaks rules do, so it is exactly what a memory indexed before them still holds.
"""

from __future__ import annotations

import json
from pathlib import Path

from funes import api
from funes.api import security
from funes.api.agent_format import status_text
from funes.ingest.redact import rules_version, scan
from funes.ingest.scrub import UNRECORDED, stored_rules
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk

DATABRICKS = "dapi" + "f13ac4b49d1cb31f69f678e39602e381"


def _index_one(tmp_path: Path, settings, repo: Repository) -> None:  # type: ignore[no-untyped-def]
    session = tmp_path / "s.jsonl"
    session.write_text(json.dumps({"role": "user", "content": "hello there",
                                   "timestamp": "2026-01-01T00:00:00Z"}) + "\n")
    api.index(settings, memory=str(repo.path), paths=[str(session)], agents=["import"])


def _status_line(repo: Repository) -> str:
    return status_text(api.status(repo), api.search_status(repo.settings, repo))


def test_a_new_memory_records_the_installed_rules(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / "p" / ".funes", settings)
    _index_one(tmp_path, settings, repo)
    assert stored_rules(repo) == rules_version()
    assert api.status(repo).redaction_outdated is None
    assert "funes scrub" not in _status_line(repo)


def test_older_chunks_are_reported_until_scrub_redacts_them(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    assert [f.kind for f in scan(f"token = {DATABRICKS}")]  # the installed rules know it
    repo = Repository.init(tmp_path / "p" / ".funes", settings)
    # chunks stored by an older funes: no record, one secret its rules did not know
    leaky = make_chunk(9, text=f"export DATABRICKS_HOST=x; use {DATABRICKS} for the job")
    repo.commit_chunks([*make_batch(0, 3), leaky], "index: from an older funes")
    assert stored_rules(repo) == UNRECORDED
    # a later index run does not make the old chunks look current
    _index_one(tmp_path, settings, repo)
    status = api.status(repo)
    assert status.redaction_outdated == UNRECORDED
    assert "run `funes scrub`" in _status_line(repo)

    result = security.scrub(repo)
    assert [r.old for r in result.replaced] == [leaky.id]
    assert stored_rules(repo) == rules_version()
    assert api.status(repo).redaction_outdated is None
    rows = repo.chunks.dataset().to_table().to_pylist()
    hidden = repo.tombstoned_ids()
    assert not any(DATABRICKS in r["text"] for r in rows if r["id"] not in hidden)


def test_a_dry_run_scrub_does_not_record(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / "p" / ".funes", settings)
    repo.commit_chunks(make_batch(0, 2), "index: old")
    security.scrub(repo, dry_run=True)
    assert stored_rules(repo) == UNRECORDED


def test_a_record_from_older_rules_is_reported(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(tmp_path / "p" / ".funes", settings)
    _index_one(tmp_path, settings, repo)
    record = repo.path / "index" / "redaction.json"
    record.write_text('{"rules": "funes-1+gitleaks@000000000000"}')
    assert api.status(repo).redaction_outdated == "funes-1+gitleaks@000000000000"
    security.scrub(repo)
    assert api.status(repo).redaction_outdated is None
