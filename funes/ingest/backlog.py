"""The embedding backlog: chunks that are stored (and searchable by BM25) but not embedded yet.

Ingest commits chunks at lexical speed; embedding runs at the model's speed (about 12 chunks/s
on 2 cores), so a user with months of history would wait hours if ingest embedded inline.
Instead `drain` embeds newest first, in bounded steps, committing each batch of vectors as an
ordinary commit: a kill loses at most one batch, and the next run resumes where this one
stopped. Recall fuses whatever vectors exist with BM25 over everything.

Middle chunks of long tool output (`noise == "tool-output-body"`) are never embedded: they are
kept whole for `get` and BM25, and their head and tail carry the meaning (docs/chunking.md).

One embedder per memory at a time: `drain` holds `index/embed.lock` (a `flock`, released
however the process ends) while it runs, and a second `drain` is refused at once
(`EmbeddingBusyError`), because two would embed the same newest chunks twice. The detached
backfill (funes.api.backfill) reports its progress in `index/backfill.json`
(`BackfillProgress`), which `funes status` reads; whether it still runs is the lock's answer,
not the file's, so a killed backfill shows as stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes import process
from funes.errors import FunesError
from funes.ingest.represent import embed_texts, label, representation, vector_label
from funes.model.objects import ModelStamp
from funes.storage.atomic import sha256_file, write_atomic
from funes.storage.repo import Repository
from funes.storage.tables import VECTOR_FILTER_COLUMNS, vector_schema

if TYPE_CHECKING:
    from funes.inference.protocols import EmbedderProtocol

#: Chunks whose noise tag means "stored, searchable, not embedded".
NOT_EMBEDDED = ("tool-output-body",)

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Backlog:
    """Chunks waiting for an embedding."""

    waiting: int
    embedded: int
    skipped: int  # chunks that are never embedded (see NOT_EMBEDDED)


@dataclass(frozen=True)
class DrainResult:
    """What one `drain` call did."""

    embedded: int
    remaining: int
    commits: int
    seconds: float
    model: str
    #: llama.cpp threads the embedder ran with.
    threads: int = 0


def stamp_of(embedder: EmbedderProtocol) -> ModelStamp:
    """The repository stamp for an embedder's model."""
    info = embedder.info
    if info is None:
        from pathlib import Path

        return ModelStamp(Path(embedder.path).stem, sha256_file(Path(embedder.path))[1],
                          embedder.dim)
    return ModelStamp(info.name, info.sha256, embedder.dim)


def _embedded_ids(repo: Repository, model: str | None) -> set[str]:
    """Chunks that have a vector labelled `model` (see `represent.vector_label`).

    `model` is the stamped model in the memory's representation. Vectors of a model the
    memory was re-indexed away from, or of another representation, no longer count.
    """
    if not repo.vectors.exists() or model is None:
        return set()
    table = repo.vectors.dataset().to_table(columns=["id"], filter=f"model = '{_q(model)}'")
    return set(table.column("id").to_pylist())


def _q(text: str) -> str:
    return text.replace("'", "''")


def _waiting(repo: Repository) -> tuple[list[str], int, int]:
    """Ids waiting (newest first), how many are embedded, how many are never embedded."""
    if not repo.chunks.exists():
        return [], 0, 0
    table = repo.chunks.dataset().to_table(columns=["id", "time", "seq", "noise"])
    done = _embedded_ids(repo, vector_label(repo))
    hidden = repo.tombstoned_ids()
    rows = zip(
        table.column("id").to_pylist(),
        table.column("time").to_pylist(),
        table.column("seq").to_pylist(),
        table.column("noise").to_pylist(),
        strict=True,
    )
    waiting: dict[str, tuple[Any, int]] = {}
    skipped = 0
    for cid, when, seq, noise in rows:
        if cid in done or cid in hidden or cid in waiting:
            continue
        if noise in NOT_EMBEDDED:
            skipped += 1
            continue
        waiting[cid] = (when.timestamp() if when is not None else 0.0, seq)
    order = sorted(waiting, key=lambda c: waiting[c], reverse=True)
    return order, len(done), skipped


def backlog(repo: Repository) -> Backlog:
    """How many chunks wait for an embedding."""
    waiting, embedded, skipped = _waiting(repo)
    return Backlog(len(waiting), embedded, skipped)


def estimate(repo: Repository) -> int:
    """About how many chunks wait for a vector, cheaply enough to report on every recall.

    Counts rows rather than distinct live ids (a merged memory may hold a row twice, and
    tombstoned rows still count), so it can be a little high; `backlog` is the exact figure.
    """
    if not repo.chunks.exists():
        return 0
    body = ", ".join(f"'{_q(n)}'" for n in NOT_EMBEDDED)
    chunks = repo.chunks.dataset().count_rows(filter=f"noise IS NULL OR noise NOT IN ({body})")
    wanted = vector_label(repo)
    vectors = 0
    if wanted is not None and repo.vectors.exists():
        vectors = repo.vectors.dataset().count_rows(filter=f"model = '{_q(wanted)}'")
    return max(0, chunks - vectors)


