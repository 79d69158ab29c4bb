"""The detached work of the agent hooks: `funes hook run`.

The hook script (funes.agents.turnhook) queues each agent event and starts one detached
`funes hook run`, which drains the queue: it indexes the transcripts the events name (routed
like `funes index`, or into the memory `funes add <agent> MEMORY` bound), embeds a little of
the backlog, and keeps a memory with a remote in sync with it (funes.api.share.sync: fetch →
merge → push, a lost race retried):

- at a session start, the memory is brought up to date (fetch and merge only), within
  `START_TIMEOUT` seconds; the agent never waits for it (this process is detached);
- at a session end, a full sync, within `SYNC_TIMEOUT` seconds;
- for agents without a session end (Codex), a full sync after a turn at most every
  `sync.interval` seconds (config; default `SYNC_INTERVAL`), and at once when a turn of
  another session arrives: the last session ended, so its last turns sync then (and the new
  session's memory is brought up to date).

Each sync runs as `funes --memory PATH sync` in a child process bounded in time, so a hung
network costs one timeout, never the whole run; its outcome is recorded where `funes status`
shows it, with the command that fixes a failure. One run at a time (a lock, taken without
waiting); a busy memory is skipped, never waited for: the next turn's hook, or `funes index`,
catches up.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from funes import process
from funes._env import Settings
from funes.agents.turnhook import lock_path, queue_dir
from funes.agents.wiring import agents_dir
from funes.api.agents import MODULES
from funes.api.routing import routing_for
from funes.api.search import embed
from funes.errors import FunesError
from funes.ingest.run import index_sources
from funes.ingest.sources import explicit_sources
from funes.storage.atomic import write_atomic
from funes.storage.lock import RepositoryBusyError, WriteLock
from funes.storage.repo import Repository

__all__ = ["hook_run"]

#: Seconds a detached hook run may take in all (then it is stopped; crash-safe storage).
HOOK_DEADLINE = 600
#: Seconds of embedding after each hook's indexing; what is left then goes to the background
#: backfill (funes.api.backfill), which runs until nothing waits.
EMBED_BUDGET = 20.0
#: Seconds the indexing of a turn waits for the write lock: the backfill holds it only to
#: commit a batch of vectors, and a turn must not be left for the next hook because of that.
INDEX_LOCK_WAIT = 15.0
#: Seconds a session-end sync may take.
SYNC_TIMEOUT = 90.0
#: Seconds a session-start update (fetch and merge) may take.
START_TIMEOUT = 30.0
#: Agents without a session-end event sync after a turn at most this often (seconds).
SYNC_INTERVAL = 900.0
#: Agents whose hooks never report a session end.
NO_SESSION_END = ("codex", "opencode")


@dataclass
class _Request:
    agent: str
    event: str
    payload: dict[str, Any]
    cwd: str
    ident: str


def _take_queue(settings: Settings) -> list[_Request]:
    """Every queued event (oldest first), removed from the queue."""
    import json

    out = []
    for path in sorted(queue_dir(settings).glob("*.json")):
        try:
            body = json.loads(path.read_text("utf-8"))
            path.unlink()
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        if isinstance(body, dict) and body.get("agent") in MODULES:
            payload = body.get("payload")
            out.append(_Request(str(body["agent"]), str(body.get("event") or "turn-end"),
                                payload if isinstance(payload, dict) else {},
                                str(body.get("cwd") or ""), str(body.get("id") or path.stem)))
    return out


def _index_agent(settings: Settings, agent: str, requests: list[_Request],
                 say: Callable[[str], None]) -> dict[Path, Repository]:
    """Index the transcripts the agent's events name; the memories that got new chunks."""
    module = MODULES[agent]
    paths: list[Path] = []
    for r in requests:
        paths += [p for p in module.transcripts(settings, r.payload) if p not in paths]
    if not paths:
        say(f"{agent}: no transcript found for {len(requests)} event(s)")
        return {}
    # Routed like `funes index`, or into the bound memory; a project memory only ever gets
    # its own project's sessions (funes.api.routing).
    router, states, repos = routing_for(settings, agent).router()
    with contextlib.closing(states):
        summary = index_sources(explicit_sources(paths, harness=agent), router, states,
                                lock_timeout=INDEX_LOCK_WAIT)
    for path, committed in summary.commits.items():
        say(f"{agent}: {summary.turns} turns, {committed.added} new chunks in {path}")
    if not summary.commits:
        say(f"{agent}: {len(paths)} transcript(s), nothing new")
    if summary.unroutable:
        say(f"{agent}: {summary.unroutable} turns outside any memory "
            "(run `funes init --global` to keep them)")
    for error in summary.errors:
        say(f"{agent}: unreadable: {error}")
    return {Path(p): repos[Path(p)] for p, c in summary.commits.items()
            if c.added and Path(p) in repos}


