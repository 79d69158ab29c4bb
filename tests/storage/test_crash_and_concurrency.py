"""Crash safety and concurrent writers, with real processes and real SIGKILLs."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from funes.model.refs import check_ref_name
from funes.storage.fsck import fsck
from funes.storage.repo import Repository
from tests.builders import make_batch
from tests.conftest import REPO_ROOT

WRITER = [sys.executable, "-m", "tests.storage.writer_proc"]


def _spawn(
    repo: Repository, log: Path, tag: str, count: int, timeout: float
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*WRITER, str(repo.path), str(log), tag, str(count), str(timeout)],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _acknowledged(log: Path) -> list[str]:
    if not log.exists():
        return []
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith("ok ")]


def _wait_started(log: Path, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not _acknowledged(log) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)


def test_sigkill_at_random_points_never_damages_the_repository(
    repo: Repository, tmp_path: Path
) -> None:
    rng = random.Random(1234)
    acknowledged: list[str] = []
    by_killed = 0  # commits the killed writers themselves acknowledged
    rounds = int(os.environ.get("FUNES_CRASH_ROUNDS", "12"))
    for round_no in range(rounds):
        log = tmp_path / f"log{round_no}"
        proc = _spawn(repo, log, f"r{round_no}", 10_000, 30)
        _wait_started(log, proc)  # imports done, commits flowing
        time.sleep(rng.uniform(0.0, 0.15))
        # Killed while still writing, after committing: else this round proves nothing.
        assert proc.poll() is None, proc.communicate()[1].decode()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        theirs = _acknowledged(log)
        assert theirs, f"round {round_no}: the writer acknowledged no commit before the kill"
        by_killed += len(theirs)
        acknowledged += theirs

        report = fsck(repo)
        assert report.ok, [str(p) for p in report.problems]
        reachable = {oid for oid, _ in repo.walk()}
        missing = [c for c in acknowledged if c not in reachable]
        assert not missing, f"round {round_no}: acknowledged commits lost: {missing}"
        # the next write completes
        after = repo.commit_chunks(make_batch(0, 3, session=f"after-{round_no}"), "after crash")
        assert after.commit is not None
        acknowledged.append(after.commit)
    assert fsck(repo).ok
    assert by_killed >= rounds
    reachable = {oid for oid, _ in repo.walk()}
    assert set(acknowledged) <= reachable


def test_two_writers_serialise_or_get_busy_and_refs_never_go_back(
    repo: Repository, tmp_path: Path
) -> None:
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [_spawn(repo, logs[0], "a", 8, 10), _spawn(repo, logs[1], "b", 8, 10)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    ok = _acknowledged(logs[0]) + _acknowledged(logs[1])
    busy = sum(log.read_text().count("busy") for log in logs)
    assert len(ok) + busy == 16
    assert len(ok) >= 8
    reachable = [oid for oid, _ in repo.walk()]
    assert set(ok) <= set(reachable)
    assert len(reachable) == len(ok)
    reflog = repo.refs.reflog(check_ref_name("refs/heads/main"))
    assert len(reflog) == len(ok)
    for prev, entry in itertools.pairwise(reflog):
        assert entry.old == prev.new  # a chain: the ref never went backwards
    messages = {e.message.split()[0] for e in reflog}
    if not busy:
        assert messages == {"a", "b"}
    assert fsck(repo).ok


def test_a_writer_with_no_patience_fails_fast_when_locked(repo: Repository) -> None:
    from funes.storage.lock import RepositoryBusyError, WriteLock

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,os,sys,time; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT);"
            "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode());"
            "print('locked', flush=True); time.sleep(30)",
            str(repo.path / "lock"),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        start = time.monotonic()
        with pytest.raises(RepositoryBusyError) as err:
            repo.commit_chunks(make_batch(0, 2), "blocked", lock_timeout=0.2)
        assert time.monotonic() - start < 2
        assert str(holder.pid) in str(err.value)
        assert "busy" in str(err.value)
    finally:
        holder.kill()
        holder.wait()
    with WriteLock(repo.path / "lock", 1):  # released by the holder's death
        pass


def test_a_commit_interrupted_after_the_lance_append_is_completed_by_the_next_writer(
    repo: Repository,
) -> None:
    """Drive the exact window between the Lance append and the ref move, deterministically."""
    from funes.storage.tables import LanceTable

    base = repo.commit_chunks(make_batch(0, 5), "base").commit
    original = LanceTable.append

    class Killed(BaseException):
        pass

    def append_then_die(self: LanceTable, records, read_version):  # type: ignore[no-untyped-def]
        original(self, records, read_version)
        raise Killed

    LanceTable.append = append_then_die  # type: ignore[method-assign]
    try:
        with pytest.raises(Killed):
            repo.commit_chunks(make_batch(5, 5), "interrupted")
    finally:
        LanceTable.append = original  # type: ignore[method-assign]
    assert repo.head() == base  # the ref did not move
    assert (repo.path / "PENDING").exists()
    repo.commit_chunks(make_batch(10, 5), "next")  # recovers, then commits
    messages = [c.message for _, c in repo.walk()]
    assert messages == ["next", "interrupted", "base"]
    assert repo.head_commit().chunk_count == 15  # type: ignore[union-attr]
    assert any(e.message.startswith("recover:") for e in repo.refs.reflog(check_ref_name("HEAD")))
    assert fsck(repo).ok
