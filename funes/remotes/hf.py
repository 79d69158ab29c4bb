"""A remote in a Hugging Face Hub dataset repository.

The repository holds the remote layout (funes.remotes.base) at its root or in a folder of it,
so `lance.dataset("hf://datasets/org/name/chunks.lance")` reads the pushed rows directly.

How it maps onto the Hub (docs/format.md, "Remotes"):

- **Reading** pins one Hub commit: `list_repo_refs` (one small request) gives the head; when it
  is the head seen last time, the cached funes refs are reused and nothing else is asked, so a
  fetch or a warm remote recall with nothing new costs one request. Otherwise one
  `dataset_info` at that commit lists every file (which objects exist), and files are
  downloaded at that exact commit.
- **Pushing** is one `create_commit(..., parent_commit=<head read>)`: the Hub's
  compare-and-swap. A 412 means someone pushed in between and becomes the same
  non-fast-forward error as a directory remote's (exit 4, "fetch first").
- **Lance metadata** cannot be written through `hf://` without Xet, so a push appends the new
  fragments to a local *mirror* of the remote dataset's metadata (its latest manifest only;
  no data files) under `.funes/remotes/<name>/mirror/`, and uploads the manifest, transaction
  and version-hint files Lance wrote there, beside the new fragment files. The mirror records
  the Hub commit it reflects and is rebuilt from the remote whenever the remote moved.

`huggingface_hub` is imported inside functions: this module is reached from the CLI, and the
CLI's start-up must not pay for it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError, RemoteError
from funes.model.ids import ObjectId, is_object_id
from funes.model.refs import RefName, check_ref_name
from funes.remotes.base import (
    NonFastForwardError,
    Progress,
    PushPlan,
    PushReport,
    RemoteDataError,
    RemoteNotFoundError,
    RemoteSpec,
    RemoteState,
    RemoteUnreachableError,
)
from funes.remotes.layout import (
    CARD_FILE,
    MAX_OBJECT_BYTES,
    MAX_REF_BYTES,
    check_path,
    latest_manifest,
    object_id_of,
    object_path,
    parse_ref_file,
    ref_of,
    refresh_card,
    table_file,
)
from funes.storage.atomic import write_atomic
from funes.storage.tables import LanceTable
from funes.storage.transfer import TransferError, append_records

if TYPE_CHECKING:
    from huggingface_hub import HfApi

#: Parallel downloads (what `snapshot_download` uses by default).
WORKERS = 8

_LOGIN_HINT = (
    "check the name; a private memory needs a token with access "
    "(set HF_TOKEN or run `hf auth login`)"
)


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "the network failed": OSError and the HTTP library's base error.

    huggingface_hub 2.x speaks httpx2, 1.x httpx; a dropped connection surfaces as the
    library's transport error, not as an HfHubHTTPError.
    """
    found: list[type[BaseException]] = [OSError]
    for name in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError):
            found.append(importlib.import_module(name).HTTPError)
    return tuple(found)


