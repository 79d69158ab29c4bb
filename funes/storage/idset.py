"""A compact immutable set of object ids, for sets that hold every chunk of a memory.

The trust marks (funes.storage.signing) keep, per memory, the ids of the user's own chunks:
every chunk of a memory the user indexed. As a `frozenset` of 64-character `str`s that is
~145 bytes an id (the string, plus the set's slot): 16 MB at 113k chunks, in the warm server
and in every process that recalls. Here an id is its 32-byte digest in one sorted `bytes`
(32 bytes an id: 3.6 MB) with a 16 KB index of where each bucket of digests starts; it is
written to `index/untrusted.json` as one hex string, so reading it back creates no object per
id.

Only canonical ids (64 lowercase hex digits, what `funes.model.ids.object_id` makes) fit in the
digest table; anything else a hostile manifest might carry is kept as itself beside it, so
membership is exact for every string.
"""

from __future__ import annotations

import bisect
import sys
from array import array
from collections.abc import Iterable, Iterator, Set
from itertools import accumulate
from typing import Any

__all__ = ["IdSet"]

_WIDTH = 32
#: Bits of a digest that pick its bucket: 4096 buckets, ~28 ids each at 113k ids, so a look-up
#: is one `bytes.find` over a few hundred bytes (a sorted table alone needs a binary search in
#: Python: 100 times slower than a set).
_BITS = 12
_BUCKETS = 1 << _BITS


def _digest(text: object) -> bytes | None:
    """The 32 bytes of a canonical id, or None for any other value."""
    if not isinstance(text, str) or len(text) != 2 * _WIDTH:
        return None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    return raw if raw.hex() == text else None  # lowercase, no whitespace: canonical only


def _digest_all(texts: list[str]) -> bytes | None:
    """The digests of `texts` end to end when every one is a canonical id, else None."""
    if any(len(t) != 2 * _WIDTH for t in texts):
        return None
    joined = "".join(texts)
    try:
        raw = bytes.fromhex(joined)
    except ValueError:
        return None
    return raw if raw.hex() == joined else None


def _bucket(raw: bytes) -> int:
    """Which bucket of the table a digest is in: its first `_BITS` bits (digests are uniform)."""
    return (raw[0] << 8 | raw[1]) >> (16 - _BITS)


