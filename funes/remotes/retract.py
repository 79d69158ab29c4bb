"""`funes push --retract`: rewrite a remote without the rows tombstones hide, delete the rest.

A tombstone that reached a remote hides its rows from every funes, but the fragment files
still hold them (any Lance reader sees them) and, on the Hub, every revision of the repository
serves them. Retraction erases them from the remote:

1. fetch, and refuse unless the local branch contains the remote's (exit 4: pull first), so
   nothing on the remote is lost; then push, so the remote has every local tombstone;
2. rewrite the remote's whole history without the rows hidden at the local tip or at any
   remote tip (funes.storage.retract.plan): new fragment files without them, images of the
   commits that change, each naming the commit it `replaces`;
3. after the caller's confirmation (which names what is lost), write it: the missing objects
   and files, a new version of each Lance dataset listing exactly the new history's fragments
   (a Lance `Overwrite`, so `lance.dataset()` still opens it), the refs (branches and tags,
   the one time a tag moves), the card; then delete every object, fragment file, older Lance
   version and transaction the new history does not name. A directory remote does this under
   its lock. On the Hub it is one commit (adds and deletes, `parent_commit` the head read),
   then `super_squash_history` so no earlier revision is served, then the LFS files no
   revision references are deleted for good (`permanently_delete_lfs_files`);
4. adopt the new history locally (funes.storage.retract.adopt); other machines adopt it on
   their next pull, downloading only the commits, manifests and files that changed.

What stays: copies other machines pulled before (until they pull and `funes gc`), Hub
branches, tags and pull requests other than `main` (the confirmation names them), and anything
anyone downloaded. An encrypted remote is refused: it is not Lance-readable, and its storage
provider never saw the rows in the clear.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.errors import RemoteError, UsageError
from funes.model.ids import ObjectId
from funes.model.objects import TABLES, DataFile, FragmentRecord
from funes.model.refs import RefName, branch_ref
from funes.remotes import crypt
from funes.remotes import sync as _sync
from funes.remotes.base import (
    CardStats,
    NonFastForwardError,
    Progress,
    Remote,
    RemoteNotFoundError,
    RemoteState,
    no_progress,
)
from funes.remotes.hf import HubRemote, _files
from funes.remotes.layout import CARD_FILE, check_path, object_path, table_file
from funes.remotes.local import DirectoryRemote
from funes.storage import retract as _retract
from funes.storage.atomic import write_atomic, write_new
from funes.storage.lock import WriteLock
from funes.storage.repo import Repository, now_iso
from funes.storage.tables import LanceTable
from funes.storage.transfer import (
    TransferError,
    ancestors,
    check_data_file,
    install_data_file,
    overwrite_records,
)

if TYPE_CHECKING:
    import pyarrow as pa

#: The Hub commit title of a retraction (a retraction killed before the squash is finished by
#: the next one, which recognises its own commit at the head).
TITLE = "funes push --retract"


@dataclass(frozen=True)
class RetractCheck:
    """What a retraction would erase and what it costs, for the confirmation."""

    remote: str
    url: str
    hub: bool
    rows: int  # chunk rows erased from the remote
    sessions: int  # sessions they belong to
    commits: int  # remote commits rewritten (they get new ids)
    files: int  # remote files deleted (objects, fragments, old dataset versions)
    history: int  # Hub: revisions no longer served; directory: Lance versions deleted
    data_files: int = 0  # of those, fragment files (what holds rows)
    since: str | None = None  # the oldest revision lost (Hub)
    other_refs: tuple[str, ...] = ()  # Hub refs besides main, which keep their own history

    @property
    def needed(self) -> bool:
        """Whether there is anything to erase: rows, or fragment files no commit names.

        Old dataset versions and unreachable objects hold no text (ids, metadata): they go
        when a retraction runs, but do not call for one.
        """
        return bool(self.rows or self.data_files)


@dataclass(frozen=True)
class RetractResult:
    """What `push --retract` did."""

    check: RetractCheck
    done: bool  # False when nothing needed erasing or the confirmation was declined
    declined: bool = False
    revision: str | None = None  # the remote's revision afterwards
    refs: dict[str, ObjectId] = field(default_factory=dict)  # remote refs afterwards
    adopted: _retract.Adoption | None = None


@dataclass(frozen=True)
class _Table:
    table: str
    records: tuple[FragmentRecord, ...]
    source: Path
    schema: pa.Schema


@dataclass(frozen=True)
class _Plan:
    """Everything a retraction writes, and what it keeps (everything else is deleted)."""

    refs: Mapping[RefName, tuple[ObjectId, ObjectId]]
    objects: Mapping[ObjectId, bytes]
    tables: Sequence[_Table]
    card: CardStats
    message: str

    @property
    def keep(self) -> set[str]:
        """The remote paths of the new history's objects and fragment files."""
        out = {object_path(oid) for oid in self.objects}
        out |= {table_file(t.table, f.path) for t in self.tables for r in t.records
                for f in r.files}
        return out


