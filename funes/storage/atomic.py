"""Crash-safe file writes.

Every file funes replaces is written to a temporary sibling, flushed to disk, and renamed over
the target, then the directory is synced: a reader (or a process killed at any instant) sees
either the old bytes or the new ones, never a torn file. Appends (reflogs) are single `write`
calls on an O_APPEND descriptor, so concurrent appenders never interleave within a line.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` all at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        with open(tmp, "wb") as fh:
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
