"""Verify a repository end to end: objects, refs, commits, fragment files and chunk rows.

Problems are collected, not raised, so one damaged object does not hide the next; each names
the object id or ref so the user knows what to fetch again or restore from a remote.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from funes.errors import FunesError
from funes.model.chunk import id_from_fields
from funes.model.ids import ObjectId
from funes.model.objects import TABLES, Commit, Manifest
from funes.storage.atomic import sha256_file
from funes.storage.refs import CorruptRefError
from funes.storage.repo import Repository


@dataclass(frozen=True)
class Problem:
    """One thing fsck found wrong."""

    kind: str  # "object", "ref", "commit", "file", "row"
    name: str  # the object id, ref name, file path or chunk id
    detail: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name}: {self.detail}"


@dataclass
class FsckReport:
    """What fsck checked and what it found."""

    objects: int = 0
    refs: int = 0
    commits: int = 0
    files: int = 0
    rows: int = 0
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is damaged (warnings do not count)."""
        return not self.problems


def fsck(repo: Repository, *, rows: bool = True) -> FsckReport:
    """Check everything; `rows=False` skips re-hashing every chunk row (the slow part)."""
    report = FsckReport()
    bad_objects: set[str] = set()
    for oid in repo.objects:
        report.objects += 1
        try:
            repo.objects.get(oid)
        except FunesError as exc:
            bad_objects.add(oid)
            report.problems.append(Problem("object", oid, _detail(exc)))

    tips: list[tuple[str, ObjectId]] = []
    try:
        head = repo.head()
        if head is not None:
            tips.append(("HEAD", head))
    except CorruptRefError as exc:
        report.problems.append(Problem("ref", "HEAD", _detail(exc)))
    try:
        names = repo.refs.names()
    except FunesError as exc:
        names = []
        report.problems.append(Problem("ref", "refs/", _detail(exc)))
    for ref in names:
        try:
            target = repo.refs.read(ref)
        except FunesError as exc:
            report.problems.append(Problem("ref", ref, _detail(exc)))
            continue
        if target is not None:
            tips.append((ref, target))
    report.refs = len(tips)

    local_manifests: dict[str, Manifest] = {}
    seen: set[str] = set()
    for via, tip in tips:
        local = via == "HEAD" or via.startswith("refs/heads/")
        stack = [tip]
        while stack:
            oid = stack.pop()
            if oid in seen:
                continue
            seen.add(oid)
            commit = _read_commit(repo, oid, via, bad_objects, report)
            if commit is None:
                continue
            report.commits += 1
            stack.extend(commit.parents)
            for mid in commit.manifests:
                manifest = _read_manifest(repo, mid, oid, bad_objects, report)
                if manifest is not None and local:
                    local_manifests[mid] = manifest
            for tid in commit.tombstones:
                if tid not in bad_objects and not repo.objects.has(tid):
                    report.problems.append(Problem("commit", oid, f"tombstone {tid} is missing"))
            for lid in commit.links:
                if lid in bad_objects:
                    continue
                try:
                    repo.objects.link(lid)
                except FunesError as exc:
                    report.problems.append(Problem("commit", oid, f"link {lid}: {_detail(exc)}"))

    _check_files(repo, local_manifests, report)
    if rows:
        _check_rows(repo, local_manifests, report)
    return report


def _detail(exc: FunesError) -> str:
    return exc.message


def _read_commit(
    repo: Repository, oid: str, via: str, bad: set[str], report: FsckReport
) -> Commit | None:
    if oid in bad:
        return None
    try:
        return repo.objects.commit(oid)
    except FunesError as exc:
        report.problems.append(Problem("commit", oid, f"{_detail(exc)} (reachable from {via})"))
        return None


def _read_manifest(
    repo: Repository, mid: str, commit: str, bad: set[str], report: FsckReport
) -> Manifest | None:
    if mid in bad:
        return None
    try:
        return repo.objects.manifest(mid)
    except FunesError as exc:
        report.problems.append(Problem("commit", commit, f"manifest {mid}: {_detail(exc)}"))
        return None


def _check_files(repo: Repository, manifests: dict[str, Manifest], report: FsckReport) -> None:
    included: dict[str, set[str]] = {}
    for table_name in TABLES:
        table = repo.table(table_name)
        if table.exists():
            try:
                included[table_name] = table.logical_paths()  # packs as the files they hold
            except Exception as exc:  # a damaged Lance manifest surfaces as many error types
                report.problems.append(Problem("file", f"{table_name}.lance", str(exc)[:200]))
                included[table_name] = set()
    from funes.storage.gc import load_collected

    collected = load_collected(repo).files  # files `gc` replaced (rows removed on purpose)
    referenced: set[str] = set()
    for mid, manifest in manifests.items():
        table = repo.table(manifest.table)
        for frag in manifest.fragments:
            for f in frag.files:
                report.files += 1
                referenced.add(f"{manifest.table}/{f.path}")
                if f"{manifest.table}/{f.path}" in collected:
                    referenced.update(collected[f"{manifest.table}/{f.path}"])
                    continue
                path = table.path / f.path
                if not path.is_file():
                    report.problems.append(Problem("file", str(path), f"missing (manifest {mid})"))
                    continue
                size, digest = sha256_file(path)
                if (size, digest) != (f.size, f.sha256):
                    report.problems.append(
                        Problem("file", str(path), f"content does not match manifest {mid}")
                    )
                elif f.path not in included.get(manifest.table, set()):
                    report.problems.append(
                        Problem("file", str(path), f"not part of {manifest.table}.lance")
                    )
    for table_name, paths in included.items():
        for rel in sorted(paths):
            if f"{table_name}/{rel}" not in referenced:
                report.warnings.append(
                    Problem("file", f"{table_name}.lance/{rel}", "in the dataset but no commit")
                )


def _check_rows(repo: Repository, manifests: dict[str, Manifest], report: FsckReport) -> None:
    expected: set[str] = set()
    for manifest in manifests.values():
        if manifest.table == "chunks":
            expected.update(manifest.ids)
    if not repo.chunks.exists():
        return
    try:
        table = repo.chunks.dataset().to_table()
    except Exception as exc:  # Lance raises OSError/ValueError/RuntimeError on damaged data
        report.problems.append(Problem("file", "chunks.lance", str(exc)[:200]))
        return
    present: set[str] = set()
    for row in table.to_pylist():
        report.rows += 1
        cid = row["id"]
        present.add(cid)
        if id_from_fields(row) != cid:
            report.problems.append(Problem("row", cid, "content does not match its id"))
    from funes.storage.gc import load_collected

    expected -= load_collected(repo).ids  # removed by `gc` (tombstoned)
    for cid in sorted(expected - present)[:50]:
        report.problems.append(Problem("row", cid, "named by a commit but not in chunks.lance"))
    # Readers serve the table's rows: one no local commit names would be served without the
    # signature check that covers manifests (fetch refuses such fragments; this finds them
    # in memories written before it did, or planted on disk).
    pending = (repo.path / "PENDING").exists()
    for cid in sorted(present - expected)[:50]:
        problem = Problem("row", cid, "in chunks.lance but named by no commit")
        (report.warnings if pending else report.problems).append(problem)
