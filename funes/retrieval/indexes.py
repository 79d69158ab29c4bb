"""Search indexes over `chunks.lance`: a BM25 full-text index on `text` and a B-tree on `id`.

They are caches (docs/design.md §2, "derived state is disposable"): built on first recall, then kept
current incrementally. Rows appended after an index was built are searched flat at once, and
`optimize_indices` folds them in once they are many, so a new commit never forces a rebuild.
Building or optimising writes a new dataset version, so it runs under the write lock.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from funes.retrieval import scantext
from funes.storage import pack
from funes.storage.lock import RepositoryBusyError
from funes.storage.repo import Repository

if TYPE_CHECKING:
    import lance

    from funes.storage.tables import LanceTable

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
#: The rest of the full-text index's tokenizer, spelled out rather than left to the Lance
#: version's defaults, so every machine and every later funes tokenizes a memory the same way
#: (these are pylance 14's defaults: memories indexed before they were pinned search
#: identically). docs/format.md, "Full-text index", is the specification; changing one is a
#: format change. The base tokenizer is the memory's stamp (TOKENIZERS).
FTS_PARAMS: dict[str, Any] = {
    "language": "English", "with_position": False, "max_token_length": 40, "lower_case": True,
    "stem": True, "remove_stop_words": True, "ascii_folding": True,
}
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
    #: Fragments holding the unindexed rows (each is searched flat, at a cost per fragment).
    unindexed_fragments: int = 0
    #: Pieces of the full-text index (an index run adds one per batch; `merge_segments`).
    segments: int = 1


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
    # unindexed rows from the segments' fragment lists: cheaper than Lance's index
    # statistics, and it counts the fragments too
    described = {ix.name: ix for ix in ds.describe_indices()}
    text = described.get("text_idx")
    built = str((text.details or {}).get("base_tokenizer") or "simple") if text else None
    covered = {int(f) for seg in text.segments for f in seg.fragment_ids} if text else set()
    rows = [f.count_rows() for f in ds.get_fragments() if f.fragment_id not in covered]
    segments = len(text.segments) if text else 0
    return IndexState(text is not None, "id_idx" in described, sum(rows), built, len(rows),
                      segments)


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
                fold(repo.chunks, CHUNK_INDEXES)
        except RepositoryBusyError:
            return current
        return state(repo)
    with repo.writing(lock_timeout):
        ds = repo.chunks.dataset()
        names = {ix.name for ix in ds.describe_indices()}
        _build(repo, ds, names)
    return state(repo)


def _build(repo: Repository, ds: lance.LanceDataset, names: set[str]) -> None:
    """Create the missing indexes (under the write lock)."""
    if "text_idx" not in names:
        ds.create_scalar_index("text", index_type="INVERTED", name="text_idx",
                               base_tokenizer=TOKENIZERS.get(repo.tokenizer(), "simple"),
                               **FTS_PARAMS)
    if "id_idx" not in names:
        repo.chunks.dataset().create_scalar_index("id", index_type="BTREE", name="id_idx")


def make_searchable(repo: Repository, *, lock_timeout: float | None = None) -> None:
    """Index rows just committed, now: build the indexes on a first commit, else add a segment.

    An index run calls this after each of its batches (funes.ingest.run), so a first run over
    a long history answers from its first batch on, and a recall never meets a batch of rows
    to search flat (tokenised on every query: 20,000 of them would make a recall take
    seconds). The new rows become a segment of their own (`num_indices_to_merge=0`): its cost
    is the new rows', where merging them in rewrites the whole index (0.65 s against 2 s for
    20,000 rows into 300,000, bench/results/day0.md). BM25 statistics span the segments, so
    the scores are those of one index built at once; the run ends with `merge_segments`.

    A few rows (a hook's turn: fewer than FOLD_AFTER, in fewer than `pack.threshold`
    fragments) are left to `maintain`, which folds them in with the next few turns' rows:
    searched flat meanwhile, they cost a recall less than a segment per turn cost the writer
    (two index rewrites and a pack per turn, each the size of the newest segments: what made
    a hook's call grow with the memory, bench/results/life.md).
    """
    current = state(repo)
    if current.fts and current.id_index and not fold_due(repo, current):
        return
    with repo.writing(lock_timeout):
        ds = repo.chunks.dataset()
        names = {ix.name for ix in ds.describe_indices()}
        if "text_idx" in names and "id_idx" in names:
            ds.optimize.optimize_indices(num_indices_to_merge=0)
        else:
            _build(repo, ds, names)


def merge_segments(repo: Repository, *, lock_timeout: float | None = None) -> bool:
    """Merge the segments a run left, geometrically; True when any were merged.

    A query reads every segment: the 17 of a first run over 340,000 rows made a BM25 query
    90 ms instead of 15 ms. The newest segments are merged by the rule `fold` keeps
    (`segments_to_merge`), so a run that added one small segment to a large memory rewrites
    that segment's rows, not the whole index (merging everything into one made every hook's
    call pay for the memory's size: tests/storage/test_life_costs.py).
    """
    current = state(repo)
    if not current.fts or current.segments <= 1:
        return False
    ds = repo.chunks.dataset()
    plans: dict[int, list[str]] = {}
    for name in CHUNK_INDEXES:
        count = segments_to_merge(ds, name)
        if count > 1:
            plans.setdefault(count, []).append(name)
    if not plans:
        return False
    with repo.writing(lock_timeout):
        for count, group in sorted(plans.items()):
            repo.chunks.dataset().optimize.optimize_indices(num_indices_to_merge=count,
                                                            index_names=group)
    return True


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
            fold(repo.vectors, ("vector_idx",))
    return True


#: The indexes of `chunks.lance`: full-text on `text`, B-tree on `id`.
CHUNK_INDEXES = ("text_idx", "id_idx")
#: Segments smaller than this are always merged by the next fold: each segment costs every
#: full-text query a little (three segments made a BM25 query 2x one segment's). Larger ones
#: follow the geometric rule: at 2,048 the newest segment was re-indexed and its rows packed
#: again by every fold until it held 2,048 rows, so a hook's call late in a memory's life
#: read and wrote 1.8x what it did on day one, against 1.46x at 256, with the same 1-3
#: segments and recall within 1.2x of one segment (bench/results/life.md, "Hooks mode").
SMALL_SEGMENT = 256


def merge_count(ds: lance.LanceDataset, name: str) -> tuple[int, int]:
    """How many of index `name`'s newest segments a fold merges, and the rows it indexes anew.

    Each fold indexes the rows appended since the last one as a new segment (Lance's delta
    index), merged with the newest segments while they are smaller than SMALL_SEGMENT rows or
    than pack.GEOMETRIC times what is being merged: every larger segment stays at least that
    many times all newer ones together, so there are O(log rows) of them and a fold costs
    about what it folds in, not the whole index (merging every fold into one segment did:
    bench/results/life.md).
    """
    found = [ix for ix in ds.describe_indices() if ix.name == name]
    rows = {f.fragment_id: f.count_rows() for f in ds.get_fragments()}
    if not found:
        return 0, 0
    covered = {int(f) for segment in found[0].segments for f in segment.fragment_ids}
    fresh = sum(n for fid, n in rows.items() if fid not in covered)
    merged, count = fresh, 0
    for segment in reversed(found[0].segments):  # newest first, as Lance merges them
        size = sum(rows.get(int(f), 0) for f in segment.fragment_ids)
        if size >= SMALL_SEGMENT and size >= pack.GEOMETRIC * merged:
            break
        merged += size
        count += 1
    return count, fresh


def segments_to_merge(ds: lance.LanceDataset, name: str) -> int:
    """How many of index `name`'s newest segments merge into one, by `merge_count`'s rule.

    With no rows left to index: the newest segment starts the merge, and each older one joins
    while it is smaller than SMALL_SEGMENT rows or than pack.GEOMETRIC times those merged.
    """
    found = [ix for ix in ds.describe_indices() if ix.name == name]
    if not found:
        return 0
    rows = {f.fragment_id: f.count_rows() for f in ds.get_fragments()}
    merged, count = 0, 0
    for segment in reversed(found[0].segments):  # newest first, as Lance merges them
        size = sum(rows.get(int(f), 0) for f in segment.fragment_ids)
        if count and size >= SMALL_SEGMENT and size >= pack.GEOMETRIC * merged:
            break
        merged += size
        count += 1
    return count


def fold(table: LanceTable, names: tuple[str, ...]) -> int:
    """Index the rows appended since the last fold (the caller holds the write lock).

    Returns the rows folded in. The segments a fold merged cover several fragments
    afterwards; the next pack rewrites those together (funes.storage.pack._plan).
    """
    ds = table.dataset()
    plans: dict[int, list[str]] = {}
    fresh = 0
    for name in names:
        count, new = merge_count(ds, name)
        if new:
            plans.setdefault(count, []).append(name)
            fresh = max(fresh, new)
    for count, group in sorted(plans.items()):
        table.dataset().optimize.optimize_indices(num_indices_to_merge=count, index_names=group)
    return fresh


@dataclass(frozen=True)
class Upkeep:
    """What one round of background maintenance did."""

    packed: pack.PackResult | None
    folded: int  # unindexed rows folded into the full-text and id indexes


def _sum(a: pack.PackResult | None, b: pack.PackResult | None) -> pack.PackResult | None:
    if a is None or b is None:
        return a or b
    tables = set(a.packed) | set(b.packed)
    return pack.PackResult({t: a.packed.get(t, 0) + b.packed.get(t, 0) for t in tables},
                           {**a.fragments, **b.fragments}, a.seconds + b.seconds)


def fold_due(repo: Repository, current: IndexState) -> bool:
    """Whether the rows the indexes do not cover cost recall enough to be folded in now.

    Once FOLD_AFTER of them, or `pack.threshold` fragments of them, are searched flat (each
    fragment costs a flat search on every recall). Fewer are searched flat until then.
    """
    return current.fts and current.id_index and current.unindexed_rows > 0 and (
        current.unindexed_rows >= FOLD_AFTER
        or current.unindexed_fragments >= pack.threshold(repo) > 0)


def maintain(repo: Repository) -> Upkeep:
    """Background upkeep after new rows, like `git gc --auto`; cheap when nothing is due.

    Packs the tables when they reach `pack.threshold` fragments (funes.storage.pack), builds
    the search indexes when they are missing, and folds appended rows into them once
    FOLD_AFTER of them, or `pack.threshold` fragments of them, are searched flat (each costs
    a flat search on every recall), then packs the fragments of the segments that fold
    covers, and caches the scan's text of new fragments in a memory scanned before
    (funes.retrieval.scantext). Each step costs about the rows it handles, not the memory's
    size. Never waits for the lock: a busy memory is maintained next time. For the hook
    worker and the end of `funes index`, never for a recall.
    """
    current = state(repo)
    # the fold before the pack: the fragments it indexes are then packed with the segments it
    # merged, once, rather than once as a tail and again after the fold
    due = fold_due(repo, current)
    packed = None if due else pack.auto(repo)
    folded = 0
    if not (current.fts and current.id_index) and current.unindexed_rows:
        # built here rather than by the first recall, which would wait for it
        with contextlib.suppress(RepositoryBusyError):
            ensure(repo, lock_timeout=0)
        return Upkeep(packed, 0)
    if due:
        try:
            with repo.writing(0):
                folded = fold(repo.chunks, CHUNK_INDEXES)
        except RepositoryBusyError:
            return Upkeep(packed, 0)
        packed = _sum(packed, pack.auto(repo))
    scantext.refresh(repo)  # new or packed fragments' text, before a scan needs it
    return Upkeep(packed, folded)