def _embed_some(settings: Settings, repo: Repository, say: Callable[[str], None]) -> None:
    """Drain a little of the embedding backlog, installing the model from this machine if needed.

    A missing model is installed only from sources that need no network (a PyPI package
    installed since `funes add` ran, converted in about a second); downloading is for `funes
    add` and `funes embed`, where someone watches. Stands aside while the background backfill
    embeds this memory; hands it what is still waiting after `EMBED_BUDGET` seconds (it starts
    one when none runs: so a backfill that was killed resumes with the next turn).
    """
    from funes.api.backfill import start_backfill
    from funes.inference import models
    from funes.ingest.backlog import embedding_pid

    running = embedding_pid(repo)
    if running is not None:
        say(f"embed: the background backfill (pid {running}) is embedding {repo.path}")
        return
    stamp = repo.model_stamp()
    name = stamp.name if stamp else repo.config.get("model.embed") or models.DEFAULT_EMBED_MODEL
    if models.installed(settings, name) is None:
        try:
            info = models.install(name, settings, offline=True)
            say(f"embed: installed {name} ({info.source})")
        except FunesError:
            say(f"embed: model {name} is not installed; `funes embed` installs it and "
                "catches up")
            return
    from funes.inference.embedder import default_threads

    # One CPU is left to the agent and the user: llama.cpp's threads spin-wait, and with every
    # core taken by a busy machine 2 threads ran 6-12× slower than 1 here (bench/results/
    # recall.md, build notes).
    done = embed(settings, repo, budget=EMBED_BUDGET, lock_timeout=0,
                 n_threads=max(1, default_threads() - 1))
    say(f"embed: {done.embedded} chunks in {done.seconds:.1f}s ({done.threads} llama.cpp "
        f"thread{'s' if done.threads > 1 else ''}), {done.remaining} waiting in {repo.path}")
    if done.remaining:
        started = start_backfill(settings, repo)
        if started.action == "started":
            say(f"embed: the background backfill (pid {started.pid}) takes the rest")


def maintain(repo: Repository, say: Callable[[str], None]) -> None:
    """Pack the memory and fold new rows into its indexes when due; never fails the hook."""
    from funes.retrieval.indexes import maintain as upkeep

    try:
        done = upkeep(repo)
    except (FunesError, OSError, RuntimeError, ValueError) as exc:  # Lance errors too
        say(f"pack: {repo.path}: {exc}")
        return
    if done.packed is not None and done.packed.did_pack:
        say(f"pack: {sum(done.packed.packed.values())} fragments packed in "
            f"{done.packed.seconds:.1f}s in {repo.path}")
    if done.folded:
        say(f"index: {done.folded} rows folded into the search indexes of {repo.path}")


def _sync(repo: Repository, event: str, say: Callable[[str], None]) -> None:
    """`funes sync` for a memory with a remote, bounded in time, never failing the hook.

    At a session start only fetch and merge (`--no-push`): nothing new was written yet.
    """
    start = event == "session-start"
    args = ["--format", "agent", "--memory", str(repo.path), "sync",
            *(["--no-push"] if start else [])]
    stamp = repo.path / "index" / "last-hook-sync"
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.touch()
    ok, detail = process.run_funes(args, cwd=repo.path,
                                   timeout=START_TIMEOUT if start else SYNC_TIMEOUT)
    if ok:
        say(f"sync: {repo.path}: {detail or 'done'}")
        return
    if "no answer within" in detail:
        _record_timeout(repo, detail)
    say(f"sync: {repo.path} not synced ({detail}); `funes status` shows why, "
        "`funes sync` retries")


def _record_timeout(repo: Repository, detail: str) -> None:
    """A sync killed at its deadline could not record its failure itself: record it here."""
    from funes.api.syncstate import default_remote_name, record_sync

    with contextlib.suppress(FunesError):
        name = default_remote_name(repo)
        record_sync(repo, name, False, f"timed out: {detail}", f"funes sync {name}")


def _sync_due(repo: Repository) -> bool:
    stamp = repo.path / "index" / "last-hook-sync"
    interval = float(repo.config.get("sync.interval") or SYNC_INTERVAL)
    try:
        return time.time() - stamp.stat().st_mtime >= interval
    except FileNotFoundError:
        return True


