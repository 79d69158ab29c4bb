"""A loopback Hugging Face Hub for tests.

`HubServer` speaks enough of the Hub's HTTP protocol for the real `huggingface_hub` client
(with `HF_HUB_DISABLE_XET=1`) and for pylance's `hf://` object store to create repositories,
commit to them with compare-and-swap, and read them back. It binds only 127.0.0.1, keeps its
state in a storage directory, logs every request for efficiency assertions, and can inject
faults (dropped connections, forced statuses, corrupted downloads).

Usage::

    with HubServer(tmp_path / "hub") as hub:
        api = HfApi(endpoint=hub.endpoint, token=hub.write_token)
        api.create_repo("org/mem", repo_type="dataset", private=True)
        ...
        assert hub.count(route="commit") == 1

The protocol facts it follows are listed in ``HUB-PROTOCOL.md`` (shared notes) and in
``docs/testing.md`` ("The loopback Hub server").
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

__all__ = [
    "COMMIT_CONFLICT_MESSAGE",
    "Commit",
    "Fault",
    "FileEntry",
    "HubServer",
    "RequestRecord",
    "TokenInfo",
    "client_env",
    "git_blob_oid",
]

#: Message the Hub sends with a 412 when `parentCommit` is stale (asserted by the client's tests).
COMMIT_CONFLICT_MESSAGE = "A commit has happened since. Please refresh and try again."

_REPO_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
_DEFAULT_GITATTRIBUTES = (
    b"*.arrow filter=lfs diff=lfs merge=lfs -text\n"
    b"*.bin filter=lfs diff=lfs merge=lfs -text\n"
    b"*.lance filter=lfs diff=lfs merge=lfs -text\n"
    b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
)
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def git_blob_oid(data: bytes) -> str:
    """Git's blob id of `data` (the Hub's oid of a regular file): sha1 of a blob header + data."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _lfs_pointer(sha256: str, size: int) -> bytes:
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _is_true(values: list[str] | None) -> bool:
    return values is not None and bool(values) and values[-1].lower() in ("1", "true", "yes")


# --------------------------------------------------------------------------------------------
# Public data types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TokenInfo:
    """A bearer token the server accepts.

    Attributes:
        user: The user name the token belongs to (`whoami` answers it; repos created without an
            organization land in this namespace).
        role: ``"read"`` or ``"write"``; only write tokens may create, commit or delete.
        orgs: Organizations the user belongs to, or ``"*"`` for every namespace.
    """

    user: str
    role: Literal["read", "write"] = "write"
    orgs: tuple[str, ...] | Literal["*"] = "*"

    def can_access(self, namespace: str) -> bool:
        """Whether the token's user may see private repos of (and write to) `namespace`."""
        return namespace == self.user or self.orgs == "*" or namespace in self.orgs


@dataclass(frozen=True)
class FileEntry:
    """One file of a commit's tree.

    Attributes:
        sha256: sha256 of the content (the key of the blob in the storage directory).
        size: Content size in bytes.
        git_oid: The Hub's ``oid``: git blob sha1 of the content for regular files, of the LFS
            pointer for LFS files.
        lfs: Whether the file was committed as LFS (`lfsFile` line) rather than inline.
    """

    sha256: str
    size: int
    git_oid: str
    lfs: bool

    @property
    def etag(self) -> str:
        """The ETag `resolve` serves: sha256 for LFS files, the git blob id otherwise."""
        return self.sha256 if self.lfs else self.git_oid

    @property
    def pointer_size(self) -> int:
        """Size of the LFS pointer file (reported in tree listings of LFS files)."""
        return len(_lfs_pointer(self.sha256, self.size))


@dataclass(frozen=True)
class Commit:
    """A commit of a repo: a full snapshot of its files.

    Attributes:
        id: 40-hex commit id.
        parents: Parent commit ids (empty for the initial commit).
        title: Commit summary.
        message: Commit description.
        author: User that made the commit.
        date: ISO-8601 UTC timestamp.
        files: Path -> `FileEntry`, the whole tree at this commit.
        changed: Paths added, modified or deleted relative to the first parent. Empty for a
            commit that changed nothing, which is how a test detects a no-op push.
        transferred: Paths whose bytes travelled to the server for this commit (inline
            content, or an LFS object uploaded since the repo's previous commit).
    """

    id: str
    parents: tuple[str, ...]
    title: str
    message: str
    author: str
    date: str
    files: Mapping[str, FileEntry]
    changed: tuple[str, ...]
    transferred: tuple[str, ...]


@dataclass
class RequestRecord:
    """One HTTP request the server received (an entry of `HubServer.requests`).

    Attributes:
        method: HTTP method.
        path: URL path, percent-decoded.
        query: Parsed query string.
        route: Route name (``"commit"``, ``"resolve"``, ``"cdn"``, ``"tree"``, ``"preupload"``,
            ``"lfs-batch"``, ``"lfs-upload"``, ...; ``"unknown"`` when nothing matched).
        listener: ``"hub"`` or ``"cdn"`` (the second port that serves LFS redirects).
        status: Response status, or None when the connection was dropped before a response.
        request_bytes: Size of the request body.
        response_bytes: Size of the response body actually sent.
        body: The request body.
        headers: Request headers (lower-cased names).
        user: User of the bearer token, if one was sent and accepted.
        repo: ``"<type>:<namespace>/<name>"`` the request addressed, if any.
        file: Path in the repo of a file download, if any.
        fault: Kind of injected fault that hit this request, if any.
        started: Wall-clock start time (``time.time()``).
        duration: Seconds spent handling the request.
    """

    method: str
    path: str
    query: dict[str, list[str]]
    route: str = "unknown"
    listener: str = "hub"
    status: int | None = None
    request_bytes: int = 0
    response_bytes: int = 0
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    repo: str | None = None
    file: str | None = None
    fault: str | None = None
    started: float = 0.0
    duration: float = 0.0

    @property
    def repo_id(self) -> str | None:
        """``"namespace/name"`` of the addressed repo, if any."""
        return None if self.repo is None else self.repo.split(":", 1)[1]

    @property
    def is_download(self) -> bool:
        """Whether this request transferred file content to the client."""
        return (
            self.method == "GET"
            and self.route in ("resolve", "cdn")
            and self.status in (200, 206)
            and self.response_bytes > 0
        )


@dataclass
class Fault:
    """An injected fault; returned by the `HubServer` fault methods so a test can check `fired`.

    A fault matches requests by method, route, URL-path regex, repo and (for corruption)
    file path. It fires on its `nth` match and on up to `times - 1` further matches
    (`times=None`: every match from the `nth` on).
    """

    kind: Literal["drop", "drop_after", "status", "corrupt"]
    method: str | None = None
    route: str | None = None
    path: str | None = None
    repo: str | None = None
    file: str | None = None
    nth: int = 1
    times: int | None = 1
    status: int = 500
    error_code: str | None = None
    message: str | None = None
    seen: int = 0
    fired: int = 0

    def _matches(self, rec: RequestRecord) -> bool:
        if self.method is not None and rec.method != self.method.upper():
            return False
        if self.route is not None and rec.route != self.route:
            return False
        if self.path is not None and re.search(self.path, rec.path) is None:
            return False
        if self.repo is not None and rec.repo_id != self.repo:
            return False
        return self.file is None or rec.file == self.file

    def _trigger(self) -> bool:
        self.seen += 1
        if self.seen < self.nth or (self.times is not None and self.fired >= self.times):
            return False
        self.fired += 1
        return True


# --------------------------------------------------------------------------------------------
# Internal state
# --------------------------------------------------------------------------------------------


@dataclass
class _Repo:
    type: str
    id: str
    private: bool
    created: str
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    lfs_oids: set[str] = field(default_factory=set)
    pending_lfs: set[str] = field(default_factory=set)

    @property
    def key(self) -> str:
        return f"{self.type}:{self.id}"

    @property
    def namespace(self) -> str:
        return self.id.split("/", 1)[0]


class _HttpError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})


@dataclass
class _Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    content_length: int | None = None  # for HEAD: the length a GET would send


