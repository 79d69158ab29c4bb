"""The loopback Hub server, driven by the real huggingface_hub client (and pylance's hf://)."""

from __future__ import annotations

import hashlib
import os
import threading
import urllib.error
import urllib.request
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import (
    CommitOperationAdd,
    CommitOperationDelete,
    HfApi,
    hf_hub_download,
    snapshot_download,
)
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from tests.support.hubserver import COMMIT_CONFLICT_MESSAGE, HubServer, client_env, git_blob_oid

# huggingface_hub's LFS upload passes a file object as `data=`, which httpx2 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")

REPO = "org/mem"
# Binary content travels as LFS (preupload sees a NUL byte), text inline: cover both paths.
TEXT = b"remember: the build needs python 3.11\n"
BINARY = bytes(range(256)) * 1200  # ~300 kB, multipart with the fixture's 64 kB chunks


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    with HubServer(tmp_path / "hub", multipart_chunk_size=64 * 1024) as server:
        client_env(monkeypatch, tmp_path / "hf-home", server)
        yield server


@pytest.fixture
def api(hub: HubServer) -> HfApi:
    return HfApi(endpoint=hub.endpoint, token=hub.write_token)


def _seed(api: HfApi, files: dict[str, bytes], *, private: bool = True, parent: str | None = None):
    api.create_repo(REPO, repo_type="dataset", private=private, exist_ok=True)
    return api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[CommitOperationAdd(path, data) for path, data in files.items()],
        commit_message="seed",
        parent_commit=parent,
    )


def _commit(api: HfApi, path: str, data: bytes, parent: str | None = None):
    return api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[CommitOperationAdd(path, data)],
        commit_message=f"add {path}",
        parent_commit=parent,
    )


# ---- repos and commits ------------------------------------------------------------------


def test_create_private_dataset_and_commit_once(hub: HubServer, api: HfApi) -> None:
    url = api.create_repo(REPO, repo_type="dataset", private=True)
    assert (url.repo_id, url.repo_type) == (REPO, "dataset")
    assert api.create_repo(REPO, repo_type="dataset", exist_ok=True).repo_id == REPO
    with pytest.raises(HfHubHTTPError) as exc:
        api.create_repo(REPO, repo_type="dataset")
    assert exc.value.response.status_code == 409

    info = api.dataset_info(REPO)
    assert info.private is True
    assert api.list_repo_files(REPO, repo_type="dataset") == [".gitattributes"]

    commit = api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[
            CommitOperationAdd("notes/a.txt", TEXT),
            CommitOperationAdd("blobs/b.bin", BINARY),
        ],
        commit_message="first push",
    )
    assert hub.count(route="commit") == 1
    assert hub.head(REPO) == commit.oid == api.dataset_info(REPO).sha
    assert hub.count(route="lfs-part") == -(-len(BINARY) // (64 * 1024))  # multipart LFS

    files = hub.files(REPO)
    assert files["notes/a.txt"].lfs is False
    assert files["notes/a.txt"].git_oid == git_blob_oid(TEXT)
    assert files["blobs/b.bin"].lfs is True
    assert files["blobs/b.bin"].sha256 == hashlib.sha256(BINARY).hexdigest()
    assert hub.read_file(REPO, "blobs/b.bin") == BINARY
    [head, initial] = hub.history(REPO)
    assert head.parents == (initial.id,)
    assert set(head.transferred) == set(head.changed) == {"notes/a.txt", "blobs/b.bin"}

    tree = {e.path: e for e in api.list_repo_tree(REPO, repo_type="dataset", recursive=True)}
    assert tree["blobs/b.bin"].lfs.sha256 == files["blobs/b.bin"].sha256
    assert sorted(tree) == [".gitattributes", "blobs", "blobs/b.bin", "notes", "notes/a.txt"]


def test_unchanged_push_makes_no_commit(hub: HubServer, api: HfApi) -> None:
    first = _seed(api, {"a.txt": TEXT, "b.bin": BINARY})
    commits_before = hub.count(route="commit")

    again = _seed(api, {"a.txt": TEXT, "b.bin": BINARY})

    assert again.oid == first.oid
    assert hub.count(route="commit") == commits_before  # the client skipped the commit
    assert hub.head(REPO) == first.oid


def test_commit_without_changes_is_detectable(hub: HubServer, api: HfApi) -> None:
    first = _seed(api, {"a.txt": TEXT})
    # Deleting and re-adding the same bytes defeats the client's no-op filter: the Hub records a
    # commit whose tree equals its parent's.
    second = api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[CommitOperationDelete("a.txt"), CommitOperationAdd("a.txt", TEXT)],
        commit_message="churn",
    )
    assert second.oid != first.oid
    assert hub.history(REPO)[0].changed == ()
    assert hub.history(REPO)[1].changed == ("a.txt",)


