"""The distribution scenarios, run against both remote kinds (a directory and the Hub)."""

from __future__ import annotations

import socket
from dataclasses import replace

import pyarrow as pa
import pytest

from funes import api
from funes.errors import DivergedError, RemoteError
from funes.model.objects import ModelStamp, Tombstone
from funes.remotes import sync
from funes.remotes.base import NonFastForwardError
from funes.storage.repo import ModelMismatchError, Repository, now_iso
from tests.builders import make_batch, vector_table
from tests.remotes.conftest import World, visible


def _tombstone(*ids: str) -> Tombstone:
    return Tombstone(tuple(sorted(ids)), "forget in test", "Test <t@example.org>", now_iso())


def test_push_clone_pull_round_trip(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 20), "index: a1")
    first = api.push(a)
    assert not first.up_to_date and first.created and first.commits == 1
    assert world.remote_head() == a.head()
    assert a.refs.read("refs/remotes/origin/main") == a.head()  # type: ignore[arg-type]

    b = world.clone("b")
    assert b.head() == a.head()
    assert visible(b) == visible(a) and len(visible(b)) == 20
    assert b.config.get("remote.origin.url") == world.url
    assert b.config.get("branch.main.remote") == "origin"
    assert api.fsck(b).ok

    a.commit_chunks(make_batch(20, 5), "index: a2")
    api.push(a)
    pulled = api.pull(b)
    assert pulled.merge.kind == "fast-forward" and b.head() == a.head()
    assert len(visible(b)) == 25 and api.fsck(b).ok


def test_nothing_new_pushes_and_pulls_nothing(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 10), "index")
    api.push(a)
    b = world.clone("b")
    before = world.remote_head()
    if world.hub:
        commits = len(world.hub.history("org/mem"))
        world.hub.clear_requests()
    again = api.push(a)
    assert again.up_to_date and world.remote_head() == before
    pulled = api.pull(b)
    assert pulled.merge.kind == "up-to-date"
    assert (pulled.fetch.objects, pulled.fetch.files) == (0, 0)
    if world.hub:
        assert len(world.hub.history("org/mem")) == commits  # no Hub commit
        assert world.hub.count(route="commit") == 0
        assert world.hub.downloads() == []  # the pull downloaded nothing
        # one small request each: the push and the pull read the refs and stopped there
        assert [r.route for r in world.hub.requests] == ["refs", "refs"]


def test_non_fast_forward_is_refused_then_pull_merges(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 10), "index: base")
    api.push(a)
    b = world.clone("b")
    a.commit_chunks(make_batch(10, 5), "index: a")
    b.commit_chunks(make_batch(100, 5, session="s2"), "index: b")
    api.push(a)
    with pytest.raises(NonFastForwardError) as refused:
        api.push(b)
    assert refused.value.exit_code == 4 and "fetch first" in refused.value.message
    assert world.remote_head() == a.head()

    pulled = api.pull(b)
    assert pulled.merge.kind == "merge"
    merge = b.head_commit()
    assert merge is not None and len(merge.parents) == 2 and merge.manifests == ()
    assert merge.chunk_count == 20 == len(visible(b))
    api.push(b)
    assert api.pull(a).merge.kind == "fast-forward"
    assert visible(a) == visible(b)
    assert api.fsck(a).ok and api.fsck(b).ok


def test_merge_is_a_set_union_and_tombstones_win_on_both_sides(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 20), "index: base")
    api.push(a)
    b = world.clone("b")
    ids = [c.id for c in make_batch(0, 40)]
    # Both machines index chunks 25..29 independently (same transcript, same ids).
    a.commit_chunks(make_batch(20, 10), "index: a", tombstones=[_tombstone(ids[5])])
    b.commit_chunks(make_batch(25, 10), "index: b", tombstones=[_tombstone(ids[7], ids[22])])
    api.push(a)
    result = api.pull(b).merge
    assert result.kind == "merge"

    seen = visible(b)
    expected = set(ids[:35]) - {ids[5], ids[7], ids[22]}
    assert set(seen) == expected
    assert result.chunk_count == len(expected) == b.head_commit().chunk_count  # type: ignore[union-attr]
    rows = b.chunks.dataset().to_table(columns=["id"]).column("id").to_pylist()
    assert len(rows) > len(set(rows))  # 25..29 are physically there twice; readers dedup
    assert b.stats().chunks == len(expected)
    # A tombstoned chunk does not come back when it is indexed again after the merge.
    again = b.commit_chunks(make_batch(5, 1), "index: again")
    assert again.added == 0

    api.push(b)
    api.pull(a)
    assert set(visible(a)) == expected
    assert a.head_commit().chunk_count == len(expected)  # type: ignore[union-attr]
    assert api.fsck(a).ok and api.fsck(b).ok


