"""Name what you publish, and publish it: tags that travel, `funes push --public`.

Tags are refs `refs/tags/<name>` that never move; push and fetch carry them (funes.remotes.sync,
docs/format.md "Tags"). Making a memory public runs the publish gate over everything that would
become public (the remote's whole history, not only what one push sends) before it asks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from funes.api.remotes import Progress, PushResult, current_branch, progress_or_silent, push
from funes.errors import FunesError, UsageError
from funes.model.ids import ObjectId
from funes.model.objects import Commit
from funes.model.refs import RefName, check_ref_name
from funes.remotes import sync as _sync
from funes.remotes.base import parse_url
from funes.storage.repo import Repository, now_iso
from funes.storage.transfer import commits_between

__all__ = ["PublishCheck", "PublishRefusedError", "PublishResult", "TagInfo", "publish",
           "tag_create", "tag_delete", "tag_list"]

@dataclass(frozen=True)
class TagInfo:
    """A tag: a name for one commit, which travels with push and fetch and never moves."""

    name: str
    commit: ObjectId
    time: str | None  # the tagged commit's time


def _tag_ref(name: str) -> RefName:
    if not name or name.startswith("-"):
        raise UsageError(f"invalid tag name {name!r}", hint="use letters, digits, '.', '-', '_'")
    try:
        return check_ref_name(f"refs/tags/{name}")
    except FunesError:
        raise UsageError(f"invalid tag name {name!r}",
                         hint="use letters, digits, '.', '-', '_' (like `v1.2` or `release-3`)"
                         ) from None


def tag_create(repo: Repository, name: str, rev: str | None = None) -> TagInfo:
    """Name commit `rev` (default HEAD) `name`; a tag that exists is never moved (exit 2).

    `funes push` sends the tags of the history it publishes; `funes fetch` (and clone, pull,
    sync) brings the remote's; `--memory org/name@TAG` and `funes clone org/name@TAG` read
    the memory at that tag.
    """
    ref = _tag_ref(name)
    oid = repo.resolve(rev or "HEAD")
    with repo.writing():
        current = repo.refs.read(ref)
        if current is not None:
            raise UsageError(f"tag {name!r} already exists (at {current[:12]})",
                             hint=f"`funes tag -d {name}` first to name another commit")
        repo.refs.set_if_equals(ref, None, oid, who=repo._who(), time=now_iso(),
                                message=f"tag {name}")
    return TagInfo(name, oid, repo.objects.commit(oid).time)


def tag_delete(repo: Repository, name: str) -> TagInfo:
    """Remove a local tag (a pushed one stays on the remote: tags do not move there)."""
    ref = _tag_ref(name)
    with repo.writing():
        oid = repo.refs.read(ref)
        if oid is None:
            raise UsageError(f"no tag {name!r}", hint="`funes tag` lists them")
        repo.refs.delete_if_equals(ref, oid, who=repo._who(), time=now_iso())
    return TagInfo(name, oid, None)


def tag_list(repo: Repository) -> list[TagInfo]:
    """Every tag, by name."""
    out = []
    for ref, oid in repo.refs.iter_refs("refs/tags/"):
        commit = repo.objects.commit(oid) if repo.objects.has(oid) else None
        out.append(TagInfo(ref.removeprefix("refs/tags/"), oid, commit.time if commit else None))
    return sorted(out, key=lambda t: t.name)


# -- making a memory public --------------------------------------------------------------------


class PublishRefusedError(FunesError):
    """`push --public` found passages that still look secret: nothing was made public."""


@dataclass(frozen=True)
class PublishCheck:
    """What would become public, as the publish gate saw it."""

    remote: str
    url: str
    commits: int
    scanned: int  # chunks the gate scanned: every chunk the remote's history names


@dataclass(frozen=True)
class PublishResult:
    """What `push --public` did."""

    push: PushResult
    check: PublishCheck
    public: bool  # False when the confirmation was declined


def publish(
    repo: Repository,
    remote: str | None = None,
    *,
    confirm: Callable[[PublishCheck], bool],
    progress: Progress | None = None,
) -> PublishResult:
    """Push, run the publish gate over everything the remote holds, confirm, make it public.

    Everything that would become public is scanned: the whole history reachable from the
    remote's branches and tags after the push (fetched first, so another machine's pushes are
    scanned too), not just what this push sends. `confirm` sees the summary and may decline.

    Raises:
        UsageError: the remote is not on the Hub (only the Hub has visibility) or is encrypted.
        PublishRefusedError: the push held chunks back, or the scan flagged chunks already on
            the remote (exit 1, the memory stays private).
    """
    branch = current_branch(repo)
    name = remote or _sync.default_remote(repo, branch)
    spec = parse_url(_sync.remote_url(repo, name), repo.settings.cwd)
    if spec.kind != "hf":
        raise UsageError(f"remote {name!r} is a directory: only a Hub memory can be made public",
                         hint="share a directory remote with the file system's permissions")
    if (repo.config.get(f"remote.{name}.encrypt") or "false") == "true":
        raise UsageError(f"remote {name!r} is encrypted: making it public would publish "
                         "ciphertext nobody can read", hint="push to an unencrypted remote")
    pushed = push(repo, name, branch, progress=progress)
    if pushed.held:
        raise PublishRefusedError(
            f"{len(pushed.held)} chunk(s) still look secret and were held back; "
            "the memory stays private",
            hint="run `funes push --dry-run` to list them, `funes scrub` to redact them")
    handle = _sync.configured_remote(repo, name)
    state = handle.state()
    _sync.fetch(repo, handle, state=state, progress=progress_or_silent(progress))
    everything: dict[ObjectId, Commit] = {}
    for tip in state.refs.values():
        for oid, commit in commits_between(repo, tip, set(everything)):
            everything[oid] = commit
    from funes.remotes import gate
    from funes.storage import publish as outgoing

    try:
        out = outgoing.outgoing(repo, list(everything.items()))
    except outgoing.UnreadableRowsError as exc:
        raise gate.ScannerError(exc.message) from None
    held = gate.hold_back(out.scannable(), out.places)
    check = PublishCheck(name, spec.url, len(everything), len(out.chunk_ids))
    if held:
        raise PublishRefusedError(
            f"{len(held)} chunk(s) on {spec.display} still look secret; the memory stays "
            "private",
            hint="`funes forget --chunk ID` then `funes gc` and push again; or keep it private")
    if not confirm(check):
        return PublishResult(pushed, check, False)
    from funes.remotes.hf import set_visibility

    set_visibility(repo.settings.hf_endpoint, spec.repo_id, private=False)
    return PublishResult(pushed, check, True)

