"""The `.funes` repository: open, create, discover, commit, walk and verify.

Layout (docs/format.md is the specification):

    FORMAT            "funes-repository 2" (1: without `vectors16.lance`; 3: with `packs.d/`)
    HEAD              "ref: refs/heads/main"
    config            INI, see funes.storage.config
    objects/ab/cd…    commits, manifests, tombstones (content-addressed JSON)
    refs/heads/…      branch tips; refs/remotes/<remote>/<branch>; refs/tags/…
    reflogs/…         one line per ref move
    chunks.lance/     Lance dataset of chunk rows (append-only)
    vectors16.lance/  Lance dataset of float16 embeddings (append-only, created on first embed)
    vectors.lance/    the same as float32, in memories written before vectors16 existed
    PENDING           journal of a commit in flight (crash recovery)
    lock              the single-writer lock (flock; never deleted)

A write is: take the lock → finish any interrupted commit → write fragment files → write the
manifest and commit objects → journal → Lance append → move the ref by compare-and-swap →
drop the journal. A process killed anywhere in that sequence leaves either the old HEAD with
some unreferenced files (harmless; `gc` removes them) or a journal that the next writer uses to
finish the move. No committed data is ever lost.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes._env import Settings
from funes.errors import FunesError, NotARepositoryError, UsageError
from funes.model.chunk import Chunk
from funes.model.ids import ObjectId, is_object_id
from funes.model.objects import VECTOR_TABLES, Commit, Link, Manifest, ModelStamp, Tombstone
from funes.model.refs import DEFAULT_BRANCH, HEAD, RefName, branch_ref, check_ref_name
from funes.storage import revisions
from funes.storage.atomic import write_atomic
from funes.storage.config import Config
from funes.storage.idindex import HiddenCache, IdIndex
from funes.storage.lock import WriteLock
from funes.storage.objects import ObjectStore
from funes.storage.refs import RefStore
from funes.storage.revisions import ORIG_HEAD
from funes.storage.signing import note_written, sign_commit
from funes.storage.tables import (
    DamagedTableError,
    LanceTable,
    chunk_schema,
    chunks_to_arrow,
    vector_schema,
)

if TYPE_CHECKING:
    import pyarrow as pa


FORMAT_NAME = "funes-repository"
#: 2: the memory may hold `vectors16.lance` (float16 embeddings), which a funes that knows
#: format 1 only would not read; a format-1 memory is raised to 2 when that table first appears.
#: 3: `packs.json` may hand part of its record to sealed files in `packs.d/`, which a funes
#: that knows format 2 would not read; a memory is raised to 3 when the first one is written.
FORMAT_VERSION = 3
#: What `init` writes: the lowest version that describes a new memory (see `raise_format`).
INIT_FORMAT = 2
PROJECT_DIR = ".funes"


class RepositoryExistsError(FunesError):
    """`init` where a repository already is."""


class UnsupportedFormatError(FunesError):
    """A repository written by a newer (or foreign) funes."""


class ModelMismatchError(FunesError):
    """An operation would mix embeddings of two different models."""

    def __init__(self, stamped: ModelStamp, other: ModelStamp) -> None:
        super().__init__(
            f"this memory is stamped with embedding model {stamped}, not {other}",
            hint="use the stamped model, or re-embed on purpose with `funes reindex --model`",
        )
        self.stamped = stamped
        self.other = other


def now_iso() -> str:
    """The current UTC time as funes writes it (millisecond precision)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class CommitResult:
    """What one commit did."""

    commit: ObjectId | None  # None when there was nothing new to commit
    added: int
    duplicates: int  # rows already in the memory (or twice in the batch): skipped
    collisions: int  # rows sharing an id with a different annotation: reported, first kept
    chunk_count: int


@dataclass
class RepoStats:
    """Counts for `status`."""

    chunks: int = 0
    sessions: int = 0
    by_harness: dict[str, dict[str, int]] = field(default_factory=dict)


