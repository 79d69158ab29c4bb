"""The background backfill: embedding a long history after `funes add`, in steps that finish.

On a first run the history is searchable by its words at once (funes.api.ingest); its vectors
take the model's time, hours for a heavy history on two cores (about 12-16 chunks/s). So
`funes add` (and `funes embed --background`, and a hook run that leaves a backlog) starts one
detached process, `funes embed --worker`, which:

- embeds newest first (funes.ingest.backlog.drain), committing every `BATCH` chunks, so a kill
  at any moment loses at most one batch and the next backfill resumes where it stopped;
- yields: it runs at a lower CPU priority (`NICE`) with one llama.cpp thread fewer than the
  machine has, so recalls and the agent come first; it holds the write lock only to commit a
  batch, and the hook worker's per-turn indexing waits for that instead of giving up
  (funes.api.hookworker);
- works in `STEP`-chunk rounds, looking at the backlog again between rounds (turns indexed
  meanwhile join it) and doing the upkeep a hook would (packing fragments, the vector index);
- stops when nothing waits, and records how far it got in `index/backfill.json`, which
  `funes status` turns into "N embedded, M waiting, done in about T".

One embedder per memory: the backfill holds the memory's embed lock for its whole run, so a
second one (or the hook worker's own little embedding) stands aside while it works.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from funes import process
from funes._env import Settings
from funes.errors import FunesError
from funes.ingest import backlog as _backlog
from funes.ingest.backlog import BackfillProgress, EmbeddingBusyError
from funes.storage.repo import Repository

if TYPE_CHECKING:
    from funes.inference.protocols import EmbedderProtocol

__all__ = ["BackfillStart", "BackfillStatus", "backfill_run", "backfill_status",
           "start_backfill"]

#: Chunks embedded per commit (≈ 10 s of the model's time here): what a kill can lose.
BATCH = 128
#: Chunks per round; between rounds the backlog is counted again and upkeep runs.
STEP = 2048
#: How much lower the backfill's CPU priority is (`nice`): recalls and the agent go first.
NICE = 10
#: Seconds between progress writes (and a write after every commit past that).
REPORT_EVERY = 2.0
#: The backfill's log, inside the memory (kept small: funes.process.open_log).
LOG = "index/backfill.log"


@dataclass(frozen=True)
class BackfillStart:
    """What `start_backfill` did."""

    #: "started", "running" (one was already), "nothing" (no backlog), "no-model" (none
    #: installed: `detail` names the command), "failed" (the process could not start).
    action: str
    pid: int | None = None
    waiting: int = 0
    detail: str = ""


@dataclass(frozen=True)
class BackfillStatus:
    """The backfill as `funes status` shows it."""

    running: bool
    pid: int | None
    embedded: int  # by this (or the last) backfill
    waiting: int  # at its last look
    rate: float  # chunks/s
    state: str  # "running", "done", "failed", "stopped" (killed, or the machine went down)
    started: float
    updated: float
    detail: str = ""


def _model_name(settings: Settings, repo: Repository) -> str:
    from funes.inference import models

    stamp = repo.model_stamp()
    return stamp.name if stamp else repo.config.get("model.embed") or models.DEFAULT_EMBED_MODEL


def start_backfill(settings: Settings, repo: Repository) -> BackfillStart:
    """Start the detached backfill of `repo` unless nothing waits or one already runs.

    Never installs a model: with none installed it says which command would (`no-model`).
    """
    from funes.inference import models

    pid = _backlog.embedding_pid(repo)
    if pid is not None:
        return BackfillStart("running", pid or None)
    waiting = _backlog.estimate(repo)
    if waiting <= 0:
        return BackfillStart("nothing")
    name = _model_name(settings, repo)
    if models.installed(settings, name) is None:
        return BackfillStart("no-model", None, waiting, f"`funes models install {name}`, then "
                             "`funes embed --background`")
    fd = process.open_log(repo.path / LOG)
    try:
        child = process.detach(
            [sys.executable, "-m", "funes", "--format", "agent", "--memory", str(repo.path),
             "embed", "--worker"], cwd=repo.path, stdout=fd, stderr=fd)
    except OSError as exc:
        return BackfillStart("failed", None, waiting, f"cannot start the backfill: {exc}")
    finally:
        os.close(fd)
    return BackfillStart("started", child.pid, waiting)


def backfill_status(repo: Repository) -> BackfillStatus | None:
    """How the last backfill of `repo` stands; None when none ever ran."""
    last = BackfillProgress.load(repo)
    if last is None:
        return None
    pid = _backlog.embedding_pid(repo)
    running = pid is not None and last.state == "running"
    state = last.state if running or last.state != "running" else "stopped"
    return BackfillStatus(running, (pid or last.pid) if running else last.pid, last.embedded,
                          last.waiting, last.rate, state, last.started, last.updated,
                          last.detail)


def backfill_run(settings: Settings, repo: Repository, say: Callable[[str], None]) -> int:
    """The detached backfill's own work (`funes embed --worker`): embed until nothing waits.

    Returns the number of chunks embedded. Exits at once, embedding nothing, when another
    process embeds this memory. Errors end the run with `state: failed` recorded; what was
    committed stays.
    """
    from funes.inference.embedder import load_embedder
    from funes.inference.runtime import default_threads

    with contextlib.suppress(OSError):
        os.nice(NICE)
    name = _model_name(settings, repo)
    run = _Run(repo, BackfillProgress(os.getpid(), name, time.time(), time.time(),
                                      waiting=_backlog.estimate(repo)))
    try:
        with _backlog.embedding(repo):
            embedder = load_embedder(settings, name, n_threads=max(1, default_threads() - 1))
            run.rounds(embedder, say)
    except EmbeddingBusyError as exc:
        say(f"not backfilling: {exc}")
        return 0
    except (FunesError, OSError) as exc:
        _finish(repo, run.progress, "failed", str(exc), say)
        return run.done
    _finish(repo, run.progress, "done", "", say)
    return run.done


class _Run:
    """One backfill's rounds and the progress it writes."""

    def __init__(self, repo: Repository, progress: BackfillProgress) -> None:
        self.repo = repo
        self.progress = progress
        self.done = 0  # chunks embedded in finished rounds
        self.waiting = progress.waiting  # at the start of this round
        self._written = 0.0

    def report(self, done: int, _total: int, _label: str) -> None:
        """Progress of `drain`: written to `index/backfill.json` every REPORT_EVERY seconds."""
        now = time.time()
        if now - self._written < REPORT_EVERY:
            return
        self._written = now
        p = self.progress
        p.embedded, p.waiting, p.updated = self.done + done, max(0, self.waiting - done), now
        p.rate = p.embedded / max(1e-6, now - p.started)
        p.save(self.repo)

    def rounds(self, embedder: EmbedderProtocol, say: Callable[[str], None]) -> None:
        """Embed STEP chunks at a time, newest first, with upkeep between, until none wait."""
        from funes.retrieval import indexes

        while True:
            self.waiting = _backlog.backlog(self.repo).waiting
            if self.waiting == 0:
                return
            step = _backlog.drain_held(self.repo, embedder, limit=STEP, batch=BATCH,
                                       progress=self.report)
            self.done += step.embedded
            self.progress.embedded = self.done
            say(f"embedded {step.embedded} chunks in {step.seconds:.0f}s, {step.remaining} "
                f"waiting in {self.repo.path}")
            indexes.maintain(self.repo)
            with contextlib.suppress(FunesError):
                indexes.ensure_vectors(self.repo, lock_timeout=0)
            if step.embedded == 0:
                return  # nothing could be embedded: stop rather than spin


def _finish(repo: Repository, progress: BackfillProgress, state: str, detail: str,
            say: Callable[[str], None]) -> None:
    now = time.time()
    progress.state, progress.detail, progress.updated = state, detail, now
    progress.waiting = _backlog.estimate(repo) if state == "done" else progress.waiting
    progress.rate = progress.embedded / max(1e-6, now - progress.started)
    progress.save(repo)
    say(f"backfill {state}: {progress.embedded} chunks embedded"
        + (f" ({detail})" if detail else ""))
