"""Rust-funes memories in funes: read-only copies behind `--memory`, and `funes import`.

A memory the Rust funes wrote (funes.remotes.foreign says how it is recognised and read) is
never written to. funes reads it by converting it:

* **`--memory org/name` or `--memory PATH`** (and `recall`, `get`, `ask`, the MCP tools):
  the rows become a private, read-only funes memory under `$FUNES_HOME/cache/remotes/`, the
  same place and the same rules as the copies of funes remotes (funes.api.memory): never a
  write target, and never the user's (`core.owned = false`, whoever owns the source: the
  Rust funes signs nothing, so nothing vouches for its rows). The copy remembers the source
  revision it was made from (`FOREIGN`), so a later command whose source has not moved reads
  the copy as it is: on the Hub one small request (the head commit), no file; a directory, a
  `stat`. When the source moves, only its new files are fetched and the copy is made again
  (so rows the owner scrubbed disappear here too).
* **Vectors.** The memory's stamped model (`embedding_model`) is mapped to a catalogued model
  (funes.inference.catalog.known_by_repo); when that model is installed here with the same
  width, the rows' vectors are kept and queries are embedded with it. Otherwise the copy is
  lexical (BM25 over an index built in the copy) and every recall says so in its signals;
  once the model is installed, the next command remakes the copy with vectors.
* **`funes import SOURCE`** (and `funes clone` of such a memory) adds the rows to a funes
  memory as ordinary chunks: our content-addressed ids (so importing twice adds nothing), the
  provenance columns mapped as docs/import.md lists, the Rust id kept in `source`. Vectors are
  kept when the memory's model is the one the target memory embeds with; otherwise the
  chunks wait in the embedding backlog like freshly indexed ones.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from funes._env import Settings
from funes.errors import UsageError
from funes.inference import registry
from funes.inference.catalog import DEFAULT_EMBED_MODEL, known_by_repo
from funes.ingest.redact import rules_version
from funes.ingest.represent import label, representation
from funes.ingest.scrub import note_ingest
from funes.model.chunk import Chunk
from funes.model.objects import ExclusionRule, ModelStamp
from funes.remotes import foreign
from funes.remotes.base import (
    RemoteNotFoundError,
    RemoteSpec,
    RemoteState,
    cache_root,
    parse_url,
)
from funes.retrieval import indexes
from funes.storage.atomic import write_atomic
from funes.storage.exclusions import active as active_exclusions
from funes.storage.exclusions import rule_matches
from funes.storage.lock import WriteLock
from funes.storage.repo import Repository
from funes.storage.tables import VECTOR_FILTER_COLUMNS, chunks_to_arrow, vector_schema

if TYPE_CHECKING:
    import pyarrow as pa

    from funes.remotes.hf import HubRemote

__all__ = ["FOREIGN_FILE", "ImportResult", "foreign_signal", "hub_copy", "import_memory",
           "is_foreign_copy", "local_copy"]

#: Present in a read-only copy made from a Rust-funes memory: where from, at which revision.
FOREIGN_FILE: Final = "FOREIGN"
#: Bumped when the conversion changes: copies made by another one are made again.
CONVERSION: Final = 1
_FOREIGN_MAX: Final = 1 << 16

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True)
class ImportResult:
    """What one import of a Rust-funes memory did."""

    source: str
    path: Path
    rows: int
    added: int
    duplicates: int
    vectors: int
    #: The memory's stamped embedding model, as it names it.
    model: str | None
    #: Why its vectors were not kept (None when they were, or it has none).
    lexical: str | None
    skipped: dict[str, int] = field(default_factory=dict)
    commits: int = 0
    #: Secrets replaced by `[REDACTED:<kind>]` on the way in, by kind.
    redactions: dict[str, int] = field(default_factory=dict)


# -- the vectors -------------------------------------------------------------------------------


def _installed_stamp(settings: Settings, rust_model: str | None,
                     dim: int | None) -> tuple[ModelStamp | None, str | None]:
    """(stamp, None) when the memory's model runs here at its width; else (None, why not)."""
    if rust_model is None or dim is None:
        return None, None
    name = known_by_repo(rust_model)
    if name is None:
        return None, f"{rust_model}, a model funes cannot run"
    entry = registry.installed(settings, name)
    if entry is None or entry[0].kind != "embed" or entry[0].dim != dim:
        return None, f"{rust_model}, not installed here (`funes models install {name}`)"
    info = entry[0]
    return ModelStamp(info.name, info.sha256, info.dim), None