class HubRemote:
    """A remote memory in a Hub dataset repository (`org/name`, optionally a folder in it)."""

    def __init__(
        self,
        name: str,
        spec: RemoteSpec,
        *,
        state_dir: Path,
        workdir: Path,
        endpoint: str | None = None,
        token: str | None = None,
    ) -> None:
        self.name = name
        self.spec = spec
        self.repo_id = spec.repo_id
        self.prefix = f"{spec.subpath}/" if spec.subpath else ""
        self.state_dir = state_dir
        self.workdir = workdir
        self.endpoint = endpoint
        self.token = token
        self._listings: dict[str, frozenset[str]] = {}

    @property
    def display(self) -> str:
        """`name (org/name)` for messages."""
        return f"{self.name} ({self.spec.display})"

    @property
    def lance_url(self) -> str:
        """What any Lance reader opens: `hf://datasets/org/name[/folder]/chunks.lance`."""
        return f"hf://datasets/{self.repo_id}/{self.prefix}chunks.lance"

    def _api(self) -> HfApi:
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.endpoint, token=self.token)

    # -- errors ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self, action: str, *, ref: str = "", ours: str = "") -> Iterator[None]:
        """Turn huggingface_hub and network failures into funes errors naming the remote."""
        from huggingface_hub.errors import (
            EntryNotFoundError,
            HfHubHTTPError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
        from huggingface_hub.utils.tqdm import (
            are_progress_bars_disabled,
            disable_progress_bars,
            enable_progress_bars,
        )

        # funes draws its own progress (stderr, terminals only); the client's tqdm bars
        # would interleave with it and with agents' output.
        quiet = not are_progress_bars_disabled()
        if quiet:
            disable_progress_bars()
        try:
            yield
        except FunesError:
            raise
        except RepositoryNotFoundError:
            raise RemoteNotFoundError(
                f"{self.display}: no such dataset repository, or no access to it",
                hint=_LOGIN_HINT,
            ) from None
        except RevisionNotFoundError:
            raise RemoteError(
                f"{self.display} moved while funes was reading it ({action})",
                hint="run the command again",
            ) from None
        except EntryNotFoundError:
            raise RemoteDataError(f"{self.display}: a file is missing ({action})") from None
        except HfHubHTTPError as exc:
            status = exc.response.status_code if exc.response is not None else None
            if status == 412 and ref:
                raise NonFastForwardError(self.display, ref, None, ours) from None
            if status in (401, 403):
                raise RemoteError(
                    f"{self.display}: not allowed to {action} (HTTP {status})", hint=_LOGIN_HINT
                ) from None
            failing = status is not None and (status >= 500 or status == 429)  # down or busy
            raise (RemoteUnreachableError if failing else RemoteError)(
                f"{self.display}: {action} failed (HTTP {status})") from None
        except _transport_errors() as exc:
            raise RemoteUnreachableError(
                f"cannot reach {self.display} ({action}: {exc.__class__.__name__})",
                hint="check the network connection (and HF_ENDPOINT), then run it again",
            ) from None
        finally:
            if quiet:
                enable_progress_bars()

    # -- reading ---------------------------------------------------------------------------

    def _state_file(self) -> Path:
        return self.state_dir / "state.json"

    def _load_state(self) -> RemoteState | None:
        try:
            data = json.loads(self._state_file().read_text("utf-8"))
            refs = {check_ref_name(k): ObjectId(v) for k, v in data["refs"].items()}
            if not all(is_object_id(v) for v in refs.values()):
                return None
            return RemoteState(True, str(data["revision"]), refs)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, FunesError):
            return None  # a cache: anything odd means "ask the remote"

    def _save_state(self, state: RemoteState) -> None:
        data = {"url": self.spec.url, "revision": state.revision, "refs": dict(state.refs)}
        write_atomic(self._state_file(), json.dumps(data, indent=1).encode(), durable=False)

    def state(self) -> RemoteState:
        """The funes refs at the repository's current head (cached by head commit)."""
        from huggingface_hub.errors import RepositoryNotFoundError

        api = self._api()
        with self._errors("read its refs"):
            try:
                git_refs = api.list_repo_refs(self.repo_id, repo_type="dataset")
            except RepositoryNotFoundError:
                return RemoteState(False, None, {})
        head = next((b.target_commit for b in git_refs.branches if b.name == "main"), None)
        if head is None:
            return RemoteState(True, None, {})
        cached = self._load_state()
        if cached is not None and cached.revision == head:
            return cached
        listing = self._listing(head)
        ref_paths: dict[str, RefName] = {}
        for path in sorted(listing):
            ref = ref_of(path)
            if ref is not None:
                ref_paths[path] = ref
        raw = self._get_many(head, list(ref_paths))
        refs = {
            ref: parse_ref_file(raw[path], ref, self.display) for path, ref in ref_paths.items()
        }
        state = RemoteState(True, head, refs)
        self._save_state(state)
        return state

    def _listing(self, revision: str) -> frozenset[str]:
        """Every file at a Hub commit, relative to the memory's folder (one request, cached)."""
        if revision not in self._listings:
            with self._errors("list its files"):
                info = self._api().dataset_info(self.repo_id, revision=revision)
            names = [s.rfilename for s in info.siblings or []]
            self._listings[revision] = frozenset(
                n[len(self.prefix) :] for n in names if n.startswith(self.prefix)
            )
        return self._listings[revision]

    def files(self, state: RemoteState) -> frozenset[str]:
        """Every file at `state`, relative to the memory's folder (one request, cached)."""
        return self._listing(state.revision) if state.revision else frozenset()

    def create(self) -> None:
        """Create the dataset repository, private (publishing is a deliberate act)."""
        with self._errors("create the repository"):
            self._api().create_repo(
                self.repo_id, repo_type="dataset", private=True, exist_ok=True
            )

    def present(self, state: RemoteState, paths: Sequence[str]) -> set[str]:
        """The paths in the listing at `state`."""
        if state.revision is None:
            return set()
        listing = self._listing(state.revision)
        return {p for p in paths if p in listing}

    def object_ids(self, state: RemoteState) -> set[ObjectId] | None:
        """Every object at `state`, from the same listing (fetch downloads them in parallel)."""
        if state.revision is None:
            return set()
        ids = (object_id_of(p) for p in self._listing(state.revision))
        return {oid for oid in ids if oid is not None}

    def read_objects(
        self, state: RemoteState, oids: Sequence[ObjectId], *, limit: int = MAX_OBJECT_BYTES
    ) -> dict[ObjectId, bytes]:
        """Object bytes, downloaded at the pinned commit (each at most `limit`)."""
        if not oids:
            return {}
        assert state.revision is not None
        raw = self._get_many(state.revision, [object_path(o) for o in oids], limit)
        return {oid: raw[object_path(oid)] for oid in oids}

    def _get_many(
        self, revision: str, paths: Sequence[str], limit: int = MAX_REF_BYTES
    ) -> dict[str, bytes]:
        """Small files' bytes, downloaded in parallel into a scratch directory."""
        if not paths:
            return {}
        self.workdir.mkdir(parents=True, exist_ok=True)
        scratch = Path(_mkdtemp(self.workdir, "hf-get-"))
        try:
            files = [(p, scratch / "out" / check_path(p)) for p in paths]
            self._download_to(revision, files, scratch / "dl", lambda *_: None,
                              {p: limit for p in paths}, exact=False)
            return {p: dest.read_bytes() for p, dest in files}
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def download(
        self,
        state: RemoteState,
        files: Sequence[tuple[str, Path]],
        progress: Progress,
        *,
        sizes: Mapping[str, int] | None = None,
    ) -> None:
        """Download files at the pinned commit to local paths (in parallel)."""
        if not files:
            return
        assert state.revision is not None
        parent = files[0][1].parent
        parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(_mkdtemp(parent, ".hf-dl-"))
        try:
            self._download_to(state.revision, files, scratch, progress, sizes or {}, exact=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _download_to(
        self,
        revision: str,
        files: Sequence[tuple[str, Path]],
        scratch: Path,
        progress: Progress,
        limits: Mapping[str, int],
        *,
        exact: bool,
    ) -> None:
        """Download in parallel, refusing a file larger than its limit (`exact`: of another size).

        The sizes the Hub reports for the files (one `paths-info` request per 500) are
        checked before anything is downloaded, and each downloaded file again before it is
        read or moved into place; huggingface_hub bounds every request in time
        (HF_HUB_DOWNLOAD_TIMEOUT, HF_HUB_ETAG_TIMEOUT).
        """
        from huggingface_hub import hf_hub_download

        def check(path: str, size: int) -> None:
            limit = limits.get(path)
            if limit is not None and (size != limit if exact else size > limit):
                raise RemoteDataError(
                    f"{self.display}: {path} is {size} bytes, "
                    f"{'its manifest says' if exact else 'more than the allowed'} {limit}; "
                    "refusing it"
                )

        if limits:
            for path, size in self.sizes(revision, [p for p, _ in files]).items():
                check(path, size)

        def one(path: str, dest: Path) -> None:
            local = hf_hub_download(
                self.repo_id,
                self.prefix + check_path(path),
                repo_type="dataset",
                revision=revision,
                local_dir=scratch,
                endpoint=self.endpoint,
                token=self.token,
            )
            check(path, os.stat(local).st_size)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(str(local), dest)

        with self._errors("download"), ThreadPoolExecutor(max_workers=WORKERS) as pool:
            futures = {pool.submit(one, path, dest): path for path, dest in files}
            for done, future in enumerate(as_completed(futures), 1):
                future.result()
                progress(done, len(files), futures[future])

    def sizes(self, revision: str, paths: Sequence[str]) -> dict[str, int]:
        """The sizes of files at `revision`, as the Hub reports them (missing ones left out)."""
        out: dict[str, int] = {}
        api = self._api()
        with self._errors("read file sizes"):
            for start in range(0, len(paths), 500):
                part = [self.prefix + check_path(p) for p in paths[start : start + 500]]
                for info in api.get_paths_info(self.repo_id, part, repo_type="dataset",
                                               revision=revision):
                    size = getattr(info, "size", None)
                    lfs = getattr(info, "lfs", None)
                    if lfs is not None and getattr(lfs, "size", None) is not None:
                        size = lfs.size
                    if isinstance(size, int):
                        out[info.path[len(self.prefix):]] = size
        return out

    # -- writing ---------------------------------------------------------------------------

    def push(self, state: RemoteState, plan: PushPlan, progress: Progress) -> PushReport:
        """One Hub commit: new objects and fragment files, Lance metadata, card, the ref."""
        from huggingface_hub import CommitOperationAdd

        revision = state.revision
        listing = self._listing(revision) if revision else frozenset()
        ops: list[Any] = []
        nbytes = objects = files = 0
        for oid, raw in plan.objects.items():
            path = object_path(oid)
            if path not in listing:
                ops.append(CommitOperationAdd(self.prefix + path, raw))
                objects += 1
                nbytes += len(raw)

        mirror = self._mirror(revision, listing)
        for update in plan.tables:
            table = LanceTable(mirror / f"{update.table}.lance")
            self._load_mirror_table(revision, listing, update.table, table)
            existing = table.file_paths() if table.exists() else set()
            new = [r for r in update.records if not all(f.path in existing for f in r.files)]
            if not new:
                continue
            for record in new:
                for f in record.files:
                    remote_path = table_file(update.table, f.path)
                    if remote_path in listing:
                        continue
                    op = CommitOperationAdd(self.prefix + remote_path, str(update.source / f.path))
                    if op.upload_info.sha256.hex() != f.sha256:
                        raise FunesError(
                            f"local fragment file {update.source / f.path} does not match its "
                            "manifest",
                            hint="run `funes fsck`; nothing was pushed",
                        )
                    ops.append(op)
                    files += 1
                    nbytes += f.size
            before = _files(table.path)
            try:
                append_records(table, new, schema=update.schema)
            except TransferError as exc:
                raise RemoteError(f"{self.display}: {exc.message}", hint=exc.hint) from None
            for rel, stamp in sorted(_files(table.path).items()):
                if before.get(rel) != stamp:
                    path = table_file(update.table, rel)
                    ops.append(CommitOperationAdd(self.prefix + path, str(table.path / rel)))
                    nbytes += stamp[0]

        card = self._card(revision, listing, plan)
        if card is not None:
            ops.append(CommitOperationAdd(self.prefix + CARD_FILE, card.encode()))
        for tag, oid in sorted(plan.tags.items()):
            if tag not in state.refs:  # a tag is never moved
                ops.append(CommitOperationAdd(self.prefix + tag, f"{oid}\n".encode()))
        ops.append(CommitOperationAdd(self.prefix + plan.ref, f"{plan.new}\n".encode()))
        progress(0, 1, f"uploading {len(ops)} files")
        # Until the commit lands the mirror is ahead of the remote: forget which commit it
        # reflects, so a failed push makes the next one rebuild it.
        (mirror / "REVISION").unlink(missing_ok=True)
        with self._errors("push", ref=plan.ref, ours=plan.new):
            info = self._api().create_commit(
                self.repo_id,
                ops,
                commit_message=plan.message,
                repo_type="dataset",
                parent_commit=revision,
            )
        progress(1, 1, "pushed")
        new_revision = str(info.oid)
        write_atomic(mirror / "REVISION", new_revision.encode(), durable=False)
        refs = {**plan.tags, **state.refs}
        refs[plan.ref] = plan.new
        self._save_state(RemoteState(True, new_revision, refs))
        return PushReport(new_revision, objects, files, nbytes)

    def _mirror(self, revision: str | None, listing: frozenset[str]) -> Path:
        """The metadata mirror, emptied unless it reflects `revision`."""
        mirror = self.state_dir / "mirror"
        try:
            reflects = (mirror / "REVISION").read_text("utf-8").strip()
        except OSError:
            reflects = None
        if reflects != revision or revision is None:
            shutil.rmtree(mirror, ignore_errors=True)
            mirror.mkdir(parents=True, exist_ok=True)
            if revision is not None:
                write_atomic(mirror / "REVISION", revision.encode(), durable=False)
        return mirror

    def _load_mirror_table(
        self, revision: str | None, listing: frozenset[str], name: str, table: LanceTable
    ) -> None:
        """Bring the remote dataset's latest manifest into the mirror (once per revision)."""
        if table.exists() or revision is None:
            return
        prefix = f"{name}.lance/"
        latest = latest_manifest(p[len(prefix) :] for p in listing if p.startswith(prefix))
        if latest is None:
            return  # no dataset on the remote yet: the push creates it
        self._download_to(
            revision,
            [(table_file(name, latest), table.path / latest)],
            self.state_dir / "mirror-dl",
            lambda *_: None,
            {table_file(name, latest): MAX_OBJECT_BYTES},
            exact=False,
        )
        shutil.rmtree(self.state_dir / "mirror-dl", ignore_errors=True)

    def _card(self, revision: str | None, listing: frozenset[str], plan: PushPlan) -> str | None:
        existing: str | None = None
        if revision is not None and CARD_FILE in listing:
            raw = self._get_many(revision, [CARD_FILE])[CARD_FILE]
            try:
                existing = raw.decode("utf-8")
            except UnicodeDecodeError:
                return None  # not ours to rewrite
        return refresh_card(existing, self.spec.display, self.lance_url, plan.card)


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under a directory with (size, mtime): what a Lance commit added or changed."""
    out: dict[str, tuple[int, int]] = {}
    if root.is_dir():
        for path in root.rglob("*"):
            if path.is_file():
                st = path.stat()
                out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


def _mkdtemp(parent: Path, prefix: str) -> str:
    import tempfile

    return tempfile.mkdtemp(prefix=prefix, dir=parent)


# -- who the user is ---------------------------------------------------------------------------


def current_token() -> str | None:
    """The token huggingface_hub would send (HF_TOKEN, else the one `hf auth login` saved)."""
    from huggingface_hub import get_token

    return get_token()


def whoami(endpoint: str | None, token: str) -> tuple[str, tuple[str, ...]]:
    """The token's user name and the organisations they belong to (one request).

    Raises:
        RemoteError: the Hub cannot be reached or refuses the token.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        info = HfApi(endpoint=endpoint, token=token).whoami()
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        raise RemoteError(f"the Hub refused the token (HTTP {status})", hint=_LOGIN_HINT) from None
    except _transport_errors() as exc:
        raise RemoteError(f"cannot reach the Hub ({exc.__class__.__name__})") from None
    name = info.get("name") if isinstance(info, dict) else None
    if not isinstance(name, str):
        raise RemoteError("the Hub's whoami answer has no user name")
    orgs = info.get("orgs") or []
    return name, tuple(str(o["name"]) for o in orgs
                       if isinstance(o, dict) and isinstance(o.get("name"), str))


def set_visibility(endpoint: str | None, repo_id: str, *, private: bool) -> None:
    """Make a dataset repository private or public (the token must be allowed to).

    Raises:
        RemoteError: the Hub cannot be reached or refuses.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        HfApi(endpoint=endpoint).update_repo_settings(repo_id, private=private,
                                                      repo_type="dataset")
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        raise RemoteError(f"{repo_id}: the Hub refused to change its visibility (HTTP {status})",
                          hint=_LOGIN_HINT) from None
    except _transport_errors() as exc:
        raise RemoteError(f"cannot reach the Hub ({exc.__class__.__name__})") from None


def is_private(endpoint: str | None, repo_id: str) -> bool:
    """Whether a dataset repository is private (one request).

    Raises:
        RemoteError: the Hub cannot be reached or refuses.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    try:
        return bool(HfApi(endpoint=endpoint).dataset_info(repo_id).private)
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        raise RemoteError(f"{repo_id}: the Hub refused to describe it (HTTP {status})",
                          hint=_LOGIN_HINT) from None
    except _transport_errors() as exc:
        raise RemoteError(f"cannot reach the Hub ({exc.__class__.__name__})") from None
