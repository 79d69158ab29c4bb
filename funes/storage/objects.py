"""The object store: immutable, content-addressed JSON documents under `objects/`.

Layout as git's loose objects: `objects/<first two hex>/<remaining 62>`. Every read re-hashes
the bytes, so a flipped bit is reported with the object's id instead of being believed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from funes.errors import CorruptObjectError, ObjectMissingError, UsageError
from funes.model.ids import ObjectId, hash_bytes, is_id_prefix, is_object_id
from funes.model.objects import (
    AnyObject,
    Commit,
    Link,
    MalformedObjectError,
    Manifest,
    Tombstone,
)
from funes.model.objects import decode as decode_object
from funes.model.objects import encode as encode_object
from funes.storage.atomic import write_new


class AmbiguousIdError(UsageError):
    """An abbreviated id matches several objects."""


class ObjectStore:
    """Loose objects in a directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path_of(self, oid: str) -> Path:
        """Where an object lives (the id is validated first: ids become paths)."""
        if not is_object_id(oid):
            raise CorruptObjectError(oid, "not a valid object id")
        return self.root / oid[:2] / oid[2:]

    def has(self, oid: str) -> bool:
        """True if the object is present (not verified)."""
        return self.path_of(oid).is_file()

    def put_raw(self, oid: ObjectId, raw: bytes) -> bool:
        """Store bytes that must hash to `oid` (objects received from elsewhere)."""
        actual = hash_bytes(raw)
        if actual != oid:
            raise CorruptObjectError(oid, f"bytes hash to {actual}")
        decode_object(raw)  # refuse well-hashed garbage before it lands
        return write_new(self.path_of(oid), raw)

    def put(self, obj: AnyObject) -> ObjectId:
        """Store an object; returns its id (a no-op if present)."""
        oid, raw = encode_object(obj)
        write_new(self.path_of(oid), raw)
        return oid

    def get_raw(self, oid: str) -> bytes:
        """The verified bytes of an object."""
        path = self.path_of(oid)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise ObjectMissingError(oid) from None
        except OSError as exc:
            raise CorruptObjectError(oid, f"unreadable ({exc.strerror})") from None
        if hash_bytes(raw) != oid:
            raise CorruptObjectError(oid, "content does not match its id")
        return raw

    def get(self, oid: str, expect: Sequence[str] | None = None) -> AnyObject:
        """Read, verify and parse an object."""
        raw = self.get_raw(oid)
        try:
            return decode_object(raw, expect)
        except MalformedObjectError as exc:
            raise CorruptObjectError(oid, exc.message) from None

    def commit(self, oid: str) -> Commit:
        """Read a commit."""
        obj = self.get(oid, ("commit",))
        assert isinstance(obj, Commit)
        return obj

    def manifest(self, oid: str) -> Manifest:
        """Read a manifest."""
        obj = self.get(oid, ("manifest",))
        assert isinstance(obj, Manifest)
        return obj

    def tombstone(self, oid: str) -> Tombstone:
        """Read a tombstone."""
        obj = self.get(oid, ("tombstone",))
        assert isinstance(obj, Tombstone)
        return obj

    def link(self, oid: str) -> Link:
        """Read a commit link."""
        obj = self.get(oid, ("link",))
        assert isinstance(obj, Link)
        return obj

    def __iter__(self) -> Iterator[ObjectId]:
        """Every id in the store (by file name; not verified)."""
        if not self.root.is_dir():
            return
        for sub in sorted(self.root.iterdir()):
            if len(sub.name) != 2 or not sub.is_dir():
                continue
            for f in sorted(sub.iterdir()):
                oid = sub.name + f.name
                if is_object_id(oid):
                    yield ObjectId(oid)

    def resolve_prefix(self, prefix: str) -> ObjectId | None:
        """Expand an abbreviated id; None when nothing matches."""
        prefix = prefix.lower()
        if not is_id_prefix(prefix):
            return None
        if is_object_id(prefix):
            return ObjectId(prefix) if self.has(prefix) else None
        sub = self.root / prefix[:2]
        if not sub.is_dir():
            return None
        found = [sub.name + f.name for f in sub.iterdir() if (sub.name + f.name).startswith(prefix)]
        found = [f for f in found if is_object_id(f)]
        if len(found) > 1:
            raise AmbiguousIdError(
                f"short id {prefix} is ambiguous ({len(found)} objects)",
                hint="type more characters of the id",
            )
        return ObjectId(found[0]) if found else None
