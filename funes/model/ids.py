"""Object ids and the canonical encoding they hash.

An id is the lowercase hex SHA-256 of an object's canonical bytes. Canonical JSON (sorted keys,
no insignificant whitespace, UTF-8, no NaN) makes the same value hash the same on any machine
and Python version, which is what lets two memories agree on ids without talking.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, NewType

ObjectId = NewType("ObjectId", str)

_ID_RE = re.compile(r"^[0-9a-f]{64}$")
_PREFIX_RE = re.compile(r"^[0-9a-f]{4,64}$")


def canonical_json(value: Any) -> bytes:
    """Encode a JSON value canonically (the bytes that ids hash)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def hash_bytes(data: bytes) -> ObjectId:
    """The id of some bytes."""
    return ObjectId(hashlib.sha256(data).hexdigest())


def is_object_id(text: str) -> bool:
    """True for a full, well-formed object id."""
    return bool(_ID_RE.match(text))


def is_id_prefix(text: str) -> bool:
    """True for an abbreviated id a user may type (4 to 64 hex digits)."""
    return bool(_PREFIX_RE.match(text))
