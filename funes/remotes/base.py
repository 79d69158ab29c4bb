"""What a remote is: URL forms, the `Remote` protocol, and the errors sync raises.

A remote holds the same layout whatever it is stored on (docs/format.md, "Remotes"):

    README.md              dataset card (stats between marker comments)
    refs/heads/<branch>    a commit id and a newline
    objects/ab/cdef…       the same content-addressed objects as a local memory
    chunks.lance/          a Lance dataset any Lance reader opens (vectors16.lance/ likewise)

`funes.remotes.local.DirectoryRemote` (a path) is the reference implementation and
`funes.remotes.hf.HubRemote` (a Hugging Face dataset repository) the production one; the sync
logic in `funes.remotes.sync` speaks only this protocol, and one scenario suite runs against
both (tests/remotes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from funes._env import Settings
from funes.errors import DivergedError, RemoteError, UsageError
from funes.model.ids import ObjectId
from funes.model.objects import FragmentRecord, ModelStamp
from funes.model.refs import RefName

if TYPE_CHECKING:
    import pyarrow as pa

Progress = Callable[[int, int, str], None]

#: Hub names: what `huggingface_hub` accepts for a namespace or repository name.
_HUB_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
_HUB_ID_RE = re.compile(rf"^({_HUB_NAME})/({_HUB_NAME})$")
_HF_URL_RE = re.compile(rf"^hf://datasets/({_HUB_NAME})/({_HUB_NAME})(?:/(.*))?$")
_HTTPS_RE = re.compile(rf"^https://huggingface\.co/datasets/({_HUB_NAME})/({_HUB_NAME})/?$")
_REMOTE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*$")


# -- errors ----------------------------------------------------------------------------------


class NoSuchRemoteError(UsageError):
    """A remote name that is not configured."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no remote named {name!r}",
            hint=f"add it with `funes remote add {name} URL`; `funes remote list` shows them",
        )
        self.name = name


class BadRemoteURLError(UsageError):
    """A remote URL funes cannot use."""


class RemoteDataError(RemoteError):
    """A remote sent something that is refused: bad hash, bad name, malformed object."""


class RemoteNotFoundError(RemoteError):
    """No memory at the remote URL, or no permission to see it."""


class RemoteUnreachableError(RemoteError):
    """The remote did not answer: no network, a timeout, or the server failing (HTTP 5xx).

    The one remote failure after which reading the copy cached here is the truth as of the
    last contact (funes.api.memory.choose_memory); a refusal (401/403), a missing memory or a
    missing tag is the remote's answer, and reading anything else instead would hide it.
    """


class NonFastForwardError(DivergedError):
    """The remote branch has commits the local branch does not contain."""

    def __init__(self, remote: str, ref: str, theirs: str | None, ours: str) -> None:
        where = f"remote at {theirs[:12]}, yours {ours[:12]}" if theirs else "someone pushed first"
        super().__init__(
            f"{remote} refused {ref}: the remote has commits you do not have ({where}); "
            "fetch first",
            hint="run `funes pull` to merge them, then push again (or --force to overwrite)",
        )
        self.remote = remote
        self.ref = ref
        self.theirs = theirs
        self.ours = ours


# -- URLs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteSpec:
    """A parsed remote URL."""

    kind: Literal["hf", "dir"]
    #: The normalised URL stored in config: `hf://datasets/org/name[/path]` or an absolute path.
    url: str
    #: For the Hub: `org/name` and the folder inside the repository ("" for its root).
    repo_id: str = ""
    subpath: str = ""
    #: For a directory remote: where it is.
    path: Path | None = None

    @property
    def display(self) -> str:
        """How messages name it: `org/name` for the Hub, the path otherwise."""
        if self.kind == "hf":
            return self.repo_id + (f"/{self.subpath}" if self.subpath else "")
        return str(self.path)

    @property
    def cache_name(self) -> str:
        """A file-name-safe, collision-free name (the remote-recall cache directory)."""
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:10]
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", self.display).strip("-.")[-60:] or "remote"
        return f"{self.kind}-{base}-{digest}"


