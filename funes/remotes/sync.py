"""push and fetch: moving commits, objects and fragment files between a memory and a remote.

Both speak only the `Remote` protocol, so the directory remote and the Hub behave alike:

- **fetch** reads the remote's refs once (that is the pinned state), downloads the objects the
  local memory lacks, walking from the remote tips and stopping at commits already present,
  then the fragment files their manifests name; everything is verified (funes.storage.transfer)
  before it is stored, and the remote-tracking refs move last. The local tables are not
  touched: merging is a separate step.
- **push** refuses a non-fast-forward unless forced, works out what the remote lacks (commits
  not reachable from any remote tip, and of those the objects and fragment files not already
  there), and hands the remote one plan that it applies with a compare-and-swap on the ref.
  A push with nothing new contacts the remote once and changes nothing.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from funes._env import Settings
from funes.errors import FunesError, UsageError
from funes.model.ids import ObjectId
from funes.model.objects import (
    AnyObject,
    Commit,
    DataFile,
    Manifest,
    ModelStamp,
)
from funes.model.refs import RefName, branch_ref, check_ref_name, remote_ref
from funes.remotes import crypt, foreign, gate
from funes.remotes.base import (
    CardStats,
    NonFastForwardError,
    NoSuchRemoteError,
    Progress,
    PushPlan,
    Remote,
    RemoteDataError,
    RemoteNotFoundError,
    RemoteSpec,
    RemoteState,
    TableUpdate,
    check_remote_name,
    no_progress,
    note_fetched,
    parse_url,
)
from funes.remotes.hf import HubRemote
from funes.remotes.layout import object_path, table_file
from funes.remotes.local import DirectoryRemote
from funes.storage import publish, retract
from funes.storage.repo import Repository, now_iso
from funes.storage.transfer import (
    TransferError,
    ancestors,
    check_data_file,
    commits_between,
    install_data_file,
    is_ancestor,
    parse_received,
    referenced,
    store_objects,
    verify_fragments,
)

# -- opening remotes -------------------------------------------------------------------------


def open_remote(
    spec: RemoteSpec, name: str, settings: Settings, repo_path: Path, *, lock_timeout: float = 5.0
) -> Remote:
    """A `Remote` for a parsed URL; its caches live under `<repo>/remotes/<name>/`."""
    remote: Remote
    if spec.kind == "hf":
        remote = HubRemote(
            name,
            spec,
            state_dir=repo_path / "remotes" / name,
            workdir=repo_path / "tmp",
            endpoint=settings.hf_endpoint,
        )
    else:
        remote = DirectoryRemote(name, spec, lock_timeout=lock_timeout)
    # Encrypted when this machine holds a key for the URL (funes.remotes.crypt).
    return crypt.wrap(remote, settings, required=False)


def remote_url(repo: Repository, name: str) -> str:
    """The URL a configured remote points to."""
    check_remote_name(name)
    url = repo.config.get(f"remote.{name}.url")
    if not url:
        raise NoSuchRemoteError(name)
    return url


def configured_remote(repo: Repository, name: str) -> Remote:
    """The remote named `name` in the memory's config.

    Fails closed on `remote.<name>.encrypt=true` without a key for its URL: sending plaintext
    to a remote the user asked to be encrypted is the one thing this must never do.
    """
    spec = parse_url(remote_url(repo, name), repo.settings.cwd)
    timeout = float(repo.config.get("core.lockTimeout") or repo.settings.lock_timeout)
    remote = open_remote(spec, name, repo.settings, repo.path, lock_timeout=timeout)
    if (repo.config.get(f"remote.{name}.encrypt") or "false") == "true":
        return crypt.wrap(remote, repo.settings, required=True)
    return remote


def default_remote(repo: Repository, branch: str | None = None) -> str:
    """The remote a bare push/fetch/pull uses: the branch's, else `origin`, else the only one."""
    if branch:
        tracked = repo.config.get(f"branch.{branch}.remote")
        if tracked:
            return tracked
    names = repo.config.subsections("remote")
    if "origin" in names or not names:
        return "origin"
    if len(names) == 1:
        return names[0]
    raise UsageError(
        f"several remotes ({', '.join(sorted(names))}) and none is `origin`",
        hint="name the remote: `funes push NAME`",
    )


# -- fetch -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RefUpdate:
    """One remote-tracking ref that moved."""

    ref: str
    old: ObjectId | None
    new: ObjectId


