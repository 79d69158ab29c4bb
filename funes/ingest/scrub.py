"""`funes scrub`: run redaction again over what is already stored and replace dirty chunks.

A chunk stored before a detector existed (or imported) may still hold a secret. scrub redacts
every visible chunk's text with the current detectors (funes.ingest.redact); each chunk that
changes is replaced in one commit: a tombstone hides the original and a redacted copy is added
(a different text, so a new id). The copy has no vector yet, so the embedding backlog
(`funes embed`, the hooks) embeds it like any new chunk. `funes gc` then removes the
originals' bytes from disk; the publish gate keeps them off remotes meanwhile.

The rules the stored chunks were redacted with are recorded in ``index/redaction.json``
(ingest writes it for a new memory, scrub after a full pass, a merge from what each incoming
chunks manifest says its rows met), so `funes status` can say when an upgrade brought rules the
stored chunks have not met yet, and says nothing for chunks this version wrote elsewhere.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

from funes.ingest.engines import redact_texts
from funes.ingest.redact import rules_version
from funes.model.chunk import Chunk
from funes.model.objects import Tombstone
from funes.storage.atomic import write_atomic
from funes.storage.repo import Repository, now_iso

_CHUNK_FIELDS = tuple(f.name for f in fields(Chunk))

#: What the stored chunks were redacted with, when nothing recorded it (indexed by a funes
#: older than the record itself).
UNRECORDED = "unrecorded (indexed before redaction rules were versioned)"


def _record_path(repo: Repository) -> Path:
    return repo.path / "index" / "redaction.json"


def stored_rules(repo: Repository) -> str | None:
    """The rules the oldest stored chunks were redacted with (None: no chunks, no record)."""
    try:
        data = json.loads(_record_path(repo).read_text("utf-8"))
    except (OSError, ValueError):
        return UNRECORDED if repo.chunks.exists() and repo.stats().chunks else None
    rules = data.get("rules") if isinstance(data, dict) else None
    return rules if isinstance(rules, str) and len(rules) < 200 else UNRECORDED


def _write_record(repo: Repository, rules: str) -> None:
    path = _record_path(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"rules": rules}).encode())


def note_ingest(repo: Repository) -> None:
    """Before ingest stores chunks: record the rules, unless older chunks are already there.

    The record keeps the *oldest* rules any stored chunk was redacted with: new chunks use the
    installed rules, but those stored before do not change until `funes scrub` runs.
    """
    if _record_path(repo).exists():
        return
    has_chunks = repo.chunks.exists() and repo.stats().chunks > 0
    _write_record(repo, UNRECORDED if has_chunks else rules_version())


def note_merged(repo: Repository, stamps: Iterable[str | None], had_chunks: bool) -> None:
    """After a merge (pull, sync, clone, a remote's copy) brought chunks: which rules they met.

    Each incoming chunks manifest says which rules redacted its rows (`Manifest.redaction`;
    None: a funes older than the stamp wrote it). The record keeps the oldest rules stored
    chunks met: it stays at the installed rules only when every incoming chunk met those too,
    so a clone of what this version wrote needs no `funes scrub`, and one of an older funes's
    chunks still does.
    """
    incoming = {stamp or UNRECORDED for stamp in stamps}
    if not incoming:
        return
    current = stored_rules(repo) if had_chunks else None
    installed = rules_version()
    if current is not None and current != installed:
        return  # older chunks were already here: the record says so
    stale = sorted(rules for rules in incoming if rules != installed)
    _write_record(repo, stale[0] if stale else installed)


def rules_outdated(repo: Repository) -> str | None:
    """The stored chunks' rules when they are not the installed ones (run `funes scrub`)."""
    stored = stored_rules(repo)
    return stored if stored is not None and stored != rules_version() else None


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
    visible = []
    for row in rows:
        cid = row["id"]
        if cid in hidden or cid in seen:
            continue
        seen.add(cid)
        visible.append(row)
    # Every engine the publish gate runs first, in its order (funes.ingest.engines): what the
    # gate would hold back is what is redacted here.
    for row, (text, findings) in zip(
        visible, redact_texts([r["text"] for r in visible]), strict=True
    ):
        cid = row["id"]
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
            copies, f"scrub: redacted {len(replaced)} chunk(s)", tombstones=[stone],
            redaction=rules_version(),
        )
        commit = result.commit
    if not dry_run:
        _write_record(repo, rules_version())  # every visible chunk now meets these rules
    return ScrubResult(len(seen), replaced, dict(kinds), commit, dry_run)