def _check_subpath(sub: str, url: str) -> str:
    sub = sub.strip("/")
    for part in sub.split("/") if sub else []:
        if part in ("", ".", "..") or "\\" in part or not re.match(r"^[A-Za-z0-9._-]+$", part):
            raise BadRemoteURLError(f"bad folder {sub!r} in remote URL {url!r}")
    return sub


def parse_url(text: str, cwd: Path) -> RemoteSpec:
    """Read a remote URL: `org/name`, `hf://datasets/org/name[/path]`, a path, `file://…`.

    `org/name` means the Hub unless a directory of that name exists here; write `./org/name`
    to mean a directory that does not exist yet.
    """
    raw = text.strip()
    if not raw:
        raise BadRemoteURLError("empty remote URL")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        raise BadRemoteURLError(f"control characters in remote URL {raw!r}")
    m = _HF_URL_RE.match(raw) or _HTTPS_RE.match(raw)
    if m:
        sub = _check_subpath(m.group(3) or "", raw) if m.re is _HF_URL_RE else ""
        repo_id = f"{m.group(1)}/{m.group(2)}"
        url = f"hf://datasets/{repo_id}" + (f"/{sub}" if sub else "")
        return RemoteSpec("hf", url, repo_id=repo_id, subpath=sub)
    if raw.startswith("hf://"):
        raise BadRemoteURLError(
            f"unsupported Hub URL {raw!r}",
            hint="memories live in dataset repositories: hf://datasets/ORG/NAME[/FOLDER]",
        )
    if raw.startswith("file://"):
        local = raw[len("file://") :]
        if not local.startswith("/"):
            raise BadRemoteURLError(f"file URLs need an absolute path: {raw!r}")
        path = Path(local)
    else:
        hub = _HUB_ID_RE.match(raw)
        if hub and not (cwd / raw).exists():
            return RemoteSpec("hf", f"hf://datasets/{raw}", repo_id=raw)
        if "://" in raw:
            raise BadRemoteURLError(
                f"unsupported remote URL {raw!r}",
                hint="use ORG/NAME or hf://datasets/ORG/NAME for the Hub, or a directory path",
            )
        try:
            path = Path(raw).expanduser()
        except RuntimeError:  # `~user` for a user that does not exist
            raise BadRemoteURLError(f"cannot expand {raw!r}: no such user") from None
        if not path.is_absolute():
            path = cwd / path
    path = path.resolve()
    return RemoteSpec("dir", str(path), path=path)


def cache_root(settings: Settings) -> Path:
    """Where the read-only copies behind `--memory org/name` live (funes.api.memory)."""
    return settings.home / "cache" / "remotes"


def looks_like_remote(text: str, cwd: Path) -> bool:
    """True when `--memory TEXT` names a remote memory (the Hub) rather than a local path."""
    try:
        spec = parse_url(text, cwd)
    except UsageError:
        return False
    return spec.kind == "hf" or text.startswith("file://")


def check_remote_name(name: str) -> str:
    """Validate a remote name: it becomes a config section and a path under refs/remotes/."""
    if not _REMOTE_NAME_RE.match(name) or name.endswith(".lock") or len(name) > 100:
        raise UsageError(
            f"invalid remote name {name[:60]!r}{'…' if len(name) > 60 else ''}",
            hint="use letters, digits, '-', '_' and inner dots, like `origin` or `team-hub`",
        )
    return name


# -- what moves --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteState:
    """A remote at one moment: everything a fetch or push reads is pinned to it.

    `revision` is the Hub commit id (or a digest of a directory remote's refs); objects and
    fragment files are immutable, so reading them later still reads this state. `refs` holds
    the branches (`refs/heads/…`) and the tags (`refs/tags/…`).
    """

    exists: bool
    revision: str | None
    refs: Mapping[RefName, ObjectId] = field(default_factory=dict)

    @property
    def branches(self) -> dict[RefName, ObjectId]:
        """The branch refs only."""
        return {r: o for r, o in self.refs.items() if r.startswith("refs/heads/")}

    @property
    def tags(self) -> dict[RefName, ObjectId]:
        """The tag refs only."""
        return {r: o for r, o in self.refs.items() if r.startswith("refs/tags/")}


