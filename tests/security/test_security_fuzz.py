"""Fuzzing what tests/remotes/test_fuzz.py does not: tombstones, links, commit signatures,
encrypted blobs and key lines, and the local records (published.json, collected.json) that
remote data feeds. Malformed input raises a FunesError (or reads as "nothing"), never crashes,
never writes outside the repository."""

from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from funes.errors import FunesError
from funes.model.ids import canonical_json, hash_bytes
from funes.model.objects import Commit, Link, Tombstone, encode
from funes.remotes import crypt
from funes.storage import signing
from funes.storage.transfer import parse_received
from tests.remotes.test_fuzz import (
    _mutate,
    assert_refused_clearly,
    assert_well_formed,
    json_value,
    repository_state,
)

TOMBSTONE = json.loads(
    encode(Tombstone(("a" * 64,), "forget", "T <t@x>", "2026-01-01T00:00:00Z"))[1]
)
LINK = json.loads(encode(Link(
    "b" * 40, "github.com/acme/x", "main", "T <t@x>", "2026-01-01T00:00:00.000Z", "fix",
    ("src/a.py",), (("claude", "s1", "t1"),), None, "2026-01-01T00:00:01.000Z",
))[1])
COMMIT = Commit(parents=(), manifests=(), tombstones=(), model=None, author="T <t@x>",
                host="h", time="2026-01-01T00:00:00.000Z", message="m", chunk_count=0)
KEY = signing.PublicKey(signing.key_id(b"\x01" * 32), b"\x01" * 32, "k")
FIELDS = sorted(set(TOMBSTONE) | set(LINK) | {"signature", "alg", "key", "sig"})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([TOMBSTONE, LINK]),
    st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3),
    json_value,
    st.sampled_from([None, "tombstone", "link", "commit"]),
)
def test_tombstones_and_links_parse_or_refuse(
    base: dict[str, Any], path: list[str], value: Any, kind: str | None
) -> None:
    data = _mutate(base, path, value)
    try:
        raw = canonical_json(data)
    except (TypeError, ValueError):
        return
    try:
        obj = parse_received(hash_bytes(raw), raw, kind, "fuzz")
    except FunesError as exc:
        assert_refused_clearly(exc, "fuzz")
        return
    assert_well_formed(obj, kind)


@settings(max_examples=300, deadline=None)
@given(json_value)
def test_any_signature_value_verifies_to_a_status(value: Any) -> None:
    data = json.loads(encode(COMMIT)[1])
    data["signature"] = value
    try:
        raw = canonical_json(data)
        commit = parse_received(hash_bytes(raw), raw, "commit", "fuzz")
    except (TypeError, ValueError, FunesError):
        return
    assert isinstance(commit, Commit)
    status, _ = signing.verify(commit, {KEY.id: KEY})
    assert status in ("unsigned", "unknown-key", "bad", "malformed")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.booleans())
def test_sealed_blobs_open_or_refuse(raw: bytes, with_magic: bool) -> None:
    blob = crypt.MAGIC + raw if with_magic else raw
    with pytest.raises(FunesError):
        crypt.open_sealed(b"\x02" * 32, "c" * 64, blob, "fuzz")


def _tree(root: Path) -> dict[str, tuple[bool, int, int]]:
    """Every path under `root` (and the entries of its parent), with kind, size and mode."""
    out = {}
    for p in [*root.parent.iterdir(), *root.rglob("*")]:
        info = p.lstat()
        out[str(p)] = (p.is_dir(), info.st_size if p.is_file() else 0, info.st_mode)
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(st.text(max_size=120))
def test_key_lines_parse_or_refuse(tmp_path: Path, text: str) -> None:
    """Any text as a key line, and as the URL of a well-formed one: refused with a FunesError,
    or stored as a key that reads back; either way nothing is written but that key file."""
    import base64

    from funes._env import settings as load

    # Each example starts from an empty directory of its own, as the first one did: keys left
    # by earlier examples would make every scan of the tree longer than the last.
    root = tmp_path / "example"
    shutil.rmtree(root, ignore_errors=True)
    home = root / "home"
    home.mkdir(parents=True)
    cwd = root / "cwd"
    cwd.mkdir()
    cfg = replace(load(), home=home, cwd=cwd)
    key = bytes(range(32))
    well_formed = f"{crypt.PREFIX} {base64.b64encode(key).decode()} {text}"
    before = _tree(root)
    for attempt in (lambda: signing.parse_public(text),
                    lambda: crypt.import_key(cfg, text, "hf://datasets/org/x"),
                    lambda: signing.parse_public(signing.PREFIX + " " + text)):
        with contextlib.suppress(FunesError):
            attempt()
    try:
        target = crypt.import_key(cfg, well_formed)
    except FunesError:
        assert not text.strip(), "a key line with a URL is accepted"
    else:
        assert target == text.strip() and crypt.load_key(cfg, target) == key
    after = _tree(root)
    keys = home / "keys"
    changed = {p for p in after if before.get(p) != after[p]} | (set(before) - set(after))
    assert all(Path(p) == keys or Path(p).is_relative_to(keys) for p in changed), changed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(json_value)
def test_local_records_never_crash(repo: Any, value: Any) -> None:
    from funes.storage import publish
    from funes.storage.gc import load_collected

    path = publish.published_path(repo, "origin")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(value)
    path.write_text(text)
    (repo.path / "collected.json").write_text(text)
    assert isinstance(publish.load_published(repo, "origin"), dict)
    collected = load_collected(repo)
    assert isinstance(collected.files, dict) and isinstance(collected.ids, set)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=0, max_size=120), st.sampled_from(["commit", "ref"]))
def test_fetching_from_a_fuzzed_encrypted_remote_writes_nothing(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes, where: str
) -> None:
    """An encrypted directory remote whose commit blob (or ref) is garbage: pull fails with a
    FunesError and writes nothing outside the local memory."""
    from funes import api
    from funes._env import settings as load
    from funes.storage.repo import Repository
    from tests.builders import make_batch

    base = tmp_path_factory.mktemp("encfuzz")
    home = base / "home"
    home.mkdir()
    cfg = replace(load(), home=home, cwd=base)
    a = Repository.init(base / "a" / ".funes", cfg)
    api.remote_add(a, "origin", str(base / "remote"), encrypt=True)
    a.commit_chunks(make_batch(0, 2), "index")
    api.push(a)
    head = a.head()
    assert head is not None
    if where == "commit":
        (base / "remote" / "objects" / head[:2] / head[2:]).write_bytes(crypt.MAGIC + raw)
    else:
        (base / "remote" / "refs" / "heads" / "main").write_bytes(raw)
    b = Repository.init(base / "b" / ".funes", cfg)
    api.remote_add(b, "origin", str(base / "remote"))
    before = {p: p.stat().st_mtime_ns for p in base.rglob("*") if not p.is_relative_to(b.path)}
    inside = repository_state(b)
    with pytest.raises(FunesError):
        api.pull(b)
    after = {p: p.stat().st_mtime_ns for p in base.rglob("*") if not p.is_relative_to(b.path)}
    assert after == before
    assert repository_state(b) == inside
    assert b.head() is None
