"""Index runs commit in bounded batches: bounded memory, and a kill loses at most one batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from funes import api
from funes.storage.fsck import fsck
from funes.storage.repo import Repository
from tests.conftest import FIXTURES, OWN_FIXTURES, REPO_ROOT, needs_shared

TRACES = FIXTURES / "traces"
#: The repository's own transcripts (about a hundred chunks): enough for a dozen batches.
OWN = [str(OWN_FIXTURES / "traces"), str(OWN_FIXTURES / "agents")]


def _repo(tmp_path: Path, settings: Any, name: str, batch: int | None = None) -> Repository:
    repo = Repository.init(tmp_path / name / ".funes", settings)
    if batch is not None:
        repo.config.set("index.batchChunks", str(batch))
    return repo


def test_a_run_commits_in_batches_and_reports_once(tmp_path: Path, settings: Any) -> None:
    whole = _repo(tmp_path, settings, "whole")
    once = api.index(settings, memory=str(whole.path), paths=OWN)
    batched = _repo(tmp_path, settings, "batched", batch=10)
    summary = api.index(settings, memory=str(batched.path), paths=OWN)

    assert len(list(whole.walk())) == 1
    commits = len(list(batched.walk()))
    assert once.added > 50 and commits >= once.added // 10 // 2 and commits > 3
    assert list(summary.commits) == [str(batched.path)]  # one summary line per memory
    result = summary.commits[str(batched.path)]
    assert result.added == summary.added == once.added
    assert result.chunk_count == once.added and result.commit == batched.head()
    assert batched.chunk_ids() == whole.chunk_ids()
    assert fsck(batched).ok


@needs_shared  # a corpus big enough that the kill lands in the middle of the run
def test_a_killed_run_resumes_from_its_last_batch(tmp_path: Path, settings: Any) -> None:
    reference = _repo(tmp_path, settings, "reference")
    api.index(settings, memory=str(reference.path), paths=[str(TRACES)])
    repo = _repo(tmp_path, settings, "killed", batch=60)
    env = {**os.environ, "FUNES_HOME": str(settings.home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "funes", "--memory", str(repo.path), "index", str(TRACES)],
        cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    saved = repo.path / "index" / "sources.sqlite"  # positions of the files finished so far
    deadline = time.monotonic() + 120
    while not saved.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # a few batches in, killed in the middle of whatever comes next
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    committed = repo.chunk_ids()
    assert committed and saved.exists(), "killed before the first batch was committed"
    assert fsck(repo).ok

    # The resumed run may commit in larger batches: what it must not redo is the files the
    # killed one finished, whatever their batch size (one commit per 60 chunks costs seconds).
    repo.config.set("index.batchChunks", "100000")
    again = api.index(settings, memory=str(repo.path), paths=[str(TRACES)])
    if len(committed) < len(reference.chunk_ids()):
        assert again.files_unchanged > 0  # resumed, not started over
        assert again.added == len(reference.chunk_ids()) - len(committed)
    assert repo.chunk_ids() == reference.chunk_ids()
    assert fsck(repo).ok
