"""Search indexes over `chunks.lance`: a BM25 full-text index on `text` and a B-tree on `id`.

They are caches (docs/design.md §2, "derived state is disposable"): built on first recall, then kept
current incrementally. Rows appended after an index was built are searched flat at once, and
`optimize_indices` folds them in once they are many, so a new commit never forces a rebuild.
Building or optimising writes a new dataset version, so it runs under the write lock.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from funes.storage import pack
from funes.storage.lock import RepositoryBusyError
from funes.storage.repo import Repository

if TYPE_CHECKING:
    import lance

#: Fold appended rows into the indexes once this many are unindexed (on a recall's path).
OPTIMIZE_AFTER = 20_000
#: Background maintenance folds them in sooner: the full-text search reads unindexed rows
#: flat, tokenising each on every query (1,600 such rows made a BM25 recall 0.7 s instead
#: of 25 ms; bench/results/life.md).
FOLD_AFTER = 64
#: Full-text tokenizers a memory can be stamped with (`funes reindex --tokenizer`), and the
#: Lance tokenizer each one is. "simple" splits on whitespace and punctuation: a run of Chinese
#: or Japanese characters is one token, so such text is found only by its exact sentence.
#: "icu" segments words with ICU's dictionaries (Chinese, Japanese, Thai…) and then splits
#: like "simple"; on English it is close but not identical (the same BM25 top hit on 435 of
#: LongMemEval's 470 questions), so it is chosen per memory rather than for all.
TOKENIZERS: dict[str, str] = {"simple": "simple", "icu": "icu/split"}
#: Below this many vectors an exact (flat) search is fast and perfect; above it an ANN index
#: (IVF with HNSW over scalar-quantised vectors) keeps queries in milliseconds.
ANN_MIN_ROWS = 50_000


@dataclass(frozen=True)
class IndexState:
    """What `status` reports about the search indexes."""

    fts: bool
    id_index: bool
    unindexed_rows: int
    #: The Lance tokenizer the full-text index was built with (None: no index yet).
    tokenizer: str | None = None


#: IndexState per Lance version (its manifest file's path and mtime, so a table deleted and
#: created again is not mistaken for the old one): a version never changes, and a recall asks
#: twice (before pinning its snapshot, and inside it); index statistics cost a few ms each.
_states: dict[tuple[str, int], IndexState] = {}


def state(repo: Repository) -> IndexState:
    """Which indexes exist and how many rows they do not cover yet."""
    if not repo.chunks.exists():
        return IndexState(False, False, 0)
    ds = repo.chunks.dataset()
    manifest = repo.chunks.path / "_versions" / f"{2**64 - 1 - int(ds.version):020d}.manifest"
    try:
        key = (str(manifest), manifest.stat().st_mtime_ns)
    except OSError:  # another manifest naming scheme: no cache
        return _state(ds)
    if key not in _states:
        if len(_states) > 256:
            _states.clear()
        _states[key] = _state(ds)
    return _states[key]


def _state(ds: lance.LanceDataset) -> IndexState:
    described = ds.describe_indices()
    names = {ix.name for ix in described}
    built = next((str((ix.details or {}).get("base_tokenizer") or "simple")
                  for ix in described if ix.name == "text_idx"), None)
    unindexed = 0
    if "text_idx" in names:
        stats = ds.stats.index_stats("text_idx")
        unindexed = int(stats.get("num_unindexed_rows", 0))
    else:
        unindexed = ds.count_rows()
    return IndexState("text_idx" in names, "id_idx" in names, unindexed, built)


def retokenize(repo: Repository, *, lock_timeout: float | None = None) -> IndexState:
    """Rebuild the full-text index when it was built with another tokenizer than the stamp's.

    The stamp travels with the memory's commits, so a clone or a pull that brings a new
    stamp rebuilds here on its first recall (0.4-2 s at 100k chunks), and every machine then
    searches the same way.
    """
    wanted = TOKENIZERS.get(repo.tokenizer(), "simple")
    built = state(repo).tokenizer
    if built is not None and built != wanted:
        with repo.writing(lock_timeout):
            if _state(repo.chunks.dataset()).tokenizer not in (None, wanted):
                repo.chunks.dataset().drop_index("text_idx")
    return ensure(repo, lock_timeout=lock_timeout)


def ensure(repo: Repository, *, lock_timeout: float | None = None) -> IndexState:
    """Build missing indexes and fold in appended rows when there are many; cheap otherwise."""
    current = state(repo)
    if current.fts and current.id_index and current.unindexed_rows < OPTIMIZE_AFTER:
        return current
    if repo.chunks.dataset().count_rows() == 0:
        return current
    if current.fts and current.id_index:
        # Only folding-in is due: rows not yet indexed are searched flat meanwhile, so a busy
        # writer (an index run) is no reason to make a recall wait.
        try:
            with repo.writing(0):
                repo.chunks.dataset().optimize.optimize_indices()
        except RepositoryBusyError:
            return current
        return state(repo)
    with repo.writing(lock_timeout):
        ds = repo.chunks.dataset()
        names = {ix.name for ix in ds.describe_indices()}
        if "text_idx" not in names:
            ds.create_scalar_index("text", index_type="INVERTED", name="text_idx",
                                   with_position=False,
                                   base_tokenizer=TOKENIZERS.get(repo.tokenizer(), "simple"))
        if "id_idx" not in names:
            ds = repo.chunks.dataset()
            ds.create_scalar_index("id", index_type="BTREE", name="id_idx")
    return state(repo)


def vector_index_state(repo: Repository) -> tuple[bool, int]:
    """Whether the vector table has an ANN index, and how many rows it does not cover."""
    if not repo.vectors.exists():
        return False, 0
    ds = repo.vectors.dataset()
    found = [ix for ix in ds.describe_indices() if ix.name == "vector_idx"]
    if not found:
        return False, ds.count_rows()
    # Counted from the fragments the index covers: `index_stats` on a vector index also loads
    # its centroids and makes Lance log a warning on the user's terminal.
    covered: set[int] = set()
    for segment in found[0].segments:
        covered.update(int(f) for f in segment.fragment_ids)
    return True, sum(f.count_rows() for f in ds.get_fragments() if f.fragment_id not in covered)


def ensure_vectors(
    repo: Repository, *, min_rows: int | None = None, lock_timeout: float | None = None
) -> bool:
    """Build the ANN index once the vector table is large; fold in new rows incrementally.

    Runs where slow work belongs (after `funes embed`), never on a recall's path: rows not yet
    indexed are searched exactly, so results stay correct in between. Returns True when an
    index exists afterwards.
    """
    indexed, unindexed = vector_index_state(repo)
    if not indexed and unindexed < (ANN_MIN_ROWS if min_rows is None else min_rows):
        return False
    if indexed and unindexed < OPTIMIZE_AFTER:
        return True
    with repo.writing(lock_timeout):
        ds = repo.vectors.dataset()
        if not indexed:
            rows = ds.count_rows()
            partitions = max(1, min(256, int(rows**0.5) // 4))
            ds.create_index("vector", index_type="IVF_HNSW_SQ", metric="cosine",
                            num_partitions=partitions, name="vector_idx")
        else:
            ds.optimize.optimize_indices()
    return True


@dataclass(frozen=True)
class Upkeep:
    """What one round of background maintenance did."""

    packed: pack.PackResult | None
    folded: int  # unindexed rows folded into the full-text and id indexes


def maintain(repo: Repository) -> Upkeep:
    """Background upkeep after new rows, like `git gc --auto`; cheap when nothing is due.

    Packs the tables when they reach `pack.threshold` fragments (funes.storage.pack), builds
    the search indexes when they are missing, and folds appended rows into them once
    FOLD_AFTER of them are searched flat. Never
    waits for the lock: a busy memory is maintained next time. For the hook worker and the
    end of `funes index`, never for a recall.
    """
    packed = pack.auto(repo)
    folded = 0
    current = state(repo)
    if not (current.fts and current.id_index) and current.unindexed_rows:
        # built here rather than by the first recall, which would wait for it
        with contextlib.suppress(RepositoryBusyError):
            ensure(repo, lock_timeout=0)
        return Upkeep(packed, 0)
    if current.fts and current.id_index and current.unindexed_rows >= FOLD_AFTER:
        try:
            with repo.writing(0):
                repo.chunks.dataset().optimize.optimize_indices()
            folded = current.unindexed_rows
        except RepositoryBusyError:
            pass
    return Upkeep(packed, folded)