def _target_stamp(settings: Settings, repo: Repository, rust_model: str | None,
                  dim: int | None) -> tuple[ModelStamp | None, str | None]:
    """The stamp under which `repo` can keep the memory's vectors, else (None, why not).

    They are the vectors `funes embed` would compute only when the model is the one the
    memory embeds with (its stamp, else `model.embed`) and it embeds the chunk text alone.
    """
    stamp, why = _installed_stamp(settings, rust_model, dim)
    wait = "the imported chunks wait for `funes embed`"
    if stamp is None:
        return None, f"its vectors are {why}; {wait}" if why else None
    have = repo.model_stamp()
    wanted = have.name if have else (repo.config.get("model.embed") or DEFAULT_EMBED_MODEL)
    if have is not None and (have.sha256, have.dim) != (stamp.sha256, stamp.dim):
        wanted = str(have)
    if wanted != stamp.name or representation(repo) != 1:
        return None, f"its vectors are {rust_model}, this memory embeds with {wanted}; {wait}"
    return stamp, None


def _vector_table(rows: Sequence[foreign.ForeignRow], model: str, dim: int,
                  table: str) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    meta = chunks_to_arrow([r.chunk for r in rows])
    flat = np.stack([np.asarray(r.vector, dtype=np.float32) for r in rows]).reshape(-1)
    columns: dict[str, Any] = {
        "id": meta.column("id"),
        "model": pa.array([model] * len(rows), pa.string()),
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(flat, pa.float32()), dim),
    }
    for name in VECTOR_FILTER_COLUMNS:
        columns[name] = meta.column(name)
    return pa.Table.from_pydict(columns).cast(vector_schema(dim, table))


# -- converting --------------------------------------------------------------------------------


def _convert(settings: Settings, repo: Repository, table: foreign.ForeignTable, source: str,
             stamp: ModelStamp | None, progress: Progress,
             lock_timeout: float | None = None) -> ImportResult:
    """Commit every accepted row of `table` into `repo`, in bounded batches."""
    skipped: collections.Counter[str] = collections.Counter()
    redactions: collections.Counter[str] = collections.Counter()
    rows = added = duplicates = vectors = commits = 0
    tag = label(stamp.name, 1) if stamp else ""
    note_ingest(repo)  # which redaction rules the stored chunks met (funes status)
    rules = active_exclusions(repo).rules  # what the user keeps out of this memory (docs/cli.md)
    for batch in foreign.read_rows(table, vectors=stamp is not None, skipped=skipped,
                                   redactions=redactions):
        rows += len(batch)
        if rules:
            kept = [r for r in batch if not _excluded(r.chunk, rules)]
            skipped["excluded"] += len(batch) - len(kept)
            batch = kept
        progress(rows, table.rows, source)
        vec = None
        if stamp is not None:
            repo.ids.sync(repo, repo.head())
            known = repo.ids.known(r.chunk.id for r in batch)
            fresh: dict[str, foreign.ForeignRow] = {}
            for r in batch:
                if r.vector is not None and r.chunk.id not in known:
                    fresh.setdefault(r.chunk.id, r)
            if fresh:
                vec = _vector_table(list(fresh.values()), tag, stamp.dim, repo.vectors.name)
        done = repo.commit_chunks(
            [r.chunk for r in batch], lambda n: f"import: {source} (Rust funes), {n} chunks",
            model=stamp if vec is not None else None, vectors=vec, lock_timeout=lock_timeout,
            redaction=rules_version())
        added += done.added
        duplicates += done.duplicates
        vectors += vec.num_rows if vec is not None else 0
        commits += done.commit is not None
    indexes.ensure(repo)
    if vectors:
        indexes.ensure_vectors(repo)
    return ImportResult(source, repo.path, rows, added, duplicates, vectors, table.model,
                        None, dict(skipped), commits, dict(redactions))


