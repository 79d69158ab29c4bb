"""Every commit link of a memory, by turn and by session, kept per HEAD.

`funes why` walks the memory's history to find one code commit's links and stops early; the
browsing verbs ask the other way round (which code commits did this session, or this recalled
turn, produce?) for many turns at once, so they read an index of all links instead.

The index is a cache beside the repository (`index/links.json`, safe to delete). It records
the HEAD it reflects; when HEAD has moved on, only the commits since are read (a walk back to
the recorded HEAD, like funes.storage.idindex); when the recorded HEAD is no longer an ancestor
(a reset), it is rebuilt. Links are few (one per linked code commit), so the file stays small.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from funes.model.ids import ObjectId
from funes.model.objects import Link, MalformedObjectError
from funes.storage.repo import Repository

__all__ = ["LinkIndex", "link_index"]

#: Largest index file read back (input from disk: bounded; a larger one is rebuilt).
_MAX_BYTES = 64 << 20
_FILE = "links.json"
_memo: dict[tuple[str, str | None], LinkIndex] = {}


@dataclass
class LinkIndex:
    """The links reachable from one HEAD, with lookups by turn and by session."""

    head: str | None
    links: dict[str, Link]  # by link object id
    _by_turn: dict[tuple[str, str], list[str]] = field(default_factory=dict, repr=False)
    _by_session: dict[str, list[str]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for lid in sorted(self.links, key=lambda i: (self.links[i].time, i)):
            link = self.links[lid]
            for _, session, turn in link.turns:
                self._by_turn.setdefault((session, turn), []).append(lid)
                bucket = self._by_session.setdefault(session, [])
                if not bucket or bucket[-1] != lid:
                    bucket.append(lid)

    def for_turn(self, session_id: str, turn_id: str) -> list[Link]:
        """The links that name this turn, oldest code commit first."""
        return [self.links[i] for i in self._by_turn.get((session_id, turn_id), [])]

    def for_session(self, session_id: str) -> list[Link]:
        """The links that name any turn of this session, oldest code commit first."""
        return [self.links[i] for i in dict.fromkeys(self._by_session.get(session_id, []))]


def link_index(memory: Repository) -> LinkIndex:
    """The links of `memory` at its HEAD (cached in this process and in `index/links.json`)."""
    head = memory.head()
    key = (str(memory.path.resolve()), head)
    found = _memo.get(key)
    if found is not None:
        return found
    path = memory.path / "index" / _FILE
    stored = _load(path)
    links: dict[str, Link] | None = None
    if stored is not None and head is not None:
        links = _catch_up(memory, head, stored)
    if links is None:
        links = dict(_walk(memory, head, None)) if head is not None else {}
    index = LinkIndex(head, links)
    _save(path, head, links)
    if len(_memo) > 32:
        _memo.clear()
    _memo[key] = index
    return index


def _walk(memory: Repository, head: str, marker: str | None) -> Iterator[tuple[str, Link]]:
    for _, commit in _until(memory, head, marker):
        for lid in commit.links:
            yield lid, memory.objects.link(lid)


def _until(memory: Repository, head: str, marker: str | None) -> Iterator[tuple[str, Any]]:
    """Commits from `head` back to `marker` (excluded), each once."""
    stack = [head]
    seen: set[str] = set()
    while stack:
        oid = stack.pop()
        if oid in seen or oid == marker:
            continue
        seen.add(oid)
        commit = memory.objects.commit(ObjectId(oid))
        yield oid, commit
        stack.extend(commit.parents)


def _catch_up(memory: Repository, head: str,
              stored: tuple[str | None, dict[str, Link]]) -> dict[str, Link] | None:
    """The stored links moved on to `head`; None when the stored HEAD is not an ancestor."""
    marker, links = stored
    if marker == head:
        return links
    if marker is None:
        return None
    reached = False
    out = dict(links)
    stack = [head]
    seen: set[str] = set()
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if oid == marker:
            reached = True
            continue
        commit = memory.objects.commit(ObjectId(oid))
        for lid in commit.links:
            out.setdefault(lid, memory.objects.link(lid))
        stack.extend(commit.parents)
    return out if reached else None


def _load(path: Path) -> tuple[str | None, dict[str, Link]] | None:
    try:
        with path.open("rb") as fh:
            raw = fh.read(_MAX_BYTES + 1)
        if len(raw) > _MAX_BYTES:
            return None
        data = json.loads(raw)
        head = data["head"]
        links = {str(k): Link.from_dict(v) for k, v in data["links"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, MalformedObjectError):
        return None  # absent, damaged or of another shape: rebuilt
    return (head if isinstance(head, str) else None), links


def _save(path: Path, head: str | None, links: dict[str, Link]) -> None:
    from funes.storage.atomic import write_atomic

    data = {"head": head, "links": {k: v.to_dict() for k, v in sorted(links.items())}}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, sort_keys=True).encode(), durable=False)