def retract(
    repo: Repository, remote: Remote, branch: str, *,
    confirm: Callable[[RetractCheck], bool], progress: Progress = no_progress,
) -> RetractResult:
    """Rewrite `remote` without the rows tombstones hide (see the module docstring).

    Raises:
        NonFastForwardError: the remote has commits the local branch lacks (pull first).
        UsageError: the remote is encrypted.
        RemoteNotFoundError: nothing at the URL.
    """
    if isinstance(remote, crypt.EncryptedRemote):
        raise UsageError(f"{remote.display} is encrypted: retraction rewrites Lance datasets, "
                         "which an encrypted remote does not hold",
                         hint="its storage provider never saw the rows in the clear; to drop "
                         "them, push this memory to a new remote and delete the old one")
    st = remote.state()
    if not st.exists:
        raise RemoteNotFoundError(f"{remote.display}: no funes memory there",
                                  hint="check the remote's URL (`funes remote list`)")
    _sync.fetch(repo, remote, state=st, progress=progress)
    local = branch_ref(branch)
    tip = repo.refs.read(local)
    if tip is None:
        raise UsageError(f"branch {branch!r} has no commits", hint="run `funes index`")
    old = st.refs.get(local)
    from funes.storage import publish

    _sync._check_fast_forward(repo, remote, local, old, tip,
                              publish.load_published(repo, remote.name), False)
    _sync.push(repo, remote, branch, progress=progress)  # every local tombstone goes first
    st = remote.state()
    known: set[str] = set()
    for ref_tip in st.refs.values():
        known |= ancestors(repo, ref_tip, stop=known)
    hidden = repo.tombstoned_ids(tip)
    for ref_tip in set(st.refs.values()):
        hidden |= repo.tombstoned_ids(ref_tip)
    _download_missing(repo, remote, st, _retract.missing_files(repo, st.refs.values(), hidden),
                      progress)
    rewrite = _retract.plan(repo, st.refs, hidden)
    plan = _plan(repo, remote, st, rewrite, branch)
    stale = [p for p in _inventory(remote, st) if _deletable(p) and p not in plan.keep]
    check = _check(remote, st, rewrite, stale)
    if not check.needed and not _squash_pending(remote, st):
        return RetractResult(check, False, revision=st.revision,
                             refs={str(k): v for k, v in st.refs.items()})
    if not confirm(check):
        return RetractResult(check, False, declined=True, revision=st.revision,
                             refs={str(k): v for k, v in st.refs.items()})
    if isinstance(remote, HubRemote):
        revision = _hub_rewrite(remote, st, plan, progress)
    elif isinstance(remote, DirectoryRemote):
        revision = _dir_rewrite(remote, plan, progress)
    else:  # pragma: no cover - every remote is one of the two
        raise UsageError(f"{remote.display} cannot be rewritten")
    refs = {ref: new for ref, (_, new) in plan.refs.items()}
    _sync._update_tracking(repo, remote.name, RemoteState(True, revision, refs),
                           f"retract {remote.name}")
    new_tip = refs.get(local)
    adopted = _retract.adopt(repo, remote.name, new_tip, known) if new_tip else None
    return RetractResult(check, True, revision=revision,
                         refs={str(k): v for k, v in refs.items()}, adopted=adopted)


def _deletable(path: str) -> bool:
    """Remote paths a retraction owns: objects and the Lance datasets (never refs, the card)."""
    return path.startswith("objects/") or any(path.startswith(f"{t}.lance/") for t in TABLES)


def _download_missing(repo: Repository, remote: Remote, st: RemoteState,
                      missing: list[tuple[str, DataFile]], progress: Progress) -> None:
    """Fetch fragment files the rewrite must read and this machine no longer has."""
    if not missing:
        return
    staging = _sync._staging(repo, "retract-")
    try:
        downloads = [(table_file(t, f.path), staging / f"{i:06d}")
                     for i, (t, f) in enumerate(missing)]
        remote.download(st, downloads, progress,
                        sizes={table_file(t, f.path): f.size for t, f in missing})
        for (_name, local), (table, data) in zip(downloads, missing, strict=True):
            check_data_file(data, local, remote.display)
            install_data_file(repo.table(table), data, local, remote.display, checked=True)
    except TransferError as exc:
        raise RemoteError(exc.message, hint=exc.hint) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _plan(repo: Repository, remote: Remote, st: RemoteState, rewrite: _retract.Rewrite,
          branch: str) -> _Plan:
    names = set(rewrite.tables) | {t for t in TABLES if repo.table(t).exists()
                                   and any(p.startswith(f"{t}.lance/")
                                           for p in _inventory(remote, st))}
    tables = []
    for name in sorted(names):
        table = repo.table(name)
        if not table.exists():
            continue
        tables.append(_Table(name, tuple(rewrite.tables.get(name, ())), table.path,
                             table.dataset().schema))
    local = branch_ref(branch)
    tip = rewrite.refs[local][1] if local in rewrite.refs else next(
        new for _, new in rewrite.refs.values())
    head = repo.objects.commit(tip)
    card = CardStats(branch=branch, commit=tip, chunks=head.chunk_count,
                     commits=len(ancestors(repo, tip)), model=head.model, updated=now_iso())
    message = (f"{TITLE}: {rewrite.rows} row(s) of {len(rewrite.sessions)} session(s) erased, "
               f"{len(rewrite.images)} commit(s) rewritten")
    return _Plan(rewrite.refs, rewrite.objects, tables, card, message)