class Repository:
    """An open `.funes` repository."""

    def __init__(self, path: Path, settings: Settings, *, is_global: bool = False) -> None:
        self.path = path
        self.settings = settings
        self.is_global = is_global
        self.objects = ObjectStore(path / "objects")
        self.refs = RefStore(path)
        self.config = Config(path / "config")
        self.chunks = LanceTable(path / "chunks.lance")
        #: The embedding tables by name (funes.model.objects.VECTOR_TABLES), present or not.
        self.embeddings: dict[str, LanceTable] = {
            name: LanceTable(path / f"{name}.lance") for name in VECTOR_TABLES
        }
        self.ids = IdIndex(path / "index" / "ids.sqlite")
        self.hidden = HiddenCache(path / "index" / "hidden.json")

    # -- creation and discovery ------------------------------------------------------------

    @classmethod
    def init(cls, path: Path, settings: Settings, *, is_global: bool = False) -> Repository:
        """Create a repository in `path` (the `.funes` directory or `$FUNES_HOME`)."""
        if (path / "FORMAT").exists():
            raise RepositoryExistsError(
                f"a funes repository already exists at {path}",
                hint="use it as it is; `funes status` describes it",
            )
        path.mkdir(parents=True, exist_ok=True)
        for sub in ("objects", "refs/heads", "refs/remotes", "refs/tags", "reflogs"):
            (path / sub).mkdir(parents=True, exist_ok=True)
        repo = cls(path, settings, is_global=is_global)
        repo.refs.set_symbolic(HEAD, branch_ref(DEFAULT_BRANCH))
        if not repo.chunks.exists():
            repo.chunks.create(chunk_schema())
        # FORMAT last: its presence is what makes the directory a repository.
        write_atomic(path / "FORMAT", f"{FORMAT_NAME} {INIT_FORMAT}\n".encode())
        return repo

    @classmethod
    def open(cls, path: Path, settings: Settings) -> Repository:
        """Open the repository in `path` (a `.funes` dir, `$FUNES_HOME`, or their parent)."""
        path = path.expanduser()
        if not (path / "FORMAT").exists() and (path / PROJECT_DIR / "FORMAT").exists():
            path = path / PROJECT_DIR
        fmt = path / "FORMAT"
        try:
            text = fmt.read_text("utf-8").strip()
        except FileNotFoundError:
            raise NotARepositoryError(str(path)) from None
        except (OSError, UnicodeDecodeError):
            raise NotARepositoryError(str(path)) from None
        name, _, version = text.partition(" ")
        if name != FORMAT_NAME or not version.isdigit():
            raise UnsupportedFormatError(
                f"{fmt} does not describe a funes repository ({text[:40]!r})",
                hint="point --memory at a directory made by `funes init`",
            )
        if int(version) > FORMAT_VERSION:
            raise UnsupportedFormatError(
                f"repository format {version} is newer than this funes supports ({FORMAT_VERSION})",
                hint="upgrade funes",
            )
        resolved = path.resolve()
        is_global = resolved == settings.home.expanduser().resolve()
        return cls(resolved, settings, is_global=is_global)

    @classmethod
    def discover(cls, settings: Settings, start: Path | None = None) -> Repository:
        """Find the repository like git: walk up from `start`, then the global memory."""
        here = (start or settings.cwd).resolve()
        for directory in (here, *here.parents):
            if (directory / PROJECT_DIR / "FORMAT").is_file():
                return cls.open(directory / PROJECT_DIR, settings)
        if (settings.home / "FORMAT").is_file():
            return cls.open(settings.home, settings)
        raise NotARepositoryError(str(here))

    # -- locking and recovery --------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self, timeout: float | None = None) -> Iterator[None]:
        """Hold the write lock, after finishing any commit a crash interrupted."""
        if timeout is None:
            configured = self.config.get("core.lockTimeout")
            timeout = float(configured) if configured else self.settings.lock_timeout
        with WriteLock(self.path / "lock", timeout):
            self._recover()
            from funes.storage import pack

            pack.recover(self)  # a pack a crash interrupted (funes.storage.pack)
            yield

    def _recover(self) -> None:
        journal = self.path / "PENDING"
        try:
            pending = json.loads(journal.read_text("utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError):
            journal.unlink()
            return
        try:
            ref = check_ref_name(pending["ref"])
            new = pending["commit"]
            tables = pending["tables"]
            removed = pending.get("removed") or {}
            if (not isinstance(tables, dict) or not isinstance(removed, dict)
                    or not isinstance(new, str) or not is_object_id(new)):
                raise TypeError("journal")
            self.objects.commit(new)  # the journal may only name a commit that exists here
        except (KeyError, TypeError, FunesError):
            journal.unlink()  # damaged or forged: the move it describes cannot be trusted
            return
        current = self.refs.read(ref)
        if (current == pending.get("old") and self._appended(tables)
                and self._removed(removed)):
            self.refs.set_if_equals(
                HEAD if ref == self.head_branch() else ref,
                current,
                ObjectId(new),
                who=self._who(),
                time=now_iso(),
                message=f"recover: {pending['message']}",
            )
        journal.unlink()

    def _appended(self, tables: dict[str, list[str]]) -> bool:
        """True if every journaled fragment file made it into its dataset."""
        for name, files in tables.items():
            table = self.table(name)
            if not table.exists() or not set(files) <= table.logical_paths():
                return False
        return True

    def _removed(self, tables: dict[str, list[str]]) -> bool:
        """True if every fragment file a `reset` journaled as dropped left its dataset."""
        for name, files in tables.items():
            table = self.table(name)
            if table.exists() and set(files) & table.file_paths():
                return False
        return True

    def table(self, name: str) -> LanceTable:
        """A table by name."""
        if name == "chunks":
            return self.chunks
        if name in self.embeddings:
            return self.embeddings[name]
        raise UsageError(f"unknown table {name!r}")

    @property
    def vectors(self) -> LanceTable:
        """The embedding table this memory writes to and searches: its home.

        `vectors16` (float16), unless the memory already holds float32 `vectors` and no
        float16 table: a memory written before half-width vectors keeps its width, so a funes
        that reads only format 1 can still read it and its pushes. A memory holding both
        (two histories merged) searches `vectors16`; the backlog re-encodes the other table's
        vectors into it (funes.ingest.backlog.adopt), so no chunk is embedded twice and a
        search never mixes widths.
        """
        half, full = self.embeddings["vectors16"], self.embeddings["vectors"]
        return full if full.exists() and not half.exists() else half

    def mark_format(self) -> None:
        """Raise FORMAT to 2 once the memory holds `vectors16` (a format-1 reader would not)."""
        if self.embeddings["vectors16"].exists():
            self.raise_format(2)

    def raise_format(self, version: int) -> None:
        """Raise FORMAT to `version` before writing what older readers would misread.

        Never lowers it: a memory stays readable by every funes that knows its version, and
        is raised only once it holds something a funes of the older version would not read.
        """
        fmt = self.path / "FORMAT"
        current = fmt.read_text("utf-8").strip().partition(" ")[2]
        if not current.isdigit() or int(current) < version:
            write_atomic(fmt, f"{FORMAT_NAME} {version}\n".encode())

    # -- reading ---------------------------------------------------------------------------

    def head(self) -> ObjectId | None:
        """The commit HEAD points to (None in a new repository)."""
        return self.refs.read(HEAD)

    def head_branch(self) -> RefName:
        """The ref HEAD follows (e.g. refs/heads/main)."""
        return self.refs.resolve_name(HEAD)

    def head_commit(self) -> Commit | None:
        """The HEAD commit, read and verified."""
        head = self.head()
        return self.objects.commit(head) if head else None

    def resolve(self, rev: str) -> ObjectId:
        """Turn a revision (HEAD, branch, ref, id prefix, with `~N` suffixes) into a commit id."""
        return revisions.resolve(self, rev)

    def orig_head(self) -> ObjectId | None:
        """Where the branch was before the last merge or reset moved it (git's ORIG_HEAD)."""
        try:
            text = (self.path / ORIG_HEAD).read_text("ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return ObjectId(text) if is_object_id(text) else None

    def set_orig_head(self, oid: ObjectId | None) -> None:
        """Record the branch tip a merge or reset is about to leave."""
        if oid is not None:
            write_atomic(self.path / ORIG_HEAD, f"{oid}\n".encode(), durable=False)

    def walk(self, start: ObjectId | None = None) -> Iterator[tuple[ObjectId, Commit]]:
        """Commits reachable from `start` (HEAD), newest first, each once."""
        first = start if start is not None else self.head()
        if first is None:
            return
        import heapq

        seen = {first}
        commit = self.objects.commit(first)
        heap: list[tuple[str, str, Commit]] = [(_neg_time(commit.time), first, commit)]
        while heap:
            _, oid, commit = heapq.heappop(heap)
            yield ObjectId(oid), commit
            for parent in commit.parents:
                if parent not in seen:
                    seen.add(parent)
                    pc = self.objects.commit(parent)
                    heapq.heappush(heap, (_neg_time(pc.time), parent, pc))

    def model_stamp(self) -> ModelStamp | None:
        """The embedding model this memory is stamped with (from HEAD), if any."""
        head = self.head_commit()
        return head.model if head else None

    def tokenizer(self) -> str:
        """The full-text tokenizer this memory is searched with (from HEAD; "simple" before)."""
        head = self.head_commit()
        return (head.tokenizer if head else None) or "simple"

    def check_model(self, model: ModelStamp) -> None:
        """Refuse a model other than the stamped one (index, merge and query call this)."""
        stamped = self.model_stamp()
        if stamped is not None and (stamped.name, stamped.sha256) != (model.name, model.sha256):
            raise ModelMismatchError(stamped, model)

    def chunk_ids(self) -> set[str]:
        """Ids of every chunk row in the local table."""
        if not self.chunks.exists():
            return set()
        ids = self.chunks.dataset().to_table(columns=["id"]).column("id")
        return set(ids.to_pylist())

    def tombstoned_ids(self, start: ObjectId | None = None) -> set[str]:
        """Chunk ids hidden by tombstones reachable from `start` (HEAD), less lifted ones.

        Cached per commit (funes.storage.idindex.HiddenCache): a read walks back only to the
        nearest commit whose set is known, not through the whole history. Tombstones a
        reachable tombstone lifts (`funes unforget`) hide nothing.
        """
        return self.hidden.hidden(self, start if start is not None else self.head())

    def tombstones(
        self, start: ObjectId | None = None
    ) -> tuple[dict[str, tuple[str, ...]], set[str]]:
        """Every tombstone reachable from `start` (HEAD) with its targets, and the lifted ones."""
        targets: dict[str, tuple[str, ...]] = {}
        lifted: set[str] = set()
        for _, commit in self.walk(start):
            for tid in commit.tombstones:
                stone = self.objects.tombstone(tid)
                targets[tid] = stone.targets
                lifted.update(stone.lifts)
        return targets, lifted

    def require_tables(self, head: ObjectId | None) -> None:
        """Refuse to read an empty chunk table under a history that has chunks.

        A lost `chunks.lance/` (or its `_versions/`) reads as a table that does not exist:
        without this check every reader would answer "nothing here" over a memory whose
        commits say otherwise.
        """
        if self.chunks.exists() or head is None:
            return
        commit = self.objects.commit(head)
        if commit.chunk_count > 0:
            raise DamagedTableError(
                f"{self.chunks.path} is missing or has no versions, but HEAD "
                f"({head[:12]}) holds {commit.chunk_count} chunks",
                hint="restore it from a backup, or clone the memory again from its remote; "
                "`funes fsck` lists the damage",
            )

    def stats(self) -> RepoStats:
        """Chunk and session counts by harness, from the chunk table."""
        stats = RepoStats()
        self.require_tables(self.head())
        if not self.chunks.exists():
            return stats
        table = self.chunks.dataset().to_table(columns=["id", "harness", "session_id"])
        hidden = self.tombstoned_ids()
        sessions: dict[str, set[str]] = {}
        counts: dict[str, int] = {}
        for cid, harness, session in zip(
            table.column("id").to_pylist(),
            table.column("harness").to_pylist(),
            table.column("session_id").to_pylist(),
            strict=True,
        ):
            if cid in hidden:
                continue
            # A merge can leave a row physically twice (both sides indexed it): count ids.
            hidden.add(cid)
            counts[harness] = counts.get(harness, 0) + 1
            sessions.setdefault(harness, set()).add(session)
        for harness in sorted(counts):
            stats.by_harness[harness] = {
                "chunks": counts[harness],
                "sessions": len(sessions[harness]),
            }
        stats.chunks = sum(counts.values())
        stats.sessions = sum(len(s) for s in sessions.values())
        return stats

    # -- writing ---------------------------------------------------------------------------

    def _who(self) -> str:
        from funes.storage.identity import author

        return str(author(self.settings, self.config))

    def commit_chunks(
        self,
        chunks: Sequence[Chunk],
        message: str | Callable[[int], str],
        *,
        tombstones: Sequence[Tombstone] = (),
        model: ModelStamp | None = None,
        vectors: pa.Table | None = None,
        allow_empty: bool = False,
        lock_timeout: float | None = None,
        links: Sequence[Link] = (),
        restamp: bool = False,
        restored: int = 0,
        tokenizer: str | None = None,
        redaction: str | None = None,
    ) -> CommitResult:
        """Append a batch of chunks (and optionally vectors/tombstones/links) as one commit.

        `restored`: chunks a lifting tombstone (`funes unforget`) makes visible again.

        Chunks already in the memory are skipped, so re-indexing is idempotent; a batch with
        nothing new makes no commit unless `allow_empty` (links always count as new).
        `restamp` replaces the embedding model stamp with `model` (`funes reindex`), where
        otherwise a different model is refused. `tokenizer` re-stamps the full-text tokenizer
        (`funes reindex --tokenizer`); otherwise the parent's is carried forward. `redaction`:
        the rules the chunks were redacted with, stamped on their manifest.
        `message` may be a function of the number of chunks actually added (known only after
        deduplication).
        """
        with self.writing(lock_timeout):
            return self._commit_locked(
                chunks, message, tombstones, model, vectors, allow_empty=allow_empty, links=links,
                restamp=restamp, restored=restored, tokenizer=tokenizer, redaction=redaction,
            )

    def _commit_locked(
        self,
        chunks: Sequence[Chunk],
        message: str | Callable[[int], str],
        tombstones: Sequence[Tombstone],
        model: ModelStamp | None,
        vectors: pa.Table | None,
        *,
        allow_empty: bool,
        links: Sequence[Link] = (),
        restamp: bool = False,
        restored: int = 0,
        tokenizer: str | None = None,
        redaction: str | None = None,
    ) -> CommitResult:
        ref = self.head_branch()
        old = self.refs.read(ref)
        parent = self.objects.commit(old) if old else None
        stamped = parent.model if parent else None
        if model is not None and stamped is not None and not restamp:
            self.check_model(model)
        stamp = model if restamp and model is not None else stamped or model

        self.ids.sync(self, old)
        known = self.ids.known(c.id for c in chunks) if chunks else set()
        fresh: dict[str, Chunk] = {}
        duplicates = collisions = 0
        for chunk in chunks:
            cid = chunk.id
            if cid in known:
                duplicates += 1
            elif cid in fresh:
                duplicates += 1
                if fresh[cid] != chunk:
                    collisions += 1
            else:
                fresh[cid] = chunk
        base_count = parent.chunk_count if parent else 0
        restamping = restamp and stamp != stamped
        carried = parent.tokenizer if parent else None
        words = carried if tokenizer is None else (None if tokenizer == "simple" else tokenizer)
        if (not fresh and not tombstones and vectors is None and not links and not allow_empty
                and not restamping and words == carried):
            return CommitResult(None, 0, duplicates, collisions, base_count)

        manifests: list[ObjectId] = []
        journal_tables: dict[str, list[str]] = {}
        appends: list[tuple[LanceTable, list[Any]]] = []
        if fresh:
            ordered = sorted(
                fresh.values(), key=lambda c: (c.session_id, c.seq, c.block_idx, c.split_idx, c.id)
            )
            records = self.chunks.write_fragments(chunks_to_arrow(ordered))
            manifests.append(
                self.objects.put(Manifest("chunks", tuple(sorted(fresh)), tuple(records),
                                          redaction))
            )
            journal_tables["chunks"] = [f.path for r in records for f in r.files]
            appends.append((self.chunks, records))
        if vectors is not None and vectors.num_rows:
            home = self.vectors
            vectors = vectors.cast(vector_schema(vectors.schema.field("vector").type.list_size,
                                                 home.name))
            if not home.exists():
                home.create(vectors.schema)
                self.mark_format()
            records = home.write_fragments(vectors)
            ids = tuple(sorted(set(vectors.column("id").to_pylist())))
            manifests.append(self.objects.put(Manifest(home.name, ids, tuple(records))))
            journal_tables[home.name] = [f.path for r in records for f in r.files]
            appends.append((home, records))
        tomb_ids = tuple(self.objects.put(t) for t in tombstones)
        link_ids = tuple(self.objects.put(link) for link in links)
        hidden_now = {t for tomb in tombstones for t in tomb.targets}
        removed = len(self.ids.visible(hidden_now) | (hidden_now & set(fresh)))

        commit = Commit(
            parents=(old,) if old else (),
            manifests=tuple(manifests),
            tombstones=tomb_ids,
            model=stamp,
            author=self._who(),
            host=socket.gethostname(),
            time=now_iso(),
            message=message(len(fresh)) if callable(message) else message,
            chunk_count=base_count + len(fresh) - removed + restored,
            links=link_ids,
            tokenizer=words,
        )
        commit = sign_commit(self, commit)  # signed when $FUNES_HOME/keys/signing.key exists
        oid = self.objects.put(commit)
        if fresh:  # the rows are this machine's own turns (funes.storage.signing.chunk_marks)
            note_written(self.path, oid)
        journal = {
            "ref": ref,
            "old": old,
            "commit": oid,
            "tables": journal_tables,
            "message": commit.summary,
        }
        write_atomic(self.path / "PENDING", json.dumps(journal).encode())
        for table, records in appends:
            table.append(records, table.dataset().version)
        self.refs.set_if_equals(
            HEAD, old, oid, who=commit.author, time=commit.time, message=commit.summary
        )
        (self.path / "PENDING").unlink()
        return CommitResult(oid, len(fresh), duplicates, collisions, commit.chunk_count)


def _neg_time(ts: str) -> str:
    """A sort key that orders ISO times newest first in a min-heap."""
    return "".join(chr(0x10FFFF - ord(ch)) if ch.isascii() else ch for ch in ts)
