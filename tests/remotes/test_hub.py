"""The Hub remote against the loopback Hub: efficiency from the request log, faults, the Lance
view of a pushed memory, dataset cards, and public memories (docs/design.md §1 flow 4)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from huggingface_hub import HfApi

from funes import api
from funes.errors import DivergedError, RemoteError
from funes.model.objects import Manifest
from funes.remotes.base import RemoteDataError, RemoteNotFoundError
from funes.storage.repo import Repository
from tests.builders import make_batch
from tests.remotes.conftest import REPO_ID, World, visible
from tests.support.hubserver import HubServer


def _pushed(world: World, n: int = 20) -> Repository:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, n), "index: base")
    api.push(a)
    return a


def _new_data_files(repo: Repository) -> set[str]:
    head = repo.head_commit()
    assert head is not None
    return {
        f"chunks.lance/{f.path}"
        for mid in head.manifests
        for frag in repo.objects.manifest(mid).fragments
        for f in frag.files
    }


# -- efficiency ----------------------------------------------------------------------------


def test_new_repos_are_private_and_carry_a_card(hub_world: World, hub: HubServer) -> None:
    _pushed(hub_world)
    info = HfApi(endpoint=hub.endpoint, token=hub.write_token).dataset_info(REPO_ID)
    assert info.private is True
    card = hub.read_file(REPO_ID, "README.md").decode()
    for tag in ("- funes", "- agent-memory", "- lance"):
        assert tag in card
    assert "| chunks | 20 |" in card


def test_incremental_push_uploads_only_new_fragments_and_metadata(
    hub_world: World, hub: HubServer
) -> None:
    a = _pushed(hub_world, 200)
    old_files = {p for p in hub.files(REPO_ID) if p.startswith("chunks.lance/data/")}
    a.commit_chunks(make_batch(1000, 10), "index: ten more")
    new_files = _new_data_files(a)
    hub.clear_requests()
    api.push(a)

    [commit] = hub.commit_requests()
    head = hub.history(REPO_ID)[0]
    moved = set(head.transferred)
    assert {p for p in moved if p.startswith("chunks.lance/data/")} == new_files
    assert not moved & old_files
    others = moved - new_files
    assert all(
        p.startswith(("objects/", "chunks.lance/_versions/", "chunks.lance/_transactions/"))
        or p in ("README.md", "refs/heads/main")
        for p in others
    ), sorted(others)
    files = hub.files(REPO_ID)
    new_bytes = sum(files[p].size for p in new_files)
    meta_bytes = sum(files[p].size for p in others)
    assert meta_bytes < 16_000  # commit, manifest, Lance manifest/txn/hint, card, ref
    sent = sum(r.request_bytes for r in hub.requests)
    # what travelled ≈ the new data: base64 inline files cost 4/3, requests add JSON framing
    assert sent < 2 * (new_bytes + meta_bytes) + 8_000, (sent, new_bytes, meta_bytes)
    assert commit.status == 200


def test_pushed_dataset_reads_with_lance_over_hf(hub_world: World, hub: HubServer) -> None:
    import lance

    a = _pushed(hub_world, 30)
    a.commit_chunks(make_batch(30, 5), "index: more")
    api.push(a)
    revision = hub.head(REPO_ID)
    ds = lance.dataset(
        f"hf://datasets/{REPO_ID}/chunks.lance",
        storage_options={"hf_token": hub.write_token, "hf_revision": revision},
    )
    rows = {r["id"]: r for r in ds.to_table().to_pylist()}
    assert rows == visible(a)


# -- faults --------------------------------------------------------------------------------


def test_dropped_connection_mid_push_leaves_both_sides_intact(
    hub_world: World, hub: HubServer
) -> None:
    a = _pushed(hub_world)
    base = a.head()
    a.commit_chunks(make_batch(100, 7), "index: more")
    fault = hub.drop_connection(route="commit")  # mid-body: the Hub applies nothing
    with pytest.raises(RemoteError) as failed:
        api.push(a)
    assert fault.fired == 1 and failed.value.exit_code == 5
    assert hub_world.remote_head() == base
    assert a.refs.read("refs/remotes/origin/main") == base  # type: ignore[arg-type]
    assert api.fsck(a).ok and len(visible(a)) == 27

    done = api.push(a)
    assert not done.up_to_date and hub_world.remote_head() == a.head()
    assert set(visible(hub_world.clone("b"))) == set(visible(a))


def test_lost_response_after_the_commit_landed(hub_world: World, hub: HubServer) -> None:
    a = _pushed(hub_world)
    a.commit_chunks(make_batch(100, 3), "index: more")
    hub.drop_connection(route="commit", after_handling=True)
    with pytest.raises(RemoteError):
        api.push(a)
    assert hub_world.remote_head() == a.head()  # it landed; the client did not hear
    assert api.push(a).up_to_date
    assert a.refs.read("refs/remotes/origin/main") == a.head()  # type: ignore[arg-type]
    a.commit_chunks(make_batch(200, 3), "index: after")  # and the mirror is rebuilt
    api.push(a)
    assert set(visible(hub_world.clone("b"))) == set(visible(a))


def test_412_from_the_hub_is_a_non_fast_forward(hub_world: World, hub: HubServer) -> None:
    a = _pushed(hub_world)
    a.commit_chunks(make_batch(100, 3), "index: more")
    hub.force_commit_conflict()
    with pytest.raises(DivergedError) as refused:
        api.push(a)
    assert refused.value.exit_code == 4 and "fetch first" in refused.value.message
    api.push(a)
    assert hub_world.remote_head() == a.head()


def _corrupted_clone(world: World, hub: HubServer, path: str) -> RemoteError:
    fault = hub.corrupt_download(path, repo=REPO_ID)
    with pytest.raises(RemoteDataError) as refused:
        world.clone("b")
    assert fault.fired == 1
    assert not (world.tmp / "b").exists()  # a failed clone leaves nothing
    return refused.value


def test_object_whose_bytes_do_not_match_its_id_is_refused(
    hub_world: World, hub: HubServer
) -> None:
    a = _pushed(hub_world)
    head = a.head()
    assert head is not None
    error = _corrupted_clone(hub_world, hub, f"objects/{head[:2]}/{head[2:]}")
    assert head in error.message and error.exit_code == 5


def test_fragment_file_that_does_not_match_its_manifest_is_refused(
    hub_world: World, hub: HubServer
) -> None:
    a = _pushed(hub_world)
    [path] = _new_data_files(a)
    error = _corrupted_clone(hub_world, hub, path)
    assert "does not match its manifest" in error.message


def test_private_memory_needs_a_token(
    hub_world: World, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _pushed(hub_world)
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(RemoteNotFoundError) as refused:
        hub_world.clone("b")
    assert refused.value.exit_code == 5 and "org/mem" in refused.value.message


# -- cards ---------------------------------------------------------------------------------


def test_card_stats_refresh_and_hand_written_cards_stay(hub_world: World, hub: HubServer) -> None:
    a = _pushed(hub_world, 5)
    a.commit_chunks(make_batch(5, 5), "index: more")
    api.push(a)
    card = hub.read_file(REPO_ID, "README.md").decode()
    assert "| chunks | 10 |" in card and card.count("funes:stats:start") == 1

    mine = "---\ntags:\n- mine\n---\n# Our team memory\n\nWritten by hand.\n"
    hub.commit_files(REPO_ID, {"README.md": mine.encode()})
    a.commit_chunks(make_batch(10, 5), "index: more")
    api.push(a)
    assert hub.read_file(REPO_ID, "README.md").decode() == mine


# -- flow 4: a public memory ----------------------------------------------------------------


def test_public_memory_anonymous_clone_and_one_off_recall(
    hub_world: World,
    hub: HubServer,
    monkeypatch: pytest.MonkeyPatch,
    run: Callable[..., object],
) -> None:
    a = hub_world.machine("a")
    a.commit_chunks(
        make_batch(0, 12, text="the streaming parser was dropped for the chunked reader"),
        "index",
    )
    api.push(a)
    hub.set_private(REPO_ID, False)
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("FUNES_SERVE", "off")
    hub.clear_requests()

    c = hub_world.clone("anon")
    assert set(visible(c)) == set(visible(a))
    assert hub.requests and all("authorization" not in r.headers for r in hub.requests)

    result = run("--format", "agent", "recall", "streaming parser", "--memory", REPO_ID)
    assert result.exit_code == 0, result.stderr  # type: ignore[attr-defined]
    out = result.stdout  # type: ignore[attr-defined]
    assert "# untrusted memory org/mem: not yours" in out
    assert "--memory org/mem" in out and "untrusted" in out.splitlines()[1]

    hub.clear_requests()
    repo = api.open_remote_memory(hub_world.settings, REPO_ID)
    assert not api.owned(repo) and api.memory_label(repo) == REPO_ID
    assert [r.route for r in hub.requests] == ["refs"]

    # Unreachable: say so, and read the last copy.
    hub.fail_with(503, route="refs", times=None)
    result = run("--format", "agent", "recall", "streaming parser", "--memory", REPO_ID)
    assert result.exit_code == 0  # type: ignore[attr-defined]
    assert "org/mem" in result.stderr and "cached" in result.stderr  # type: ignore[attr-defined]
    assert "untrusted" in result.stdout  # type: ignore[attr-defined]


def test_unreachable_remote_memory_without_any_copy_exits_5(
    hub_world: World, hub: HubServer, run: Callable[..., object], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # no local memory to fall back to
    hub.fail_with(503, route="refs", times=None)
    result = run("status", "--memory", "org/elsewhere")
    assert result.exit_code == 5  # type: ignore[attr-defined]
    assert "org/elsewhere" in result.stderr  # type: ignore[attr-defined]


# -- names that try to escape --------------------------------------------------------------


def test_remote_manifest_naming_a_path_outside_is_refused(
    hub_world: World, hub: HubServer, tmp_path: Path
) -> None:
    from funes.model.objects import encode

    a = _pushed(hub_world, 3)
    head = a.head_commit()
    assert head is not None
    manifest = a.objects.manifest(head.manifests[0])
    frag = manifest.fragments[0]
    for n, evil in enumerate(("../../../outside.lance", "/tmp/outside.lance", "data/..\\x.lance")):
        meta = {**frag.meta, "files": [{**frag.meta["files"][0], "path": evil}]}
        files = (type(frag.files[0])(evil, frag.files[0].size, frag.files[0].sha256),)
        bad = Manifest("chunks", manifest.ids, (type(frag)(meta, files),))
        mid, raw = encode(bad)
        commit = type(head)(**{**head.__dict__, "manifests": (mid,), "message": evil})
        cid, craw = encode(commit)
        hub.commit_files(
            REPO_ID,
            {
                f"objects/{mid[:2]}/{mid[2:]}": raw,
                f"objects/{cid[:2]}/{cid[2:]}": craw,
                "refs/heads/main": f"{cid}\n".encode(),
            },
        )
        with pytest.raises(RemoteDataError) as refused:
            hub_world.clone(f"b{n}")
        assert "refusing fragment file name" in refused.value.message
    assert not list(tmp_path.parent.rglob("outside.lance"))
    assert not Path("/tmp/outside.lance").exists()


def test_remote_ref_that_is_not_a_commit_id_is_refused(hub_world: World, hub: HubServer) -> None:
    _pushed(hub_world, 3)
    hub.commit_files(REPO_ID, {"refs/heads/main": b"../../etc/passwd\n"})
    with pytest.raises(RemoteDataError):
        hub_world.clone("b")