def test_incremental_push_uploads_only_new_files(hub: HubServer, api: HfApi) -> None:
    first = _seed(api, {"a.txt": TEXT, "b.bin": BINARY})
    hub.clear_requests()
    new_blob = b"\0" + os.urandom(1000)  # a NUL in the 512-byte sample makes it LFS
    api.create_commit(
        REPO,
        repo_type="dataset",
        operations=[
            CommitOperationAdd("a.txt", TEXT),
            CommitOperationAdd("b.bin", BINARY),
            CommitOperationAdd("c.bin", new_blob),
        ],
        commit_message="second push",
        parent_commit=first.oid,
    )
    assert hub.history(REPO)[0].transferred == ("c.bin",)
    sent = hub.uploaded_bytes()
    assert new_blob in sent
    assert BINARY[512:2048] not in sent  # the unchanged LFS file was not re-sent...
    assert hub.count(route="lfs-upload") == 1 and hub.count(route="lfs-part") == 0
    # ...but preupload samples carry the first 512 bytes of every file offered, changed or not.
    assert TEXT in sent and TEXT not in hub.find(route="commit")[-1].body


def test_uploaded_bytes_sees_inline_content(hub: HubServer, api: HfApi) -> None:
    _seed(api, {"secret.txt": b"token=s3cr3t-value\n"})
    assert b"s3cr3t-value" in hub.uploaded_bytes()  # decoded from the base64 NDJSON line


