"""The immutable objects of a memory: commits, manifests, tombstones and commit links.

Each object is a JSON document with a `type` field; its id is the SHA-256 of its canonical
bytes (funes.model.ids). Parsing is strict because objects also arrive from remotes we do not
trust: anything malformed raises `MalformedObjectError`, never a KeyError or TypeError.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from funes.errors import FunesError
from funes.model.ids import ObjectId, canonical_json, hash_bytes, is_object_id

#: Format version written into every commit; readers refuse newer majors.
OBJECT_FORMAT = 1

#: The Lance tables a manifest can add rows to. Embeddings have two: `vectors` holds them as
#: float32 (every memory written before half-width vectors), `vectors16` as float16 (half the
#: bytes, no measurable recall lost: bench/results/fast-path.md). A memory writes to one of
#: them, its home (funes.storage.repo.Repository.vectors); a merge may bring the other.
TABLES: tuple[str, ...] = ("chunks", "vectors", "vectors16")
#: The embedding tables, and the width each stores a vector component in.
VECTOR_TABLES: dict[str, str] = {"vectors": "float32", "vectors16": "float16"}


class MalformedObjectError(FunesError):
    """Bytes that are not a valid funes object of the expected type."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"malformed object: {detail}", hint="run `funes fsck`")


def _req(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise MalformedObjectError(f"missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise MalformedObjectError(f"field {key!r} has the wrong type")
    return value


def _opt(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise MalformedObjectError(f"field {key!r} has the wrong type")
    return value


def _ids(data: Mapping[str, Any], key: str) -> tuple[ObjectId, ...]:
    values = _req(data, key, list)
    for value in values:
        if not isinstance(value, str) or not is_object_id(value):
            raise MalformedObjectError(f"field {key!r} holds a bad id")
    return tuple(ObjectId(v) for v in values)


@dataclass(frozen=True)
class ModelStamp:
    """The embedding model a memory's vectors were made with."""

    name: str
    sha256: str
    dim: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in commits."""
        return {"name": self.name, "sha256": self.sha256, "dim": self.dim}

    @classmethod
    def from_dict(cls, data: Any) -> ModelStamp:
        """Parse the JSON form, strictly."""
        if not isinstance(data, dict):
            raise MalformedObjectError("model stamp is not an object")
        return cls(_req(data, "name", str), _req(data, "sha256", str), _req(data, "dim", int))

    def __str__(self) -> str:
        return f"{self.name} (sha256 {self.sha256[:12]})"


@dataclass(frozen=True)
class DataFile:
    """One immutable file of a Lance fragment, with the hash that makes it verifiable."""

    path: str  # relative to the table directory, e.g. "data/0101...lance"
    size: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in manifests."""
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class FragmentRecord:
    """A Lance fragment as a manifest records it: its metadata and its files."""

    #: `lance.FragmentMetadata.to_json()` with the dataset-local id left as written.
    meta: dict[str, Any]
    files: tuple[DataFile, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form stored in manifests."""
        return {"meta": self.meta, "files": [f.to_dict() for f in self.files]}


def _fragments(data: Mapping[str, Any]) -> tuple[FragmentRecord, ...]:
    out = []
    for item in _req(data, "fragments", list):
        if not isinstance(item, dict):
            raise MalformedObjectError("fragment is not an object")
        files = []
        for f in _req(item, "files", list):
            if not isinstance(f, dict):
                raise MalformedObjectError("fragment file is not an object")
            files.append(
                DataFile(_req(f, "path", str), _req(f, "size", int), _req(f, "sha256", str))
            )
        out.append(FragmentRecord(_req(item, "meta", dict), tuple(files)))
    return tuple(out)


@dataclass(frozen=True)
class Manifest:
    """Rows a commit adds to one table: their ids and the fragments that hold them."""

    table: str
    ids: tuple[str, ...]  # sorted chunk ids
    fragments: tuple[FragmentRecord, ...]
    #: The redaction rules (funes.ingest.redact.rules_version) a chunks manifest's rows were
    #: redacted with, so a memory that receives them knows whether they met its own rules
    #: (`funes status`). None: an older funes wrote it. Omitted when None, so manifests written
    #: before it keep their ids; here rather than on the commit so an older funes, which
    #: re-serialises a commit to check its signature, still verifies new commits.
    redaction: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (without `type`)."""
        data: dict[str, Any] = {
            "table": self.table,
            "ids": list(self.ids),
            "fragments": [f.to_dict() for f in self.fragments],
        }
        if self.redaction is not None:
            data["redaction"] = self.redaction
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Manifest:
        """Parse strictly."""
        table = _req(data, "table", str)
        if table not in TABLES:
            raise MalformedObjectError(f"unknown table {table!r}")
        rules = _opt(data, "redaction", str)
        if rules is not None and len(rules) > 200:
            raise MalformedObjectError("field 'redaction' is too long")
        return cls(table, _ids(data, "ids"), _fragments(data), rules)


@dataclass(frozen=True)
class ExclusionRule:
    """What an exclusion keeps out of a memory: one kind and one pattern (`funes exclude`).

    Kinds: `project` (a project identity, its last component, or a glob of it), `path` (a
    glob on the working directory or the transcript's path), `agent` (a harness name),
    `session` (a glob on the session id). Matching lives in funes.storage.exclusions.
    """

    kind: str
    pattern: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form stored in tombstones."""
        return {"kind": self.kind, "pattern": self.pattern}

    @classmethod
    def from_dict(cls, data: Any) -> ExclusionRule:
        """Parse strictly: rules arrive from remotes too."""
        if not isinstance(data, dict):
            raise MalformedObjectError("exclusion rule is not an object")
        kind = _req(data, "kind", str)
        pattern = _req(data, "pattern", str)
        if kind not in EXCLUSION_KINDS or not pattern or len(pattern) > 1024 or any(
                ord(ch) < 32 for ch in pattern):
            raise MalformedObjectError(f"bad exclusion rule {kind!r}")
        return cls(kind, pattern)

    def __str__(self) -> str:
        return f"{self.kind} {self.pattern}"


#: The kinds of exclusion rule, in the order `status` lists them.
EXCLUSION_KINDS: tuple[str, ...] = ("project", "path", "agent", "session")


@dataclass(frozen=True)
class Tombstone:
    """A deletion that travels: the chunk ids it hides from every rebuild.

    `lifts` names earlier tombstones this one cancels (`funes unforget`): omitted from the
    JSON when empty, so tombstones written before it existed keep their ids, and an older
    funes reads a lifting tombstone as one that hides nothing.

    `exclude` is the rule this tombstone records (`funes exclude`): its targets are what the
    rule matched when it was added, and every funes that has the tombstone keeps what the rule
    matches out of later index runs and hides it after a merge. Omitted when None, so an older
    funes reads it as an ordinary tombstone (it hides the targets, ignores the rule).
    """

    targets: tuple[str, ...]
    reason: str
    author: str
    time: str
    lifts: tuple[ObjectId, ...] = ()
    exclude: ExclusionRule | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (without `type`)."""
        data: dict[str, Any] = {
            "targets": list(self.targets),
            "reason": self.reason,
            "author": self.author,
            "time": self.time,
        }
        if self.lifts:
            data["lifts"] = list(self.lifts)
        if self.exclude is not None:
            data["exclude"] = self.exclude.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tombstone:
        """Parse strictly."""
        return cls(
            _ids(data, "targets"),
            _req(data, "reason", str),
            _req(data, "author", str),
            _req(data, "time", str),
            _ids(data, "lifts") if "lifts" in data else (),
            ExclusionRule.from_dict(data["exclude"]) if "exclude" in data else None,
        )


@dataclass(frozen=True)
class Commit:
    """A point in a memory's history."""

    parents: tuple[ObjectId, ...]
    manifests: tuple[ObjectId, ...]
    tombstones: tuple[ObjectId, ...]
    model: ModelStamp | None
    author: str
    host: str
    time: str  # UTC ISO-8601
    message: str
    #: Rows visible at this commit (chunks minus tombstoned), so `status` needs no scan.
    chunk_count: int = 0
    format: int = OBJECT_FORMAT
    signature: dict[str, Any] | None = field(default=None)
    #: Links to code commits (`Link` ids) this commit records; omitted from the JSON when
    #: empty, so commits written before links existed keep their ids.
    links: tuple[ObjectId, ...] = ()
    #: The full-text tokenizer the memory is searched with (funes.retrieval.indexes), carried
    #: forward by every commit like the model stamp; None is the default ("simple") and is
    #: omitted from the JSON, so commits written before tokenizers existed keep their ids.
    tokenizer: str | None = None
    #: The commit this one replaces on a remote that `funes push --retract` rewrote (the same
    #: commit without the retracted rows); other machines' fetches map the old one to it.
    #: Omitted when None.
    replaces: ObjectId | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (without `type`)."""
        data: dict[str, Any] = {
            "format": self.format,
            "parents": list(self.parents),
            "manifests": list(self.manifests),
            "tombstones": list(self.tombstones),
            "model": self.model.to_dict() if self.model else None,
            "author": self.author,
            "host": self.host,
            "time": self.time,
            "message": self.message,
            "chunk_count": self.chunk_count,
        }
        if self.signature is not None:
            data["signature"] = self.signature
        if self.links:
            data["links"] = list(self.links)
        if self.tokenizer is not None:
            data["tokenizer"] = self.tokenizer
        if self.replaces is not None:
            data["replaces"] = self.replaces
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Commit:
        """Parse strictly; refuse formats newer than this funes understands."""
        fmt = _req(data, "format", int)
        if fmt > OBJECT_FORMAT:
            raise MalformedObjectError(
                f"commit format {fmt} is newer than this funes ({OBJECT_FORMAT}); upgrade funes"
            )
        model = data.get("model")
        return cls(
            parents=_ids(data, "parents"),
            manifests=_ids(data, "manifests"),
            tombstones=_ids(data, "tombstones"),
            model=ModelStamp.from_dict(model) if model is not None else None,
            author=_req(data, "author", str),
            host=_req(data, "host", str),
            time=_req(data, "time", str),
            message=_req(data, "message", str),
            chunk_count=_req(data, "chunk_count", int),
            format=fmt,
            signature=_opt(data, "signature", dict),
            links=_ids(data, "links") if "links" in data else (),
            tokenizer=_opt(data, "tokenizer", str),
            replaces=_replaced(data),
        )

    @property
    def summary(self) -> str:
        """The first line of the message."""
        return self.message.splitlines()[0] if self.message else ""


def _replaced(data: Mapping[str, Any]) -> ObjectId | None:
    value = data.get("replaces")
    if value is None:
        return None
    if not isinstance(value, str) or not is_object_id(value):
        raise MalformedObjectError("field 'replaces' holds a bad id")
    return ObjectId(value)


_GIT_ID_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")


def is_git_id(text: str) -> bool:
    """True for a full git object id (SHA-1, or SHA-256 in repositories that use it)."""
    return bool(_GIT_ID_RE.match(text))


def _strs(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    values = _req(data, key, list)
    if not all(isinstance(v, str) for v in values):
        raise MalformedObjectError(f"field {key!r} holds a non-string")
    return tuple(values)


@dataclass(frozen=True)
class Link:
    """A code commit tied to the agent turns that produced it (written by the git hook).

    A link names turns, not chunks: chunk ids change with chunking settings, while a turn is
    what the transcript fixes, and `funes why` shows whole turns anyway.
    """

    #: The code commit's full git id (40 hex digits, or 64 in a SHA-256 repository).
    commit: str
    #: The code repository's project identity (funes.ingest.project), shared by its clones.
    repository: str
    branch: str | None  # short branch name at commit time; None when HEAD was detached
    author: str  # "Name <email>" of the code commit
    time: str  # committer time, UTC ISO-8601
    message: str  # the code commit's message
    paths: tuple[str, ...]  # paths changed against the first parent, sorted
    #: (harness, session_id, turn_id) of every linked turn, sorted.
    turns: tuple[tuple[str, str, str], ...]
    #: The window the turns were taken from: `since` ≤ turn time < `until` (None: unbounded).
    since: str | None
    until: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (without `type`)."""
        return {
            "commit": self.commit,
            "repository": self.repository,
            "branch": self.branch,
            "author": self.author,
            "time": self.time,
            "message": self.message,
            "paths": list(self.paths),
            "turns": [list(t) for t in self.turns],
            "since": self.since,
            "until": self.until,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Link:
        """Parse strictly: links arrive from remotes too."""
        commit = _req(data, "commit", str)
        if not is_git_id(commit):
            raise MalformedObjectError("field 'commit' is not a full git commit id")
        turns = []
        for item in _req(data, "turns", list):
            if (
                not isinstance(item, list)
                or len(item) != 3
                or not all(isinstance(v, str) and v for v in item)
            ):
                raise MalformedObjectError("field 'turns' holds a bad (harness, session, turn)")
            turns.append((item[0], item[1], item[2]))
        return cls(
            commit=commit,
            repository=_req(data, "repository", str),
            branch=_opt(data, "branch", str),
            author=_req(data, "author", str),
            time=_req(data, "time", str),
            message=_req(data, "message", str),
            paths=_strs(data, "paths"),
            turns=tuple(turns),
            since=_opt(data, "since", str),
            until=_req(data, "until", str),
        )

    @property
    def summary(self) -> str:
        """The first line of the code commit's message."""
        return self.message.splitlines()[0] if self.message else ""

    @property
    def sessions(self) -> dict[tuple[str, str], int]:
        """Turns per (harness, session_id), in first-seen order."""
        out: dict[tuple[str, str], int] = {}
        for harness, session, _ in self.turns:
            out[(harness, session)] = out.get((harness, session), 0) + 1
        return out


AnyObject = Commit | Manifest | Tombstone | Link

_KINDS: dict[str, type[Commit] | type[Manifest] | type[Tombstone] | type[Link]] = {
    "commit": Commit,
    "manifest": Manifest,
    "tombstone": Tombstone,
    "link": Link,
}


def kind_of(obj: AnyObject) -> str:
    """The `type` field of an object."""
    for name, cls in _KINDS.items():
        if isinstance(obj, cls):
            return name
    raise TypeError(type(obj).__name__)


def encode(obj: AnyObject) -> tuple[ObjectId, bytes]:
    """Canonical bytes of an object and their id."""
    data = {"type": kind_of(obj), **obj.to_dict()}
    raw = canonical_json(data)
    return hash_bytes(raw), raw


def decode(raw: bytes, expect: Sequence[str] | None = None) -> AnyObject:
    """Parse canonical bytes into an object (the caller verifies the hash)."""
    import json

    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedObjectError(f"not JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise MalformedObjectError("not a JSON object")
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise MalformedObjectError(f"unknown object type {kind!r}")
    if expect is not None and kind not in expect:
        raise MalformedObjectError(f"expected {'/'.join(expect)}, found {kind}")
    return _KINDS[kind].from_dict(data)
