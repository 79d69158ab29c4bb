"""The warm server's process plumbing: the one-server lock, the allocator, open memories.

Kept apart from funes.api.serve (the server's state machine and its requests) because none of
it depends on what the server answers: holding the per-home lock, keeping glibc's malloc from
hoarding memory across threads, reading the process's resident memory, and one open memory
with the Lance session whose caches outlive a request.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

from funes import process, protocol
from funes.storage.repo import Repository
from funes.storage.snapshot import Snapshot

__all__ = ["INDEX_CACHE_BYTES", "LOCK_RETRIES", "METADATA_CACHE_BYTES", "OpenMemory",
           "libc_malloc", "limit_arenas", "release", "rss_mb", "server_lock", "trim"]

#: How long a new server tries to take the lock before deciding another one has it (a client
#: probing the lock holds it shared for a moment).
LOCK_RETRIES = 10
#: Lance cache sizes per open memory: index pages and metadata of one memory of ~100k chunks
#: fit, so a warm recall reads no index file twice, while five memories stay in the budget.
INDEX_CACHE_BYTES = 48 << 20
METADATA_CACHE_BYTES = 16 << 20


@contextlib.contextmanager
def server_lock(ep: protocol.Endpoint) -> Iterator[int | None]:
    """Hold the server lock; yields None when taken, else the pid of the server holding it.

    The holder deletes the lock file when it is done, so finished servers leave nothing
    behind. That is safe because a new holder checks, once locked, that the file it locked is
    still the one at that path; if not, it locked a file that has just been deleted, and it
    tries again.
    """
    holder: int | None = None
    for _ in range(LOCK_RETRIES):
        fd = os.open(ep.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            taken = process.try_flock(fd)
        except OSError:
            os.close(fd)
            raise
        if not taken:
            holder = process.read_pid(fd)
            os.close(fd)
            time.sleep(0.02)  # perhaps only a client probing it (protocol.lock_held): retry
            continue
        try:
            same = os.fstat(fd).st_ino == os.stat(ep.lock).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            continue
        try:
            process.write_pid(fd)
            yield None
        finally:
            with contextlib.suppress(FileNotFoundError):
                ep.lock.unlink()  # while still holding it: see the docstring
            os.close(fd)
        return
    yield holder or 0


def libc_malloc() -> Any:
    """Glibc's allocator controls, or None where there is no glibc (macOS, musl)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


#: mallopt's M_ARENA_MAX: how many malloc arenas threads may spread over.
_M_ARENA_MAX = -8


def limit_arenas(libc: Any) -> None:
    """Two malloc arenas for the whole server instead of glibc's eight per core.

    Every request runs in a thread, and so do Lance's and llama.cpp's workers; glibc gives
    busy threads arenas of their own and keeps freed memory in them, so a server that had
    answered a few memories held hundreds of MB it no longer used (bench/results/fast-path.md).
    """
    if libc is not None:
        libc.mallopt(_M_ARENA_MAX, 2)


def trim(libc: Any) -> None:
    """Give freed memory back to the system (after a memory is closed)."""
    if libc is not None:
        libc.malloc_trim(0)


def release(libc: Any) -> None:
    """Hand memory freed by a request back to the system: Arrow's pool, then malloc's.

    A listing or a scan reads columns of every row of a memory (tens of MB of Arrow buffers
    at 100k chunks); Arrow's allocator (mimalloc) and glibc keep such memory for reuse, so a
    server that had answered one scan stayed ~45 MB larger for good (bench/results/browse.md).
    """
    import sys

    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None:
        pyarrow.default_memory_pool().release_unused()
    trim(libc)


def rss_mb() -> float | None:
    """This process's resident memory in MB (Linux /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


class OpenMemory:
    """One open memory: its repository, its Lance session (caches), and its use."""

    def __init__(self, repo: Repository) -> None:
        import lance

        self.repo = repo
        # One Lance session for every snapshot of this memory: its index and metadata caches
        # outlive a request, and go with the memory when it is closed.
        self.session = lance.Session(  # type: ignore[attr-defined]
            index_cache_size_bytes=INDEX_CACHE_BYTES,
            metadata_cache_size_bytes=METADATA_CACHE_BYTES,
        )
        self.active = 0
        self.requests = 0
        self.last = time.monotonic()

    def view(self) -> Snapshot:
        """This memory pinned for one request, on the shared Lance session."""
        return Snapshot(self.repo, session=self.session)
