"""Half-width vectors: new memories store float16 (`vectors16`), memories written before keep
float32 (`vectors`), and the two meet through pulls, pushes and clones without a re-embed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from funes import api
from funes.ingest import backlog
from funes.model.objects import ModelStamp
from funes.retrieval.recall import Options, vector_search
from funes.storage.repo import Repository
from funes.storage.tables import LanceTable, vector_schema
from funes.storage.transfer import TransferError, verify_fragments
from tests.builders import make_batch, vector_table
from tests.remotes.conftest import World

DIM = 384
STAMP = ModelStamp("m", "0" * 64, DIM)


def _unit(n: int, seed: int) -> np.ndarray:
    vecs = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def _embed(repo: Repository, start: int, vecs: np.ndarray) -> None:
    batch = make_batch(start, len(vecs))
    repo.commit_chunks(batch, f"index {start}")
    repo.commit_chunks([], f"embed {start}", model=STAMP, vectors=vector_table(batch, vecs))


def _legacy(repo: Repository) -> Repository:
    """A memory as a funes before half-width vectors left it: format 1, a float32 table."""
    (repo.path / "FORMAT").write_text("funes-repository 1\n")
    repo.table("vectors").create(vector_schema(DIM, "vectors"))
    return repo


def _format(repo: Repository) -> str:
    return (repo.path / "FORMAT").read_text().strip()


def _top(repo: Repository, vec: np.ndarray) -> str:
    return vector_search(repo, vec, Options(candidates=3), None)[0][0]


def _data_bytes(table: LanceTable) -> int:
    return sum(p.stat().st_size for p in (table.path / "data").iterdir())


def test_a_new_memory_stores_half_width_vectors_and_an_old_one_keeps_its_width(
    settings: object, tmp_path: Path
) -> None:
    new = Repository.init(tmp_path / "new" / ".funes", settings)  # type: ignore[arg-type]
    old = _legacy(Repository.init(tmp_path / "old" / ".funes", settings))  # type: ignore[arg-type]
    vecs = _unit(200, 1)
    _embed(new, 0, vecs)
    _embed(old, 0, vecs)

    assert new.vectors.name == "vectors16" and not new.table("vectors").exists()
    assert new.vectors.dataset().schema.field("vector").type == pa.list_(pa.float16(), DIM)
    assert _format(new) == "funes-repository 2"
    assert old.vectors.name == "vectors" and not old.table("vectors16").exists()
    assert old.vectors.dataset().schema.field("vector").type == pa.list_(pa.float32(), DIM)
    assert _format(old) == "funes-repository 1"  # a format-1 funes still reads it
    manifests = [new.objects.manifest(m).table for _, c in new.walk() for m in c.manifests]
    assert "vectors16" in manifests and "vectors" not in manifests

    assert _data_bytes(new.vectors) < 0.6 * _data_bytes(old.vectors)
    for i in (0, 57, 199):  # the same nearest neighbour at either width
        assert _top(new, vecs[i]) == _top(old, vecs[i]) == make_batch(i, 1)[0].id


def test_histories_of_both_widths_merge_push_and_clone_without_a_re_embed(world: World) -> None:
    a = _legacy(world.machine("a"))
    a_vecs, b_vecs = _unit(6, 2), _unit(5, 3)
    _embed(a, 0, a_vecs)
    api.push(a)  # the remote now holds a float32 table, as one pushed before this change

    b = world.machine("b")  # a new memory with its own history, joining the shared one
    _embed(b, 100, b_vecs)
    merged = api.pull(b).merge
    assert merged is not None and merged.kind == "merge"
    assert b.table("vectors").exists() and b.vectors.name == "vectors16"
    # A's vectors were carried into the home table at merge time: nothing waits, nothing
    # was embedded again, and a search by one of A's vectors finds A's chunk.
    assert backlog.backlog(b).waiting == 0
    assert b.vectors.dataset().count_rows() == 11
    assert _top(b, a_vecs[4]) == make_batch(4, 1)[0].id
    assert _top(b, b_vecs[2]) == make_batch(102, 1)[0].id

    more = _unit(4, 5)  # A, still on float32, adds more before it sees B's work
    _embed(a, 10, more)
    api.push(a)
    assert api.pull(b).merge.kind == "merge"  # type: ignore[union-attr]
    assert backlog.backlog(b).waiting == 0 and b.vectors.dataset().count_rows() == 15
    assert _top(b, more[3]) == make_batch(13, 1)[0].id
    assert backlog.adopt(b) == 0  # nothing left to carry

    api.push(b)
    api.pull(a)  # fast-forward: A gains the float16 table and switches to it
    assert a.vectors.name == "vectors16" and _format(a) == "funes-repository 2"
    assert backlog.backlog(a).waiting == 0
    assert _top(a, b_vecs[0]) == make_batch(100, 1)[0].id
    assert _top(a, a_vecs[1]) == make_batch(1, 1)[0].id

    c = world.clone("c")
    assert c.table("vectors").exists() and c.table("vectors16").exists()
    assert _top(c, a_vecs[5]) == make_batch(5, 1)[0].id
    assert backlog.backlog(c).waiting == 0
    for repo in (a, b, c):
        assert api.fsck(repo).ok


def test_a_fragment_of_the_other_width_is_refused(tmp_path: Path) -> None:
    """A float32 file named as a `vectors16` fragment would be misread by Lance: refused."""
    batch = make_batch(0, 3)
    table = LanceTable(tmp_path / "vectors16.lance")
    rows = vector_table(batch, _unit(3, 4)).cast(vector_schema(DIM, "vectors"))
    records = table.write_fragments(rows)
    paths = {f.path: table.path / f.path for r in records for f in r.files}
    ids = sorted(c.id for c in batch)
    with pytest.raises(TransferError, match="another schema"):
        verify_fragments("vectors16", ids, records, paths, "test", STAMP)
    verify_fragments("vectors", ids, records, paths, "test", STAMP)  # its own table takes it


def test_a_drain_carries_over_what_a_merge_left_behind(settings: object, tmp_path: Path) -> None:
    """Should the merge's own re-encoding not have run (killed between the two), the next
    drain does it first: no chunk is embedded again by the model."""
    from funes.inference.fake import FakeEmbedder

    fake = FakeEmbedder(dim=DIM)
    stamp = backlog.stamp_of(fake)
    repo = _legacy(Repository.init(tmp_path / "m" / ".funes", settings))  # type: ignore[arg-type]
    batch = make_batch(0, 7)
    repo.commit_chunks(batch, "index")
    repo.commit_chunks([], "embed", model=stamp,
                       vectors=vector_table(batch, _unit(7, 6), model=stamp.name))
    repo.table("vectors16").create(vector_schema(DIM, "vectors16"))  # the merge's table
    assert repo.vectors.name == "vectors16" and backlog.backlog(repo).waiting == 7

    done = backlog.drain(repo, fake)
    assert done.embedded == 0  # the model ran for none of them
    assert backlog.backlog(repo).waiting == 0 and repo.vectors.dataset().count_rows() == 7
