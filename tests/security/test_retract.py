"""`funes push --retract`: what tombstones hide is erased from a remote, which stays usable.

Checked on a directory remote and on the loopback Hub, with raw scans of every remote file
(every file every revision the Hub still serves, and the Hub's blob storage itself) for any
16-character window of the forgotten text, before (the control) and after.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.api import security as sec
from funes.errors import DivergedError, UsageError
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk
from tests.remotes.conftest import REPO_ID, World, visible

#: What must leave the remote: long and distinctive, so no other bytes hold a window of it.
SECRET = ("the Zanzibar merger closes on the ninth of Quintember at a price of "
          "forty-two marmalade florins per share, per the board of Oglethorpe & Vance")


def windows(text: str, width: int = 16) -> list[bytes]:
    return sorted({text[i:i + width].encode() for i in range(len(text) - width + 1)})


def holders(blobs: dict[str, bytes], text: str = SECRET) -> list[str]:
    """Which blobs hold any window of `text`."""
    wanted = windows(text)
    return sorted(name for name, data in blobs.items() if any(w in data for w in wanted))


def remote_blobs(world: World) -> dict[str, bytes]:
    """Every file of the remote: on the Hub, every file of every revision it serves, plus
    every blob in its storage directory (what a served revision cannot reach is gone too)."""
    if world.hub is None:
        root = Path(world.url)
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    from huggingface_hub import HfApi

    hub_api = HfApi(endpoint=world.hub.endpoint, token=world.hub.write_token)
    out: dict[str, bytes] = {}
    for commit in hub_api.list_repo_commits(REPO_ID, repo_type="dataset"):
        for path in world.hub.files(REPO_ID, revision=commit.commit_id):
            out[f"{commit.commit_id[:8]}:{path}"] = world.hub.read_file(
                REPO_ID, path, revision=commit.commit_id)
    for blob in (world.hub.storage_dir / "objects").rglob("*"):
        if blob.is_file():
            out[f"storage:{blob.name}"] = blob.read_bytes()
    return out


def _seed(repo: Repository) -> list[str]:
    leak = [make_chunk(50 + i, session="client-x", text=f"{SECRET} (note {i})")
            for i in range(3)]
    repo.commit_chunks(make_batch(0, 10), "index: day 1")
    repo.commit_chunks([*leak, *make_batch(10, 4)], "index: day 2")
    return [c.id for c in leak]


def _open_lance(world: World) -> Any:
    import lance

    if world.hub is None:
        return lance.dataset(str(Path(world.url) / "chunks.lance"))
    return lance.dataset(f"hf://datasets/{REPO_ID}/chunks.lance",
                         storage_options={"hf_token": world.hub.write_token,
                                          "hf_revision": world.hub.head(REPO_ID)})


def test_retract_erases_forgotten_text_and_the_remote_stays_usable(world: World) -> None:
    a = world.machine("a")
    leaked = _seed(a)
    api.push(a)
    b = world.clone("b")
    assert set(leaked) <= set(visible(b))
    sec.forget(a, session="client-x")
    api.push(a)
    # The control: a tombstone hides, it does not erase (the scan can see the text).
    assert holders(remote_blobs(world))
    before_hub = world.hub.head(REPO_ID) if world.hub else None

    seen: list[api.RetractCheck] = []
    result = api.retract(a, confirm=lambda check: seen.append(check) or True)
    assert result.done and seen[0].rows == 3 and seen[0].sessions == 1
    assert seen[0].commits >= 2 and seen[0].files > 0
    if world.hub is not None:
        assert seen[0].hub and seen[0].history >= 3  # initial commit + pushes

    blobs = remote_blobs(world)
    assert blobs and holders(blobs) == []
    ds = _open_lance(world)
    assert ds.count_rows() == 14 and not set(leaked) & set(ds.to_table(columns=["id"])
                                                         .column("id").to_pylist())
    if world.hub is not None:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import RevisionNotFoundError

        hub_api = HfApi(endpoint=world.hub.endpoint, token=world.hub.write_token)
        assert len(list(hub_api.list_repo_commits(REPO_ID, repo_type="dataset"))) == 1
        with pytest.raises(RevisionNotFoundError):
            hub_api.dataset_info(REPO_ID, revision=before_hub)

    # This memory moved onto the rewritten history; nothing it sees changed.
    assert result.adopted is not None and a.head() == world.remote_head()
    assert len(visible(a)) == 14 and api.fsck(a).ok

    # Another machine pulls without error and adopts it: it downloads no old file again.
    pulled = api.pull(b)
    assert pulled.adopted is not None and b.head() == world.remote_head()
    assert len(visible(b)) == 14 and not set(leaked) & set(visible(b))
    assert pulled.fetch.files <= 2  # the rewritten fragments (chunks of day 2), nothing else
    assert api.fsck(b).ok
    for path in b.path.rglob("*"):  # fetched long ago: gc spares only files under an hour old
        os.utime(path, (1_000_000_000, 1_000_000_000))
    sec.gc(b)
    assert holders({str(p): p.read_bytes() for p in b.path.rglob("*") if p.is_file()}) == []

    # A fresh clone finds none of it; life goes on: B pushes, A pulls (a fast-forward).
    c = world.clone("c")
    assert holders({str(p): p.read_bytes() for p in c.path.rglob("*") if p.is_file()}) == []
    assert len(visible(c)) == 14 and api.fsck(c).ok
    b.commit_chunks(make_batch(20, 2), "index: after")
    assert not api.push(b).up_to_date
    merged = api.pull(a)
    assert merged.merge.kind == "fast-forward" and len(visible(a)) == 16
    again = api.retract(a, confirm=lambda check: True)
    assert again.done is False, again.check  # nothing left to erase


def test_retract_asks_and_a_refusal_changes_nothing(world: World) -> None:
    a = world.machine("a")
    _seed(a)
    api.push(a)
    sec.forget(a, session="client-x")
    api.push(a)
    head = world.remote_head()
    declined = api.retract(a, confirm=lambda check: False)
    assert declined.declined and not declined.done
    assert world.remote_head() == head and holders(remote_blobs(world))


def test_retract_refuses_when_the_remote_has_work_this_memory_lacks(world: World) -> None:
    a = world.machine("a")
    _seed(a)
    api.push(a)
    b = world.clone("b")
    b.commit_chunks(make_batch(30, 2), "index: b")
    api.push(b)
    sec.forget(a, session="client-x")
    with pytest.raises(DivergedError, match="fetch first"):
        api.retract(a, confirm=lambda check: True)
    assert holders(remote_blobs(world))  # untouched: nothing of B's work was lost


def test_retract_refuses_an_encrypted_remote(tmp_path: Path, settings: Any) -> None:
    repo = Repository.init(tmp_path / "a" / ".funes", settings)
    api.remote_add(repo, "origin", str(tmp_path / "sealed"), encrypt=True)
    repo.commit_chunks(make_batch(0, 2), "index")
    api.push(repo)
    with pytest.raises(UsageError, match="encrypted"):
        api.retract(repo, confirm=lambda check: True)


def test_push_retract_cli_names_what_is_lost(world: World, run: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    a = world.machine("a")
    _seed(a)
    api.push(a)
    sec.forget(a, session="client-x")
    monkeypatch.chdir(a.path.parent)
    out = run("push", "--retract")
    assert out.exit_code == 2 and "3 chunk row(s) of 1 session(s)" in out.stderr
    assert "--yes" in out.stderr and holders(remote_blobs(world))
    if world.hub is not None:
        assert "squashed" in out.stderr
    out = run("push", "--retract", "--yes")
    assert out.exit_code == 0, out.stderr
    assert "retracted 3 chunk row(s)" in out.stdout and holders(remote_blobs(world)) == []


def test_a_machine_with_work_of_its_own_adopts_the_rewritten_remote(world: World) -> None:
    a = world.machine("a")
    leaked = _seed(a)
    api.push(a)
    b = world.clone("b")
    b.commit_chunks(make_batch(40, 3), "index: b, not pushed yet")
    sec.forget(a, session="client-x")
    assert api.retract(a, confirm=lambda check: True).done
    assert api.fetch(b).rewritten  # a fetch alone notes it; the pull after it adopts
    pulled = api.pull(b)
    assert pulled.adopted is not None and pulled.adopted.rebased == 1
    assert not api.fetch(b).rewritten
    # B's own commit now sits on the images: the old history is not in B's branch any more
    from funes.storage.transfer import ancestors

    history = ancestors(b, b.head())
    replaced = {c.replaces for _, c in b.walk() if c.replaces}
    assert replaced and not replaced & history
    assert len(visible(b)) == 17 and not set(leaked) & set(visible(b))
    pushed = api.push(b)
    assert not pushed.up_to_date and pushed.commits <= 2  # its commit (and the merge), no more
    assert holders(remote_blobs(world)) == []
    api.pull(a)
    assert len(visible(a)) == 17 and api.fsck(a).ok and api.fsck(b).ok


def test_rows_a_push_kept_home_travel_once_their_tombstone_is_lifted(world: World) -> None:
    a = world.machine("a")
    leaked = _seed(a)
    forgot = sec.forget(a, session="client-x").commit
    api.push(a)  # the hidden rows stay home
    assert holders(remote_blobs(world)) == []
    b = world.clone("b")
    assert len(visible(b)) == 14
    assert forgot is not None
    api.unforget(a, forgot)
    api.push(a)
    api.pull(b)
    assert set(leaked) <= set(visible(b)) and len(visible(b)) == 17
    assert api.fsck(b).ok