def _json(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> _Response:
    return _Response(
        status,
        {"Content-Type": "application/json; charset=utf-8", **(headers or {})},
        json.dumps(obj).encode(),
    )


@dataclass
class _Request:
    method: str
    route: str
    params: dict[str, str]
    query: dict[str, list[str]]
    headers: Mapping[str, str]
    body: bytes
    token: TokenInfo | None
    record: RequestRecord


_API_REPO = r"^/api/(?P<t>models|datasets|spaces)/(?P<ns>[^/]+)/(?P<name>[^/]+)"
_GIT_REPO = r"^/(?:(?P<t>datasets|spaces)/)?(?P<ns>[^/]+)/(?P<name>[^/]+?)"
_LFS = (
    r"^/_lfs/(?P<t>model|dataset|space)/(?P<ns>[^/]+)/(?P<name>[^/]+)"
    r"/(?P<oid>[0-9a-f]{64})/(?P<size>\d+)"
)
_ROUTES: list[tuple[str, str, str, str]] = [
    # (listener, methods, regex on the raw path, route name)
    ("hub", "GET", r"^/api/whoami-v2$", "whoami"),
    ("hub", "POST", r"^/api/repos/create$", "repo-create"),
    ("hub", "DELETE", r"^/api/repos/delete$", "repo-delete"),
    ("hub", "PUT", _API_REPO + r"/settings$", "repo-settings"),
    ("hub", "GET", _API_REPO + r"(?:/revision/(?P<rev>[^/]+))?$", "repo-info"),
    ("hub", "GET", _API_REPO + r"/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$", "tree"),
    ("hub", "POST", _API_REPO + r"/paths-info/(?P<rev>[^/]+)$", "paths-info"),
    ("hub", "GET", _API_REPO + r"/refs$", "refs"),
    ("hub", "GET", _API_REPO + r"/commits/(?P<rev>[^/]+)$", "commits"),
    ("hub", "POST DELETE", _API_REPO + r"/branch/(?P<rev>[^/]+)$", "branch"),
    ("hub", "POST DELETE", _API_REPO + r"/tag/(?P<rev>[^/]+)$", "tag"),
    ("hub", "POST", _API_REPO + r"/preupload/(?P<rev>[^/]+)$", "preupload"),
    ("hub", "GET", _API_REPO + r"/xet-(?:read|write)-token/(?P<rev>[^/]+)$", "xet-token"),
    ("hub", "POST", _API_REPO + r"/commit/(?P<rev>[^/]+)$", "commit"),
    ("hub", "POST", _API_REPO + r"/super-squash/(?P<rev>[^/]+)$", "super-squash"),
    ("hub", "GET", _API_REPO + r"/lfs-files$", "lfs-files"),
    ("hub", "POST", _API_REPO + r"/lfs-files/batch$", "lfs-files-batch"),
    ("hub", "POST", _GIT_REPO + r"\.git/info/lfs/objects/batch$", "lfs-batch"),
    ("hub", "PUT", _LFS + r"$", "lfs-upload"),
    ("hub", "PUT", _LFS + r"/part/(?P<part>\d+)$", "lfs-part"),
    ("hub", "POST", _LFS + r"/complete$", "lfs-complete"),
    ("hub", "POST", _LFS + r"/verify$", "lfs-verify"),
    ("hub", "GET HEAD", _GIT_REPO + r"/resolve/(?P<rev>[^/]+)/(?P<path>.+)$", "resolve"),
    ("cdn", "GET HEAD", r"^/_cdn/(?P<oid>[0-9a-f]{64})$", "cdn"),
]
_COMPILED = [(lst, m.split(), re.compile(rx), name) for lst, m, rx, name in _ROUTES]


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class HubServer:
    """A Hub-compatible HTTP server on 127.0.0.1, for tests; use it as a context manager.

    Args:
        storage_dir: Directory holding blobs and ``state.json``. Reusing a directory restarts
            the Hub with its repos. Defaults to a fresh temporary directory.
        lfs_threshold: Files at least this large are told to upload as LFS by `preupload`
            (binary samples go LFS at any size, like on the Hub).
        multipart_chunk_size: LFS objects larger than this upload in parts of this size.
        lfs_redirect: When True (the Hub's behaviour), `resolve` of an LFS file answers 302 to a
            second "CDN" listener on another port, with `X-Linked-Etag` and `X-Linked-Size`.
        tree_page_size: Entries per page of `tree` listings (the Hub: 1000).
        tree_expand_page_size: Entries per page of `tree?expand=True` listings (the Hub: 50).

    Attributes:
        endpoint: Base URL, e.g. ``"http://127.0.0.1:43121"``; give it to
            ``HfApi(endpoint=...)``, ``hf_hub_download(endpoint=...)`` or env ``HF_ENDPOINT``.
        cdn_endpoint: Base URL of the CDN listener.
        tokens: Accepted bearer tokens (token -> `TokenInfo`); add more with `add_token`.
        write_token: Write token of user ``"tester"``, member of every organization.
        read_token: Read-only token of user ``"tester"``.
        other_token: Write token of user ``"stranger"``, member of no organization.
    """

    def __init__(
        self,
        storage_dir: str | os.PathLike[str] | None = None,
        *,
        lfs_threshold: int = 10 * 1024 * 1024,
        multipart_chunk_size: int = 8 * 1024 * 1024,
        lfs_redirect: bool = True,
        tree_page_size: int = 1000,
        tree_expand_page_size: int = 50,
    ) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if storage_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="hubserver-")
            storage_dir = self._tmp.name
        self.storage_dir = Path(storage_dir)
        (self.storage_dir / "objects").mkdir(parents=True, exist_ok=True)
        (self.storage_dir / "uploads").mkdir(parents=True, exist_ok=True)
        self.lfs_threshold = lfs_threshold
        self.multipart_chunk_size = multipart_chunk_size
        self.lfs_redirect = lfs_redirect
        self.tree_page_size = tree_page_size
        self.tree_expand_page_size = tree_expand_page_size

        self.write_token = "hf_test_write_tester"
        self.read_token = "hf_test_read_tester"
        self.other_token = "hf_test_write_stranger"
        self.tokens: dict[str, TokenInfo] = {
            self.write_token: TokenInfo("tester", "write", "*"),
            self.read_token: TokenInfo("tester", "read", "*"),
            self.other_token: TokenInfo("stranger", "write", ()),
        }

        self._lock = threading.RLock()
        self._log_lock = threading.Lock()
        self._log: list[RequestRecord] = []
        self._faults: list[Fault] = []
        self._repos: dict[str, _Repo] = {}
        self._counter = 0
        self._secret = secrets.token_bytes(16)
        self._connections: set[socket.socket] = set()
        self._servers: list[ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []
        self.endpoint = ""
        self.cdn_endpoint = ""
        self._load()

    # ---- lifecycle -----------------------------------------------------------------------

    def start(self) -> HubServer:
        """Bind both listeners on free loopback ports and serve in daemon threads."""
        if self._servers:
            return self
        for listener in ("hub", "cdn"):
            srv = _Server(("127.0.0.1", 0), _Handler, self, listener)
            port = srv.server_address[1]
            url = f"http://127.0.0.1:{port}"
            if listener == "hub":
                self.endpoint = url
            else:
                self.cdn_endpoint = url
            thread = threading.Thread(
                target=srv.serve_forever,
                kwargs={"poll_interval": 0.02},
                name=f"hubserver-{listener}-{port}",
                daemon=True,
            )
            thread.start()
            self._servers.append(srv)
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop serving, close every open client connection and release the ports."""
        for srv in self._servers:
            srv.shutdown()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for srv in self._servers:
            srv.server_close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._servers.clear()
        self._threads.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- tokens ------------------------------------------------------------------------

    def add_token(
        self,
        token: str,
        user: str,
        role: Literal["read", "write"] = "write",
        orgs: Iterable[str] | Literal["*"] = (),
    ) -> str:
        """Accept `token` as a bearer token of `user` with `role`; returns the token."""
        self.tokens[token] = TokenInfo(user, role, orgs if orgs == "*" else tuple(orgs))
        return token

    # ---- request log -------------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the request log, oldest first (thread-safe)."""
        with self._log_lock:
            return list(self._log)

    def clear_requests(self) -> None:
        """Empty the request log (e.g. after setting a test up)."""
        with self._log_lock:
            self._log.clear()

    def find(
        self,
        *,
        route: str | None = None,
        method: str | None = None,
        repo: str | None = None,
        status: int | None = None,
        listener: str | None = None,
    ) -> list[RequestRecord]:
        """Logged requests matching every given criterion (`repo` is ``"namespace/name"``)."""
        out = []
        for rec in self.requests:
            if route is not None and rec.route != route:
                continue
            if method is not None and rec.method != method.upper():
                continue
            if repo is not None and rec.repo_id != repo:
                continue
            if status is not None and rec.status != status:
                continue
            if listener is not None and rec.listener != listener:
                continue
            out.append(rec)
        return out

    def count(self, **criteria: Any) -> int:
        """Number of logged requests matching `criteria` (the arguments of `find`)."""
        return len(self.find(**criteria))

    def downloads(self, repo: str | None = None) -> list[RequestRecord]:
        """Requests that sent file content (GET on `resolve` or the CDN, 200/206)."""
        return [r for r in self.requests if r.is_download and (repo is None or r.repo_id == repo)]

    def downloaded_files(self, repo: str | None = None) -> list[str]:
        """Repo paths of every file download, in order (a path repeats if fetched twice)."""
        return [r.file or "" for r in self.downloads(repo)]

    def uploaded_bytes(self) -> bytes:
        """Every byte clients sent, with inline payloads decoded.

        Concatenates all request bodies plus the base64-decoded `content` of NDJSON commit
        lines and of preupload `sample` fields, so ``secret not in hub.uploaded_bytes()`` is a
        sound "never left the machine" check.
        """
        chunks: list[bytes] = []
        for rec in self.requests:
            chunks.append(rec.body)
            chunks.extend(_decoded_payloads(rec))
        return b"\n".join(chunks)

    def commit_requests(self, repo: str | None = None) -> list[RequestRecord]:
        """Logged requests on the `commit` route (successful or not)."""
        return self.find(route="commit", repo=repo)

    # ---- faults ------------------------------------------------------------------------

    def drop_connection(
        self,
        *,
        route: str | None = None,
        method: str | None = None,
        path: str | None = None,
        repo: str | None = None,
        nth: int = 1,
        times: int | None = 1,
        after_handling: bool = False,
    ) -> Fault:
        """Close the connection on the `nth` matching request without answering.

        By default the request is dropped mid-body, before the server acts on it (the ref
        stays put). With `after_handling=True` the server applies the request first and then
        loses the response: the "did my commit land?" case.
        """
        return self._add_fault(
            Fault(
                "drop_after" if after_handling else "drop",
                method=method,
                route=route,
                path=path,
                repo=repo,
                nth=nth,
                times=times,
            )
        )

    def fail_with(
        self,
        status: int,
        *,
        route: str | None = None,
        method: str | None = None,
        path: str | None = None,
        repo: str | None = None,
        nth: int = 1,
        times: int | None = 1,
        error_code: str | None = None,
        message: str | None = None,
    ) -> Fault:
        """Answer the `nth` matching request with `status` (and optional `X-Error-Code`)."""
        return self._add_fault(
            Fault(
                "status",
                method=method,
                route=route,
                path=path,
                repo=repo,
                nth=nth,
                times=times,
                status=status,
                error_code=error_code,
                message=message or f"Injected failure ({status})",
            )
        )

    def force_commit_conflict(
        self, *, repo: str | None = None, nth: int = 1, times: int | None = 1
    ) -> Fault:
        """Answer the `nth` commit with the Hub's 412 "A commit has happened since" error."""
        return self.fail_with(
            412, route="commit", repo=repo, nth=nth, times=times, message=COMMIT_CONFLICT_MESSAGE
        )

    def corrupt_download(
        self, file: str, *, repo: str | None = None, nth: int = 1, times: int | None = 1
    ) -> Fault:
        """Flip bits in the content served for `file` (a path in the repo) on its nth GET."""
        return self._add_fault(Fault("corrupt", file=file, repo=repo, nth=nth, times=times))

    def clear_faults(self) -> None:
        """Remove every pending fault."""
        with self._lock:
            self._faults.clear()

    def _add_fault(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def _take_fault(self, rec: RequestRecord, kinds: tuple[str, ...]) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.kind in kinds and fault._matches(rec) and fault._trigger():
                    return fault
        return None

    # ---- direct (non-HTTP) access for test setup and assertions -------------------------

    def create_repo(
        self,
        repo_id: str,
        *,
        repo_type: str = "dataset",
        private: bool = True,
        author: str = "tester",
    ) -> str:
        """Create a repo without HTTP (initial commit: `.gitattributes`); returns its URL."""
        with self._lock:
            if f"{repo_type}:{repo_id}" in self._repos:
                raise ValueError(f"{repo_type} repo {repo_id} already exists")
            repo = self._new_repo(repo_type, repo_id, private, author)
            return self._repo_url(repo)

    def commit_files(
        self,
        repo_id: str,
        files: Mapping[str, bytes | None],
        *,
        repo_type: str = "dataset",
        branch: str = "main",
        message: str = "Commit from test",
        lfs: bool | None = None,
    ) -> str:
        """Commit `files` (path -> bytes, or None to delete) without HTTP; returns the commit id.

        `lfs` forces LFS or regular storage; by default the `preupload` rule decides.
        """
        with self._lock:
            repo = self._get_repo(repo_type, repo_id)
            ops: list[tuple[str, str, FileEntry | None, bool]] = []
            for path, data in files.items():
                if data is None:
                    ops.append(("delete", path, None, False))
                    continue
                as_lfs = self._wants_lfs(path, len(data), data[:512]) if lfs is None else lfs
                ops.append(("put", path, self._store(data, as_lfs), False))
                if as_lfs:
                    repo.lfs_oids.add(hashlib.sha256(data).hexdigest())
            return self._apply_commit(repo, branch, ops, message, "", "tester", None).id

    def set_private(self, repo_id: str, private: bool, *, repo_type: str = "dataset") -> None:
        """Change a repo's visibility without HTTP."""
        with self._lock:
            self._get_repo(repo_type, repo_id).private = private
            self._save()

    def repo_exists(self, repo_id: str, *, repo_type: str = "dataset") -> bool:
        """Whether the repo exists."""
        with self._lock:
            return f"{repo_type}:{repo_id}" in self._repos

    def head(self, repo_id: str, *, repo_type: str = "dataset", branch: str = "main") -> str:
        """Commit id `branch` points at."""
        with self._lock:
            return self._get_repo(repo_type, repo_id).branches[branch]

    def history(
        self, repo_id: str, *, repo_type: str = "dataset", revision: str = "main"
    ) -> list[Commit]:
        """First-parent history from `revision`, newest first (the initial commit last)."""
        with self._lock:
            repo = self._get_repo(repo_type, repo_id)
            return self._history(repo, self._resolve_rev(repo, revision))

    def files(
        self, repo_id: str, *, repo_type: str = "dataset", revision: str = "main"
    ) -> dict[str, FileEntry]:
        """The tree at `revision`: path -> `FileEntry`."""
        with self._lock:
            repo = self._get_repo(repo_type, repo_id)
            return dict(repo.commits[self._resolve_rev(repo, revision)].files)

    def read_file(
        self, repo_id: str, path: str, *, repo_type: str = "dataset", revision: str = "main"
    ) -> bytes:
        """Content of `path` at `revision`."""
        entry = self.files(repo_id, repo_type=repo_type, revision=revision)[path]
        return self._blob_path(entry.sha256).read_bytes()

    # ---- storage -----------------------------------------------------------------------

    def _blob_path(self, sha256: str) -> Path:
        return self.storage_dir / "objects" / sha256[:2] / sha256[2:]

    def _store(self, data: bytes, lfs: bool) -> FileEntry:
        sha256 = hashlib.sha256(data).hexdigest()
        path = self._blob_path(sha256)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        git_oid = git_blob_oid(_lfs_pointer(sha256, len(data)) if lfs else data)
        return FileEntry(sha256, len(data), git_oid, lfs)

    def _wants_lfs(self, path: str, size: int, sample: bytes) -> bool:
        if path == ".gitattributes" or size == 0:
            return False
        return size >= self.lfs_threshold or b"\0" in sample

    def _save(self) -> None:
        state = {
            "counter": self._counter,
            "repos": {
                key: {
                    "type": r.type,
                    "id": r.id,
                    "private": r.private,
                    "created": r.created,
                    "branches": r.branches,
                    "tags": r.tags,
                    "lfs_oids": sorted(r.lfs_oids),
                    "commits": {
                        cid: {
                            "parents": list(c.parents),
                            "title": c.title,
                            "message": c.message,
                            "author": c.author,
                            "date": c.date,
                            "files": {
                                p: [e.sha256, e.size, e.git_oid, e.lfs] for p, e in c.files.items()
                            },
                            "changed": list(c.changed),
                            "transferred": list(c.transferred),
                        }
                        for cid, c in r.commits.items()
                    },
                }
                for key, r in self._repos.items()
            },
        }
        target = self.storage_dir / "state.json"
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, target)

    def _load(self) -> None:
        target = self.storage_dir / "state.json"
        if not target.exists():
            return
        state = json.loads(target.read_text())
        self._counter = state["counter"]
        for key, r in state["repos"].items():
            repo = _Repo(
                r["type"],
                r["id"],
                r["private"],
                r["created"],
                r["branches"],
                r["tags"],
                lfs_oids=set(r["lfs_oids"]),
            )
            for cid, c in r["commits"].items():
                repo.commits[cid] = Commit(
                    cid,
                    tuple(c["parents"]),
                    c["title"],
                    c["message"],
                    c["author"],
                    c["date"],
                    {p: FileEntry(*e) for p, e in c["files"].items()},
                    tuple(c["changed"]),
                    tuple(c["transferred"]),
                )
            self._repos[key] = repo

    # ---- repo model --------------------------------------------------------------------

    def _new_repo(self, repo_type: str, repo_id: str, private: bool, author: str) -> _Repo:
        repo = _Repo(repo_type, repo_id, private, _now())
        self._repos[repo.key] = repo
        entry = self._store(_DEFAULT_GITATTRIBUTES, lfs=False)
        repo.branches["main"] = ""
        self._apply_commit(
            repo,
            "main",
            [("put", ".gitattributes", entry, False)],
            "initial commit",
            "",
            author,
            None,
        )
        return repo

    def _get_repo(self, repo_type: str, repo_id: str) -> _Repo:
        try:
            return self._repos[f"{repo_type}:{repo_id}"]
        except KeyError:
            raise KeyError(f"no {repo_type} repo {repo_id}") from None

    def _repo_url(self, repo: _Repo) -> str:
        return f"{self.endpoint}/{_URL_PREFIX[repo.type]}{repo.id}"

    def _resolve_rev(self, repo: _Repo, rev: str) -> str:
        if rev in repo.branches:
            return repo.branches[rev]
        if rev in repo.tags:
            return repo.tags[rev]
        if _SHA_RE.match(rev) and rev in repo.commits:
            return rev
        raise _HttpError(404, f"Invalid rev id: {rev}", "RevisionNotFound")

    def _history(self, repo: _Repo, cid: str) -> list[Commit]:
        out = []
        while cid:
            commit = repo.commits[cid]
            out.append(commit)
            cid = commit.parents[0] if commit.parents else ""
        return out

    def _apply_commit(
        self,
        repo: _Repo,
        branch: str,
        ops: list[tuple[str, str, FileEntry | None, bool]],
        title: str,
        message: str,
        author: str,
        parent_commit: str | None,
    ) -> Commit:
        """Apply `ops` on top of `branch` atomically (caller holds the lock)."""
        if branch not in repo.branches:
            if branch in repo.tags or _SHA_RE.match(branch):
                raise _HttpError(
                    400, f"Invalid rev id: {branch} is not a branch", "RevisionNotFound"
                )
            raise _HttpError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
        head = repo.branches[branch]
        if parent_commit is not None and parent_commit != head:
            raise _HttpError(412, COMMIT_CONFLICT_MESSAGE)
        old: Mapping[str, FileEntry] = repo.commits[head].files if head else {}
        files = dict(old)
        transferred: list[str] = []
        for kind, path, entry, sent in ops:
            _check_path(path)
            if kind == "put":
                assert entry is not None
                files[path] = entry
                if sent:
                    transferred.append(path)
            elif kind == "delete":
                if path not in files:
                    raise _HttpError(
                        404, f"A file with this name doesn't exist: {path}", "EntryNotFound"
                    )
                del files[path]
            elif kind == "delete_folder":
                prefix = path.strip("/") + "/"
                gone = [p for p in files if p.startswith(prefix)]
                if not gone:
                    raise _HttpError(
                        404, f"A folder with this name doesn't exist: {path}", "EntryNotFound"
                    )
                for p in gone:
                    del files[p]
        changed = tuple(sorted(p for p in set(old) | set(files) if old.get(p) != files.get(p)))
        self._counter += 1
        digest = hashlib.sha1(
            json.dumps(
                [
                    repo.key,
                    head,
                    self._counter,
                    title,
                    sorted((p, e.sha256) for p, e in files.items()),
                ]
            ).encode()
        ).hexdigest()
        commit = Commit(
            id=digest,
            parents=(head,) if head else (),
            title=title,
            message=message,
            author=author,
            date=_now(),
            files=files,
            changed=changed,
            transferred=tuple(transferred),
        )
        repo.commits[commit.id] = commit
        repo.branches[branch] = commit.id
        self._save()
        return commit

    def _last_commits(self, repo: _Repo, cid: str) -> dict[str, Commit]:
        """For each path at `cid` (and each directory), the newest commit that changed it."""
        out: dict[str, Commit] = {}
        for commit in self._history(repo, cid):
            for path in commit.changed:
                parts = path.split("/")
                for i in range(1, len(parts) + 1):
                    out.setdefault("/".join(parts[:i]), commit)
        return out

    # ---- HTTP plumbing -----------------------------------------------------------------

    def _log_record(self, rec: RequestRecord) -> None:
        with self._log_lock:
            self._log.append(rec)

    def _sign(self, *parts: str) -> str:
        return hmac.new(self._secret, "|".join(parts).encode(), hashlib.sha256).hexdigest()[:32]

    def _auth(self, headers: Mapping[str, str]) -> TokenInfo | None:
        value = headers.get("authorization", "")
        if not value:
            return None
        scheme, _, token = value.partition(" ")
        info = self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if info is None:
            raise _HttpError(401, "Invalid credentials in Authorization header")
        return info

    def _read_repo(self, req: _Request) -> _Repo:
        """The addressed repo, if the caller may read it; 401/404 `RepoNotFound` otherwise."""
        p = req.params
        repo_type = _REPO_TYPES.get(p.get("t") or "models", p.get("t") or "model")
        repo = self._repos.get(f"{repo_type}:{p['ns']}/{p['name']}")
        if repo is None or (
            repo.private and (req.token is None or not req.token.can_access(repo.namespace))
        ):
            if req.token is None:
                raise _HttpError(401, "Invalid username or password.", "RepoNotFound")
            raise _HttpError(404, "Repository not found", "RepoNotFound")
        return repo

    def _write_repo(self, req: _Request) -> _Repo:
        repo = self._read_repo(req)
        self._require_write(req, repo.namespace)
        return repo

    @staticmethod
    def _require_write(req: _Request, namespace: str) -> TokenInfo:
        if req.token is None:
            raise _HttpError(401, "Invalid username or password.")
        if req.token.role != "write" or not req.token.can_access(namespace):
            raise _HttpError(
                403, f"You don't have the rights to write to {namespace} (token role or namespace)"
            )
        return req.token

    def _dispatch(self, req: _Request) -> _Response:
        handler: Callable[[_Request], _Response] = getattr(
            self, "_h_" + req.route.replace("-", "_"), self._h_unknown
        )
        return handler(req)

    # ---- handlers: account and repos -----------------------------------------------------

    def _h_unknown(self, req: _Request) -> _Response:
        raise _HttpError(404, f"Not implemented by the test Hub: {req.method} {req.record.path}")

    def _h_whoami(self, req: _Request) -> _Response:
        if req.token is None:
            raise _HttpError(401, "Invalid credentials in Authorization header")
        orgs = [] if req.token.orgs == "*" else [{"name": o, "type": "org"} for o in req.token.orgs]
        return _json(
            {
                "type": "user",
                "id": hashlib.sha1(req.token.user.encode()).hexdigest()[:24],
                "name": req.token.user,
                "fullname": req.token.user,
                "isPro": False,
                "orgs": orgs,
                "auth": {
                    "type": "access_token",
                    "accessToken": {"displayName": "test", "role": req.token.role},
                },
            }
        )

    def _h_repo_create(self, req: _Request) -> _Response:
        body = _json_body(req)
        token = req.token
        if token is None:
            raise _HttpError(401, "Invalid username or password.")
        name = body.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", name):
            raise _HttpError(400, f"Invalid repo name: {name!r}")
        namespace = body.get("organization") or token.user
        repo_type = body.get("type") or "model"
        if repo_type not in _URL_PREFIX:
            raise _HttpError(400, f"Invalid repo type: {repo_type}")
        self._require_write(req, namespace)
        private = body.get("visibility", "private" if body.get("private") else "public") != "public"
        repo_id = f"{namespace}/{name}"
        req.record.repo = f"{repo_type}:{repo_id}"
        with self._lock:
            existing = self._repos.get(f"{repo_type}:{repo_id}")
            if existing is not None:
                url = self._repo_url(existing)
                raise _HttpError(
                    409, f"You already created this {repo_type} repo", extra={"url": url}
                )
            repo = self._new_repo(repo_type, repo_id, private, token.user)
        return _json({"url": self._repo_url(repo), "name": repo_id, "id": repo_id})

    def _h_repo_delete(self, req: _Request) -> _Response:
        body = _json_body(req)
        repo_type = body.get("type") or "model"
        namespace = body.get("organization") or (req.token.user if req.token else "")
        req.params = {"t": repo_type + "s", "ns": namespace, "name": str(body.get("name"))}
        with self._lock:
            repo = self._write_repo(req)
            req.record.repo = repo.key
            del self._repos[repo.key]
            self._save()
        return _json({})

    def _h_repo_settings(self, req: _Request) -> _Response:
        body = _json_body(req)
        with self._lock:
            repo = self._write_repo(req)
            if "visibility" in body:
                repo.private = body["visibility"] != "public"
            elif "private" in body:
                repo.private = bool(body["private"])
            self._save()
        return _json({})

    def _h_repo_info(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._read_repo(req)
            rev = unquote(req.params.get("rev") or "main")
            cid = self._resolve_rev(repo, rev)
            commit = repo.commits[cid]
            blobs = _is_true(req.query.get("blobs"))
            siblings = []
            for path, e in sorted(commit.files.items()):
                sib: dict[str, Any] = {"rfilename": path}
                if blobs:
                    sib.update(size=e.size, blobId=e.git_oid)
                    if e.lfs:
                        sib["lfs"] = {
                            "sha256": e.sha256,
                            "size": e.size,
                            "pointerSize": e.pointer_size,
                        }
                siblings.append(sib)
            info = {
                "_id": hashlib.sha1(repo.key.encode()).hexdigest()[:24],
                "id": repo.id,
                "author": repo.namespace,
                "sha": cid,
                "private": repo.private,
                "gated": False,
                "disabled": False,
                "createdAt": repo.created,
                "lastModified": commit.date,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "siblings": siblings,
                "usedStorage": sum(e.size for e in commit.files.values()),
            }
        return _json(info)

    # ---- handlers: listing -------------------------------------------------------------

    def _entry_json(
        self, path: str, e: FileEntry, last: Mapping[str, Commit] | None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "file", "oid": e.git_oid, "size": e.size, "path": path}
        if e.lfs:
            out["lfs"] = {"oid": e.sha256, "size": e.size, "pointerSize": e.pointer_size}
        if last is not None and path in last:
            c = last[path]
            out["lastCommit"] = {"id": c.id, "title": c.title, "date": c.date}
        return out

    def _dir_json(
        self, path: str, files: Mapping[str, FileEntry], last: Mapping[str, Commit] | None
    ) -> dict[str, Any]:
        prefix = path + "/"
        digest = hashlib.sha1(
            json.dumps(
                sorted((p, e.git_oid) for p, e in files.items() if p.startswith(prefix))
            ).encode()
        ).hexdigest()
        out: dict[str, Any] = {"type": "directory", "oid": digest, "size": 0, "path": path}
        if last is not None and path in last:
            c = last[path]
            out["lastCommit"] = {"id": c.id, "title": c.title, "date": c.date}
        return out

    def _h_tree(self, req: _Request) -> _Response:
        recursive = _is_true(req.query.get("recursive"))
        expand = _is_true(req.query.get("expand"))
        base = unquote(req.params.get("path") or "").strip("/")
        with self._lock:
            repo = self._read_repo(req)
            cid = self._resolve_rev(repo, unquote(req.params["rev"]))
            files = repo.commits[cid].files
            last = self._last_commits(repo, cid) if expand else None
        prefix = base + "/" if base else ""
        if base and base in files:
            raise _HttpError(404, f"{base} is a file, not a directory", "EntryNotFound")
        dirs: set[str] = set()
        entries: list[tuple[str, FileEntry | None]] = []
        for path in files:
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix) :].split("/")
            if recursive:
                entries.append((path, files[path]))
                for i in range(1, len(rest)):
                    dirs.add(prefix + "/".join(rest[:i]))
            elif len(rest) == 1:
                entries.append((path, files[path]))
            else:
                dirs.add(prefix + rest[0])
        if base and not entries and not dirs:
            raise _HttpError(
                404, f"Entry not found: {base}", "EntryNotFound", {"X-Repo-Commit": cid}
            )
        entries.extend((d, None) for d in dirs)
        entries.sort(key=lambda item: item[0])
        size = self.tree_expand_page_size if expand else self.tree_page_size
        start = int((req.query.get("cursor") or ["0"])[-1] or 0)
        page = entries[start : start + size]
        body = [
            self._entry_json(p, e, last) if e is not None else self._dir_json(p, files, last)
            for p, e in page
        ]
        headers = {}
        if start + size < len(entries):
            query = {k: v[-1] for k, v in req.query.items() if k != "cursor"}
            query["cursor"] = str(start + size)
            link = f"{self.endpoint}{quote(req.record.path)}?{urlencode(query)}"
            headers["Link"] = f'<{link}>; rel="next"'
        return _json(body, headers=headers)

    def _h_paths_info(self, req: _Request) -> _Response:
        ctype = req.headers.get("content-type", "")
        if "json" in ctype:
            data = _json_body(req)
            paths = list(data.get("paths") or [])
            expand = bool(data.get("expand"))
        else:
            form = parse_qs(req.body.decode(), keep_blank_values=True)
            paths = form.get("paths", [])
            expand = _is_true(form.get("expand"))
        with self._lock:
            repo = self._read_repo(req)
            cid = self._resolve_rev(repo, unquote(req.params["rev"]))
            files = repo.commits[cid].files
            last = self._last_commits(repo, cid) if expand else None
        out = []
        for raw in paths:
            path = raw.strip("/")
            if path in files:
                out.append(self._entry_json(path, files[path], last))
            elif any(p.startswith(path + "/") for p in files):
                out.append(self._dir_json(path, files, last))
        return _json(out)

    def _h_refs(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._read_repo(req)
            out: dict[str, Any] = {
                "branches": [
                    {"name": b, "ref": f"refs/heads/{b}", "targetCommit": c}
                    for b, c in sorted(repo.branches.items())
                ],
                "tags": [
                    {"name": t, "ref": f"refs/tags/{t}", "targetCommit": c}
                    for t, c in sorted(repo.tags.items())
                ],
                "converts": [],
            }
        if _is_true(req.query.get("include_prs")):
            out["pullRequests"] = []
        return _json(out)

    def _h_commits(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._read_repo(req)
            cid = self._resolve_rev(repo, unquote(req.params["rev"]))
            history = self._history(repo, cid)
        return _json(
            [
                {
                    "id": c.id,
                    "title": c.title,
                    "message": c.message,
                    "authors": [{"user": c.author, "avatar": None}],
                    "date": c.date,
                }
                for c in history
            ]
        )

    def _h_branch(self, req: _Request) -> _Response:
        name = unquote(req.params["rev"])
        with self._lock:
            repo = self._write_repo(req)
            if req.method == "DELETE":
                if name not in repo.branches:
                    raise _HttpError(404, f"Invalid rev id: {name}", "RevisionNotFound")
                if name == "main":
                    raise _HttpError(403, "Cannot delete the default branch")
                del repo.branches[name]
            else:
                if name in repo.branches:
                    raise _HttpError(409, f"Reference already exists: refs/heads/{name}")
                start = _json_body(req).get("startingPoint") or "main"
                repo.branches[name] = self._resolve_rev(repo, start)
            self._save()
        return _json({})

    def _h_tag(self, req: _Request) -> _Response:
        with self._lock:
            repo = self._write_repo(req)
            if req.method == "DELETE":
                tag = unquote(req.params["rev"])
                if repo.tags.pop(tag, None) is None:
                    raise _HttpError(404, f"Invalid rev id: {tag}", "RevisionNotFound")
            else:
                tag = str(_json_body(req).get("tag"))
                if tag in repo.tags:
                    raise _HttpError(409, f"Reference already exists: refs/tags/{tag}")
                repo.tags[tag] = self._resolve_rev(repo, unquote(req.params["rev"]))
            self._save()
        return _json({})

    # ---- handlers: upload and commit ---------------------------------------------------

    def _h_xet_token(self, req: _Request) -> _Response:
        self._read_repo(req)
        raise _HttpError(
            501,
            "The loopback test Hub does not speak Xet: set HF_HUB_DISABLE_XET=1 "
            "(or patch huggingface_hub.constants.HF_HUB_DISABLE_XET = True).",
        )

    def _h_preupload(self, req: _Request) -> _Response:
        body = _json_body(req)
        with self._lock:
            repo = self._write_repo(req)
            rev = unquote(req.params["rev"])
            files = repo.commits[self._resolve_rev(repo, rev)].files
        out = []
        for f in body.get("files", []):
            path = str(f.get("path"))
            sample = base64.b64decode(f.get("sample") or "")
            size = int(f.get("size") or 0)
            mode = "lfs" if self._wants_lfs(path, size, sample) else "regular"
            entry = files.get(path)
            oid = None if entry is None else (entry.sha256 if entry.lfs else entry.git_oid)
            out.append({"path": path, "uploadMode": mode, "shouldIgnore": False, "oid": oid})
        return _json({"files": out, "commitOid": None})

    def _lfs_base(self, repo: _Repo, oid: str, size: int) -> str:
        ns, name = repo.id.split("/", 1)
        return f"{self.endpoint}/_lfs/{repo.type}/{ns}/{name}/{oid}/{size}"

    def _h_lfs_batch(self, req: _Request) -> _Response:
        body = _json_body(req)
        if body.get("operation") != "upload":
            raise _HttpError(400, "The test Hub only implements LFS uploads")
        transfers = body.get("transfers") or ["basic"]
        with self._lock:
            repo = self._write_repo(req)
        objects = []
        for obj in body.get("objects", []):
            oid, size = str(obj.get("oid")), int(obj.get("size"))
            item: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if not re.fullmatch(r"[0-9a-f]{64}", oid):
                item["error"] = {"code": 422, "message": "Invalid oid"}
            elif oid in repo.lfs_oids and self._blob_path(oid).exists():
                pass  # already stored: no actions
            else:
                base = self._lfs_base(repo, oid, size)
                sig = self._sign(repo.key, oid, str(size))
                upload: dict[str, Any]
                if "multipart" in transfers and size > self.multipart_chunk_size:
                    nparts = -(-size // self.multipart_chunk_size)
                    header = {"chunk_size": str(self.multipart_chunk_size)}
                    for n in range(1, nparts + 1):
                        header[f"{n:05d}"] = f"{base}/part/{n}?sig={sig}"
                    upload = {"href": f"{base}/complete?sig={sig}", "header": header}
                else:
                    upload = {"href": f"{base}?sig={sig}"}
                item["actions"] = {
                    "upload": upload,
                    "verify": {"href": f"{base}/verify?sig={sig}"},
                }
            objects.append(item)
        return _json(
            {"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
            headers={"Content-Type": "application/vnd.git-lfs+json"},
        )

    def _lfs_repo(self, req: _Request) -> tuple[_Repo, str, int]:
        p = req.params
        repo_key = f"{p['t']}:{p['ns']}/{p['name']}"
        oid, size = p["oid"], int(p["size"])
        sig = (req.query.get("sig") or [""])[-1]
        if not hmac.compare_digest(sig, self._sign(repo_key, oid, str(size))):
            raise _HttpError(403, "Invalid or missing upload signature")
        with self._lock:
            repo = self._repos.get(repo_key)
        if repo is None:
            raise _HttpError(404, "Repository not found", "RepoNotFound")
        req.record.repo = repo.key
        return repo, oid, size

    def _finish_lfs(self, repo: _Repo, oid: str, size: int, data: bytes) -> None:
        if len(data) != size or hashlib.sha256(data).hexdigest() != oid:
            raise _HttpError(400, "Uploaded content does not match the announced oid/size")
        self._store(data, lfs=True)
        with self._lock:
            repo.lfs_oids.add(oid)
            repo.pending_lfs.add(oid)
            self._save()

    def _parts_dir(self, repo: _Repo, oid: str) -> Path:
        return self.storage_dir / "uploads" / hashlib.sha1(f"{repo.key}|{oid}".encode()).hexdigest()

    def _h_lfs_upload(self, req: _Request) -> _Response:
        repo, oid, size = self._lfs_repo(req)
        self._finish_lfs(repo, oid, size, req.body)
        return _Response(200)

    def _h_lfs_part(self, req: _Request) -> _Response:
        repo, oid, _size = self._lfs_repo(req)
        part_dir = self._parts_dir(repo, oid)
        part_dir.mkdir(parents=True, exist_ok=True)
        (part_dir / f"{int(req.params['part']):05d}").write_bytes(req.body)
        return _Response(200, {"ETag": f'"{hashlib.md5(req.body).hexdigest()}"'})

    def _h_lfs_complete(self, req: _Request) -> _Response:
        repo, oid, size = self._lfs_repo(req)
        parts = _json_body(req).get("parts", [])
        part_dir = self._parts_dir(repo, oid)
        data = bytearray()
        for part in sorted(parts, key=lambda x: int(x["partNumber"])):
            chunk_path = part_dir / f"{int(part['partNumber']):05d}"
            if not chunk_path.exists():
                raise _HttpError(400, f"Missing part {part['partNumber']}")
            chunk = chunk_path.read_bytes()
            if part.get("etag") != f'"{hashlib.md5(chunk).hexdigest()}"':
                raise _HttpError(400, f"ETag mismatch for part {part['partNumber']}")
            data += chunk
        self._finish_lfs(repo, oid, size, bytes(data))
        for chunk_path in part_dir.iterdir():
            chunk_path.unlink()
        part_dir.rmdir()
        return _json({})

    def _h_lfs_verify(self, req: _Request) -> _Response:
        repo, oid, _size = self._lfs_repo(req)
        self._require_write(req, repo.namespace)
        if oid not in repo.lfs_oids:
            raise _HttpError(404, f"LFS object {oid} not found")
        return _json({})

    def _h_commit(self, req: _Request) -> _Response:
        if _is_true(req.query.get("create_pr")):
            raise _HttpError(400, "The test Hub does not implement pull requests (create_pr)")
        try:
            lines = [json.loads(line) for line in req.body.decode().splitlines() if line.strip()]
        except ValueError as exc:
            raise _HttpError(400, f"Invalid NDJSON commit payload: {exc}") from None
        with self._lock:
            repo = self._write_repo(req)
            token = req.token
            assert token is not None
            header: dict[str, Any] = {}
            ops: list[tuple[str, str, FileEntry | None, bool]] = []
            used_lfs: set[str] = set()
            for line in lines:
                key, value = line.get("key"), line.get("value") or {}
                path = str(value.get("path", ""))
                if key == "header":
                    header = value
                elif key == "file":
                    raw = value.get("content", "")
                    encoded = value.get("encoding") == "base64"
                    data = base64.b64decode(raw) if encoded else str(raw).encode()
                    ops.append(("put", path, self._store(data, lfs=False), True))
                elif key == "lfsFile":
                    oid = str(value.get("oid"))
                    blob = self._blob_path(oid)
                    if oid not in repo.lfs_oids or not blob.exists():
                        raise _HttpError(
                            422,
                            "Your push was rejected because an LFS pointer pointed to a file "
                            f"that does not exist ({path}: {oid})",
                        )
                    size = blob.stat().st_size
                    if value.get("size") not in (None, size):
                        raise _HttpError(422, f"LFS size mismatch for {path}")
                    entry = FileEntry(oid, size, git_blob_oid(_lfs_pointer(oid, size)), lfs=True)
                    ops.append(("put", path, entry, oid in repo.pending_lfs))
                    used_lfs.add(oid)
                elif key == "deletedFile":
                    ops.append(("delete", path, None, False))
                elif key == "deletedFolder":
                    ops.append(("delete_folder", path, None, False))
                else:
                    raise _HttpError(400, f"Unknown commit line key: {key!r}")
            commit = self._apply_commit(
                repo,
                unquote(req.params["rev"]),
                ops,
                str(header.get("summary") or "Upload files"),
                str(header.get("description") or ""),
                token.user,
                header.get("parentCommit"),
            )
            repo.pending_lfs -= used_lfs
        return _json(
            {
                "success": True,
                "commitOid": commit.id,
                "commitUrl": f"{self._repo_url(repo)}/commit/{commit.id}",
                "commitMessage": commit.title,
                "hookOutput": "",
                "pullRequestUrl": None,
            }
        )

    # ---- handlers: history and storage -------------------------------------------------

    def _h_super_squash(self, req: _Request) -> _Response:
        """`HfApi.super_squash_history`: the branch becomes one parentless commit with its tree.

        Like the Hub, only a branch can be squashed (a tag or commit id is a 400), and the
        commits no branch or tag reaches any more stop being served (their revisions 404); the
        blobs no commit holds leave the storage.
        """
        name = unquote(req.params["rev"])
        with self._lock:
            repo = self._write_repo(req)
            if name not in repo.branches:
                code = 400 if name in repo.tags or _SHA_RE.match(name) else 404
                raise _HttpError(code, f"Invalid rev id: {name} is not a branch",
                                 "RevisionNotFound")
            head = repo.commits[repo.branches[name]]
            title = str(_json_body(req).get("message") or f"Super-squash branch '{name}'")
            self._counter += 1
            digest = hashlib.sha1(json.dumps(
                [repo.key, "squash", self._counter, title,
                 sorted((p, e.sha256) for p, e in head.files.items())]).encode()).hexdigest()
            assert req.token is not None
            squashed = Commit(digest, (), title, "", req.token.user, _now(), dict(head.files),
                              tuple(sorted(head.files)), ())
            repo.commits[digest] = squashed
            repo.branches[name] = digest
            self._drop_unreachable(repo)
            self._gc_blobs()
            self._save()
        return _json({"commitId": digest})

    def _drop_unreachable(self, repo: _Repo) -> None:
        keep: set[str] = set()
        stack = [c for c in (*repo.branches.values(), *repo.tags.values()) if c]
        while stack:
            cid = stack.pop()
            if cid in keep or cid not in repo.commits:
                continue
            keep.add(cid)
            stack.extend(repo.commits[cid].parents)
        repo.commits = {cid: c for cid, c in repo.commits.items() if cid in keep}

    def _gc_blobs(self) -> None:
        """Delete stored blobs that no commit of any repo and no LFS object record holds."""
        used: set[str] = set()
        for repo in self._repos.values():
            used |= repo.lfs_oids | repo.pending_lfs
            for commit in repo.commits.values():
                used.update(e.sha256 for e in commit.files.values())
        used.add(hashlib.sha256(_DEFAULT_GITATTRIBUTES).hexdigest())
        for path in (self.storage_dir / "objects").glob("*/*"):
            if path.parent.name + path.name not in used and not path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)

    def _lfs_names(self, repo: _Repo) -> dict[str, str]:
        names: dict[str, str] = {}
        for commit in repo.commits.values():
            for path, entry in commit.files.items():
                if entry.lfs:
                    names.setdefault(entry.sha256, path)
        return names

    def _h_lfs_files(self, req: _Request) -> _Response:
        """`HfApi.list_lfs_files`: every LFS object the repo stores, in one page."""
        with self._lock:
            repo = self._write_repo(req)
            names = self._lfs_names(repo)
            out = []
            for oid in sorted(repo.lfs_oids):
                blob = self._blob_path(oid)
                size = blob.stat().st_size if blob.exists() else 0
                out.append({"fileOid": oid, "filename": names.get(oid, ""),
                            "oid": git_blob_oid(_lfs_pointer(oid, size)),
                            "pushedAt": repo.created, "ref": None, "size": size})
        return _json(out)

    def _h_lfs_files_batch(self, req: _Request) -> _Response:
        """`HfApi.permanently_delete_lfs_files`: the objects go, and with `rewriteHistory` the
        files naming them leave every commit (without it, a referenced object is a 409)."""
        body = _json_body(req).get("deletions") or {}
        shas = [str(s) for s in body.get("sha") or []]
        rewrite = bool(body.get("rewriteHistory", True))
        with self._lock:
            repo = self._write_repo(req)
            named = set(self._lfs_names(repo))
            if not rewrite and named & set(shas):
                raise _HttpError(409, "Some LFS files are still referenced; pass rewriteHistory")
            for sha in shas:
                repo.lfs_oids.discard(sha)
                repo.pending_lfs.discard(sha)
            if rewrite:
                for cid, commit in list(repo.commits.items()):
                    files = {p: e for p, e in commit.files.items()
                             if not (e.lfs and e.sha256 in shas)}
                    if len(files) != len(commit.files):
                        repo.commits[cid] = Commit(commit.id, commit.parents, commit.title,
                                                   commit.message, commit.author, commit.date,
                                                   files, commit.changed, commit.transferred)
            self._gc_blobs()
            self._save()
        return _json({})

    # ---- handlers: downloads -----------------------------------------------------------

    def _h_resolve(self, req: _Request) -> _Response:
        path = unquote(req.params["path"])
        req.record.file = path
        with self._lock:
            repo = self._read_repo(req)
            cid = self._resolve_rev(repo, unquote(req.params["rev"]))
            entry = repo.commits[cid].files.get(path)
        if entry is None:
            raise _HttpError(
                404, f"Entry not found: {path}", "EntryNotFound", {"X-Repo-Commit": cid}
            )
        headers = {"X-Repo-Commit": cid, "ETag": f'"{entry.etag}"', "Accept-Ranges": "bytes"}
        if entry.lfs:
            headers.update({"X-Linked-Etag": f'"{entry.sha256}"', "X-Linked-Size": str(entry.size)})
            if self.lfs_redirect:
                query = {"repo": repo.key, "file": path, "commit": cid}
                query["sig"] = self._sign(entry.sha256, repo.key, path, cid)
                location = f"{self.cdn_endpoint}/_cdn/{entry.sha256}?{urlencode(query)}"
                headers.update({"Location": location, "ETag": f'"{entry.git_oid}"'})
                return _Response(302, headers)
        return self._serve_blob(req, entry.sha256, entry.size, headers)

    def _h_cdn(self, req: _Request) -> _Response:
        oid = req.params["oid"]
        q = {k: v[-1] for k, v in req.query.items()}
        sig = self._sign(oid, q.get("repo", ""), q.get("file", ""), q.get("commit", ""))
        if not hmac.compare_digest(q.get("sig", ""), sig):
            raise _HttpError(403, "Invalid or missing signature")
        req.record.repo = q.get("repo")
        req.record.file = q.get("file")
        blob = self._blob_path(oid)
        if not blob.exists():
            raise _HttpError(404, "Not found")
        size = blob.stat().st_size
        # X-Repo-Commit lets clients that follow the redirect for HEAD (huggingface_hub 1.x
        # treats another port of the same host as the Hub) still read the metadata here.
        headers = {"ETag": f'"{oid}"', "Accept-Ranges": "bytes", "X-Repo-Commit": q["commit"]}
        return self._serve_blob(req, oid, size, headers)

    def _serve_blob(
        self, req: _Request, sha256: str, size: int, headers: dict[str, str]
    ) -> _Response:
        headers["Content-Type"] = "application/octet-stream"
        start, end, status = 0, size, 200
        range_header = req.headers.get("range")
        if range_header:
            parsed = _parse_range(range_header, size)
            if parsed is None:
                headers["Content-Range"] = f"bytes */{size}"
                return _Response(416, headers)
            start, end = parsed
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        if req.method == "HEAD":
            return _Response(status, headers, content_length=end - start)
        with self._blob_path(sha256).open("rb") as fh:
            fh.seek(start)
            data = fh.read(end - start)
        if data and self._take_fault(req.record, ("corrupt",)) is not None:
            req.record.fault = "corrupt"
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        return _Response(status, headers, data)


# --------------------------------------------------------------------------------------------
# HTTP server classes
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        hub: HubServer,
        listener: str,
    ) -> None:
        if address[0] != "127.0.0.1":
            raise ValueError("the test Hub binds loopback only")
        self.hub = hub
        self.listener = listener
        super().__init__(address, handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "funes-test-hub/1"
    timeout = 30  # idle keep-alive connections close by themselves
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in one write; no Nagle/delayed-ACK stalls on keep-alive.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.hub._lock:
            self.server.hub._connections.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.hub._lock:
                self.server.hub._connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log replaces stderr noise

    def do_GET(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def _content_length(self) -> int | None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return None
        return int(self.headers.get("Content-Length") or 0)

    def _read_body(self) -> bytes:
        length = self._content_length()
        if length is not None:
            return self.rfile.read(length) if length else b""
        chunks: list[bytes] = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline().strip():
                    pass  # trailers
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _abort(self, rec: RequestRecord) -> None:
        self._publish(rec)
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _handle(self) -> None:
        hub = self.server.hub
        self._t0 = time.monotonic()
        self._published = False
        split = urlsplit(self.path)
        rec = RequestRecord(
            method=self.command,
            path=unquote(split.path),
            query=parse_qs(split.query, keep_blank_values=True),
            listener=self.server.listener,
            headers={k.lower(): v for k, v in self.headers.items()},
            started=time.time(),
        )
        try:
            route, params = "unknown", {}
            for listener, methods, rx, name in _COMPILED:
                m = rx.match(split.path)
                if listener == self.server.listener and self.command in methods and m:
                    route, params = name, {k: v for k, v in m.groupdict().items() if v is not None}
                    break
            rec.route = route
            if "ns" in params and "name" in params:
                t = params.get("t") or "models"
                rec.repo = (
                    f"{_REPO_TYPES.get(t, t)}:{unquote(params['ns'])}/{unquote(params['name'])}"
                )
            fault = hub._take_fault(rec, ("drop", "status"))
            if fault is not None and fault.kind == "drop":
                rec.fault = "drop"
                length = self._content_length()
                if length:
                    self.rfile.read(length // 2)  # mid-body
                self._abort(rec)
                return
            body = self._read_body()
            rec.body, rec.request_bytes = body, len(body)
            try:
                token = hub._auth(rec.headers) if self.server.listener == "hub" else None
                rec.user = token.user if token else None
                req = _Request(
                    self.command, route, params, rec.query, rec.headers, body, token, rec
                )
                if fault is not None:
                    rec.fault = "status"
                    raise _HttpError(fault.status, fault.message or "", fault.error_code)
                resp = hub._dispatch(req)
            except _HttpError as err:
                resp = _error_response(err)
            if hub._take_fault(rec, ("drop_after",)) is not None:
                rec.fault = "drop_after"
                self._abort(rec)
                return
            self._send(resp, rec)
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        except Exception:  # a server bug: answer 500 with the traceback, keep serving
            resp = _Response(500, {"Content-Type": "text/plain"}, traceback.format_exc().encode())
            try:
                self._send(resp, rec)
            except OSError:
                self.close_connection = True
        finally:
            self._publish(rec)
            rec.duration = time.monotonic() - self._t0

    def _publish(self, rec: RequestRecord) -> None:
        """Log `rec` before the client can observe the outcome, so tests never race the log."""
        if not self._published:
            self._published = True
            rec.duration = time.monotonic() - self._t0
            self.server.hub._log_record(rec)

    def _send(self, resp: _Response, rec: RequestRecord) -> None:
        self.send_response(resp.status)
        length = resp.content_length if resp.content_length is not None else len(resp.body)
        for name, value in resp.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(length))
        rec.status = resp.status
        body = resp.body if self.command != "HEAD" else b""
        rec.response_bytes = len(body)
        self._publish(rec)
        self._headers_buffer.append(b"\r\n" + body)  # type: ignore[attr-defined]
        self.flush_headers()


def _error_response(err: _HttpError) -> _Response:
    headers = {"X-Error-Message": err.message.encode("ascii", "replace").decode(), **err.headers}
    if err.code:
        headers["X-Error-Code"] = err.code
    return _json({"error": err.message, **err.extra}, err.status, headers)


def _json_body(req: _Request) -> dict[str, Any]:
    if not req.body:
        return {}
    try:
        data = json.loads(req.body)
    except ValueError:
        raise _HttpError(400, "Invalid JSON body") from None
    if not isinstance(data, dict):
        raise _HttpError(400, "Expected a JSON object")
    return data


def _check_path(path: str) -> None:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise _HttpError(400, f"Invalid path in repo: {path!r}")


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """Parse a single `bytes=` range into [start, end); None if unsatisfiable."""
    m = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if m is None or (not m.group(1) and not m.group(2)):
        return (0, size)  # unsupported form (e.g. several ranges): serve everything
    first, last = m.groups()
    if not first:
        n = int(last)
        if n == 0 or size == 0:
            return None
        return (max(0, size - n), size)
    start = int(first)
    end = min(int(last) + 1, size) if last else size
    if start >= size or start >= end:
        return None
    return (start, end)


def _decoded_payloads(rec: RequestRecord) -> list[bytes]:
    out: list[bytes] = []
    if rec.route == "commit":
        for line in rec.body.splitlines():
            try:
                value = json.loads(line).get("value") or {}
                if value.get("encoding") == "base64":
                    out.append(base64.b64decode(value.get("content", "")))
            except (ValueError, AttributeError):
                continue
    elif rec.route == "preupload":
        try:
            for f in json.loads(rec.body).get("files", []):
                out.append(base64.b64decode(f.get("sample") or ""))
        except (ValueError, AttributeError):
            pass
    return out


# --------------------------------------------------------------------------------------------
# Client configuration for tests
# --------------------------------------------------------------------------------------------


def client_env(
    monkeypatch: Any, home: str | os.PathLike[str], hub: HubServer | None = None
) -> None:
    """Point `huggingface_hub` (and pylance's `hf://`) at a private home and, optionally, `hub`.

    Sets `HF_HOME`, `HF_HUB_DISABLE_XET=1`, `HF_HUB_DISABLE_TELEMETRY=1`,
    `HF_HUB_DISABLE_UPDATE_CHECK=1`, removes `HF_TOKEN`, and, because `huggingface_hub` reads
    these once at import, patches the matching `huggingface_hub.constants` too. With `hub`,
    `HF_ENDPOINT` is set for code that reads the environment at call time (pylance, child
    processes); in-process `huggingface_hub` calls still need ``endpoint=hub.endpoint``.

    Args:
        monkeypatch: pytest's `monkeypatch` fixture (undone at test teardown).
        home: Directory to use as `HF_HOME`.
        hub: Server whose endpoint goes into `HF_ENDPOINT`.
    """
    home = os.fspath(home)
    monkeypatch.setenv("HF_HOME", home)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_UPDATE_CHECK", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    if hub is not None:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HOME", home)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", os.path.join(home, "hub"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", os.path.join(home, "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", os.path.join(home, "stored_tokens"))
    monkeypatch.setattr(constants, "HF_XET_CACHE", os.path.join(home, "xet"))
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_UPDATE_CHECK", True)
