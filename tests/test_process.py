"""funes.process: logs, lock probes, detached children and bounded runs, with real processes."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from funes import process

#: A child that takes a lock on argv[1] (shared with argv[2] == "sh") and says so, then waits.
HOLDER = (
    "import fcntl, os, sys, time\n"
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)\n"
    "fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2] == 'sh' else fcntl.LOCK_EX)\n"
    "os.pwrite(fd, f'{os.getpid()}\\n'.encode(), 0) if sys.argv[2] == 'ex' else None\n"
    "print('locked', flush=True)\n"
    "time.sleep(60)\n"
)


def _holding(path: Path, kind: str) -> subprocess.Popen[str]:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), kind],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "locked\n"
    return child


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_stamps_are_utc_seconds_with_a_z() -> None:
    when = 1_800_000_000.75
    expected = datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")
    assert process.utc_stamp(when) == expected.replace("+00:00", "Z") == "2027-01-15T08:00:00Z"


def test_a_log_past_its_limit_is_moved_aside_keeping_one_old_copy(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "hooks.log"  # its directory is created too
    for n in range(3):
        process.log_line(log, f"line {n} " + "x" * 60, limit=50)
    # each write past 50 bytes moved the log aside first: the newest line stands alone
    assert log.read_text().endswith("line 2 " + "x" * 60 + "\n")
    assert log.read_text().count("\n") == 1
    old = log.with_name("hooks.log.1").read_text()
    assert "line 1" in old and "line 0" not in old
    assert old.split(" ", 1)[0].endswith("Z")
    assert sorted(p.name for p in log.parent.iterdir()) == ["hooks.log", "hooks.log.1"]


def test_appends_from_an_open_log_keep_earlier_lines(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    for n in range(2):
        fd = process.open_log(log)
        try:
            process.append_stamped(fd, f"event {n}")
        finally:
            os.close(fd)
    lines = log.read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["event 0", "event 1"]


def test_logging_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    process.log_line(blocker / "logs" / "x.log", "lost, quietly")  # no exception
    assert blocker.read_text() == "not a directory"


def test_lock_probe_sees_another_process_holding_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    assert not process.lock_held(lock)  # no file
    lock.touch()
    assert not process.lock_held(lock)  # nobody holds it
    child = _holding(lock, "ex")
    try:
        assert process.lock_held(lock)
        fd = os.open(lock, os.O_RDWR)
        try:
            assert not process.try_flock(fd)
            assert process.read_pid(fd) == child.pid
        finally:
            os.close(fd)
    finally:
        child.kill()
        child.wait()
    assert not process.lock_held(lock)  # the kernel released it with the process


def test_probes_do_not_mistake_each_other_for_a_holder(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    child = _holding(lock, "sh")  # a prober caught mid-probe
    try:
        assert not process.lock_held(lock)
        fd = os.open(lock, os.O_RDWR)
        try:
            assert not process.try_flock(fd)  # a would-be holder waits for the probe to end
        finally:
            os.close(fd)
    finally:
        child.kill()
        child.wait()


def test_a_lock_taken_records_its_holder(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert process.try_flock(fd)
        os.write(fd, b"a much longer previous content\n")
        process.write_pid(fd)
        assert lock.read_text() == f"{os.getpid()}\n"
        out = subprocess.run(
            [sys.executable, "-c", "from pathlib import Path; import sys\n"
             "from funes import process\n"
             "print(process.lock_held(Path(sys.argv[1])))", str(lock)],
            capture_output=True, text=True, check=True)
        assert out.stdout == "True\n"
    finally:
        os.close(fd)
    fd = os.open(lock, os.O_RDWR)
    try:
        closed = os.dup(fd)
        os.close(closed)
        with pytest.raises(OSError):
            process.try_flock(closed)  # not "held elsewhere": the error comes through
        assert process.read_pid(fd) == os.getpid()
    finally:
        os.close(fd)


def test_a_detached_child_outlives_its_parent_in_a_session_of_its_own(tmp_path: Path) -> None:
    """The parent's stdout closes when it exits, though its detached child still runs."""
    log = tmp_path / "child.log"
    parent = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from funes import process\n"
        "fd = process.open_log(Path(sys.argv[1]))\n"
        "child = process.detach([sys.executable, '-c', 'import os, sys, time; "
        "print(os.getsid(0), sys.stdin.read() == \"\", flush=True); "
        "print(\"to stderr\", file=sys.stderr, flush=True); time.sleep(60)'], "
        "stdout=fd, stderr=fd)\n"
        "print(child.pid, os.getsid(0), flush=True)\n"
    )
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", parent, str(log)], capture_output=True,
                         text=True, check=True, timeout=30)
    assert time.monotonic() - started < 20  # did not wait for the 60 s child
    pid, parent_session = (int(x) for x in out.stdout.split())
    try:
        assert _alive(pid)
        deadline = time.monotonic() + 10
        while log.read_text().count("\n") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        first, second = log.read_text().splitlines()[:2]
        session, empty_stdin = first.split()
        assert int(session) == pid != parent_session and empty_stdin == "True"
        assert second == "to stderr"
    finally:
        os.kill(pid, 9)
    assert _wait_gone(pid)


