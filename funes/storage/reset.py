"""`funes reset --hard REV`: move the current branch to any commit, the tables following it.

The way back from a merge one regrets (a teammate's tombstone that hid your own chunks, a
pull of passages you do not want): `reset --hard ORIG_HEAD`, or `HEAD@{1}` from the reflog,
like git. The local tables hold the rows of local branches only (docs/format.md, "Tables"),
so the Lance datasets move with the ref: fragments no local branch names any more leave the
dataset version (their files stay on disk until `gc`, so a second reset can bring them back),
and fragments the target names that the tables lack are appended (their files must be here:
a fetched commit's are). Readers then serve exactly what the reachable manifests name.

The move goes through the same journal as a commit (`PENDING`, with a `removed` list besides
the appended files), so a crash at any point leaves the old state or finishes the new one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from funes.errors import FunesError, UsageError
from funes.model.ids import ObjectId
from funes.model.objects import TABLES, FragmentRecord
from funes.model.refs import HEAD, RefName, check_ref_name
from funes.storage import pack
from funes.storage.atomic import write_atomic
from funes.storage.refs import CorruptRefError
from funes.storage.repo import Repository, now_iso
from funes.storage.transfer import MissingFragmentError, check_record, overwrite_records


@dataclass(frozen=True)
class ResetResult:
    """What `reset --hard` did."""

    branch: str
    old: ObjectId | None
    new: ObjectId
    dropped: int  # fragments that left the local tables
    appended: int  # fragments added to them
    chunk_count: int


def reset_hard(repo: Repository, rev: str, *, lock_timeout: float | None = None) -> ResetResult:
    """Point the current branch at `rev` and make the local tables hold what it names.

    With HEAD missing (damage), `rev` must name a branch: HEAD is pointed at it again.

    Raises:
        BadRevisionError: `rev` names no commit.
        MissingFragmentError: the target names a fragment file this machine lacks.
    """
    with repo.writing(lock_timeout):
        try:
            ref = repo.head_branch()
        except CorruptRefError:
            ref = _repair_head(repo, rev)
        old = repo.refs.read(ref)
        new = repo.resolve(rev)
        target = repo.objects.commit(new)
        tips = [new] + [oid for name, oid in repo.refs.iter_refs("refs/heads/") if name != ref]
        wanted = _named_records(repo, tips)
        from funes.storage.gc import load_collected

        collected = load_collected(repo).files
        appended: dict[str, list[FragmentRecord]] = {}
        removed: dict[str, list[str]] = {}
        keep: dict[str, list[dict[str, Any]]] = {}
        unpacked: list[str] = []
        dropped = 0
        for name in TABLES:
            table = repo.table(name)
            records = wanted.get(name, {})
            named = set(records)
            for path in list(named):  # a file gc replaced is named through its replacements
                for new_file in collected.get(f"{name}/{path}", []):
                    named.add(new_file.removeprefix(f"{name}/"))
            current = table.dataset().get_fragments() if table.exists() else []
            physical = {f"data/{f.path}" for fr in current for f in fr.metadata.files}
            packed = pack.record(repo.path, table, physical) if current else {}
            packs, in_packs = packed.get("packs", set()), packed.get("files", set())
            # A pack holds the rows of many files: kept whole while it holds only named
            # files, else dropped and its named files appended again from their originals
            # (packing leaves them in data/; the next pack gathers them again).
            unpack = bool(in_packs - named)
            present: set[str] = set() if unpack else set(in_packs)
            for frag in current:
                meta = dict(frag.metadata.to_json())
                paths = [f"data/{f['path']}" for f in meta["files"]]
                if set(paths) & packs:
                    if not unpack:
                        keep.setdefault(name, []).append(meta)
                        continue
                elif set(paths) <= named:
                    keep.setdefault(name, []).append(meta)
                    present.update(paths)
                    continue
                removed.setdefault(name, []).extend(paths)
                dropped += 1
            if unpack:
                unpacked.append(name)
            seen: set[int] = set()
            for path, record in sorted(records.items()):
                if id(record) in seen or path in present or f"{name}/{path}" in collected:
                    continue
                seen.add(id(record))
                for f in record.files:
                    local = table.path / f.path
                    if not local.is_file() or local.stat().st_size != f.size:
                        raise MissingFragmentError(local, new)
                appended.setdefault(name, []).append(record)
        message = f"reset: moving to {rev}"
        journal = {
            "ref": ref, "old": old, "commit": new, "message": message,
            "tables": {n: [f.path for r in rs for f in r.files] for n, rs in appended.items()},
            "removed": removed,
        }
        write_atomic(repo.path / "PENDING", json.dumps(journal).encode())
        for name in TABLES:
            if name in appended or name in removed:
                _overwrite(repo, name, keep.get(name, []), appended.get(name, []))
        for name in unpacked:
            pack.forget_packs(repo.path, name)  # its packs left the version
        repo.set_orig_head(old)
        if old != new:
            repo.refs.set_if_equals(
                HEAD if ref == repo.head_branch() else ref, old, new,
                who=repo._who(), time=now_iso(), message=message,
            )
        (repo.path / "PENDING").unlink()
        return ResetResult(
            ref.removeprefix("refs/heads/"), old, new, dropped,
            sum(len(v) for v in appended.values()), target.chunk_count,
        )


def _repair_head(repo: Repository, rev: str) -> RefName:
    """HEAD is missing or damaged: point it at the branch `rev` names, if it names one."""
    name = rev if rev.startswith("refs/heads/") else f"refs/heads/{rev}"
    try:
        ref = check_ref_name(name)
    except FunesError:
        ref = None
    if ref is None or repo.refs.read(ref) is None:
        raise UsageError(
            f"HEAD is damaged and {rev!r} is not a branch",
            hint="name the branch HEAD should follow: `funes reset --hard main`",
        )
    repo.refs.set_symbolic(HEAD, ref)
    return ref


def _named_records(repo: Repository, tips: list[ObjectId]) -> dict[str, dict[str, FragmentRecord]]:
    """Every fragment file the manifests reachable from `tips` name, per table."""
    out: dict[str, dict[str, FragmentRecord]] = {}
    seen: set[str] = set()
    stack: list[str] = list(tips)
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        commit = repo.objects.commit(oid)
        stack.extend(commit.parents)
        for mid in commit.manifests:
            manifest = repo.objects.manifest(mid)
            for record in manifest.fragments:
                check_record(record, f"manifest {mid[:12]}")
                for f in record.files:
                    out.setdefault(manifest.table, {})[f.path] = record
    return out


def _overwrite(
    repo: Repository, name: str, keep: list[dict[str, Any]], add: list[FragmentRecord]
) -> None:
    """Make the table's next version hold exactly `keep` and `add` (a Lance `Overwrite`)."""
    table = repo.table(name)
    if not table.exists():
        from funes.storage.transfer import data_file_schema

        table.create(data_file_schema(table.path / add[0].files[0].path))
        repo.mark_format()
    records = [*(FragmentRecord(meta, ()) for meta in keep), *add]
    overwrite_records(table, records, table.dataset().schema)
