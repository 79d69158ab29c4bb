"""Where each remote stands: the recorded outcome of the last sync, ahead/behind, the stale note.

Every `sync`, `push`, `pull` and `clone` records how it ended in
`.funes/remotes/<remote>/last-sync.json` (local state, never sent): `funes status` shows it
with the one command that fixes a failure, and recall's agent output carries a one-line note
once a memory has not synced for `sync.staleAfter` seconds (docs/agents.md). A failure that
persists is therefore visible where people look, not only in the hook log.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from funes.errors import FunesError
from funes.model.ids import ObjectId
from funes.model.refs import RefName, remote_ref
from funes.remotes import sync as _sync
from funes.remotes.base import LAST_FETCH, RemoteNotFoundError
from funes.remotes.gate import HeldChunk
from funes.remotes.sync import PushResult
from funes.storage.atomic import write_atomic
from funes.storage.repo import Repository
from funes.storage.transfer import ancestors

__all__ = ["STALE_AFTER", "LastSync", "Outcome", "RemoteStatus", "default_remote_name",
           "held_fix", "last_sync", "record_sync", "recorded", "remote_status", "sync_note"]

#: A memory that has not synced with a remote for this long gets a note in agent output.
STALE_AFTER = 86400.0
#: Largest last-sync record read back (a few fields).
_RECORD_MAX = 1 << 14


@dataclass(frozen=True)
class LastSync:
    """The last sync, push or pull against one remote, as `status` reports it."""

    time: float
    ok: bool
    #: The error's message when it failed, else a summary.
    detail: str
    #: The one command that fixes a failure (None when it succeeded).
    fix: str | None
    #: When a sync last succeeded (0: never).
    last_ok: float
    #: Chunks the publish gate keeps off this remote (they still look secret), as of the
    #: last push; the record is not ok while there are any, and `fix` says what clears them.
    withheld: tuple[HeldChunk, ...] = ()
    #: How many chunks are withheld (a record an older funes wrote has the count alone).
    held: int = 0


@dataclass(frozen=True)
class RemoteStatus:
    """One remote in `status`: how far apart the two sides are, and how the last sync went."""

    name: str
    url: str
    #: Commits of the current branch the remote lacks, and the other way round, as of the
    #: last fetch (None: never fetched), or as of now when `checked` found the remote's tip.
    ahead: int | None
    behind: int | None
    last: LastSync | None
    #: When the tracking refs last matched the remote (a fetch, pull, sync, clone or push).
    fetched_at: float | None = None
    #: The remote was asked for its tip just now (one small request) and answered.
    checked: bool = False
    #: It answered with a tip this memory has not fetched: behind by at least one commit.
    moved: bool = False
    #: Why the remote could not be asked now (the numbers are then as of the last fetch).
    check_error: str | None = None


def default_remote_name(repo: Repository) -> str:
    """The remote a bare `funes sync` (or push, pull) uses for the current branch."""
    return _sync.default_remote(repo, repo.head_branch().removeprefix("refs/heads/"))


def _record_path(repo: Repository, name: str) -> Path:
    return repo.path / "remotes" / name / "last-sync.json"


def last_sync(repo: Repository, name: str) -> LastSync | None:
    """The recorded outcome of the last sync, push or pull against remote `name`."""
    try:
        with _record_path(repo, name).open("rb") as fh:
            raw = fh.read(_RECORD_MAX + 1)
        data = json.loads(raw) if len(raw) <= _RECORD_MAX else {}
        withheld = tuple(
            HeldChunk(str(h["chunk"])[:64], str(h["harness"])[:64], str(h["session"])[:200],
                      str(h["turn"])[:200], tuple(str(d)[:100] for d in h["detectors"][:20]))
            for h in (data.get("withheld") or [])[:_WITHHELD_MAX]
        )
        return LastSync(float(data["time"]), bool(data["ok"]), str(data["detail"])[:500],
                        str(data["fix"])[:200] if data.get("fix") else None,
                        float(data.get("last_ok") or 0), withheld,
                        max(len(withheld), int(data.get("held") or 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


#: Withheld chunks a record lists at most (the count beyond is in its detail).
_WITHHELD_MAX = 50


def record_sync(repo: Repository, name: str, ok: bool, detail: str, fix: str | None,
                withheld: tuple[HeldChunk, ...] | None = None, *, verb: str = "push") -> None:
    """Record how a sync against `name` ended (`funes status` shows it; `last_sync` reads it).

    `withheld` is what the push of this sync held back (None: nothing was pushed, so what an
    earlier push held back is still withheld). While chunks are withheld the record is not
    ok, whatever the operation did: the team lacks those turns, so the last fully ok time
    stays, and the fix is the one that clears them.
    """
    now = time.time()
    before = last_sync(repo, name)
    if withheld is None:
        withheld = before.withheld if before is not None else ()
        if withheld and ok:
            rules = sorted({d for h in withheld for d in h.detectors})
            detail = (f"{detail}: nothing new to send; {len(withheld)} chunk(s) still withheld, "
                      f"they look secret ({', '.join(rules)})")
            fix = held_fix(withheld, name, verb)
    fully = ok and not withheld
    body = {"time": now, "ok": fully, "detail": detail, "fix": fix, "held": len(withheld),
            "last_ok": now if fully else (before.last_ok if before else 0),
            "withheld": [{"chunk": h.chunk, "harness": h.harness, "session": h.session,
                          "turn": h.turn, "detectors": list(h.detectors)}
                         for h in withheld[:_WITHHELD_MAX]]}
    path = _record_path(repo, name)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(body).encode())


#: Engines whose findings `funes scrub` redacts (funes.ingest.engines); a chunk only an
#: external scanner (gitleaks, trufflehog on PATH) flags must be forgotten instead.
_EXTERNAL_PREFIXES = ("gitleaks:", "trufflehog:")


def held_fix(held: Sequence[HeldChunk], name: str, verb: str = "push") -> str:
    """The command that clears chunks the gate holds back, then sends them (redacted).

    `funes scrub` runs the engines the gate runs first, so it redacts whatever they flag; what
    only an external scanner flags is beyond it, and is forgotten by id. The last step is the
    operation that held them (`funes push` or `funes sync`).
    """
    external = sorted({h.chunk[:12] for h in held
                       if all(d.startswith(_EXTERNAL_PREFIXES) for d in h.detectors)})
    steps = []
    if len(external) < len(held):
        steps.append("funes scrub")
    steps += [f"funes forget --chunk {c}" for c in external]
    again = "sync" if verb == "sync" else "push"
    return " && ".join([*steps, f"funes {again} {name}"])


@dataclass
class Outcome:
    """What the block `recorded` wraps reports back: what its push sent and held back."""

    sent: bool = False
    withheld: tuple[HeldChunk, ...] = ()

    @property
    def held(self) -> int:
        """How many chunks the push held back."""
        return len(self.withheld)

    def pushed(self, result: PushResult | None) -> None:
        """Note what the publish gate held back from `result` (None: no push ran).

        A push with nothing to send leaves what an earlier one withheld withheld.
        """
        if result is None or result.dry_run:
            return
        if result.held or not result.up_to_date:
            self.sent = True
            self.withheld = tuple(result.held)


@contextlib.contextmanager
def recorded(repo: Repository, name: str, verb: str) -> Iterator[Outcome]:
    """Record how a sync, push or pull against `name` ended (what `status` shows).

    A push the publish gate held chunks back from is recorded as not ok, with the chunks, the
    rules and the fix (`held_fix`): "ok" would tell the team it has every turn.
    """
    outcome = Outcome()
    try:
        yield outcome
    except FunesError as exc:
        record_sync(repo, name, False, exc.message, _fix_for(repo, exc, name))
        raise
    if outcome.withheld:
        rules = sorted({d for h in outcome.withheld for d in h.detectors})
        record_sync(repo, name, False,
                    f"{verb}: the publish gate held back {outcome.held} chunk(s) that still "
                    f"look secret ({', '.join(rules)}; the rest was sent)",
                    held_fix(outcome.withheld, name, verb), outcome.withheld, verb=verb)
        return
    record_sync(repo, name, True, verb, None, () if outcome.sent else None, verb=verb)


def _fix_for(repo: Repository, exc: FunesError, name: str) -> str:
    """The one command that gets a failed sync going again.

    On the Hub, a refusal (HTTP 401/403, or "no such repository, or no access", which is what
    the Hub answers a revoked token) needs a fresh token first.
    """
    url = repo.config.get(f"remote.{name}.url") or ""
    refused = isinstance(exc, RemoteNotFoundError) or "not allowed" in exc.message
    if url.startswith("hf://") and refused:
        return f"hf auth login && funes sync {name}"
    return f"funes sync {name}"


#: Seconds `status` waits for the remotes to say where their branch is (all at once).
CHECK_TIMEOUT = 5.0


def remote_status(repo: Repository, *, refresh: bool = False) -> list[RemoteStatus]:
    """Every remote: ahead/behind of the current branch against its tracking ref, last sync.

    With `refresh`, each remote is asked where its branch is now (one small request each, in
    parallel, within `CHECK_TIMEOUT` seconds), so "up to date" is true now rather than as of
    the last fetch: a tip this memory has is counted exactly, one it has not fetched means
    behind (`moved`). Nothing is downloaded and no ref moves; a remote that cannot be asked
    keeps the numbers of the last fetch, with the reason.
    """
    branch = repo.head_branch().removeprefix("refs/heads/")
    head = repo.head()
    names = [n for n in sorted(repo.config.subsections("remote"))
             if repo.config.get(f"remote.{n}.url")]
    tips = _remote_tips(repo, names, branch) if refresh and names else {}
    out = []
    ours = ancestors(repo, head) if head else set()
    for name in names:
        url = repo.config.get(f"remote.{name}.url") or ""
        tracking = repo.refs.read(remote_ref(name, branch))
        fields: dict[str, object] = {"fetched_at": _fetched_at(repo, name)}
        against = tracking
        if name in tips:
            tip, error = tips[name]
            if error is not None:
                fields["check_error"] = error
            else:
                fields["checked"] = True
                tip = _local_of(repo, name, tip)
                if tip is not None and tip != _local_of(repo, name, tracking):
                    if repo.objects.has(tip):
                        against = tip
                    else:
                        fields["moved"] = True
        ahead = behind = None
        if against is not None and repo.objects.has(against):
            theirs = ancestors(repo, _local_of(repo, name, against) or against)
            ahead, behind = len(ours - theirs), len(theirs - ours)
        out.append(RemoteStatus(name, url, ahead, behind, last_sync(repo, name),
                                **fields))  # type: ignore[arg-type]
    return out


def _local_of(repo: Repository, name: str, oid: str | None) -> ObjectId | None:
    """The local commit a remote commit stands for: a published image maps back to ours."""
    if oid is None:
        return None
    from funes.storage.publish import load_published

    images = {image: local for local, image in load_published(repo, name).items()}
    return ObjectId(images.get(oid, oid))


def _remote_tips(repo: Repository, names: list[str],
                 branch: str) -> dict[str, tuple[str | None, str | None]]:
    """Each remote's tip of `branch` now, or why it could not be asked: name → (tip, error)."""
    import threading

    found: dict[str, tuple[str | None, str | None]] = {}

    def ask(name: str) -> None:
        try:
            state = _sync.configured_remote(repo, name).state()
            found[name] = (state.refs.get(RefName(f"refs/heads/{branch}")), None)
        except FunesError as exc:
            found[name] = (None, exc.message)
        except Exception as exc:  # a check must never break `status`
            found[name] = (None, f"{exc.__class__.__name__}: {exc}")

    threads = [threading.Thread(target=ask, args=(n,), daemon=True) for n in names]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + CHECK_TIMEOUT
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    for name in names:
        found.setdefault(name, (None, f"no answer within {CHECK_TIMEOUT:.0f}s"))
    return dict(found)