def test_parent_commit_race_has_exactly_one_winner(hub: HubServer, api: HfApi) -> None:
    base = _seed(api, {"a.txt": TEXT})
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def push(name: str) -> None:
        barrier.wait()
        try:
            results[name] = _commit(api, f"{name}.txt", name.encode(), parent=base.oid)
        except HfHubHTTPError as exc:
            results[name] = exc

    threads = [threading.Thread(target=push, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    errors = [r for r in results.values() if isinstance(r, HfHubHTTPError)]
    winners = [r for r in results.values() if not isinstance(r, HfHubHTTPError)]
    assert len(errors) == 1 and len(winners) == 1
    assert errors[0].response.status_code == 412
    assert COMMIT_CONFLICT_MESSAGE in str(errors[0])
    assert hub.head(REPO) == winners[0].oid  # type: ignore[attr-defined]
    assert len(hub.history(REPO)) == 3


def test_forced_conflict_and_stale_parent(hub: HubServer, api: HfApi) -> None:
    base = _seed(api, {"a.txt": TEXT})
    fault = hub.force_commit_conflict()
    with pytest.raises(HfHubHTTPError) as exc:
        _commit(api, "b.txt", b"b", parent=base.oid)
    assert exc.value.response.status_code == 412 and fault.fired == 1
    assert hub.head(REPO) == base.oid

    moved = _commit(api, "b.txt", b"b", parent=base.oid)
    with pytest.raises(HfHubHTTPError) as exc:
        _commit(api, "c.txt", b"c", parent=base.oid)
    assert exc.value.response.status_code == 412
    assert hub.head(REPO) == moved.oid


def test_dropped_connection_mid_commit_leaves_ref_unchanged(hub: HubServer, api: HfApi) -> None:
    base = _seed(api, {"a.txt": TEXT})
    fault = hub.drop_connection(route="commit")
    with pytest.raises(httpx2.TransportError):
        _commit(api, "b.txt", b"b" * 5000, parent=base.oid)
    assert fault.fired == 1
    assert hub.head(REPO) == base.oid
    assert hub.find(route="commit")[-1].status is None

    retry = _commit(api, "b.txt", b"b" * 5000, parent=base.oid)
    assert hub.head(REPO) == retry.oid


def test_lost_commit_response_moves_the_ref(hub: HubServer, api: HfApi) -> None:
    base = _seed(api, {"a.txt": TEXT})
    hub.drop_connection(route="commit", after_handling=True)
    with pytest.raises(httpx2.TransportError):
        _commit(api, "b.txt", b"b", parent=base.oid)
    landed = hub.head(REPO)
    assert landed != base.oid and hub.history(REPO)[0].changed == ("b.txt",)
    # Retrying the same content is a client-side no-op that returns the landed commit...
    assert _commit(api, "b.txt", b"b", parent=base.oid).oid == landed
    # ...while anything else still based on the old parent loses the compare-and-swap.
    with pytest.raises(HfHubHTTPError) as exc:
        _commit(api, "c.txt", b"c", parent=base.oid)
    assert exc.value.response.status_code == 412


def test_xet_upload_is_refused_with_a_hint(
    hub: HubServer, api: HfApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    api.create_repo(REPO, repo_type="dataset")
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    # hf_xet fetches its token itself and reports a bare ConnectionError; the log says why.
    with pytest.raises(ConnectionError, match="501"):
        _commit(api, "b.bin", BINARY)
    [refused] = hub.find(route="xet-token")
    assert refused.status == 501 and hub.count(route="commit") == 0


def test_read_token_cannot_write(hub: HubServer) -> None:
    HfApi(endpoint=hub.endpoint, token=hub.write_token).create_repo(REPO, repo_type="dataset")
    reader = HfApi(endpoint=hub.endpoint, token=hub.read_token)
    with pytest.raises(HfHubHTTPError) as exc:
        _commit(reader, "a.txt", TEXT)
    assert exc.value.response.status_code == 403


# ---- access -----------------------------------------------------------------------------


def test_anonymous_read_private_fails_public_works(hub: HubServer, api: HfApi) -> None:
    _seed(api, {"a.txt": TEXT}, private=True)
    anonymous = HfApi(endpoint=hub.endpoint, token=False)
    stranger = HfApi(endpoint=hub.endpoint, token=hub.other_token)

    with pytest.raises(RepositoryNotFoundError):
        anonymous.dataset_info(REPO)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(REPO, "a.txt", repo_type="dataset", endpoint=hub.endpoint, token=False)
    with pytest.raises(RepositoryNotFoundError):
        stranger.dataset_info(REPO)
    assert hub.find(route="repo-info", status=401) and hub.find(route="repo-info", status=404)

    api.update_repo_settings(REPO, repo_type="dataset", private=False)
    assert anonymous.dataset_info(REPO).private is False
    path = hf_hub_download(REPO, "a.txt", repo_type="dataset", endpoint=hub.endpoint, token=False)
    assert Path(path).read_bytes() == TEXT
    with pytest.raises(HfHubHTTPError) as exc:  # public still means read-only for others
        _commit(stranger, "b.txt", b"b")
    assert exc.value.response.status_code == 403


def test_delete_repo(hub: HubServer, api: HfApi) -> None:
    _seed(api, {"a.txt": TEXT})
    api.delete_repo(REPO, repo_type="dataset")
    assert not hub.repo_exists(REPO)
    with pytest.raises(RepositoryNotFoundError):
        api.dataset_info(REPO)
    api.delete_repo(REPO, repo_type="dataset", missing_ok=True)


# ---- downloads --------------------------------------------------------------------------


def test_hf_hub_download_and_snapshot_download_agree(
    hub: HubServer, api: HfApi, tmp_path: Path
) -> None:
    commit = _seed(api, {"notes/a.txt": TEXT, "blobs/b.bin": BINARY})
    hub.clear_requests()
    kw = {"repo_type": "dataset", "endpoint": hub.endpoint, "token": hub.write_token}

    single = {
        p: Path(hf_hub_download(REPO, p, **kw)).read_bytes() for p in ("notes/a.txt", "blobs/b.bin")
    }
    assert single == {"notes/a.txt": TEXT, "blobs/b.bin": BINARY}
    assert sorted(hub.downloaded_files()) == ["blobs/b.bin", "notes/a.txt"]
    assert hub.count(route="cdn") == 1  # the LFS file came through the redirect

    local = Path(snapshot_download(REPO, local_dir=tmp_path / "clone", **kw))
    assert (local / "notes/a.txt").read_bytes() == TEXT
    assert (local / "blobs/b.bin").read_bytes() == BINARY

    cached = Path(snapshot_download(REPO, **kw))
    assert cached.name == commit.oid
    hub.clear_requests()
    snapshot_download(REPO, **kw)  # warm: one revision lookup, no file traffic
    assert [r.route for r in hub.requests] == ["repo-info"]
    assert hub.downloads() == []


def test_pinned_revision_download(hub: HubServer, api: HfApi) -> None:
    old = _seed(api, {"a.txt": b"v1"})
    _commit(api, "a.txt", b"v2", parent=old.oid)
    kw = {"repo_type": "dataset", "endpoint": hub.endpoint, "token": hub.write_token}
    assert Path(hf_hub_download(REPO, "a.txt", revision=old.oid, **kw)).read_bytes() == b"v1"
    assert Path(hf_hub_download(REPO, "a.txt", **kw)).read_bytes() == b"v2"


def test_corrupted_download(hub: HubServer, api: HfApi) -> None:
    _seed(api, {"b.bin": BINARY})
    fault = hub.corrupt_download("b.bin")
    kw = {"repo_type": "dataset", "endpoint": hub.endpoint, "token": hub.write_token}
    bad = Path(hf_hub_download(REPO, "b.bin", **kw)).read_bytes()
    assert fault.fired == 1 and bad != BINARY and len(bad) == len(BINARY)
    good = Path(hf_hub_download(REPO, "b.bin", force_download=True, **kw)).read_bytes()
    assert good == BINARY


def test_range_and_head_requests(hub: HubServer, api: HfApi) -> None:
    commit = _seed(api, {"a.txt": TEXT})
    url = f"{hub.endpoint}/datasets/{REPO}/resolve/main/a.txt"
    auth = {"Authorization": f"Bearer {hub.write_token}"}

    with urllib.request.urlopen(
        urllib.request.Request(url, headers={**auth, "Range": "bytes=2-5"})
    ) as r:
        assert r.status == 206 and r.read() == TEXT[2:6]
        assert r.headers["Content-Range"] == f"bytes 2-5/{len(TEXT)}"
    head = urllib.request.Request(url, headers=auth, method="HEAD")
    with urllib.request.urlopen(head) as r:
        assert r.headers["X-Repo-Commit"] == commit.oid
        assert r.headers["ETag"] == f'"{git_blob_oid(TEXT)}"'
        assert int(r.headers["Content-Length"]) == len(TEXT)
    missing = urllib.request.Request(url.replace("a.txt", "nope.txt"), headers=auth)
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(missing)
    assert exc.value.code == 404 and exc.value.headers["X-Error-Code"] == "EntryNotFound"


def test_tree_pagination(hub: HubServer, api: HfApi) -> None:
    hub.tree_page_size = 2
    _seed(api, {f"f{i}.txt": b"x%d" % i for i in range(5)})
    hub.clear_requests()
    assert len(api.list_repo_files(REPO, repo_type="dataset")) == 6
    assert hub.count(route="tree") == 3


def test_model_repo_and_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = tmp_path / "hub"
    with HubServer(storage) as first:
        client_env(monkeypatch, tmp_path / "home", first)
        api = HfApi(endpoint=first.endpoint, token=first.write_token)
        api.create_repo("tester/model", private=True)
        api.upload_file(path_or_fileobj=TEXT, path_in_repo="README.txt", repo_id="tester/model")
    with HubServer(storage) as second:
        assert second.read_file("tester/model", "README.txt", repo_type="model") == TEXT
        path = hf_hub_download(
            "tester/model", "README.txt", endpoint=second.endpoint, token=second.write_token
        )
        assert Path(path).read_bytes() == TEXT


# ---- pylance hf:// ----------------------------------------------------------------------


def test_lance_reads_hf_url_at_pinned_revision(
    hub: HubServer, api: HfApi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lance
    import pyarrow as pa

    local = tmp_path / "chunks.lance"
    rows = pa.table({"id": list(range(200)), "text": [f"chunk {i}" for i in range(200)]})
    lance.write_dataset(rows, local)

    def push(parent: str | None) -> str:
        ops = [
            CommitOperationAdd(f"chunks.lance/{p.relative_to(local).as_posix()}", str(p))
            for p in sorted(local.rglob("*"))
            if p.is_file()
        ]
        return api.create_commit(
            REPO, repo_type="dataset", operations=ops, commit_message="push", parent_commit=parent
        ).oid

    api.create_repo(REPO, repo_type="dataset", private=True)
    v1 = push(None)
    lance.write_dataset(rows.slice(0, 10), local, mode="append")
    v2 = push(v1)

    url = f"hf://datasets/{REPO}/chunks.lance"
    token = {"hf_token": hub.read_token}
    hub.clear_requests()
    pinned = lance.dataset(url, storage_options={**token, "hf_revision": v1})
    assert pinned.to_table().sort_by("id").equals(rows)
    assert lance.dataset(url, storage_options={**token, "hf_revision": v2}).count_rows() == 210
    assert {r.route for r in hub.requests} >= {"tree", "resolve"}
    assert all(f"/{v1}/" in r.path or f"/{v2}/" in r.path for r in hub.find(route="tree"))
    cdn = hub.find(listener="cdn")
    assert cdn and all("authorization" not in r.headers for r in cdn)

    monkeypatch.setenv("HF_TOKEN", hub.read_token)  # the token can also come from the env
    assert lance.dataset(url).count_rows() == 210

    # Anonymous read of a private repo fails; pylance retries the 401 a few times first (~2 s).
    monkeypatch.delenv("HF_TOKEN")
    hub.clear_requests()
    with pytest.raises(ValueError, match="PermissionDenied"):
        lance.dataset(url)
    assert {(r.route, r.status) for r in hub.requests} == {("tree", 401)}

    hub.set_private(REPO, False)
    assert lance.dataset(url).count_rows() == 210


def test_super_squash_and_permanent_lfs_deletion(hub: HubServer, api: HfApi) -> None:
    from huggingface_hub.errors import RevisionNotFoundError

    first = _seed(api, {"a.bin": BINARY, "notes.txt": TEXT}).oid
    other = bytes(reversed(BINARY))
    api.create_commit(REPO, repo_type="dataset", commit_message="replace",
                      operations=[CommitOperationDelete("a.bin"),
                                  CommitOperationAdd("b.bin", other)])
    assert len(api.list_repo_commits(REPO, repo_type="dataset")) == 3
    with pytest.raises(HfHubHTTPError):  # only a branch can be squashed
        api.super_squash_history(REPO, branch=first, repo_type="dataset")
    api.super_squash_history(REPO, repo_type="dataset", commit_message="squashed")
    (only,) = api.list_repo_commits(REPO, repo_type="dataset")
    assert only.title == "squashed" and not api.list_repo_commits(REPO, repo_type="dataset",
                                                                  revision=only.commit_id)[1:]
    assert sorted(api.list_repo_files(REPO, repo_type="dataset")) == [
        ".gitattributes", "b.bin", "notes.txt"]
    with pytest.raises(RevisionNotFoundError):
        api.dataset_info(REPO, revision=first)
    # The squash drops the commits, not yet the LFS object only they held.
    lfs = {f.file_oid: f for f in api.list_lfs_files(REPO, repo_type="dataset")}
    gone = hashlib.sha256(BINARY).hexdigest()
    assert set(lfs) == {gone, hashlib.sha256(other).hexdigest()}
    assert (hub.storage_dir / "objects" / gone[:2] / gone[2:]).exists()
    api.permanently_delete_lfs_files(REPO, [lfs[gone]], repo_type="dataset")
    assert [f.file_oid for f in api.list_lfs_files(REPO, repo_type="dataset")] == [
        hashlib.sha256(other).hexdigest()]
    assert not (hub.storage_dir / "objects" / gone[:2] / gone[2:]).exists()
    assert hf_hub_download(REPO, "b.bin", repo_type="dataset", endpoint=hub.endpoint,
                           token=hub.write_token) and api.file_exists(REPO, "b.bin",
                                                                      repo_type="dataset")