@dataclass(frozen=True)
class FetchResult:
    """What `fetch` brought."""

    remote: str
    url: str
    revision: str | None
    refs: dict[str, ObjectId] = field(default_factory=dict)  # remote branches and their tips
    updated: list[RefUpdate] = field(default_factory=list)
    objects: int = 0
    files: int = 0
    bytes: int = 0
    #: The remote was rewritten by a retraction (images that replace commits arrived, now or
    #: in an earlier fetch not yet followed by a pull): `pull` adopts it (rewritten_from).
    rewritten: bool = False


def fetch(
    repo: Repository,
    remote: Remote,
    *,
    state: RemoteState | None = None,
    progress: Progress = no_progress,
    tags: bool = True,
) -> FetchResult:
    """Download what the remote has and this memory lacks; move `refs/remotes/<name>/*`.

    `tags=False` creates none of the remote's tags here (a published selection's tags name
    commits outside this memory's history).

    Raises:
        RemoteNotFoundError: nothing at the URL (or no access).
        RemoteDataError: the remote sent something that fails verification; nothing of it
            was stored and no ref moved.
    """
    st = state if state is not None else remote.state()
    if not st.exists:
        raise RemoteNotFoundError(
            f"{remote.display}: no funes memory there",
            hint="check the URL; a private Hub memory needs a token (HF_TOKEN or "
            "`hf auth login`)",
        )
    staging = _staging(repo, "fetch-")
    try:
        objects = _fetch_objects(repo, remote, st, progress)
        files, nbytes = _fetch_files(repo, remote, st, objects, staging, progress)
        try:
            written = store_objects(repo, objects)
        except FunesError as exc:
            raise RemoteDataError(f"{remote.display}: {exc.message}") from None
        nbytes += sum(len(raw) for raw, _ in objects.values())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if any(isinstance(obj, Commit) and obj.replaces for _, obj in objects.values()):
        retract.note_rewrite(repo, remote.name)
    updated = _update_tracking(repo, remote.name, st, f"fetch {remote.name}")
    if tags:
        updated += _take_tags(repo, st, f"fetch {remote.name}")
    refs = {str(ref): oid for ref, oid in st.branches.items()}
    return FetchResult(
        remote.name, remote.spec.url, st.revision, refs, updated, written, files, nbytes,
        retract.rewritten_from(repo, remote.name) is not None,
    )


def _staging(repo: Repository, prefix: str) -> Path:
    """A scratch directory inside the repository (same file system: renames are atomic)."""
    root = repo.path / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=root))


def _fetch_objects(
    repo: Repository, remote: Remote, st: RemoteState, progress: Progress
) -> dict[ObjectId, tuple[bytes, AnyObject]]:
    """Every object reachable from the remote tips that is missing here, verified.

    The walk stops at commits present locally: a commit is only ever stored after its whole
    history (funes.storage.transfer.store_objects), so its ancestors are here too.
    """
    frontier: dict[ObjectId, str] = {
        oid: "commit" for oid in st.refs.values() if not repo.objects.has(oid)
    }
    pool: dict[ObjectId, bytes] = {}
    if frontier:
        listed = remote.object_ids(st)
        if listed:
            wanted = sorted(o for o in listed if not repo.objects.has(o))
            progress(0, len(wanted), "objects")
            pool.update(remote.read_objects(st, wanted))
    found: dict[ObjectId, tuple[bytes, AnyObject]] = {}
    while frontier:
        need = [oid for oid in frontier if oid not in pool]
        if need:
            pool.update(remote.read_objects(st, need))
        following: dict[ObjectId, str] = {}
        for oid, kind in frontier.items():
            if oid not in pool:
                raise RemoteDataError(f"{remote.display} is missing object {oid}")
            try:
                obj = parse_received(oid, pool[oid], kind, remote.display)
            except TransferError as exc:
                raise RemoteDataError(exc.message, hint=exc.hint) from None
            found[oid] = (pool[oid], obj)
            if isinstance(obj, Commit):
                for child, child_kind in referenced(obj):
                    if child not in found and not repo.objects.has(child):
                        following[child] = child_kind
        frontier = following
        progress(len(found), len(found) + len(frontier), "objects")
    return found