def _excluded(chunk: Chunk, rules: Sequence[ExclusionRule]) -> bool:
    return any(rule_matches(rule, harness=chunk.harness, session=chunk.session_id,
                            workdir=chunk.workdir, project=chunk.project, source=chunk.source)
               for rule in rules)


def import_memory(settings: Settings, repo: Repository, source: str | None = None, *,
                  progress: Progress | None = None) -> ImportResult:
    """`funes import [SOURCE]`: add a Rust-funes memory's rows to `repo` (see the module doc).

    `repo` is a memory the caller may write (the CLI opens it with `writable_memory`).

    SOURCE is `org/name` (or `hf://datasets/…`) on the Hub, or a directory: a memory root, its
    `chunks.lance`, or the Rust funes' local memory (`$FUNES_HOME/memory`, the default).

    Raises:
        UsageError: SOURCE is not a Rust-funes memory (a funes memory is cloned or pulled).
        RemoteError: the Hub cannot be reached or sends something refused.
    """
    show = progress or (lambda *_: None)
    text = source or str(settings.home / "memory")
    spec = parse_url(text, settings.cwd)
    table, display = _source_table(settings, spec, show)
    stamp, why = _target_stamp(settings, repo, table.model, table.dim)
    result = _convert(settings, repo, table, display, stamp, show)
    return dataclasses.replace(result, lexical=why)


def _source_table(settings: Settings, spec: RemoteSpec,
                  progress: Progress) -> tuple[foreign.ForeignTable, str]:
    """The opened table of a Rust-funes memory at `spec`, fetched first from the Hub."""
    from funes.remotes.sync import open_remote

    if spec.kind == "dir":
        assert spec.path is not None
        table = foreign.table_in(spec.path)
        if table is None and not spec.path.exists():
            raise UsageError(f"no Rust-funes memory at {spec.display}",
                             hint="name one: `funes import ORG/NAME`, or a directory holding "
                             "its chunks.lance")
        if table is None:
            raise UsageError(f"{spec.display} is not a Rust-funes memory (no chunks.lance, or "
                             "a funes memory)",
                             hint="a funes memory is cloned (`funes clone`) or pulled, not "
                             "imported")
        return foreign.open_table(table), spec.display
    root = cache_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    name = spec.cache_name
    with WriteLock(root / f"{name}.lock", timeout=60):
        work = root / f"{name}.import"
        remote = open_remote(spec, "origin", settings, work)
        state = remote.state()
        if not state.exists or state.branches or not foreign.is_rust_listing(
                _hub(remote).files(state)):
            raise UsageError(f"{spec.display} is not a Rust-funes memory",
                             hint="a funes memory is cloned (`funes clone`) or pulled")
        path, version = foreign.fetch_hub_table(_hub(remote), state, _mirror(root, name),
                                                progress)
        return foreign.open_table(path, version), spec.display


def _hub(remote: object) -> HubRemote:
    from funes.remotes.hf import HubRemote

    if not isinstance(remote, HubRemote):  # an encryption key for a Rust memory's URL
        raise UsageError("a Rust-funes memory is never encrypted: remove the key for its URL")
    return remote


def _mirror(root: Path, name: str) -> Path:
    """Where the files of a Hub memory are kept between reads (immutable, fetched once)."""
    return root / f"{name}.rust"


# -- the read-only copies ----------------------------------------------------------------------


def _read_marker(path: Path) -> dict[str, Any]:
    try:
        with (path / FOREIGN_FILE).open("rb") as fh:
            raw = fh.read(_FOREIGN_MAX + 1)
        value = json.loads(raw) if len(raw) <= _FOREIGN_MAX else {}
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def is_foreign_copy(repo: Repository) -> bool:
    """Whether `repo` is a read-only copy made from a Rust-funes memory."""
    return bool(_read_marker(repo.path))


