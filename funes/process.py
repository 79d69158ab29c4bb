"""Background-process plumbing: logs, lock probes, detached children, bounded runs.

The agent and git hooks, the warm server's client and the publish gate all start processes
they do not wait for, or wait for only so long, and all report to a log nobody watches live.
Each of those ideas lives here once, so the callers read as policy (what to run, for how long,
what to say when it fails):

- `utc_stamp` and `append_stamped`: the one timestamp format of every log line.
- `open_log`: an append descriptor on a log that keeps itself small (past `LOG_LIMIT` bytes it
  moves to `<name>.1`, one old copy kept) and `log_line`, a dated line that never raises.
- `lock_held`, `try_flock`, `read_pid`/`write_pid`: is another process holding this `flock`?
  (A probe takes the lock *shared*, so two probes never mistake each other for a holder.)
- `detach`: start a child in its own session (it outlives us and our terminal's Ctrl-C) with
  its output wherever the caller says, never on our own stdio.
- `run_bounded`: run a child for at most so many seconds and so many bytes of output; past
  either, the child's whole process group is killed, so nothing it started lingers;
  `run_funes`, the same for a `funes` command whose last line the hook reports.

Standard library only, and `subprocess` imported on first use: hooks import this on every
commit and every agent turn, and the thin client (funes.cli.thin) through funes.protocol.
Importable from every layer (tests/test_architecture.py `SHARED`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import subprocess

__all__ = [
    "LOG_LIMIT",
    "OUTPUT_LIMIT",
    "Finished",
    "append_stamped",
    "detach",
    "lock_held",
    "log_line",
    "open_log",
    "read_pid",
    "run_bounded",
    "run_funes",
    "try_flock",
    "utc_stamp",
    "write_pid",
]

#: Bytes past which a log is moved aside (to `<name>.1`) before the next write.
LOG_LIMIT = 1 << 20
#: Bytes of output (stdout and stderr together) a bounded run keeps before it stops the child.
OUTPUT_LIMIT = 64 << 20


# -- logs --------------------------------------------------------------------------------------


def utc_stamp(when: float | None = None) -> str:
    """`2026-12-01T18:19:35Z`: the time at the head of every log line (UTC, seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def open_log(path: Path, *, limit: int = LOG_LIMIT) -> int:
    """An append descriptor on the log `path` (created with its directory).

    A log past `limit` bytes is first renamed to `<name>.1` (replacing the older copy), so a
    log written on every commit or turn never grows without bound and the last ~`limit` bytes
    are always there to read. Appends are single `write` calls on an O_APPEND descriptor:
    processes writing at once never interleave within a line.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if path.stat().st_size > limit:
            os.replace(path, path.with_name(path.name + ".1"))
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def append_stamped(fd: int, message: str) -> None:
    """Write `<utc_stamp> message` as one line on `fd`."""
    os.write(fd, f"{utc_stamp()} {message}\n".encode("utf-8", "replace"))


def log_line(path: Path, message: str, *, limit: int = LOG_LIMIT) -> None:
    """One dated line in the log `path`; never raises (a log must not fail its writer)."""
    with contextlib.suppress(OSError):
        fd = open_log(path, limit=limit)
        try:
            append_stamped(fd, message)
        finally:
            os.close(fd)


# -- locks -------------------------------------------------------------------------------------


def try_flock(fd: int, *, shared: bool = False) -> bool:
    """Take `flock` on `fd` without waiting: False when another process holds it.

    Raises:
        OSError: anything but "held elsewhere" (a file system without locks, a bad fd).
    """
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def lock_held(path: Path) -> bool:
    """Whether some process holds an exclusive `flock` on `path` right now.

    The probe takes the lock shared and drops it at once (closing the descriptor), so
    processes probing at the same moment do not see each other as holders. A lock holder that
    tries to take the lock in that instant fails once; the holders here retry or defer to the
    prober (funes.api.serve, funes.api.hookworker).
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return not try_flock(fd, shared=True)
    except OSError:
        return False
    finally:
        os.close(fd)


def write_pid(fd: int) -> None:
    """Record this process as the holder of the lock file `fd` (for `read_pid`)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def read_pid(fd: int) -> int | None:
    """The pid `write_pid` recorded in the lock file `fd`, if one is there."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


# -- children ----------------------------------------------------------------------------------

#: Detached children of this process still running: holding the `Popen` keeps it from being
#: collected while the child runs (which warns); `subprocess` reaps the child once it exits.
_DETACHED: list[subprocess.Popen[bytes]] = []


def detach(
    argv: list[str],
    *,
    cwd: Path | str | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
) -> subprocess.Popen[bytes]:
    """Start `argv` in a session of its own and return without waiting for it.

    The child outlives this process, its terminal and a Ctrl-C sent to our process group.
    `stdout`/`stderr` are descriptors (a log from `open_log`); None is /dev/null. Our own
    stdio is never inherited: a caller reading our output through a pipe (git, an agent) sees
    it close when we exit, not when the child does.

    Raises:
        OSError: the program cannot be started.
    """
    import subprocess

    _DETACHED[:] = [p for p in _DETACHED if p.poll() is None]
    child = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL if stdout is None else stdout,
        stderr=subprocess.DEVNULL if stderr is None else stderr,
        start_new_session=True,
        close_fds=True,
    )
    _DETACHED.append(child)
    return child