def _fetch_files(
    repo: Repository,
    remote: Remote,
    st: RemoteState,
    objects: dict[ObjectId, tuple[bytes, AnyObject]],
    staging: Path,
    progress: Progress,
) -> tuple[int, int]:
    """Download the fragment files new manifests name, and check each manifest against them.

    Nothing is installed until every manifest passed. A manifest may also name files already
    here (its hashes match them): those are checked in place, since the metadata that comes
    with them is new.
    """
    wanted: dict[str, tuple[str, DataFile]] = {}
    manifests: list[tuple[ObjectId, Manifest]] = []
    stamps: dict[str, ModelStamp | None] = {}  # manifest → the model of a commit naming it
    for _, obj in objects.values():
        if isinstance(obj, Commit):
            for mid in obj.manifests:
                stamps.setdefault(mid, obj.model)
    for oid, (_, obj) in objects.items():
        if not isinstance(obj, Manifest):
            continue
        manifests.append((oid, obj))
        table = repo.table(obj.table)
        for record in obj.fragments:
            for f in record.files:
                if not (table.path / f.path).is_file():
                    wanted.setdefault(table_file(obj.table, f.path), (obj.table, f))
    names = sorted(wanted)
    downloads = [(name, staging / f"{i:06d}") for i, name in enumerate(names)]
    staged: dict[tuple[str, str], tuple[Path, DataFile]] = {}
    nbytes = 0
    try:
        if downloads:
            remote.download(st, downloads, progress,
                            sizes={name: wanted[name][1].size for name in names})
        for name, local in downloads:
            table_name, data = wanted[name]
            nbytes += check_data_file(data, local, remote.display)
            staged[(table_name, data.path)] = (local, data)
        # Chunks are appended to the local table as they are; vectors of another model (and
        # dimension) may be fetched, and are refused only by a merge (ModelMismatchError).
        chunks = repo.table("chunks")
        schemas = {"chunks": chunks.dataset().schema} if chunks.exists() else {}
        for oid, manifest in manifests:
            table = repo.table(manifest.table)
            paths = {
                f.path: staged[(manifest.table, f.path)][0]
                if (manifest.table, f.path) in staged else table.path / f.path
                for record in manifest.fragments for f in record.files
            }
            verify_fragments(manifest.table, manifest.ids, manifest.fragments, paths,
                             f"{remote.display} manifest {oid[:12]}", stamps.get(oid),
                             schemas.get(manifest.table))
        for (table_name, _), (local, data) in staged.items():
            install_data_file(repo.table(table_name), data, local, remote.display, checked=True)
    except TransferError as exc:
        raise RemoteDataError(exc.message, hint=exc.hint) from None
    return len(downloads), nbytes


def _update_tracking(
    repo: Repository, name: str, st: RemoteState, message: str
) -> list[RefUpdate]:
    """Point `refs/remotes/<name>/<branch>` at the remote's tips (forced, like git's `+`)."""
    note_fetched(repo.path, name)
    updated: list[RefUpdate] = []
    with repo.writing():
        for ref, oid in sorted(st.branches.items()):
            tracking = remote_ref(name, ref.removeprefix("refs/heads/"))
            current = repo.refs.read(tracking)
            if current != oid:
                repo.refs.set_if_equals(
                    tracking, current, oid, who=repo._who(), time=now_iso(), message=message
                )
                updated.append(RefUpdate(tracking, current, oid))
    return updated


def _take_tags(repo: Repository, st: RemoteState, message: str) -> list[RefUpdate]:
    """Create the remote's tags this memory lacks (`refs/tags/<name>`).

    Like git, a local tag of the same name is never moved.
    """
    updated: list[RefUpdate] = []
    new = {ref: oid for ref, oid in st.tags.items() if repo.refs.read(ref) is None}
    if not new:
        return updated
    with repo.writing():
        for ref, oid in sorted(new.items()):
            if repo.refs.read(ref) is None and repo.objects.has(oid):
                repo.refs.set_if_equals(ref, None, oid, who=repo._who(), time=now_iso(),
                                        message=message)
                updated.append(RefUpdate(ref, None, oid))
    return updated


def _tags_to_send(
    repo: Repository, st: RemoteState, tip: ObjectId, published: dict[str, str]
) -> dict[RefName, ObjectId]:
    """Local tags on the pushed history that the remote lacks (as their published images)."""
    tags = dict(repo.refs.iter_refs("refs/tags/"))
    missing = {ref: oid for ref, oid in tags.items() if ref not in st.refs}
    if not missing:
        return {}
    history = ancestors(repo, tip)
    return {ref: ObjectId(published.get(oid, oid)) for ref, oid in missing.items()
            if oid in history}


