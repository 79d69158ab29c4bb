"""Chunks: the searchable unit, and how their content-addressed ids are computed.

A chunk id hashes the chunk's text together with the provenance that the transcript itself
fixes (harness, session, turn, position, role, time). Fields that depend on the machine that
indexed it (the source file path, the resolved project identity, the working directory) are
annotations, not identity: the same transcript indexed on two machines must give the same ids.
The exact recipe is part of the on-disk format (docs/format.md, "Chunk ids").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from funes.model.ids import ObjectId, canonical_json, hash_bytes

#: Bumped only with the on-disk format: changing the recipe changes every id.
CHUNK_ID_VERSION = 1

#: The fields hashed into a chunk id, in the order documented in docs/format.md.
ID_FIELDS: tuple[str, ...] = (
    "harness",
    "session_id",
    "turn_id",
    "seq",
    "ts",
    "role",
    "block_type",
    "block_idx",
    "split_idx",
    "tool_name",
    "text",
)


@dataclass(frozen=True)
class Chunk:
    """A piece of one block's rendered text plus its provenance."""

    text: str
    harness: str
    session_id: str
    turn_id: str
    seq: int
    ts: str
    role: str
    block_type: str
    block_idx: int
    split_idx: int
    tool_name: str | None = None
    parent_turn_id: str | None = None
    parent_session_id: str | None = None
    workdir: str | None = None
    project: str | None = None
    source: str | None = None
    noise: str | None = None

    @cached_property
    def id(self) -> ObjectId:
        """The content-addressed id (see module docstring).

        Computed once per chunk: an index run asks for it four times (dedup, the batch's
        order and manifest, the row), and hashing the canonical JSON was an eighth of a
        first run's time.
        """
        return chunk_id(self)

    def to_row(self) -> dict[str, Any]:
        """The chunk as a storage row, id included."""
        row = asdict(self)
        row["id"] = self.id
        return row


def chunk_id(chunk: Chunk) -> ObjectId:
    """Hash the identity fields of a chunk."""
    return id_from_fields({name: getattr(chunk, name) for name in ID_FIELDS})


def id_from_fields(fields: dict[str, Any]) -> ObjectId:
    """Hash identity fields taken from a stored row (fsck and reads re-verify with this)."""
    payload = {"v": CHUNK_ID_VERSION, **{name: fields.get(name) for name in ID_FIELDS}}
    return hash_bytes(b"chunk\0" + canonical_json(payload))