def _inventory(remote: Remote, st: RemoteState) -> list[str]:
    """Every file of the remote, as paths in the remote layout."""
    if isinstance(remote, HubRemote):
        return sorted(remote._listing(st.revision)) if st.revision else []
    assert isinstance(remote, DirectoryRemote)
    root = remote.root
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and not p.is_symlink())


def _check(remote: Remote, st: RemoteState, rewrite: _retract.Rewrite,
           stale: list[str]) -> RetractCheck:
    hub = isinstance(remote, HubRemote)
    history, since = 0, None
    others: tuple[str, ...] = ()
    if isinstance(remote, HubRemote):
        history, since, others = _hub_history(remote)
    else:
        history = sum(1 for p in stale if "/_versions/" in p)
    return RetractCheck(remote.name, remote.spec.url, hub, rewrite.rows, len(rewrite.sessions),
                        len(rewrite.images), len(stale), history,
                        data_files=sum(1 for p in stale if "/data/" in p), since=since,
                        other_refs=others)


# -- a directory remote --------------------------------------------------------------------------


def _dir_rewrite(remote: DirectoryRemote, plan: _Plan, progress: Progress) -> str:
    """Write the new history under the remote's lock, refs last but before the deletions."""
    root = remote.root
    with WriteLock(root / "lock", remote.lock_timeout):
        for ref, (old, new) in plan.refs.items():
            current = remote._read_ref(ref)
            if current != old:
                raise NonFastForwardError(remote.display, ref, current, new)
        for oid, raw in plan.objects.items():
            write_new(root / object_path(oid), raw)
        written: set[str] = set()
        for update in plan.tables:
            table = LanceTable(root / f"{update.table}.lance")
            for done, record in enumerate(update.records, 1):
                for f in record.files:
                    remote._copy_checked(update.source / f.path, table.path / f.path, f.size,
                                         f.sha256)
                progress(done, len(update.records), f"{update.table}.lance")
            before = _files(table.path)
            overwrite_records(table, update.records, update.schema)
            written |= {table_file(update.table, rel) for rel, stamp in _files(table.path).items()
                        if before.get(rel) != stamp}
        card = remote._card(_push_plan(plan))
        if card is not None:
            write_atomic(root / CARD_FILE, card.encode())
        for ref, (_, new) in sorted(plan.refs.items()):
            write_atomic(root / check_path(ref), f"{new}\n".encode())
        keep = plan.keep | written
        for path in _inventory(remote, RemoteState(True, None)):
            if _deletable(path) and path not in keep:
                with contextlib.suppress(FileNotFoundError):
                    (root / path).unlink()
        _prune_dirs(root)
    return remote.state().revision or ""


def _prune_dirs(root: Path) -> None:
    for sub in ("objects", *(f"{t}.lance" for t in TABLES)):
        base = root / sub
        if base.is_dir():
            for path in sorted((p for p in base.rglob("*") if p.is_dir()), reverse=True):
                with contextlib.suppress(OSError):
                    path.rmdir()  # only if empty


def _push_plan(plan: _Plan) -> Any:
    """The card's part of a plan, in the shape `refresh_card` callers pass (a PushPlan)."""
    from funes.remotes.base import PushPlan

    ref, (old, new) = next(iter(sorted(plan.refs.items())))
    return PushPlan(ref, old, new, {}, (), plan.card, plan.message)


# -- the Hub -------------------------------------------------------------------------------------


def _hub_history(remote: HubRemote) -> tuple[int, str | None, tuple[str, ...]]:
    """Revisions of `main` (and the oldest one's date), and the other refs of the repository."""
    api = remote._api()
    with remote._errors("read its history"):
        commits = list(api.list_repo_commits(remote.repo_id, repo_type="dataset"))
        refs = api.list_repo_refs(remote.repo_id, repo_type="dataset", include_pull_requests=True)
    others = [f"branch {b.name}" for b in refs.branches if b.name != "main"]
    others += [f"tag {t.name}" for t in refs.tags]
    others += [f"pull request {p.name}" for p in (refs.pull_requests or [])]
    since = str(commits[-1].created_at) if commits else None
    return len(commits), since, tuple(others)


