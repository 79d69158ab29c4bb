"""Name what you publish, and publish it: tags that travel, `funes push --public`.

Tags are refs `refs/tags/<name>` that never move; push and fetch carry them (funes.remotes.sync,
docs/format.md "Tags"). Making a memory public runs the publish gate over everything that would
become public (the remote's whole history, not only what one push sends) before it asks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from funes.api.remotes import Progress, PushResult, current_branch, progress_or_silent, push
from funes.api.syncstate import recorded
from funes.errors import FunesError, UsageError
from funes.ingest.redact import rules_version
from funes.model.ids import ObjectId
from funes.model.objects import Commit
from funes.model.refs import RefName, check_ref_name
from funes.remotes import sync as _sync
from funes.remotes.base import parse_url
from funes.storage.repo import Repository, now_iso
from funes.storage.transfer import commits_between

__all__ = ["PublishCheck", "PublishRefusedError", "PublishResult", "SelectionResult", "TagInfo",
           "publish", "publish_selection", "selection_remote", "tag_create", "tag_delete",
           "tag_list"]

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
    check = _scan_remote(repo, name, spec.url, progress)
    if not confirm(check):
        return PublishResult(pushed, check, False)
    from funes.remotes.hf import set_visibility

    set_visibility(repo.settings.hf_endpoint, spec.repo_id, private=False)
    return PublishResult(pushed, check, True)


def _scan_remote(repo: Repository, name: str, url: str,
                 progress: Progress | None) -> PublishCheck:
    """Run the publish gate over everything the remote's branches and tags reach.

    Fetched first, so another machine's pushes are scanned too.

    Raises:
        PublishRefusedError: the scan flagged chunks already on the remote.
    """
    handle = _sync.configured_remote(repo, name)
    state = handle.state()
    _sync.fetch(repo, handle, state=state, progress=progress_or_silent(progress),
                tags=(repo.config.get(f"remote.{name}.selection") or "false") != "true")
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
    # Tombstoned rows too: their bytes are in the remote's files, which any Lance reader sees.
    held = gate.hold_back(out.scannable(), out.places)
    if held:
        raise PublishRefusedError(
            f"{len(held)} chunk(s) on {handle.spec.display} still look secret; the memory "
            "stays private",
            hint="`funes forget --chunk ID`, then `funes push --retract` erases them there")
    return PublishCheck(name, url, len(everything), len(out.chunk_ids))



# -- publishing a selection -------------------------------------------------------------------


@dataclass(frozen=True)
class SelectionResult:
    """What `funes publish REMOTE --…` published (or, with `dry_run`, would publish)."""

    remote: str
    url: str
    branch: str
    tag: str | None
    sessions: tuple[tuple[str, str], ...]  # (harness, session id) chosen
    added: int  # chunks new to the published memory
    vectors: int  # vectors new to it
    forgotten: int  # chunks it published before that this memory has forgotten since
    chunks: int  # chunks the published memory holds afterwards
    commit: ObjectId | None  # the publish commit (None: nothing new)
    push: PushResult | None = None
    public: bool | None = None  # on the Hub: public afterwards; None for a directory remote
    dry_run: bool = False


def selection_remote(repo: Repository, remote: str) -> str:
    """The configured remote `remote` names, or one configured now for a URL.

    A URL gets a remote named after its last component (`publish-<name>`), marked as holding
    a selection, so `funes push` and `sync` refuse it.
    """
    from funes.remotes.base import check_remote_name

    names = repo.config.subsections("remote")
    if remote in names:
        return remote
    spec = parse_url(remote, repo.settings.cwd)
    for name in names:
        if repo.config.get(f"remote.{name}.url") == spec.url:
            return name
    base = "publish-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in
                                spec.display.rsplit("/", 1)[-1])[:60].strip("-")
    name, n = base, 1
    while name in names:
        n += 1
        name = f"{base}-{n}"
    check_remote_name(name)
    with repo.writing():
        repo.config.set(f"remote.{name}.url", spec.url)
        repo.config.set(f"remote.{name}.selection", "true")
    return name


def publish_selection(
    repo: Repository,
    remote: str,
    *,
    sessions: tuple[str, ...] = (),
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
    linked_to: str | None = None,
    tag: str | None = None,
    branch: str = "main",
    confirm: Callable[[PublishCheck], bool] | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> SelectionResult:
    """Publish only the chosen sessions to REMOTE: its own history, card and tag.

    The sessions meeting every criterion given (`--linked-to A..B`: those whose turns are
    linked to the code commits of the range, found in the code repository here) are written
    as one new commit on top of the remote's branch (funes.storage.selection), which goes
    through the publish gate like any push. On the Hub, `confirm` is then asked before a
    private repository is made public (None: leave its visibility as it is).

    Raises:
        UsageError: no criterion, nothing chosen, the tag exists on the remote, the remote
            holds a whole memory, or the range has no linked commit.
        NotLinkedError: no commit of `linked_to` is linked in this memory.
    """
    from funes.api.ingest import parse_since
    from funes.storage import selection

    name = selection_remote(repo, remote)
    handle = _sync.configured_remote(repo, name)
    if (repo.config.get(f"remote.{name}.encrypt") or "false") == "true":
        raise UsageError(f"remote {name!r} is encrypted: a published selection must be readable",
                         hint="publish to an unencrypted remote")
    state = handle.state()
    ref = _sync.check_branch(branch)
    tag_ref = _tag_ref(tag) if tag else None
    if tag_ref is not None and tag_ref in state.refs:
        raise UsageError(f"{handle.display} has a tag {tag!r} already (tags never move)",
                         hint="publish under another tag name")
    if state.exists and state.refs and (repo.config.get(f"remote.{name}.selection")
                                        or "false") != "true":
        raise UsageError(
            f"remote {name!r} holds a whole memory (`funes push` sends there): a selection "
            "published to it would sit beside everything else",
            hint=f"publish to a new remote; or, if it holds only selections, `funes config set "
            f"remote.{name}.selection true`")
    if state.exists and state.refs:
        _sync.fetch(repo, handle, state=state, progress=progress_or_silent(progress),
                    tags=False)
    links = []
    linked: frozenset[tuple[str, str]] | None = None
    if linked_to:
        found = _linked_range(repo, linked_to)
        linked = frozenset((h, s) for f in found for h, s, _ in f.link.turns)
        links = [f.link for f in found]
    choice = selection.Choice(tuple(sessions), project, parse_since(since) if since else None,
                              parse_since(until) if until else None, linked)
    chosen = selection.choose(repo, choice)
    if not chosen:
        raise UsageError("no session of this memory meets those criteria",
                         hint="`funes recall` or `funes status` shows what the memory holds")
    base = state.refs.get(ref)
    keys = tuple(chosen)
    if dry_run:
        there = selection.published_ids(repo, base).get("chunks", set())
        ids = set().union(*chosen.values())
        prior = repo.objects.commit(base).chunk_count if base else 0
        return SelectionResult(name, handle.spec.url, branch, tag, keys, len(ids - there), 0, 0,
                               prior + len(ids - there), None, dry_run=True)
    what = f"--linked-to {linked_to}" if linked_to else f"{len(chosen)} session(s)"
    message = f"publish {tag or branch}: {len(chosen)} session(s) ({what})"
    built = selection.build(repo, base, chosen, selection.narrowed(links, set(chosen)), message,
                            redaction=rules_version())
    tip = built.commit or base
    result = SelectionResult(name, handle.spec.url, branch, tag, keys, built.added,
                             built.vectors, built.forgotten, built.total, built.commit)
    if tip is None:
        return result
    with repo.writing():
        repo.config.set(f"remote.{name}.selection", "true")
    with recorded(repo, name, "push") as outcome:
        pushed = _sync.push(repo, handle, branch, tip=tip,
                            tags={tag_ref: tip} if tag_ref is not None else {},
                            progress=progress_or_silent(progress))
        outcome.pushed(pushed)
    public: bool | None = None
    if handle.spec.kind == "hf":
        public = _make_public(repo, name, handle.spec, confirm, progress, pushed)
    return replace(result, push=pushed, public=public)


def _linked_range(repo: Repository, spec: str) -> list[Any]:
    """The links of the code commits `spec` names (`A..B`), in the code repository here."""
    from funes.gitlink.coderepo import commit_range, find_code_repo
    from funes.gitlink.links import NotLinkedError, links_for

    shas = commit_range(find_code_repo(repo.settings.cwd), spec)
    found = [f for items in links_for(repo, shas).values() for f in items]
    if not found:
        raise NotLinkedError(spec)
    return found


def _make_public(repo: Repository, name: str, spec: Any,
                 confirm: Callable[[PublishCheck], bool] | None,
                 progress: Progress | None, pushed: PushResult) -> bool:
    """After a selection's push: ask, then make the Hub repository public (the whole scanned)."""
    from funes.remotes.hf import is_private, set_visibility

    if not is_private(repo.settings.hf_endpoint, spec.repo_id):
        return True
    if confirm is None or pushed.held:
        return False
    check = _scan_remote(repo, name, spec.url, progress)
    if not confirm(check):
        return False
    set_visibility(repo.settings.hf_endpoint, spec.repo_id, private=False)
    return True
