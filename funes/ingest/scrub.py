"""`funes scrub`: run redaction again over what is already stored and replace dirty chunks.

A chunk stored before a detector existed (or imported) may still hold a secret. scrub redacts
every visible chunk's text with the current detectors (funes.ingest.redact); each chunk that
changes is replaced in one commit: a tombstone hides the original and a redacted copy is added
(a different text, so a new id). The copy has no vector yet, so the embedding backlog
(`funes embed`, the hooks) embeds it like any new chunk. `funes gc` then removes the
originals' bytes from disk; the publish gate keeps them off remotes meanwhile.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields

from funes.ingest.redact import redact
from funes.model.chunk import Chunk
from funes.model.objects import Tombstone
from funes.storage.repo import Repository, now_iso

_CHUNK_FIELDS = tuple(f.name for f in fields(Chunk))


@dataclass(frozen=True)
class ScrubbedChunk:
    """One replaced chunk: where it was and what was found (never the secret)."""

    old: str
    new: str
    harness: str
    session: str
    turn: str
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class ScrubResult:
    """What scrub did (or, with `dry_run`, would do)."""

    scanned: int
    replaced: list[ScrubbedChunk] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    commit: str | None = None
    dry_run: bool = False


def scrub(repo: Repository, *, dry_run: bool = False) -> ScrubResult:
    """Redact stored chunks; replace each dirty one by a tombstone and a redacted copy."""
    if not repo.chunks.exists():
        return ScrubResult(0, dry_run=dry_run)
    rows = repo.chunks.dataset().to_table().to_pylist()
    hidden = repo.tombstoned_ids()
    seen: set[str] = set()
    replaced: list[ScrubbedChunk] = []
    copies: list[Chunk] = []
    kinds: Counter[str] = Counter()
    for row in rows:
        cid = row["id"]
        if cid in hidden or cid in seen:
            continue
        seen.add(cid)
        text, findings = redact(row["text"])
        if not findings:
            continue
        copy = Chunk(**{name: row.get(name) for name in _CHUNK_FIELDS if name != "text"},
                     text=text)
        found = tuple(sorted({f.kind for f in findings}))
        kinds.update(f.kind for f in findings)
        copies.append(copy)
        replaced.append(ScrubbedChunk(cid, copy.id, copy.harness, copy.session_id,
                                      copy.turn_id, found))
    commit = None
    if replaced and not dry_run:
        stone = Tombstone(
            tuple(sorted(r.old for r in replaced)), "scrub", repo._who(), now_iso()
        )
        result = repo.commit_chunks(
            copies, f"scrub: redacted {len(replaced)} chunk(s)", tombstones=[stone]
        )
        commit = result.commit
    return ScrubResult(len(seen), replaced, dict(kinds), commit, dry_run)