def _vector_rows(repo: Repository, ids: list[str], vectors: Any, model: str, dim: int) -> Any:
    import pyarrow as pa

    quoted = ", ".join("'" + i + "'" for i in ids)  # ids are 64-hex: nothing to escape
    meta = repo.chunks.dataset().to_table(
        columns=["id", *VECTOR_FILTER_COLUMNS], filter=f"id IN ({quoted})"
    )
    by_id = {row["id"]: row for row in meta.to_pylist()}
    schema = vector_schema(dim, repo.vectors.name)
    cols: dict[str, list[Any]] = {name: [] for name in schema.names}
    for cid, vec in zip(ids, vectors, strict=True):
        row = by_id[cid]
        cols["id"].append(cid)
        cols["model"].append(model)
        cols["vector"].append(vec.tolist())
        for name in VECTOR_FILTER_COLUMNS:
            cols[name].append(row[name])
    return pa.Table.from_pydict(cols, schema=schema)


#: Vectors re-encoded per commit by `adopt`: bounds its memory (≈ 1.5 MB per 1,000 rows of
#: 384 float32 components) and what a kill can lose.
ADOPT_BATCH = 8192


def adopt(repo: Repository, *, lock_timeout: float | None = None) -> int:
    """Re-encode into the home embedding table the vectors only the other one holds.

    A memory holds both tables when two histories met, one written before half-width vectors
    (`vectors`, float32) and one after (`vectors16`): a pull, a sync, a merge. Search reads
    the home table only (one width, one ANN index), so without this the other history's
    chunks would wait in the backlog and be embedded again, at the model's speed. Their
    vectors are already here: each chunk's vector of the memory's model and representation
    is copied across, rounded to the home width (float32 → float16 moves no ranking:
    bench/results/fast-path.md), and committed like any embedding batch. Returns how many.
    """
    stamp = repo.model_stamp()
    wanted = vector_label(repo)
    home = repo.vectors
    others = [t for t in repo.embeddings.values() if t.name != home.name and t.exists()]
    if stamp is None or wanted is None or not others:
        return 0
    import pyarrow as pa

    # Once a table is carried over, it changes only when a merge appends to it: remembering
    # its version spares every later drain (one per agent turn) a scan of both tables.
    marker = repo.path / "index" / "adopted.json"
    try:
        seen = json.loads(marker.read_text("utf-8"))
    except (OSError, ValueError):
        seen = {}
    seen = seen if isinstance(seen, dict) else {}
    pending = [(t, t.dataset()) for t in others]
    pending = [(t, ds) for t, ds in pending if seen.get(t.name) != f"{ds.version} {wanted}"]
    if not pending:
        return 0
    done = _embedded_ids(repo, wanted) | repo.tombstoned_ids()
    adopted = 0
    for other, ds in pending:
        if ds.schema.field("vector").type.list_size != stamp.dim:
            continue  # another width under the same label cannot be this model's vectors
        rows = ds.to_table(columns=list(vector_schema(stamp.dim, other.name).names),
                           filter=f"model = '{_q(wanted)}'")
        keep = []
        for cid in rows.column("id").to_pylist():  # a merged table may hold a row twice
            keep.append(cid not in done)
            done.add(cid)
        rows = rows.filter(pa.array(keep, pa.bool_()))
        for start in range(0, rows.num_rows, ADOPT_BATCH):
            part = rows.slice(start, ADOPT_BATCH)
            repo.commit_chunks(
                [], f"embed: {part.num_rows} vectors re-encoded from {other.name} ({wanted})",
                model=stamp, vectors=part, lock_timeout=lock_timeout,
            )
            adopted += part.num_rows
        seen[other.name] = f"{ds.version} {wanted}"
        marker.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(marker, json.dumps(seen).encode(), durable=False)
    return adopted


#: The embedder's lock and the backfill's progress, inside the memory.
EMBED_LOCK = Path("index") / "embed.lock"
PROGRESS_FILE = Path("index") / "backfill.json"


class EmbeddingBusyError(FunesError):
    """Another process is embedding this memory (the background backfill, most likely)."""

    def __init__(self, repo: Repository, holder: int | None) -> None:
        who = f"pid {holder}" if holder else "another process"
        super().__init__(
            f"{who} is already embedding {repo.path} (the background backfill, if `funes add` "
            "or a hook started it)",
            hint="`funes status` shows how far it is; it commits every batch, so stopping it "
            "loses nothing",
        )
        self.holder = holder


@contextlib.contextmanager
def embedding(repo: Repository) -> Iterator[None]:
    """Hold the memory's embed lock for a drain; refuse at once when it is held.

    Raises:
        EmbeddingBusyError: another process holds it.
    """
    path = repo.path / EMBED_LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        if not process.try_flock(fd):
            raise EmbeddingBusyError(repo, process.read_pid(fd))
        process.write_pid(fd)
        yield
    finally:
        os.close(fd)  # releases the lock