# -- push --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PushResult:
    """What `push` did."""

    remote: str
    url: str
    branch: str
    old: ObjectId | None  # the remote branch before
    new: ObjectId  # and after
    up_to_date: bool
    forced: bool = False
    created: bool = False  # the remote (repository or directory) was created by this push
    hub: bool = False  # a Hugging Face Hub remote (else a directory)
    revision: str | None = None  # the remote's new revision (the Hub commit id)
    commits: int = 0
    objects: int = 0
    files: int = 0
    bytes: int = 0
    #: Chunks the publish gate kept back (they still look secret); never their text.
    held: tuple[gate.HeldChunk, ...] = ()
    dry_run: bool = False
    scanned: int = 0  # chunks the gate scanned


def push(
    repo: Repository,
    remote: Remote,
    branch: str,
    *,
    force: bool = False,
    progress: Progress = no_progress,
    dry_run: bool = False,
    scanners: Sequence[gate.Scanner] | None = None,
    tip: ObjectId | None = None,
    tags: Mapping[RefName, ObjectId] | None = None,
) -> PushResult:
    """Send `branch` to the remote's branch of the same name, through the publish gate.

    `tip` sends that commit instead of the local branch's, and `tags` are then the tags to
    create with it (`funes publish`: a history that is not a local branch).

    Every chunk the push would send is scanned again (funes.remotes.gate); chunks that still
    look secret are held back (the commits carrying them are sent as rewritten images without
    them, funes.storage.publish) and listed in `PushResult.held`. `dry_run` reports what would
    be sent and changes nothing, here or on the remote. The steps: what leaves (the store) →
    the gate → the published images (the store) → send → track.

    Raises:
        NonFastForwardError: the remote branch has commits this one lacks (exit 4, "fetch
            first"), found before sending anything or by the remote's compare-and-swap.
        ScannerError: a scanner failed; nothing was sent.
    """
    local = branch_ref(branch)
    tip = tip or repo.refs.read(local)
    if tip is None:
        raise UsageError(f"branch {branch!r} has no commits to push", hint="run `funes index`")
    st = remote.state()
    foreign.refuse_writing(remote, st, remote.spec.display)  # --force included
    published = publish.load_published(repo, remote.name)
    old = st.refs.get(local)
    new_tags = (_tags_to_send(repo, st, tip, published) if tags is None
                else {r: o for r, o in tags.items() if r not in st.refs})
    if old == published.get(tip, tip) and not new_tags:
        if not dry_run:
            _update_tracking(
                repo, remote.name, RemoteState(True, st.revision, {local: old}), "push"
            )
        return PushResult(remote.name, remote.spec.url, branch, old, old, True,
                          hub=remote.spec.kind == "hf", dry_run=dry_run)
    forced = _check_fast_forward(repo, remote, local, old, tip, published, force)
    sending = _sending(repo, st, tip, published)
    hidden = repo.tombstoned_ids(tip)  # readers of the remote would hide them: they stay home
    out, back, held = _gate(repo, sending, scanners, hidden,
                            [o for o in st.refs.values()], tip)
    if dry_run:
        return PushResult(
            remote.name, remote.spec.url, branch, old, tip, False, forced=forced,
            commits=len(sending), held=tuple(held), dry_run=True, scanned=len(out.chunk_ids),
        )
    keep = {h.chunk for h in held}
    extra = {oid: publish.restored_manifests(repo, ids - keep)
             for oid, ids in back.items() if ids - keep}
    images = publish.publish(repo, out, keep, tip, published, hidden=hidden, extra=extra)
    if images.images:
        publish.save_published(repo, remote.name, {**published, **images.images})
    created = False
    if not st.exists:  # created only once the gate passed: a failed scan leaves no trace
        remote.create()
        created = True
        st = remote.state()
    # tags name commits of the history just sent (published images when the gate rewrote them)
    tags = {ref: ObjectId(images.images.get(oid, oid)) for ref, oid in new_tags.items()}
    plan = _plan(repo, remote, st, branch, old, images, len(sending), tags)
    report = remote.push(st, plan, progress)
    _update_tracking(
        repo, remote.name, RemoteState(True, report.revision, {local: plan.new}), "push"
    )
    return PushResult(
        remote.name,
        remote.spec.url,
        branch,
        old,
        plan.new,
        False,
        forced=forced,
        created=created or report.created,
        hub=remote.spec.kind == "hf",
        revision=report.revision,
        commits=len(sending),
        objects=report.objects,
        files=report.files,
        bytes=report.bytes,
        held=tuple(held),
        scanned=len(out.chunk_ids),
    )


