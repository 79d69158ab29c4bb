"""Encrypted remotes: only ciphertext leaves; a clone with the key recalls normally; a missing
or wrong key is a clear error and nothing is stored."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from funes import api
from funes.api import security as sec
from funes.errors import RemoteError
from funes.storage.repo import Repository
from tests.builders import make_chunk
from tests.remotes.conftest import World, visible

WORDS = [f"zebrafinch{i}marzipan" for i in range(6)]


def _remote_bytes(world: World) -> bytes:
    if world.hub is not None:
        return world.hub.uploaded_bytes()
    return b"".join(p.read_bytes() for p in Path(world.url).rglob("*") if p.is_file())


def _encrypted_machine(world: World) -> Repository:
    a = Repository.init(world.tmp / "a" / ".funes", world.settings)
    api.remote_add(a, "origin", world.url, encrypt=True)
    chunks = [make_chunk(i, session="enc", text=f"{w} passage {i}") for i, w in enumerate(WORDS)]
    a.commit_chunks(chunks, "index: secret project")
    return a


def test_only_ciphertext_leaves_and_a_keyed_clone_recalls(world: World) -> None:
    a = _encrypted_machine(world)
    result = api.push(a)
    assert not result.up_to_date
    sent = _remote_bytes(world)
    assert sent
    for i, word in enumerate(WORDS):
        assert word.encode() not in sent and f"passage {i}".encode() not in sent
    if world.hub is None:
        assert not (Path(world.url) / "chunks.lance").exists()  # not Lance-readable
    # A teammate with the key (another FUNES_HOME) clones and recalls normally.
    line = sec.memory_key_export(a, "origin")
    bob_home = world.tmp / "home-bob"
    bob_home.mkdir()
    bob = replace(world.settings, home=bob_home, cwd=world.tmp)
    sec.memory_key_import(bob, line)
    cloned = api.clone(bob, world.url, "b")
    b = Repository.open(cloned.path, bob)
    assert len(visible(b)) == len(WORDS)
    assert b.config.get("remote.origin.encrypt") == "true"
    hits = api.recall(bob, b, WORDS[3], vector=False, rerank=False, neighbors=0).hits
    assert hits and hits[0].row["text"].startswith(WORDS[3])
    assert api.fsck(b).ok
    # Round trip: Bob's push is encrypted too, and A pulls it.
    b.commit_chunks([make_chunk(50, session="bob", text="bobsecretword quince")], "index: b")
    api.push(b)
    assert b"bobsecretword" not in _remote_bytes(world)
    api.pull(a)
    assert len(visible(a)) == len(WORDS) + 1


def test_missing_or_wrong_key_is_a_clear_error_and_stores_nothing(world: World) -> None:
    a = _encrypted_machine(world)
    api.push(a)
    # No key: clone refuses and leaves nothing behind.
    eve_home = world.tmp / "home-eve"
    eve_home.mkdir()
    eve = replace(world.settings, home=eve_home, cwd=world.tmp)
    with pytest.raises(RemoteError, match="encrypted"):
        api.clone(eve, world.url, "e")
    assert not (world.tmp / "e").exists()
    # A wrong key: a clear error, nothing stored.
    from funes.remotes import crypt

    wrong = crypt.PREFIX + " " + "A" * 43 + "= " + world.url
    sec.memory_key_import(eve, wrong)
    with pytest.raises(RemoteError, match="wrong memory key"):
        api.clone(eve, world.url, "e")
    assert not (world.tmp / "e").exists()
    # A memory configured as encrypted without a key refuses to push (nothing sent).
    c = Repository.init(world.tmp / "c" / ".funes", eve)
    api.remote_add(c, "origin", world.url)
    c.config.set("remote.origin.encrypt", "true")
    shutil.rmtree(eve_home / "keys")
    with pytest.raises(RemoteError, match="no key"):
        api.push(c)
