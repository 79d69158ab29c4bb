"""The single-writer lock of a repository.

`flock` on a lock file that is never deleted: the kernel releases it when the holder exits,
however it exits (SIGKILL included), so there are no stale locks to clean up and no race
between unlinking and re-creating the file. Readers never take it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import TracebackType

from funes import process
from funes.errors import FunesError


class RepositoryBusyError(FunesError):
    """Another process holds the write lock and did not release it in time."""

    def __init__(self, path: Path, holder: int | None, waited: float) -> None:
        who = f"pid {holder}" if holder else "another process"
        super().__init__(
            f"repository is busy: {who} is writing to {path.parent} (waited {waited:.1f}s)",
            hint="try again when it finishes, or raise FUNES_LOCK_TIMEOUT",
        )
        self.holder = holder


class LockFileError(FunesError):
    """The lock file is not a file funes can open (a directory, a symlink, no permission)."""


class WriteLock:
    """Exclusive write lock; `timeout=0` fails at once (what hooks want)."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = max(0.0, timeout)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, waiting up to `timeout` seconds."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise LockFileError(
                f"cannot open the lock file {self.path} ({exc.strerror})",
                hint="it must be a plain file: remove whatever is there "
                f"(`rm -r {self.path}`) and run the command again",
            ) from None
        start = time.monotonic()
        delay = 0.01
        while True:
            try:
                if process.try_flock(fd):
                    break
            except OSError:
                os.close(fd)
                raise
            waited = time.monotonic() - start
            if waited >= self.timeout:
                holder = process.read_pid(fd)
                os.close(fd)
                raise RepositoryBusyError(self.path, holder, waited)
            time.sleep(min(delay, max(0.0, self.timeout - waited)))
            delay = min(delay * 2, 0.2)
        process.write_pid(fd)
        self._fd = fd

    def release(self) -> None:
        """Give the lock up (closing the descriptor releases the flock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WriteLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