def _check_fast_forward(
    repo: Repository, remote: Remote, local: RefName, old: ObjectId | None, tip: ObjectId,
    published: dict[str, str], force: bool,
) -> bool:
    """Whether the push must be forced; refuses a non-fast-forward without `force`.

    The remote tip may be the published image of a local commit: then that commit counts.
    """
    originals = publish.originals(published)
    if old is None or (
        repo.objects.has(old)
        and (is_ancestor(repo, old, tip)
             or (old in originals and is_ancestor(repo, ObjectId(originals[old]), tip)))
    ):
        return False
    if not force:
        raise NonFastForwardError(remote.display, local, old, tip)
    return True


def _sending(
    repo: Repository, st: RemoteState, tip: ObjectId, published: dict[str, str]
) -> list[tuple[ObjectId, Commit]]:
    """The commits of `tip`'s history the remote lacks (an image there stands for its original)."""
    originals = publish.originals(published)
    on_remote: set[str] = set()
    for oid in st.refs.values():
        if repo.objects.has(oid):
            on_remote |= ancestors(repo, oid, stop=on_remote)
    for image in list(on_remote):
        if image in originals and repo.objects.has(originals[image]):
            on_remote |= ancestors(repo, ObjectId(originals[image]), stop=on_remote)
    return list(commits_between(repo, tip, on_remote))


def _gate(
    repo: Repository, sending: list[tuple[ObjectId, Commit]],
    scanners: Sequence[gate.Scanner] | None, hidden: set[str],
    remote_tips: list[ObjectId], tip: ObjectId,
) -> tuple[publish.Outgoing, dict[ObjectId, set[str]], list[gate.HeldChunk]]:
    """Read what leaves and scan it; a fragment that cannot be read fails the gate.

    Rows `hidden` at the tip are not sent, so not scanned; rows a lift brings back that the
    remote lacks (`publish.restoring`) are sent, so scanned.
    """
    try:
        out = publish.outgoing(repo, sending)
        back = publish.restoring(repo, out, remote_tips, tip)
        texts, places = publish.row_texts(repo, set().union(*back.values())) if back \
            else ({}, {})
    except publish.UnreadableRowsError as exc:
        raise gate.ScannerError(exc.message) from None
    scan = {cid: text for cid, text in out.scannable().items() if cid not in hidden}
    scan.update(texts)
    return out, back, gate.hold_back(dict(sorted(scan.items())), {**out.places, **places},
                                     scanners)


def _plan(
    repo: Repository, remote: Remote, st: RemoteState, branch: str, old: ObjectId | None,
    images: publish.Published, sent: int, tags: dict[RefName, ObjectId],
) -> PushPlan:
    """The plan the remote applies: the objects it lacks, the fragments, the ref to swap."""
    tip = images.tip
    wanted = publish.transfer_plan(repo, images.commits)
    there = remote.present(st, [object_path(oid) for oid in wanted.objects])
    objects = {oid: raw for oid, raw in wanted.objects.items() if object_path(oid) not in there}
    updates = [
        TableUpdate(name, tuple(records), repo.table(name).path, repo.table(name).dataset().schema)
        for name, records in sorted(wanted.tables.items())
    ]
    head = repo.objects.commit(tip)
    card = CardStats(
        branch=branch,
        commit=tip,
        chunks=head.chunk_count,
        commits=len(ancestors(repo, tip)),
        model=head.model,
        updated=now_iso(),
    )
    message = (
        f"funes push {branch}: {(old or 'new')[:12]}..{tip[:12]} "
        f"({sent} commits, {head.chunk_count} chunks)"
    )
    return PushPlan(branch_ref(branch), old, tip, objects, updates, card, message, tags)


def check_branch(name: str) -> RefName:
    """Validate a branch name given on the command line."""
    return check_ref_name(f"refs/heads/{name}")


def remove_tracking(repo: Repository, name: str) -> int:
    """Delete `refs/remotes/<name>/*` and the remote's caches; returns refs removed."""
    removed = 0
    with repo.writing():
        for ref, oid in list(repo.refs.iter_refs(f"refs/remotes/{name}/")):
            repo.refs.delete_if_equals(ref, oid, who=repo._who(), time=now_iso())
            removed += 1
        shutil.rmtree(repo.path / "remotes" / name, ignore_errors=True)
        # Empty directories left under refs/remotes/<name>/ would read as a stale remote.
        base = repo.path / "refs" / "remotes" / name
        if base.is_dir():
            for path in sorted((p for p in base.rglob("*") if p.is_dir()), reverse=True):
                with contextlib.suppress(OSError):
                    path.rmdir()  # only if empty
            with contextlib.suppress(OSError):
                base.rmdir()
    return removed