def foreign_signal(repo: Repository) -> str | None:
    """The signal recall reports on a copy whose vectors are not usable here, else None."""
    signal = _read_marker(repo.path).get("signal")
    return signal if isinstance(signal, str) else None


def _current(cache: Path, settings: Settings, revision: str) -> bool:
    """Whether the copy at `cache` is of `revision` and as good as it can be made now."""
    marker = _read_marker(cache)
    if marker.get("revision") != revision or marker.get("conversion") != CONVERSION:
        return False
    if not (cache / "FORMAT").is_file():
        return False
    wants = marker.get("wants")  # lexical for want of a model: remake once it is installed
    return not (isinstance(wants, str) and registry.installed(settings, wants) is not None)


def _remake(settings: Settings, cache: Path, spec: RemoteSpec, table: foreign.ForeignTable,
            revision: str) -> Repository:
    """Make the copy at `cache` again from `table`, then put it in place of the old one."""
    building = cache.with_name(cache.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    repo = Repository.init(building, settings)
    repo.config.set("core.owned", "false")
    repo.config.set("remote.origin.url", spec.url)
    stamp, why = _installed_stamp(settings, table.model, table.dim)
    signal = f"lexical only: this memory's vectors are {why}" if why else None
    result = _convert(settings, repo, table, spec.display, stamp, lambda *_: None)
    marker = {
        "conversion": CONVERSION, "source": spec.url, "revision": revision,
        "version": table.version, "model": table.model, "rows": result.rows,
        "chunks": result.added, "vectors": result.vectors, "skipped": result.skipped,
        "signal": signal, "wants": known_by_repo(table.model) if why and table.model else None,
    }
    write_atomic(building / FOREIGN_FILE, json.dumps(marker, indent=1).encode())
    old = cache.with_name(cache.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if cache.exists():
        with contextlib.suppress(OSError):  # the Hub's cached head: one request fewer next time
            (cache / "remotes").rename(building / "remotes")
        cache.rename(old)
    building.rename(cache)
    shutil.rmtree(old, ignore_errors=True)
    return Repository.open(cache, settings)


def _no_tags(spec: RemoteSpec, tag: str | None) -> None:
    if tag is not None:
        raise RemoteNotFoundError(f"{spec.display} is a Rust-funes memory: it has no tags",
                                  hint=f"read it as it is: --memory {spec.display}")


def local_copy(settings: Settings, spec: RemoteSpec, tag: str | None) -> Repository:
    """The read-only copy of the Rust-funes memory in the directory `spec` names."""
    _no_tags(spec, tag)
    assert spec.path is not None
    table = foreign.table_in(spec.path)
    if table is None:
        raise RemoteNotFoundError(f"{spec.display}: no Rust-funes memory there")
    root = cache_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    name = spec.cache_name
    cache = root / name
    with WriteLock(root / f"{name}.lock", timeout=60):
        revision = foreign.dir_revision(table)
        if _current(cache, settings, revision):
            return Repository.open(cache, settings)
        return _remake(settings, cache, spec, foreign.open_table(table), revision)


def hub_copy(settings: Settings, repo: Repository, remote: object, state: RemoteState,
             tag: str | None) -> Repository | None:
    """The read-only copy of a Hub memory with no funes refs, if it is the Rust funes'.

    Called by funes.api.memory.open_remote_memory with its cache (`repo`) and the remote's
    state, under the cache's lock. None when the repository is not a Rust-funes memory.
    """
    hub = _hub(remote)
    assert state.revision is not None
    if _current(repo.path, settings, state.revision):
        return repo
    if not foreign.is_rust_listing(hub.files(state)):
        return None
    _no_tags(hub.spec, tag)
    path, version = foreign.fetch_hub_table(hub, state, _mirror(cache_root(settings),
                                                                repo.path.name), _quiet)
    return _remake(settings, repo.path, hub.spec, foreign.open_table(path, version),
                   state.revision)


def _quiet(done: int, total: int, label: str) -> None:
    return None
