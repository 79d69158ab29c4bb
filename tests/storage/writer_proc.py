"""A writer process for the crash and concurrency tests: commits batches in a loop.

Usage: python writer_proc.py REPO LOGFILE TAG COUNT LOCK_TIMEOUT
Appends `ok <commit>` or `busy` to LOGFILE after each attempt, written and fsynced before the
next attempt starts, so the parent knows which commits were acknowledged before it killed us: a
commit is acknowledged once `commit_chunks` returned, and every acknowledged one must survive.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from funes._env import settings
from funes.storage.lock import RepositoryBusyError
from funes.storage.repo import Repository
from tests.builders import make_batch


def main() -> None:
    repo_path, log_path, tag, count, timeout = sys.argv[1:6]
    repo = Repository.open(Path(repo_path), settings())
    with open(log_path, "a", buffering=1) as log:

        def record(line: str) -> None:
            log.write(line + "\n")
            os.fsync(log.fileno())

        for i in range(int(count)):
            batch = make_batch(i * 50, 50, session=f"{tag}-{i}")
            try:
                result = repo.commit_chunks(batch, f"{tag} {i}", lock_timeout=float(timeout))
            except RepositoryBusyError:
                record("busy")
                continue
            record(f"ok {result.commit}")


if __name__ == "__main__":
    main()