@dataclass(frozen=True)
class CardStats:
    """What the dataset card's marked region reports."""

    branch: str
    commit: str
    chunks: int
    commits: int
    model: ModelStamp | None
    updated: str


@dataclass(frozen=True)
class TableUpdate:
    """Fragments a push adds to one of the remote's Lance datasets."""

    table: str
    records: tuple[FragmentRecord, ...]
    #: The local table directory holding the fragment files.
    source: Path
    #: The local dataset's schema (a new remote table is created with it).
    schema: pa.Schema


@dataclass(frozen=True)
class PushPlan:
    """Everything one push sends, decided before the remote is touched."""

    ref: RefName
    old: ObjectId | None  # what the remote ref must still be (compare-and-swap)
    new: ObjectId
    objects: Mapping[ObjectId, bytes]
    tables: Sequence[TableUpdate]
    card: CardStats
    message: str
    #: Tags the remote lacks, created beside the ref (`refs/tags/<name>`; never moved).
    tags: Mapping[RefName, ObjectId] = field(default_factory=dict)


@dataclass(frozen=True)
class PushReport:
    """What a remote did with a plan."""

    revision: str
    objects: int
    files: int
    bytes: int
    created: bool = False


class Remote(Protocol):
    """A place memories are pushed to and fetched from."""

    #: The configured name (`origin`), and the URL it points to.
    name: str
    spec: RemoteSpec

    @property
    def display(self) -> str:
        """`name (url)` for messages."""
        ...

    def state(self) -> RemoteState:
        """Read the remote's refs (one small request on the Hub when nothing changed)."""
        ...

    def create(self) -> None:
        """Create an empty remote (a private repository on the Hub)."""
        ...

    def present(self, state: RemoteState, paths: Sequence[str]) -> set[str]:
        """The subset of `paths` that exist at `state`."""
        ...

    def object_ids(self, state: RemoteState) -> set[ObjectId] | None:
        """Every object id at `state`, when one listing tells (None: walk instead)."""
        ...

    def read_objects(
        self, state: RemoteState, oids: Sequence[ObjectId], *, limit: int = ...
    ) -> dict[ObjectId, bytes]:
        """The raw bytes of objects (not verified: the caller verifies).

        Bounded: an object larger than `limit` (default: the remote's object limit) is
        refused before it is read, and so is anything that is not a plain file.
        """
        ...

    def download(
        self,
        state: RemoteState,
        files: Sequence[tuple[str, Path]],
        progress: Progress,
        *,
        sizes: Mapping[str, int] | None = None,
    ) -> None:
        """Copy remote files (paths in the remote layout) to local paths, unverified.

        `sizes` gives what each file's manifest says it holds: a file of another size is
        refused before (directory) or as soon as (Hub) it is read, never copied whole.
        """
        ...

    def push(self, state: RemoteState, plan: PushPlan, progress: Progress) -> PushReport:
        """Apply a plan: objects, files, Lance metadata, card, and the ref moved last.

        Atomic where the remote allows it (one Hub commit); the ref always moves by
        compare-and-swap against `plan.old`.

        Raises:
            NonFastForwardError: the ref is no longer `plan.old` (someone pushed first).
        """
        ...


def no_progress(done: int, total: int, label: str) -> None:
    """A progress callback that shows nothing."""
    return None


#: `<repo>/remotes/<name>/last-fetch.json`: when the tracking refs last matched the remote (a
#: fetch, or a push that moved the remote to ours); local state, never sent (`funes status`).
LAST_FETCH = "last-fetch.json"


def note_fetched(repo_path: Path, name: str) -> None:
    """Record that the tracking refs of remote `name` are the remote's as of now."""
    import contextlib
    import json
    import time

    from funes.storage.atomic import write_atomic

    path = repo_path / "remotes" / name / LAST_FETCH
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"time": time.time()}).encode(), durable=False)
