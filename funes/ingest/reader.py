"""Reading sources into chunks, in this process or in worker processes beside it.

Reading one transcript is parse → redact → chunk: pure CPU work that needs nothing but the
file, and most of a first run's time (about two thirds of the CPU of a first run over 19,000
sessions, bench/results/day0.md). So a run over many files reads them in `workers` processes
while this one routes and commits, and a run over a few files (a hook's turn) reads them here,
where starting a process would cost more than the work.

Either way the results come back in the order the sources were given, with the same chunks
(the work is deterministic and nothing in it depends on where it ran), so batches, commits and
chunk ids are those of a sequential run. At most `WINDOW` files per worker are read ahead of
the one being committed: memory stays bounded whatever the history's size. A worker that dies
costs nothing but time: the files it had are read in this process.
"""

from __future__ import annotations

import collections
import contextlib
import os
import pickle
import struct
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from funes.errors import FunesError
from funes.ingest.chunking import chunk_turn
from funes.ingest.engines import redact_turns
from funes.ingest.parsers.base import SourceTruncatedError
from funes.ingest.parsers.registry import parse_file
from funes.ingest.sources import SourceFile
from funes.ingest.state import Plan
from funes.model.chunk import Chunk
from funes.model.turns import Turn

#: Worker processes are worth starting from this many files to read (each costs about a
#: second of CPU to start: the tokenizer and the redaction rules load in it).
PARALLEL_MIN_FILES = 64
#: Files read ahead per worker.
WINDOW = 8


@dataclass
class ReadTurn:
    """One turn as the run needs it: its provenance (blocks dropped), chunks, redactions."""

    turn: Turn  # `blocks` emptied: the chunks carry the text
    chunks: list[Chunk]
    redactions: collections.Counter[str]


@dataclass
class ReadFile:
    """What reading one source produced."""

    source: SourceFile
    cursor: str
    planned: Plan
    turns: list[ReadTurn] = field(default_factory=list)
    skipped: collections.Counter[str] = field(default_factory=collections.Counter)
    end_offset: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    #: The saved position no longer matched the file: it was read again from the start.
    reread: bool = False
    error: str | None = None


def since_ok(turn: Turn, since: datetime | None) -> bool:
    """Whether `turn` is at or after `since` (a turn with an unreadable time is not)."""
    if since is None:
        return True
    try:
        ts = datetime.fromisoformat(turn.ts)
    except ValueError:
        return False
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=since.tzinfo)
    return ts >= since


def read_source(source: SourceFile, cursor: str, planned: Plan, *, since: datetime | None,
                max_tokens: int) -> ReadFile:
    """Parse `source` from its planned position, redact each turn, chunk it."""
    out = ReadFile(source, cursor, planned)
    try:
        try:
            result = parse_file(source.path, source.harness, start_offset=planned.start,
                                state=planned.state)
        except SourceTruncatedError:
            out.reread = True
            result = parse_file(source.path, source.harness)
    except (FunesError, OSError) as exc:
        out.error = f"{source.path}: {exc}"
        return out
    out.skipped, out.end_offset, out.state = result.skipped, result.end_offset, result.state
    turns = [turn for turn in result.turns if since_ok(turn, since)]
    # Every engine, in the gate's order, over the whole file at once (funes.ingest.engines).
    for turn, (clean, found) in zip(turns, redact_turns(turns), strict=True):
        out.turns.append(ReadTurn(replace(turn, blocks=()),
                                  chunk_turn(clean, max_tokens=max_tokens), found))
    return out


