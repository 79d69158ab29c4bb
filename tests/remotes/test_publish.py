"""Name what you publish: tags that travel, reading a memory at a tag, `push --public`."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from funes import api
from funes.errors import RemoteError, UsageError
from funes.remotes import sync as remote_sync
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk
from tests.remotes.conftest import REPO_ID, World, visible
from tests.security.conftest import AWS_KEY
from tests.support.hubserver import HubServer


def test_tags_travel_and_pin_what_is_read(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 4), "index: release")
    released = api.tag_create(a, "v1")
    assert [t.name for t in api.tag_list(a)] == ["v1"]
    with pytest.raises(UsageError, match="already exists"):
        api.tag_create(a, "v1")
    api.push(a)
    a.commit_chunks([make_chunk(50, text="after the release")], "index: later")
    api.push(a)

    # fetch brings the tag; the tag names the released commit on every machine
    b = world.machine("b")
    api.pull(b)
    assert {t.name: t.commit for t in api.tag_list(b)} == {"v1": released.commit}
    assert b.resolve("v1") == released.commit

    # clone at the tag, and read at the tag without cloning (a path takes no tag: file://)
    url = world.url if world.kind == "hf" else f"file://{world.url}"
    at_tag = api.clone(replace(world.settings, cwd=world.tmp), f"{url}@v1", "at-v1")
    assert at_tag.head == released.commit
    pinned = Repository.open(at_tag.path, world.settings)
    assert len(visible(pinned)) == 4
    choice = api.choose_memory(world.settings, f"{url}@v1")
    assert choice.repo.head() == released.commit and choice.label.endswith("@v1")
    assert len(visible(choice.repo)) == 4
    assert len(visible(api.open_remote_memory(world.settings, url))) == 5
    with pytest.raises(RemoteError, match="no tag"):
        api.open_remote_memory(world.settings, f"{url}@v9")


def test_a_tag_on_an_already_pushed_commit_is_pushed_alone(world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 2), "index")
    api.push(a)
    api.tag_create(a, "v2")
    result = api.push(a)
    assert not result.up_to_date  # the tag had to travel
    b = world.machine("b")
    api.fetch(b)
    assert [t.name for t in api.tag_list(b)] == ["v2"]
    assert api.push(a).up_to_date  # and only once


def test_push_public_scans_everything_then_asks(hub_world: World, hub: HubServer) -> None:
    a = hub_world.machine("a")
    a.commit_chunks(make_batch(0, 6), "index")
    seen: list[api.PublishCheck] = []

    def decline(check: api.PublishCheck) -> bool:
        seen.append(check)
        return False

    result = api.publish(a, confirm=decline)
    assert not result.public and hub.repo_exists(REPO_ID)
    assert seen[0].scanned == 6 and seen[0].commits == 1
    assert _private(hub)
    assert api.publish(a, confirm=lambda check: True).public
    assert not _private(hub)


def test_push_public_refuses_a_remote_that_holds_a_secret(hub_world: World,
                                                          hub: HubServer) -> None:
    a = hub_world.machine("a")
    a.commit_chunks([*make_batch(0, 3), make_chunk(9, text=f"key {AWS_KEY}")], "index")
    # an older funes (no gate) pushed it: the secret is on the remote already
    remote_sync.push(a, remote_sync.configured_remote(a, "origin"), "main", scanners=[])
    with pytest.raises(api.PublishRefusedError, match="still look secret"):
        api.publish(a, confirm=lambda check: True)
    assert _private(hub)


def test_push_public_cli_asks_or_takes_yes(hub_world: World, hub: HubServer, run: Any,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    a = hub_world.machine("a")
    a.commit_chunks(make_batch(0, 2), "index")
    monkeypatch.chdir(a.path.parent)
    out = run("push", "--public")
    assert out.exit_code == 2 and "--yes" in out.stderr  # no terminal to ask on
    assert _private(hub)
    out = run("push", "--public", "--yes")
    assert out.exit_code == 0, out.stderr
    assert "is public now" in out.stdout and not _private(hub)


def test_push_public_needs_the_hub(world: World) -> None:
    if world.kind == "hf":
        pytest.skip("the directory case")
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 2), "index")
    with pytest.raises(UsageError, match="only a Hub memory"):
        api.publish(a, confirm=lambda check: True)


def _private(hub: HubServer) -> bool:
    from huggingface_hub import HfApi

    info = HfApi(endpoint=hub.endpoint, token=hub.write_token).dataset_info(REPO_ID)
    return bool(info.private)


def test_the_card_says_how_to_use_the_memory_with_funes(hub_world: World,
                                                        hub: HubServer) -> None:
    from funes import __version__

    a = hub_world.machine("a")
    a.commit_chunks(make_batch(0, 3), "index")
    api.push(a)
    card = hub.read_file(REPO_ID, "README.md").decode()
    for usage in ("funes recall \"", f"--memory {REPO_ID}", f"funes clone {REPO_ID}",
                  f"funes add claude {REPO_ID}", f"funes {__version__}",
                  f'lance.dataset("hf://datasets/{REPO_ID}/chunks.lance")', "| chunks | 3 |"):
        assert usage in card, usage
    assert "github.com" not in card  # no other project's repository
