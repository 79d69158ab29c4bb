"""Crash-safe file writes.

Every file funes replaces is written to a temporary sibling, flushed to disk, and renamed over
the target, then the directory is synced: a reader (or a process killed at any instant) sees
either the old bytes or the new ones, never a torn file. Appends (reflogs) are single `write`
calls on an O_APPEND descriptor, so concurrent appenders never interleave within a line.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path


def sha256_file(path: Path) -> tuple[int, str]:
    """Size and hex SHA-256 of a file, read in 1 MiB blocks (models and fragments are large)."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path, data: bytes, *, durable: bool = True, mode: int | None = None
) -> None:
    """Replace `path` with `data` all at once.

    With `mode`, the file has exactly that mode (whatever the umask) from the moment it
    appears: a key or a hook script is never visible with the wrong permissions.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        # Without a mode the umask decides, as for open(); with one, 0600 until fchmod sets it.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if durable:
        fsync_dir(path.parent)


def write_new(path: Path, data: bytes) -> bool:
    """Write an immutable file once; False if it already exists (content-addressed files)."""
    if path.exists():
        return False
    write_atomic(path, data)
    return True


def append_line(path: Path, line: str) -> None:
    """Append one line durably (reflogs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