def default_workers() -> int:
    """Worker processes for a large run: the CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


Job = tuple[SourceFile, str, Plan]


def read_all(jobs: Sequence[Job], *, since: datetime | None, max_tokens: int,
             workers: int) -> Generator[ReadFile, None, None]:
    """Read every job, in order; in `workers` processes when that is more than one."""
    if workers <= 1:
        for source, cursor, planned in jobs:
            yield read_source(source, cursor, planned, since=since, max_tokens=max_tokens)
        return
    pool = _Pool(workers, since=since, max_tokens=max_tokens)
    try:
        for i in range(min(len(jobs), WINDOW * workers)):
            pool.submit(i, jobs[i])
        for i, job in enumerate(jobs):
            read = pool.result(i)
            if read is None:  # its worker died: read it here
                read = read_source(*job, since=since, max_tokens=max_tokens)
            ahead = i + WINDOW * workers
            if ahead < len(jobs):
                pool.submit(ahead, jobs[ahead])
            yield read
    finally:  # also when the run stops early (an error, Ctrl-C)
        pool.close()


class _Pool:
    """Worker processes of our own (`python -m funes.ingest.reader`), one thread feeding each.

    Not multiprocessing: its spawn start runs the caller's main script again in every worker
    (a library caller without an `if __name__ == "__main__"` guard would index twice), and
    fork would copy the threads Lance runs in this process. Jobs and results travel as
    length-prefixed pickles between processes of this same installation.
    """

    def __init__(self, n: int, *, since: datetime | None, max_tokens: int) -> None:
        import queue
        import subprocess
        import sys
        import threading
        from pathlib import Path

        import funes

        env = dict(os.environ)
        root = str(Path(funes.__file__).resolve().parents[1])  # this funes, not another
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        self._options = (since, max_tokens)
        self._jobs: queue.Queue[tuple[int, Job] | None] = queue.Queue()
        self._done: dict[int, ReadFile | None] = {}
        self._ready = threading.Condition()
        self._procs = [subprocess.Popen([sys.executable, "-m", "funes.ingest.reader"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env) for _ in range(n)]
        self._alive = n
        self._threads = [threading.Thread(target=self._feed, args=(p,), daemon=True)
                         for p in self._procs]
        for t in self._threads:
            t.start()

    def submit(self, index: int, job: Job) -> None:
        self._jobs.put((index, job))

    def result(self, index: int) -> ReadFile | None:
        with self._ready:
            self._ready.wait_for(lambda: index in self._done)
            return self._done.pop(index)

    def _feed(self, proc: Any) -> None:
        """Hand jobs to one worker until it dies; then leave the jobs to the others.

        The last worker to die marks what is left for the caller to read itself.
        """
        while (item := self._jobs.get()) is not None:
            index, job = item
            try:
                _send(proc.stdin, (*job, *self._options))
                read: ReadFile | None = _receive(proc.stdout)
            except Exception:  # whatever broke, this worker is done
                read = None
            with self._ready:
                self._done[index] = read
                if read is None:
                    self._alive -= 1
                self._ready.notify_all()
            if read is None:
                break
        with self._ready:
            if self._alive > 0 or item is None:
                return
        while (item := self._jobs.get()) is not None:  # nobody left: the caller reads them
            with self._ready:
                self._done[item[0]] = None
                self._ready.notify_all()

    def close(self) -> None:
        import subprocess

        for _ in self._threads:
            self._jobs.put(None)
        for proc in self._procs:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
        for t in self._threads:
            t.join(timeout=30)
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # a worker that will not stop is killed
                proc.kill()
                proc.wait()


def _send(stream: Any, value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream: Any) -> Any:
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError("the reader process ended")
    (size,) = struct.unpack("<Q", head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the reader process ended mid-answer")
    return pickle.loads(data)  # our own child process, of this same installation


def _serve() -> None:
    """A worker: read jobs from stdin, answer each with its ReadFile on stdout, until EOF."""
    import sys

    from funes.ingest.tokenizer import get_tokenizer

    get_tokenizer()  # loaded once, before the first file
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            source, cursor, planned, since, max_tokens = _receive(stdin)
        except EOFError:
            return
        _send(stdout, read_source(source, cursor, planned, since=since, max_tokens=max_tokens))


if __name__ == "__main__":
    # through the module's own name, so results pickle as funes.ingest.reader.ReadFile and
    # not as __main__.ReadFile, which the parent could not load
    from funes.ingest.reader import _serve as serve

    serve()