def test_a_detached_child_gets_dev_null_by_default(tmp_path: Path) -> None:
    child = process.detach([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"],
                           cwd=tmp_path)
    assert child.wait(30) == 3
    assert process.detach([sys.executable, "-c", "pass"]).wait(30) == 0


def test_a_bounded_run_returns_output_and_status(tmp_path: Path) -> None:
    done = process.run_bounded(
        [sys.executable, "-c", "import os, sys; print(os.getcwd()); "
         "print('oops', file=sys.stderr); sys.exit(2)"], cwd=tmp_path, timeout=30)
    assert done.returncode == 2 and not done.ok and not done.timed_out
    assert done.stdout.decode().strip() == str(tmp_path.resolve())
    assert done.stderr == b"oops\n"
    assert done.summary() == str(tmp_path.resolve())
    merged = process.run_bounded(
        [sys.executable, "-c", "import sys; print('a', flush=True); "
         "print('funes: b', file=sys.stderr)"], timeout=30, merge_stderr=True)
    assert merged.ok and merged.stdout == b"a\nfunes: b\n" and merged.stderr == b""
    assert merged.summary() == "b"
    silent = process.run_bounded([sys.executable, "-c", "raise SystemExit(4)"], timeout=30)
    assert silent.summary() == "exit status 4"


def test_a_bounded_run_kills_the_whole_group_at_its_deadline(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild"
    script = (
        "import subprocess, sys, time\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(g.pid))\n"
        "print('working', flush=True)\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    done = process.run_bounded([sys.executable, "-c", script], timeout=2)
    assert time.monotonic() - started < 20
    assert done.timed_out and done.returncode is None and not done.ok
    assert done.stdout == b"working\n"
    assert done.summary() == "no answer within 2s"
    assert _wait_gone(int(pidfile.read_text()))  # nothing it started lingers


def test_a_child_that_closes_its_output_but_runs_on_is_still_bounded() -> None:
    script = "import os, time; os.close(1); os.close(2); time.sleep(60)"
    done = process.run_bounded([sys.executable, "-c", script], timeout=1)
    assert done.timed_out and done.returncode is None


def test_a_bounded_run_stops_a_child_that_prints_without_end() -> None:
    script = "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n"
    done = process.run_bounded([sys.executable, "-c", script], timeout=60, limit=1 << 20)
    assert done.overflowed and not done.timed_out and done.returncode is None
    assert len(done.stdout) == 1 << 20
    assert "too much output" in done.summary()


def test_a_program_that_cannot_start_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        process.run_bounded([str(tmp_path / "missing")], timeout=5)
    with pytest.raises(OSError):
        process.detach([str(tmp_path / "missing")])


def test_run_funes_reports_the_last_line_or_why_not(tmp_path: Path) -> None:
    from funes import __version__

    ok, detail = process.run_funes(["--version"], cwd=tmp_path, timeout=60)
    assert ok and detail == f"funes, version {__version__}"
    ok, detail = process.run_funes(["no-such-command"], cwd=tmp_path, timeout=60)
    assert not ok and detail.startswith("No such command 'no-such-command'")  # prefix dropped
    ok, detail = process.run_funes(["--version"], cwd=tmp_path / "missing", timeout=60)
    assert not ok and detail.startswith("cannot start")


def test_the_module_stays_light() -> None:
    """Hooks import it on every commit and turn: no subprocess until a child is started."""
    out = subprocess.run(
        [sys.executable, "-c", "import sys, funes.process\n"
         "print(sorted(m for m in ('subprocess', 'selectors', 'click') if m in sys.modules))"],
        capture_output=True, text=True, check=True)
    assert out.stdout == "[]\n"


def test_flock_helpers_agree_with_fcntl(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        child = subprocess.run(
            [sys.executable, "-c", "import os, sys\nfrom funes import process\n"
             "fd = os.open(sys.argv[1], os.O_RDWR)\nprint(process.try_flock(fd))", str(lock)],
            capture_output=True, text=True, check=True)
        assert child.stdout == "False\n"
    finally:
        os.close(fd)


def test_a_bounded_run_feeds_its_input_without_stalling() -> None:
    data = bytes(range(256)) * 8192  # 2 MiB: far more than a pipe holds
    echo = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read()[::-1])"
    done = process.run_bounded([sys.executable, "-c", echo], input=data, timeout=60)
    assert done.ok and done.stdout == data[::-1]
    # a child that never reads its input: the deadline still holds
    done = process.run_bounded([sys.executable, "-c", "import time; time.sleep(60)"],
                               input=data, timeout=1)
    assert done.timed_out
    # a child that exits without reading it: not an error of ours
    done = process.run_bounded([sys.executable, "-c", "print('bye')"], input=data, timeout=30)
    assert done.ok and done.stdout == b"bye\n"