def _fetched_at(repo: Repository, name: str) -> float | None:
    """When the tracking refs of `name` last matched the remote (None: not recorded)."""
    try:
        raw = (repo.path / "remotes" / name / LAST_FETCH).read_bytes()[:_RECORD_MAX]
        return float(json.loads(raw)["time"])
    except (OSError, ValueError, KeyError, TypeError):
        last = last_sync(repo, name)
        return last.last_ok or None if last is not None else None


def sync_note(repo: Repository, now: float | None = None) -> str | None:
    """One line for agent output when the memory has not synced with a remote for long."""
    stale_after = float(repo.config.get("sync.staleAfter") or STALE_AFTER)
    now = time.time() if now is None else now
    for name in sorted(repo.config.subsections("remote")):
        last = last_sync(repo, name)
        if last is not None and last.held:
            return (f"# note: {last.held} chunk(s) are withheld from {name}: they "
                    f"still look secret; run `{last.fix or 'funes scrub'}`")
        if last is None or (last.ok and now - last.time < stale_after):
            continue
        if last.last_ok and now - last.last_ok < stale_after:
            continue
        since = (datetime.fromtimestamp(last.last_ok, UTC).strftime("%Y-%m-%d %H:%M UTC")
                 if last.last_ok else "never")
        why = "" if last.ok else f" ({last.detail})"
        return (f"# note: this memory has not synced with {name} since {since}{why}; "
                f"run `{last.fix or f'funes sync {name}'}`")
    return None