def test_merge_of_any_two_commits_and_model_stamps(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 4), "index: base")
    api.push(a)
    b = world.clone("b")
    x = ModelStamp("model-x", "a" * 64, 4)
    y = ModelStamp("model-y", "b" * 64, 4)
    def vectors(start: int, n: int) -> pa.Table:
        return vector_table(make_batch(start, n), [[0.5, 0.5, 0.5, 0.5]] * n)

    a.commit_chunks([], "embed: a", model=x, vectors=vectors(0, 4))
    b.commit_chunks([], "embed: b", model=y, vectors=vectors(0, 4))
    api.push(a)
    api.fetch(b)
    with pytest.raises(ModelMismatchError) as mismatch:
        api.merge(b, "origin/main")
    assert "model-x" in str(mismatch.value) and "model-y" in str(mismatch.value)

    # A third machine with no vectors of its own takes A's through a clone: no re-embedding.
    c = world.clone("c")
    assert c.vectors.exists() and c.vectors.dataset().count_rows() == 4
    assert c.model_stamp() == x
    c.commit_chunks(make_batch(50, 2), "index: c")
    assert api.merge(c, "origin/main").kind == "up-to-date"
    assert api.fsck(c).ok


def test_compare_and_swap_race_has_exactly_one_winner(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 5), "index: base")
    api.push(a)
    b = world.clone("b")
    a.commit_chunks(make_batch(5, 5), "index: a")
    b.commit_chunks(make_batch(100, 5, session="s2"), "index: b")

    # B reads the remote, then A pushes before B's push lands.
    remote_b = sync.configured_remote(b, "origin")
    stale = remote_b.state()
    api.push(a)
    remote_b.state = lambda: stale  # type: ignore[method-assign]
    with pytest.raises(DivergedError) as lost:
        sync.push(b, remote_b, "main")
    assert lost.value.exit_code == 4
    assert world.remote_head() == a.head()
    assert b.refs.read("refs/remotes/origin/main") != b.head()  # type: ignore[arg-type]
    assert api.fsck(b).ok


def test_force_push_overwrites(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 5), "index: a")
    api.push(a)
    b = world.machine("b")
    b.commit_chunks(make_batch(100, 5, session="s2"), "index: unrelated")
    with pytest.raises(NonFastForwardError):
        api.push(b)
    forced = api.push(b, force=True)
    assert forced.forced and world.remote_head() == b.head()
    c = world.clone("c")
    assert set(visible(c)) == set(visible(b))


def test_pull_into_an_unrelated_memory_unions_both(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 5), "index: a")
    api.push(a)
    b = world.machine("b")
    b.commit_chunks(make_batch(100, 5, session="s2"), "index: b")
    assert api.pull(b).merge.kind == "merge"
    assert len(visible(b)) == 10 and api.fsck(b).ok


def test_clone_global_and_failed_clone_leaves_nothing(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 3), "index")
    api.push(a)
    result = api.clone(world.settings, world.url, is_global=True)
    assert result.path == world.settings.home
    glob = Repository.open(world.settings.home, world.settings)
    assert glob.is_global and len(visible(glob)) == 3

    missing = world.url + "-missing" if world.kind == "dir" else "hf://datasets/org/missing"
    with pytest.raises(RemoteError) as failed:
        api.clone(replace(world.settings, cwd=world.tmp), missing, "gone")
    assert failed.value.exit_code == 5
    assert not (world.tmp / "gone").exists()


def test_remote_recall_without_clone(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 6), "index")
    api.push(a)
    url = world.url if world.kind == "hf" else f"file://{world.url}"
    repo = api.open_remote_memory(world.settings, url)
    # ownership follows the remote's owner: the user's own directory, but a Hub namespace
    # (`org`) the token's whoami does not list (tests/remotes/test_ownership.py)
    assert api.owned(repo) == (world.kind == "dir")
    assert set(visible(repo)) == set(visible(a))
    assert api.memory_label(repo) in ("org/mem", url)
    a.commit_chunks(make_batch(6, 2), "index more")
    api.push(a)
    if world.hub:
        world.hub.clear_requests()
    again = api.open_remote_memory(world.settings, url)
    assert again.path == repo.path and len(visible(again)) == 8
    if world.hub:
        world.hub.clear_requests()
        api.open_remote_memory(world.settings, url)
        assert [r.route for r in world.hub.requests] == ["refs"]  # warm: one small request


def test_hostname_is_recorded_in_merge_commits(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 2), "index")
    api.push(a)
    b = world.machine("b")
    b.commit_chunks(make_batch(10, 2), "index")
    api.pull(b)
    head = b.head_commit()
    assert head is not None and head.host == socket.gethostname()
    assert head.message == "merge origin/main into main"


def test_a_pulled_memory_gets_the_ann_index_embed_would_build(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Vectors that arrive by clone or pull are indexed like embedded ones (no exact scans)."""
    import numpy as np

    from funes.retrieval import indexes

    a = world.machine("a")
    chunks = make_batch(0, 600)
    a.commit_chunks(chunks, "index")
    vecs = np.random.default_rng(3).normal(size=(600, 8))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    a.commit_chunks([], "embed", model=ModelStamp("m", "c" * 64, 8),
                    vectors=vector_table(chunks, vecs.tolist()))
    api.push(a)
    monkeypatch.setattr(indexes, "ANN_MIN_ROWS", 10_000)
    b = world.clone("b")
    assert indexes.vector_index_state(b) == (False, 600)  # small: exact search is right
    monkeypatch.setattr(indexes, "ANN_MIN_ROWS", 500)
    c = world.clone("c")
    assert indexes.vector_index_state(c) == (True, 0)
    api.pull(b)  # up to date, but the memory is now past the threshold
    assert indexes.vector_index_state(b)[0]