def _squash_pending(remote: Remote, st: RemoteState) -> bool:
    """A Hub retraction whose commit landed but whose squash did not (killed in between)."""
    if not isinstance(remote, HubRemote) or st.revision is None:
        return False
    api = remote._api()
    with remote._errors("read its history"):
        commits = list(api.list_repo_commits(remote.repo_id, repo_type="dataset"))
    return len(commits) > 1 and commits[0].title.startswith(TITLE)


def _hub_rewrite(remote: HubRemote, st: RemoteState, plan: _Plan, progress: Progress) -> str:
    """One commit (adds and deletes), the history squashed, unreferenced LFS files deleted."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    revision = st.revision
    listing = remote._listing(revision) if revision else frozenset()
    prefix = remote.prefix
    ops: list[Any] = []
    for oid, raw in plan.objects.items():
        if object_path(oid) not in listing:
            ops.append(CommitOperationAdd(prefix + object_path(oid), raw))
    mirror = remote._mirror(revision, listing)
    written: set[str] = set()
    for update in plan.tables:
        table = LanceTable(mirror / f"{update.table}.lance")
        remote._load_mirror_table(revision, listing, update.table, table)
        for record in update.records:
            for f in record.files:
                path = table_file(update.table, f.path)
                if path in listing or path in written:
                    continue
                op = CommitOperationAdd(prefix + path, str(update.source / f.path))
                if op.upload_info.sha256.hex() != f.sha256:
                    raise RemoteError(f"local fragment file {update.source / f.path} does not "
                                      "match its manifest", hint="run `funes fsck`; nothing "
                                      "was changed on the remote")
                ops.append(op)
                written.add(path)
        before = _files(table.path)
        overwrite_records(table, update.records, update.schema)
        for rel, stamp in sorted(_files(table.path).items()):
            if before.get(rel) != stamp:
                path = table_file(update.table, rel)
                ops.append(CommitOperationAdd(prefix + path, str(table.path / rel)))
                written.add(path)
    card = remote._card(revision, listing, _push_plan(plan))
    if card is not None:
        ops.append(CommitOperationAdd(prefix + CARD_FILE, card.encode()))
    for ref, (_, new) in sorted(plan.refs.items()):
        ops.append(CommitOperationAdd(prefix + ref, f"{new}\n".encode()))
    keep = plan.keep | written
    ops += [CommitOperationDelete(prefix + path) for path in sorted(listing)
            if _deletable(path) and path not in keep]
    (mirror / "REVISION").unlink(missing_ok=True)
    api = remote._api()
    progress(0, 1, f"rewriting {len(ops)} files")
    with remote._errors("retract", ref=next(iter(plan.refs), ""), ours=""):
        api.create_commit(remote.repo_id, ops, commit_message=plan.message,
                          repo_type="dataset", parent_commit=revision)
    head = _squash(remote, plan.message)
    progress(1, 1, "retracted")
    write_atomic(mirror / "REVISION", head.encode(), durable=False)
    remote._save_state(RemoteState(True, head, {ref: new for ref, (_, new) in plan.refs.items()}))
    return head


def _squash(remote: HubRemote, message: str) -> str:
    """Squash `main` into one commit, then delete the LFS files no revision references."""
    api = remote._api()
    with remote._errors("squash its history"):
        api.super_squash_history(remote.repo_id, branch="main", commit_message=message,
                                 repo_type="dataset")
        refs = api.list_repo_refs(remote.repo_id, repo_type="dataset")
        head = next(b.target_commit for b in refs.branches if b.name == "main")
        used = _lfs_in_use(api, remote.repo_id, [head, *(b.target_commit for b in refs.branches
                                                         if b.name != "main"),
                                                 *(t.target_commit for t in refs.tags)])
        orphans = [f for f in api.list_lfs_files(remote.repo_id, repo_type="dataset")
                   if f.file_oid not in used]
        if orphans:
            api.permanently_delete_lfs_files(remote.repo_id, orphans, repo_type="dataset")
    return str(head)


def _lfs_in_use(api: Any, repo_id: str, revisions: Iterable[str]) -> set[str]:
    """The sha256 of every LFS file the given revisions hold."""
    used: set[str] = set()
    for revision in dict.fromkeys(revisions):
        info = api.dataset_info(repo_id, revision=revision, files_metadata=True)
        for sibling in info.siblings or []:
            lfs = getattr(sibling, "lfs", None)
            sha = getattr(lfs, "sha256", None) if lfs is not None else None
            if isinstance(sha, str):
                used.add(sha)
    return used