def embedding_pid(repo: Repository) -> int | None:
    """The pid of the process embedding this memory now, or None when none is."""
    path = repo.path / EMBED_LOCK
    if not process.lock_held(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return process.read_pid(fd) or 0
    finally:
        os.close(fd)


@dataclass
class BackfillProgress:
    """What the detached backfill last said about itself (`index/backfill.json`)."""

    pid: int
    model: str
    started: float  # epoch seconds
    updated: float
    #: Chunks this backfill embedded so far, and how many were waiting at its last look.
    embedded: int = 0
    waiting: int = 0
    #: Chunks per second over this backfill's run.
    rate: float = 0.0
    #: "running", "done" (nothing left), "failed" (`detail` says why).
    state: str = "running"
    detail: str = ""

    def save(self, repo: Repository) -> None:
        """Write it atomically (cheap: a few hundred bytes, once per batch)."""
        path = repo.path / PROGRESS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(asdict(self)).encode(), durable=False)

    @classmethod
    def load(cls, repo: Repository) -> BackfillProgress | None:
        """The last progress written, or None (never started, or an unreadable file)."""
        try:
            data = json.loads((repo.path / PROGRESS_FILE).read_text("utf-8"))
            known = {f.name for f in fields(cls)}
            return cls(**{k: v for k, v in data.items() if k in known})
        except (OSError, ValueError, TypeError):
            return None


def drain(
    repo: Repository,
    embedder: EmbedderProtocol,
    *,
    budget: float | None = None,
    limit: int | None = None,
    batch: int = 128,
    progress: Progress | None = None,
    lock_timeout: float | None = None,
) -> DrainResult:
    """Embed waiting chunks newest first until done, `budget` seconds or `limit` chunks.

    Raises:
        EmbeddingBusyError: another process is embedding this memory.
    """
    with embedding(repo):
        return drain_held(repo, embedder, budget=budget, limit=limit, batch=batch,
                          progress=progress, lock_timeout=lock_timeout)


def drain_held(
    repo: Repository,
    embedder: EmbedderProtocol,
    *,
    budget: float | None = None,
    limit: int | None = None,
    batch: int = 128,
    progress: Progress | None = None,
    lock_timeout: float | None = None,
) -> DrainResult:
    """`drain` for a caller that holds `embedding(repo)` already (the backfill, for its run)."""
    stamp = stamp_of(embedder)
    repo.check_model(stamp)
    if repo.model_stamp() is None:
        # Stamp first, so the backlog below is counted against this model's vectors.
        repo.commit_chunks([], f"stamp: embedding model {stamp.name}", model=stamp,
                           restamp=True, lock_timeout=lock_timeout)
    start = time.monotonic()
    adopt(repo, lock_timeout=lock_timeout)
    rep = representation(repo)
    tag = label(stamp.name, rep)
    order, _, _ = _waiting(repo)
    total = len(order) if limit is None else min(limit, len(order))
    done = commits = 0
    texts_by_id: dict[str, str] = {}
    while done < total:
        if budget is not None and time.monotonic() - start >= budget:
            break
        ids = order[done : min(total, done + batch)]
        texts_by_id = embed_texts(repo, ids, rep)
        vectors = []
        for i, cid in enumerate(ids):
            # a passage: models trained with a passage prefix (e5) get it from the embedder
            vectors.append(embedder.embed_passages([texts_by_id[cid]])[0])
            if progress:
                progress(done + i + 1, total, f"{stamp.name}")
            if budget is not None and time.monotonic() - start >= budget:
                ids = ids[: i + 1]
                break
        table = _vector_rows(repo, ids, vectors, tag, stamp.dim)
        repo.commit_chunks(
            [], f"embed: {len(ids)} chunks ({tag})", model=stamp, vectors=table,
            lock_timeout=lock_timeout,
        )
        commits += 1
        done += len(ids)
    return DrainResult(done, len(order) - done, commits, time.monotonic() - start, stamp.name,
                       embedder.n_threads)


def reindex(
    repo: Repository,
    embedder: EmbedderProtocol,
    *,
    budget: float | None = None,
    progress: Progress | None = None,
    lock_timeout: float | None = None,
) -> DrainResult:
    """Re-stamp the memory with another embedding model and embed everything with it.

    The old model's vectors stay (nothing is overwritten) but stop counting: recall and the
    backlog only use vectors whose `model` matches the stamp. Vectors share one table, so the
    new model must have the same dimension as the old one.
    """
    stamp = stamp_of(embedder)
    old = repo.model_stamp()
    if old is not None and old.dim != stamp.dim and repo.vectors.exists():
        raise ReindexDimensionError(old, stamp)
    if old is None or (old.name, old.sha256) != (stamp.name, stamp.sha256):
        repo.commit_chunks([], f"reindex: embedding model {stamp.name}", model=stamp,
                           restamp=True, lock_timeout=lock_timeout)
    return drain(repo, embedder, budget=budget, progress=progress, lock_timeout=lock_timeout)


class ReindexDimensionError(FunesError):
    """A re-index to a model whose vectors have another width."""

    def __init__(self, old: ModelStamp, new: ModelStamp) -> None:
        super().__init__(
            f"cannot re-index from {old} ({old.dim}-d) to {new} ({new.dim}-d): the vector "
            "table of this memory holds one width",
            hint="re-index into a new memory: `funes init` elsewhere, then `funes index` there",
        )