def _session_memory(settings: Settings, agent: str, request: _Request) -> Repository | None:
    cwd = request.payload.get("cwd") or request.cwd
    with contextlib.suppress(FunesError, OSError):
        return routing_for(settings, agent).session_memory(str(cwd) if cwd else None)
    return None


def _handle(settings: Settings, requests: list[_Request], say: Callable[[str], None]) -> None:
    touched: dict[Path, Repository] = {}
    for agent in dict.fromkeys(r.agent for r in requests):
        mine = [r for r in requests if r.agent == agent and r.event != "session-start"]
        if not mine:
            continue
        try:
            touched.update(_index_agent(settings, agent, mine, say))
        except RepositoryBusyError:
            say(f"{agent}: the memory is busy (another writer); the next hook or "
                "`funes index` picks these turns up")
        except FunesError as exc:
            say(f"{agent}: not indexed: {exc}")
    for repo in touched.values():
        try:
            _embed_some(settings, repo, say)
        except RepositoryBusyError:
            say(f"embed: {repo.path} is busy; the next hook continues")
        except FunesError as exc:
            say(f"embed: {repo.path}: {exc}")
        maintain(repo, say)
    synced: set[Path] = set()
    for r in requests:
        boundary = r.event in ("session-end", "session-start")
        if not boundary and r.agent not in NO_SESSION_END:
            continue
        targets = [_session_memory(settings, r.agent, r)]
        ended = None if boundary else _session_changed(settings, r)
        if ended is not None:
            # The agent has no session-end event: a turn of another session means the last
            # one ended, so its memory syncs now, whatever `sync.interval` says.
            targets.append(_session_memory(settings, r.agent, ended))
        for target in targets:
            if target is None or target.path in synced \
                    or not target.config.subsections("remote"):
                continue
            if not boundary and ended is None and not _sync_due(target):
                continue
            synced.add(target.path)
            _sync(target, r.event, say)


def _session_of(payload: dict[str, Any]) -> str | None:
    """The session an event belongs to (Codex's `thread-id`, else `session_id`)."""
    for key in ("thread-id", "thread_id", "session_id", "sessionID"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _session_changed(settings: Settings, request: _Request) -> _Request | None:
    """The last session's event when `request` is the first seen of another session, else None.

    Kept per agent in `$FUNES_HOME/agents/last-session-<agent>.json` (its id and directory),
    for the agents that never report a session end (Codex).
    """
    import json

    session = _session_of(request.payload)
    if session is None:
        return None
    path = agents_dir(settings) / f"last-session-{request.agent}.json"
    try:
        before = json.loads(path.read_bytes()[: 1 << 14])
    except (OSError, ValueError):
        before = None
    cwd = request.payload.get("cwd") or request.cwd
    if isinstance(before, dict) and before.get("session") == session:
        return None
    with contextlib.suppress(OSError):
        write_atomic(path, json.dumps({"session": session, "cwd": cwd}).encode(), durable=False)
    if not isinstance(before, dict) or not isinstance(before.get("session"), str):
        return None
    return _Request(request.agent, "turn-end", {"cwd": str(before.get("cwd") or "")},
                    str(before.get("cwd") or ""), request.ident)


def hook_run(settings: Settings, say: Callable[[str], None]) -> int:
    """Drain the hook queue (`funes hook run`); the number of events handled.

    `say` receives the lines of the hook log, each dated (funes.process.utc_stamp): the
    detached run's output is that log (funes.agents.turnhook starts it so).

    Returns at once, handling nothing, when another hook run holds the lock: that run looks at
    the queue again before it stops. The whole run is bounded by `HOOK_DEADLINE` seconds.
    """

    def dated(line: str) -> None:
        say(f"{process.utc_stamp()} {line}")

    signal.alarm(HOOK_DEADLINE)
    try:
        return _drain(settings, dated)
    finally:
        signal.alarm(0)


def _drain(settings: Settings, say: Callable[[str], None]) -> int:
    handled = 0
    agents_dir(settings).mkdir(parents=True, exist_ok=True)
    while True:
        lock = WriteLock(lock_path(settings), 0)
        try:
            lock.acquire()
        except RepositoryBusyError:
            say("another hook run is indexing; it takes these events too")
            return handled
        try:
            while requests := _take_queue(settings):
                handled += len(requests)
                _handle(settings, requests, say)
                say(f"done {' '.join(r.ident for r in requests)}")
        finally:
            lock.release()
        # an event queued between the last look and the release would wait for the next turn
        if not any(queue_dir(settings).glob("*.json")):
            return handled