def _offsets(blob: bytes) -> array[int]:
    """Where each bucket of a sorted table starts, in ids (and the table's length last)."""
    heads = array("H", memoryview(blob).cast("H")[:: _WIDTH // 2])  # first 2 bytes of each
    if sys.byteorder == "little":
        heads.byteswap()  # big-endian: the digests' own sort order
    shift = 16 - _BITS
    return array("I", [*(bisect.bisect_left(heads, k << shift) for k in range(_BUCKETS)),
                       len(heads)])


def _moved(offsets: array[int], digests: Iterable[bytes], step: int) -> array[int]:
    """`offsets` after adding (`step` 1) or removing (-1) `digests`, without a rescan."""
    changes = [0] * (_BUCKETS + 1)
    for raw in digests:
        changes[_bucket(raw) + 1] += step
    return array("I", (at + change for at, change in zip(offsets, accumulate(changes),
                                                           strict=True)))


class IdSet(Set[str]):
    """An immutable set of ids: canonical ones as sorted digests, any others as strings."""

    __slots__ = ("_blob", "_offsets", "_other")

    def __init__(self, ids: Iterable[str] = ()) -> None:
        texts = sorted(set(ids))  # lowercase hex sorts as its digests do
        other: set[str] = set()
        blob = _digest_all(texts)
        if blob is None:  # not all canonical: sort them out one by one
            digests = []
            for text in texts:
                raw = _digest(text)
                if raw is None:
                    other.add(text)
                else:
                    digests.append(raw)
            blob = b"".join(digests)
        self._blob = blob
        self._offsets = _offsets(self._blob)
        self._other = frozenset(other)

    @classmethod
    def _of(cls, blob: bytes, other: frozenset[str], offsets: array[int] | None = None) -> IdSet:
        made = cls.__new__(cls)
        made._blob = blob
        made._offsets = _offsets(blob) if offsets is None else offsets
        made._other = other
        return made

    # -- the Set protocol ------------------------------------------------------------------

    def __contains__(self, item: object) -> bool:
        raw = _digest(item)
        return item in self._other if raw is None else self._find(raw) >= 0

    def _find(self, raw: bytes) -> int:
        """The index of a digest in the table, or -1."""
        bucket = _bucket(raw)
        start, end = self._offsets[bucket] * _WIDTH, self._offsets[bucket + 1] * _WIDTH
        at = self._blob.find(raw, start, end)
        while at >= 0 and at % _WIDTH:  # straddles two digests: not one of them
            at = self._blob.find(raw, at + 1, end)
        return at // _WIDTH if at >= 0 else -1

    def __len__(self) -> int:
        return len(self._blob) // _WIDTH + len(self._other)

    def __iter__(self) -> Iterator[str]:
        blob = self._blob
        for start in range(0, len(blob), _WIDTH):
            yield blob[start:start + _WIDTH].hex()
        yield from self._other

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IdSet):
            return self._blob == other._blob and self._other == other._other
        return Set.__eq__(self, other)

    def __hash__(self) -> int:
        return hash((self._blob, self._other))

    def __repr__(self) -> str:
        return f"IdSet({len(self)} ids)"

    # -- building new sets -----------------------------------------------------------------

    def union(self, ids: Iterable[str]) -> IdSet:
        """This set with `ids` added: one pass over the table, not a rebuild from strings."""
        new: set[bytes] = set()
        other = set(self._other)
        for text in ids:
            raw = _digest(text)
            if raw is None:
                other.add(text)
            elif self._find(raw) < 0:
                new.add(raw)
        if not new:
            return self if len(other) == len(self._other) else self._of(
                self._blob, frozenset(other), self._offsets)
        pieces: list[bytes] = []
        last = 0
        for raw in sorted(new):
            at = self._insertion(raw)
            pieces += [self._blob[last * _WIDTH:at * _WIDTH], raw]
            last = at
        pieces.append(self._blob[last * _WIDTH:])
        return self._of(b"".join(pieces), frozenset(other), _moved(self._offsets, new, 1))

    def _insertion(self, raw: bytes) -> int:
        """Where a digest not in the table would go (its bucket is short: a linear look)."""
        bucket = _bucket(raw)
        at, end = self._offsets[bucket], self._offsets[bucket + 1]
        while at < end and self._blob[at * _WIDTH:(at + 1) * _WIDTH] < raw:
            at += 1
        return at

    def difference(self, ids: Iterable[str]) -> IdSet:
        """This set without `ids`."""
        cut: dict[int, bytes] = {}
        drop: set[str] = set()
        for text in ids:
            raw = _digest(text)
            if raw is None:
                drop.add(text)
            elif (at := self._find(raw)) >= 0:
                cut[at] = raw
        if not cut and not drop & self._other:
            return self
        pieces: list[bytes] = []
        last = 0
        for at in sorted(cut):
            pieces.append(self._blob[last * _WIDTH:at * _WIDTH])
            last = at + 1
        pieces.append(self._blob[last * _WIDTH:])
        return self._of(b"".join(pieces), self._other - drop,
                        _moved(self._offsets, cut.values(), -1))

    # -- stored form -----------------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        """The JSON form: the digest table as one hex string, the other ids as a list."""
        return {"digests": self._blob.hex(), "other": sorted(self._other)}

    @classmethod
    def load(cls, data: object) -> IdSet | None:
        """The set `dump` wrote, or None when `data` is not one (a damaged cache)."""
        if not isinstance(data, dict):
            return None
        digests, other = data.get("digests"), data.get("other")
        if not isinstance(digests, str) or not isinstance(other, list) \
                or not all(isinstance(o, str) for o in other):
            return None
        try:
            blob = bytes.fromhex(digests)
        except ValueError:
            return None
        if len(blob) % _WIDTH:
            return None
        return cls._of(blob, frozenset(other))
