"""The attack suite (issue 14): hostile remotes built by hand, fuzzed Lance fragment metadata,
hostile file types in every place a fetch reads. Whatever a remote holds, a pull either
brings exactly honest data or is refused with a one-line error (exit 5) leaving the victim's
memory byte for byte as it was; nothing hangs and status/recall keep working."""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from funes import api
from funes.errors import FunesError
from funes.storage.repo import Repository
from tests.builders import make_chunk
from tests.security.hostile import (
    WORD,
    Scene,
    fragment_meta,
    put_object,
    read_object,
    scene,
    snapshot_tree,
)

small_int = st.one_of(st.integers(-3, 40), st.sampled_from([2**31, 2**63 - 1, 2**64, -(2**63)]))
json_leaf = st.one_of(st.none(), st.booleans(), small_int, st.text(max_size=12),
                      st.floats(allow_nan=False, allow_infinity=False))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=10,
)
META_KEYS = ["physical_rows", "overlays", "deletion_file", "row_id_meta",
             "created_at_version_meta", "last_updated_at_version_meta", "id", "extra"]
FILE_KEYS = ["fields", "column_indices", "file_major_version", "file_minor_version",
             "file_size_bytes", "base_id", "path", "extra"]


def _int_lists(base: list[int]) -> st.SearchStrategy[list[int]]:
    return st.one_of(
        st.permutations(base),
        st.lists(st.integers(-1, len(base) + 2), min_size=0, max_size=len(base) + 2),
    )


@st.composite
def meta_mutations(draw: st.DrawFn) -> list[tuple[str, str, Any]]:
    """A few edits to a fragment's metadata: (level, key, new value)."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        level = draw(st.sampled_from(["meta", "file"]))
        key = draw(st.sampled_from(META_KEYS if level == "meta" else FILE_KEYS))
        if key in ("fields", "column_indices"):
            value: Any = draw(_int_lists(list(range(19))))
        elif key in ("physical_rows", "file_size_bytes", "file_major_version",
                     "file_minor_version", "id"):
            value = draw(small_int)
        else:
            value = draw(json_value)
        edits.append((level, key, value))
    return edits


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    from dataclasses import replace

    from funes._env import settings as load

    # Module-scoped (one victim for every example): its home is its own, not the test's.
    tmp = tmp_path_factory.mktemp("arena")
    return scene(tmp, replace(load(), home=tmp / "home" / ".funes", cwd=tmp))


def _pull_checked(sc: Scene, honest: bool) -> None:
    """Pull; refused → nothing changed; accepted → only because the data was honest."""
    before = snapshot_tree(sc.victim.path)
    started = time.monotonic()
    try:
        api.pull(sc.victim)
    except FunesError as exc:
        assert exc.exit_code == 5, exc.message
        assert "\n" not in exc.message
        assert snapshot_tree(sc.victim.path) == before
    else:
        assert honest, "a forged manifest was accepted"
    assert time.monotonic() - started < 20
    assert api.status(sc.victim).chunks > 0


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=meta_mutations())
def test_fuzzed_fragment_metadata(arena: Scene, edits: list[tuple[str, str, Any]]) -> None:
    sc = arena
    tip = sc.tip()
    head = read_object(sc.remote, tip)
    honest = read_object(sc.remote, head["manifests"][0])
    manifest = copy.deepcopy(honest)
    meta = fragment_meta(manifest)
    for level, key, value in edits:
        (meta if level == "meta" else meta["files"][0])[key] = value
    # Equivalent forms of the honest metadata (a default written out, the dataset-local id)
    # may pass; anything else must not.
    normal = _normal(fragment_meta(manifest)) == _normal(fragment_meta(honest))
    try:
        sc.forge_commit([put_object(sc.remote, manifest)], message=json.dumps(edits)[:200])
        _pull_checked(sc, honest=normal)
    finally:
        (sc.remote / "refs" / "heads" / "main").write_text(f"{tip}\n")
        if sc.victim.head() != sc.victim.refs.read("refs/heads/main"):  # type: ignore[arg-type]
            pytest.fail("HEAD moved")


def _normal(meta: dict[str, Any]) -> Any:
    defaults = {"overlays": [], "deletion_file": None, "row_id_meta": None,
                "created_at_version_meta": None, "last_updated_at_version_meta": None}
    out = {k: v for k, v in meta.items() if k != "id" and not (k in defaults and v == defaults[k])}
    files = out.get("files")
    if isinstance(files, list):
        out["files"] = [{k: v for k, v in f.items() if not (k == "base_id" and v is None)}
                        if isinstance(f, dict) else f for f in files]
    return out


# -- hostile file types, everywhere a fetch reads ---------------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _outside(path: Path) -> None:
    target = path.parent.parent / ".." / "outside-file"
    target.write_bytes(b"x" * 64)
    path.symlink_to(target.resolve())


def _directory(path: Path) -> None:
    path.mkdir()


def _sparse(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.truncate(70 << 20)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


HOSTILE: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo, "dev-zero": _dev_zero, "outside": _outside, "directory": _directory,
    "sparse": _sparse, "empty": _empty,
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("place", ["object", "fragment", "commit"])
def test_hostile_file_types(tmp_path: Path, settings: Any, kind: str, place: str) -> None:
    sc = scene(tmp_path, settings)
    manifest, fragment = sc.staged_manifest([make_chunk(77, session="evil",
                                                        text=f"{WORD} planted")])
    mid = put_object(sc.remote, manifest)
    commit = sc.forge_commit([mid])
    target = {
        "object": sc.remote / "objects" / mid[:2] / mid[2:],
        "commit": sc.remote / "objects" / commit[:2] / commit[2:],
        "fragment": fragment,
    }[place]
    target.unlink()
    HOSTILE[kind](target)
    _pull_checked(sc, honest=False)
    result = api.recall(settings, Repository.open(sc.victim.path, settings), WORD,
                        vector=False, rerank=False, neighbors=0)
    assert all("planted" not in h.row["text"] for h in result.hits)


# -- forged commits: marked, never trusted ----------------------------------------------------


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(signature=st.one_of(
    st.none(),
    st.fixed_dictionaries({"alg": st.sampled_from(["ed25519", "rsa", ""]),
                           "key": st.text("0123456789abcdef", min_size=0, max_size=40),
                           "sig": st.text(max_size=20)}),
))
def test_forged_commits_are_marked(arena: Scene, signature: dict[str, Any] | None) -> None:
    """A commit no trusted key signed, with any signature field, never vouches for its rows
    once the victim signs (the arena's victim has a key from the first example on)."""
    from funes.api import security as sec
    from funes.storage.signing import own_key, untrusted_chunk_ids

    sc = arena
    if own_key(sc.victim.settings) is None:
        sec.keys_generate(sc.victim.settings, "victim")
    chunk = make_chunk(1000 + len(os.listdir(sc.remote / "objects")), session="forged",
                       text=f"{WORD} forged")
    manifest, _ = sc.staged_manifest([chunk])
    sc.forge_commit([put_object(sc.remote, manifest)], signature=signature)
    api.pull(sc.victim)
    assert chunk.id in untrusted_chunk_ids(Repository.open(sc.victim.path, sc.victim.settings))
