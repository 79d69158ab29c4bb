"""A remote in a directory: a shared drive, a USB stick, another machine's export.

The reference implementation of `Remote`: the layout is the Hub's, written with plain file
operations, and the compare-and-swap on the ref happens under a lock file (`flock`, like the
local repository's). A `.funes` directory works as a remote too, since its layout is the same.

A push writes objects, copies fragment files (hash-checked while copying), appends them to
the remote's Lance datasets and refreshes the card, all under the lock, and moves the ref
last. A push killed half-way leaves the ref where it was; the extra files and Lance versions
it left are harmless (unreferenced by any ref, skipped by the next push, which finds the
fragments already in the dataset).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from funes.errors import FunesError, RemoteError
from funes.model.ids import ObjectId
from funes.model.refs import RefName
from funes.remotes.base import (
    NonFastForwardError,
    Progress,
    PushPlan,
    PushReport,
    RemoteDataError,
    RemoteSpec,
    RemoteState,
)
from funes.remotes.layout import (
    CARD_FILE,
    MAX_FILE_BYTES,
    MAX_OBJECT_BYTES,
    MAX_REF_BYTES,
    check_path,
    object_path,
    parse_ref_file,
    ref_of,
    refresh_card,
    table_file,
)
from funes.storage.atomic import fsync_dir, write_atomic, write_new
from funes.storage.lock import WriteLock
from funes.storage.tables import LanceTable
from funes.storage.transfer import TransferError, append_records

_BLOCK = 1 << 20


def open_regular(root: Path, rel: str, display: str, limit: int) -> tuple[int, int]:
    """Open `root/rel` if it is a regular file inside `root` of at most `limit` bytes.

    Returns (descriptor, size). A remote directory is written by strangers: a FIFO would
    block a plain `open` forever, a device (`/dev/zero`) or a symlink to one never ends, and
    a symlink can lead anywhere on this machine. So the path must resolve inside the remote,
    the open never waits (O_NONBLOCK; it only matters for FIFOs), and the descriptor must be
    a regular file whose size is checked before anything is read. Reading a regular file
    never blocks.
    """
    path = root / check_path(rel)
    real = os.path.realpath(path)
    base = os.path.realpath(root)
    if not real.startswith(base.rstrip(os.sep) + os.sep):
        raise RemoteDataError(f"{display}: {rel} points outside the remote; refusing it")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise RemoteDataError(f"{display} is missing {rel}") from None
    except OSError as exc:
        raise RemoteError(f"{display}: cannot read {rel} ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RemoteDataError(f"{display}: {rel} is not a regular file; refusing it")
        if st.st_size > limit:
            raise RemoteDataError(
                f"{display}: {rel} is {st.st_size} bytes, more than the {limit} it may be; "
                "refusing it"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_regular(root: Path, rel: str, display: str, limit: int) -> bytes:
    """The bytes of a regular file inside `root`, at most `limit` of them (see open_regular)."""
    fd, _ = open_regular(root, rel, display, limit)
    try:
        chunks: list[bytes] = []
        total = 0
        while block := os.read(fd, min(_BLOCK, limit + 1 - total) or 1):
            chunks.append(block)
            total += len(block)
            if total > limit:
                raise RemoteDataError(f"{display}: {rel} grew past {limit} bytes; refusing it")
        return b"".join(chunks)
    except OSError as exc:
        raise RemoteError(f"{display}: cannot read {rel} ({exc.strerror})") from None
    finally:
        os.close(fd)


class DirectoryRemote:
    """A remote memory in a local directory."""

    def __init__(self, name: str, spec: RemoteSpec, *, lock_timeout: float = 5.0) -> None:
        assert spec.path is not None
        self.name = name
        self.spec = spec
        self.lock_timeout = lock_timeout
        root = spec.path
        # Another memory's project directory: use its `.funes` (same layout).
        if (root / ".funes" / "FORMAT").is_file():
            root = root / ".funes"
        self.root = root

    @property
    def display(self) -> str:
        """`name (path)` for messages."""
        return f"{self.name} ({self.root})"

    # -- reading ---------------------------------------------------------------------------

    def _is_memory(self) -> bool:
        return (self.root / "objects").is_dir()

    def state(self) -> RemoteState:
        """The refs, read now; the revision is a digest of them."""
        if not self._is_memory():
            if self.root.exists() and (not self.root.is_dir() or any(self.root.iterdir())):
                raise RemoteError(
                    f"{self.display} is not a funes memory (no objects/ directory)",
                    hint="point the remote at an empty or new directory, or at a memory",
                )
            return RemoteState(False, None, {})
        refs: dict[RefName, ObjectId] = {}
        for kind in ("heads", "tags"):
            folder = self.root / "refs" / kind
            if not folder.is_dir():
                continue
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                if path.name.startswith(".tmp-"):
                    continue
                rel = path.relative_to(self.root).as_posix()
                ref = ref_of(rel)
                if ref is None:
                    continue
                raw = read_regular(self.root, rel, self.display, MAX_REF_BYTES)
                refs[ref] = parse_ref_file(raw, ref, self.display)
        digest = hashlib.sha256(
            "".join(f"{ref} {oid}\n" for ref, oid in sorted(refs.items())).encode()
        ).hexdigest()
        return RemoteState(True, digest, refs)

    def create(self) -> None:
        """Lay out an empty remote in the directory (made if missing)."""
        try:
            for sub in ("objects", "refs/heads"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RemoteError(f"cannot create {self.display} ({exc.strerror})") from None

    def present(self, state: RemoteState, paths: Sequence[str]) -> set[str]:
        """The paths that exist (a stat each: local and cheap)."""
        return {p for p in paths if (self.root / check_path(p)).is_file()}

    def object_ids(self, state: RemoteState) -> set[ObjectId] | None:
        """None: walking the history from the refs costs nothing here."""
        return None

    def read_objects(
        self, state: RemoteState, oids: Sequence[ObjectId], *, limit: int = MAX_OBJECT_BYTES
    ) -> dict[ObjectId, bytes]:
        """Object bytes straight from the directory (regular files of at most `limit`)."""
        return {
            oid: read_regular(self.root, object_path(oid), self.display, limit) for oid in oids
        }

    def download(
        self,
        state: RemoteState,
        files: Sequence[tuple[str, Path]],
        progress: Progress,
        *,
        sizes: Mapping[str, int] | None = None,
    ) -> None:
        """Copy files out of the directory; a file must have the size `sizes` gives it."""
        for done, (path, dest) in enumerate(files, 1):
            expected = (sizes or {}).get(path)
            fd, size = open_regular(self.root, path, self.display,
                                    expected if expected is not None else MAX_FILE_BYTES)
            try:
                if expected is not None and size != expected:
                    raise RemoteDataError(
                        f"{self.display}: {path} is {size} bytes, its manifest says {expected}; "
                        "refusing it"
                    )
                with open(dest, "wb") as out:
                    left = size
                    while left > 0 and (block := os.read(fd, min(_BLOCK, left))):
                        out.write(block)
                        left -= len(block)
            except OSError as exc:
                raise RemoteError(f"{self.display}: cannot copy {path} ({exc.strerror})") from None
            finally:
                os.close(fd)
            progress(done, len(files), path)

    # -- writing ---------------------------------------------------------------------------

    def push(self, state: RemoteState, plan: PushPlan, progress: Progress) -> PushReport:
        """Write the plan under the remote's lock; the ref moves last, by compare-and-swap."""
        created = not self._is_memory()
        if created:
            self.create()
        ref_path = self.root / check_path(plan.ref)
        with WriteLock(self.root / "lock", self.lock_timeout):
            current = self._read_ref(plan.ref)
            if current != plan.old:
                raise NonFastForwardError(self.display, plan.ref, current, plan.new)
            objects = sum(
                write_new(self.root / object_path(oid), raw) for oid, raw in plan.objects.items()
            )
            nbytes = sum(len(raw) for raw in plan.objects.values())
            files = 0
            total = sum(len(r.files) for t in plan.tables for r in t.records)
            for update in plan.tables:
                table = LanceTable(self.root / f"{update.table}.lance")
                existing = table.file_paths() if table.exists() else set()
                new = [
                    r for r in update.records if not all(f.path in existing for f in r.files)
                ]
                for record in new:
                    for f in record.files:
                        files += 1
                        nbytes += self._copy_checked(update.source / f.path, table.path / f.path,
                                                     f.size, f.sha256)
                        progress(files, total, table_file(update.table, f.path))
                try:
                    append_records(table, new, schema=update.schema)
                except TransferError as exc:
                    raise RemoteError(f"{self.display}: {exc.message}", hint=exc.hint) from None
            card = self._card(plan)
            if card is not None:
                write_atomic(self.root / CARD_FILE, card.encode())
            for tag, oid in sorted(plan.tags.items()):
                if self._read_ref(tag) is None:  # a tag is never moved
                    write_atomic(self.root / check_path(tag), f"{oid}\n".encode())
            write_atomic(ref_path, f"{plan.new}\n".encode())
        return PushReport(self.state().revision or "", objects, files, nbytes, created)

    def _read_ref(self, ref: str) -> ObjectId | None:
        if not os.path.lexists(self.root / check_path(ref)):
            return None
        return parse_ref_file(read_regular(self.root, ref, self.display, MAX_REF_BYTES), ref,
                              self.display)

    def _card(self, plan: PushPlan) -> str | None:
        try:
            existing: str | None = (self.root / CARD_FILE).read_text("utf-8")
        except FileNotFoundError:
            existing = None
        except (OSError, UnicodeDecodeError):
            return None  # unreadable: someone else's file, leave it
        name = self.root.parent.name if self.root.name == ".funes" else self.root.name
        return refresh_card(existing, name, str(self.root / "chunks.lance"), plan.card)

    @staticmethod
    def _copy_checked(src: Path, dest: Path, size: int, sha256: str) -> int:
        """Copy a fragment file, hashing what is written; skip one already there."""
        if dest.is_file() and dest.stat().st_size == size:
            return 0
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".tmp-{dest.name}-{os.getpid()}")
        h = hashlib.sha256()
        written = 0
        try:
            with open(src, "rb") as fin, open(tmp, "wb") as fout:
                while block := fin.read(1 << 20):
                    h.update(block)
                    fout.write(block)
                    written += len(block)
                fout.flush()
                os.fsync(fout.fileno())
            if (written, h.hexdigest()) != (size, sha256):
                raise FunesError(
                    f"local fragment file {src} does not match its manifest",
                    hint="run `funes fsck`; nothing was pushed",
                )
            os.replace(tmp, dest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        fsync_dir(dest.parent)
        return written