@dataclass(frozen=True)
class Finished:
    """How a bounded run ended."""

    argv: tuple[str, ...]
    #: The exit status; None when the run was stopped (`timed_out` or `overflowed`).
    returncode: int | None
    stdout: bytes
    #: Empty when stderr went into `stdout` (`merge_stderr`).
    stderr: bytes
    timeout: float
    timed_out: bool = False
    #: More than the output limit arrived; the child was stopped.
    overflowed: bool = False

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0."""
        return self.returncode == 0

    def summary(self) -> str:
        """One line for a log or a warning: why it was stopped, else its last line of output.

        A `funes` child's own "funes: " prefix is dropped (the caller adds its own).
        """
        if self.timed_out:
            return f"no answer within {self.timeout:g}s"
        if self.overflowed:
            return f"{self.argv[0]} printed too much output"
        lines = [ln for ln in self.stdout.decode("utf-8", "replace").splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else ""
        last = last.removeprefix("funes: ")
        return last or f"exit status {self.returncode}"


def run_bounded(
    argv: list[str],
    *,
    timeout: float,
    cwd: Path | str | None = None,
    limit: int = OUTPUT_LIMIT,
    merge_stderr: bool = False,
    input: bytes | None = None,
) -> Finished:
    """Run `argv` for at most `timeout` seconds and `limit` bytes of output.

    The child runs in a session of its own with `input` on its stdin (else /dev/null); past
    the deadline or the limit its whole process group is killed (grandchildren included) and
    the run says which. `merge_stderr` interleaves stderr into stdout, as a terminal would.

    Raises:
        OSError: the program cannot be started.
    """
    import selectors
    import signal
    import subprocess

    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    pending = memoryview(input or b"")
    out = {"stdout": bytearray(), "stderr": bytearray()}
    size = 0
    timed_out = overflowed = False
    try:
        with selectors.DefaultSelector() as sel:
            for name in ("stdout", "stderr"):
                stream = getattr(proc, name)
                if stream is not None:
                    sel.register(stream, selectors.EVENT_READ, name)
            if proc.stdin is not None:
                os.set_blocking(proc.stdin.fileno(), False)  # a full pipe must not stall us
                sel.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
            while sel.get_map() and not (timed_out or overflowed):
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for key, _ in sel.select(left):
                    if key.data == "stdin":
                        try:
                            pending = pending[os.write(key.fd, pending[: 1 << 16]):]
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:  # the child stopped reading: its business
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(key.fileobj)
                            key.fileobj.close()  # type: ignore[union-attr]
                        continue
                    block = os.read(key.fd, 1 << 16)
                    if not block:
                        sel.unregister(key.fileobj)
                        continue
                    out[key.data] += block
                    size += len(block)
                    if size > limit:
                        overflowed = True
                        break
        if not (timed_out or overflowed):
            try:  # output closed; the child may still be running
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        if timed_out or overflowed or proc.returncode is None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                with contextlib.suppress(OSError):
                    stream.close()
        proc.wait()
    stopped = timed_out or overflowed
    return Finished(tuple(argv), None if stopped else proc.returncode,
                    bytes(out["stdout"][:limit]), bytes(out["stderr"][:limit]), timeout,
                    timed_out, overflowed)


def run_funes(args: list[str], *, cwd: Path, timeout: float) -> tuple[bool, str]:
    """`funes ARGS` (this installation) bounded by `timeout` seconds: (succeeded, one line).

    What a hook runs when it must wait for the answer (a pre-push `push`, a session's `sync`):
    the line is the child's last line of output, or why it was stopped or could not start.
    """
    argv = [sys.executable, "-m", "funes", *args]
    try:
        done = run_bounded(argv, cwd=cwd, timeout=timeout, merge_stderr=True)
    except OSError as exc:
        return False, f"cannot start {argv[0]}: {exc.strerror}"
    return done.ok, done.summary()
