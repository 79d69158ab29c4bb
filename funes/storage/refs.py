"""Refs: named pointers to commits, moved only by compare-and-swap, with a reflog.

`HEAD` is symbolic (`ref: refs/heads/main`) like git's. Callers hold the repository's write
lock while they update refs; the compare-and-swap makes a lost update impossible even so, and
is the same primitive the remotes use (`create_commit(parent_commit=…)` on the Hub).
Reflog lines are written before the ref itself, as git does, so a crash between the two leaves
at worst a reflog entry for a move that did not happen, never a move that left no trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from funes.errors import DivergedError, FunesError
from funes.model.ids import ObjectId, is_object_id
from funes.model.refs import HEAD, RefName, check_ref_name
from funes.storage.atomic import append_line, write_atomic

ZERO = "0" * 64


class CorruptRefError(FunesError):
    """A ref file that does not hold a commit id or a symbolic ref."""

    def __init__(self, name: str, detail: str, *, hint: str | None = None) -> None:
        super().__init__(
            f"ref {name} is damaged: {detail}",
            hint=hint or "run `funes fsck`; `funes reflog` shows where it pointed before, "
            "`funes reset --hard REV` puts it back",
        )
        self.name = name


class RefMovedError(DivergedError):
    """A compare-and-swap found the ref somewhere other than expected."""

    def __init__(self, name: str, expected: str | None, actual: str | None) -> None:
        super().__init__(
            f"ref {name} moved: expected {(expected or 'nothing')[:12]}, "
            f"found {(actual or 'nothing')[:12]}",
            hint="another process updated it; run the command again",
        )
        self.name = name
        self.expected = expected
        self.actual = actual


@dataclass(frozen=True)
class ReflogEntry:
    """One move of a ref."""

    old: str | None
    new: str | None
    who: str
    time: str
    message: str


class RefStore:
    """Refs as files under a repository directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, name: RefName) -> Path:
        return self.root / name

    def _log_path(self, name: RefName) -> Path:
        return self.root / "reflogs" / name

    def read_symbolic(self, name: RefName = HEAD) -> RefName | None:
        """The ref a symbolic ref points to, or None if it is direct."""
        text = self._read_text(name)
        if text is not None and text.startswith("ref: "):
            target = text[5:].strip()
            try:
                return check_ref_name(target)
            except FunesError:
                raise CorruptRefError(name, f"points to an invalid ref {target!r}") from None
        return None

    def _read_text(self, name: RefName) -> str | None:
        try:
            return self._path(name).read_text("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise CorruptRefError(name, f"unreadable ({exc.__class__.__name__})") from None

    def resolve_name(self, name: RefName) -> RefName:
        """Follow symbolic refs to the direct ref that would be updated.

        HEAD always exists (`init` writes it first): a missing HEAD is damage, never an
        unborn branch, or every reader would see an empty history over live rows and the
        next commit would start a parentless one.
        """
        if name == HEAD and self._read_text(HEAD) is None:
            raise CorruptRefError(
                HEAD, "is missing",
                hint="restore it with `funes reset --hard main` (or the branch you were on; "
                "`funes reflog` lists where HEAD pointed)",
            )
        seen = set()
        while True:
            target = self.read_symbolic(name)
            if target is None:
                return name
            if target in seen:
                raise CorruptRefError(name, "symbolic refs form a loop")
            seen.add(target)
            name = target

    def read(self, name: RefName) -> ObjectId | None:
        """The commit a ref points to (following symbolic refs), or None if unborn."""
        direct = self.resolve_name(name)
        text = self._read_text(direct)
        if text is None:
            return None
        value = text.strip()
        if not is_object_id(value):
            raise CorruptRefError(direct, "does not hold a commit id")
        return ObjectId(value)

    def set_symbolic(self, name: RefName, target: RefName) -> None:
        """Point a symbolic ref (HEAD) at a branch."""
        write_atomic(self._path(name), f"ref: {target}\n".encode())

    def set_if_equals(
        self,
        name: RefName,
        old: str | None,
        new: ObjectId,
        *,
        who: str,
        time: str,
        message: str,
    ) -> None:
        """Move a ref from `old` (None: must not exist) to `new`, or raise RefMovedError.

        The caller holds the repository's write lock; the check makes a stale caller fail
        loudly instead of overwriting someone else's move.
        """
        direct = self.resolve_name(name)
        current = self.read(direct)
        if current != old:
            raise RefMovedError(direct, old, current)
        line = _reflog_line(old, new, who, time, message)
        append_line(self._log_path(direct), line)
        if direct != name:
            append_line(self._log_path(name), line)
        write_atomic(self._path(direct), f"{new}\n".encode())

    def delete_if_equals(self, name: RefName, old: str, *, who: str, time: str) -> None:
        """Remove a direct ref if it still points at `old`."""
        current = self.read(name)
        if current != old:
            raise RefMovedError(name, old, current)
        append_line(self._log_path(name), _reflog_line(old, None, who, time, "delete"))
        with contextlib.suppress(FileNotFoundError):
            self._path(name).unlink()

    def names(self, prefix: str = "refs/") -> list[RefName]:
        """Names of the direct refs under a prefix, sorted (their values are not read)."""
        base = self.root / "refs"
        if not base.is_dir():
            return []
        out = []
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            name = path.relative_to(self.root).as_posix()
            if path.name.startswith(".tmp-") or not name.startswith(prefix):
                continue
            try:
                out.append(check_ref_name(name))
            except FunesError:
                raise CorruptRefError(name, "is not a valid ref name") from None
        return out

    def iter_refs(self, prefix: str = "refs/") -> Iterator[tuple[RefName, ObjectId]]:
        """Direct refs under a prefix with their commits, sorted by name."""
        for ref in self.names(prefix):
            oid = self.read(ref)
            if oid is not None:
                yield ref, oid

    def reflog(self, name: RefName) -> list[ReflogEntry]:
        """The moves of a ref, oldest first (malformed lines are skipped)."""
        try:
            text = self._log_path(name).read_text("utf-8", errors="replace")
        except FileNotFoundError:
            return []
        entries = []
        for line in text.splitlines():
            head, _, message = line.partition("\t")
            parts = head.split(" ")
            if len(parts) < 4:
                continue
            old, new, time = parts[0], parts[1], parts[-1]
            who = " ".join(parts[2:-1])
            entries.append(
                ReflogEntry(
                    None if old == ZERO else old, None if new == ZERO else new, who, time, message
                )
            )
        return entries


def _reflog_line(old: str | None, new: str | None, who: str, time: str, message: str) -> str:
    clean = " ".join(message.split())
    who = " ".join(who.split()) or "unknown"
    return f"{old or ZERO} {new or ZERO} {who} {time}\t{clean}"
