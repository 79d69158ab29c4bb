"""Fuzzing what is read from a remote: refs, objects (commits, manifests), Lance metadata
names, URLs. Malformed input must raise a FunesError, never crash and never write outside the
repository."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from funes.errors import FunesError
from funes.model.ids import canonical_json, hash_bytes
from funes.remotes.base import parse_url
from funes.remotes.layout import branch_of, lance_version, latest_manifest, parse_ref_file
from funes.storage.fsck import fsck
from funes.storage.transfer import parse_received
from tests.builders import make_batch

HEX = "0123456789abcdef"
oid_text = st.text(HEX, min_size=64, max_size=64)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    oid_text,
    st.sampled_from(["../x", "/etc/passwd", "data/../../x.lance", "data/a.lance", "..", ""]),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)


def _valid_objects() -> list[dict[str, Any]]:
    """One real commit and manifest, as JSON, to mutate."""
    import tempfile

    from funes._env import settings as load
    from funes.model.objects import encode
    from funes.storage.repo import Repository

    with tempfile.TemporaryDirectory() as tmp:
        repo = Repository.init(Path(tmp) / ".funes", load())
        repo.commit_chunks(make_batch(0, 3), "index")
        commit = repo.head_commit()
        assert commit is not None
        manifest = repo.objects.manifest(commit.manifests[0])
        return [json.loads(encode(commit)[1]), json.loads(encode(manifest)[1])]


VALID = _valid_objects()
FIELDS = sorted({k for obj in VALID for k in obj} | {"fragments", "files", "meta", "path"})


def assert_well_formed(obj: Any, kind: str | None) -> None:
    """What parse_received accepted is what its kind promises: the checks fetch relies on.

    The requested kind; every id it names is an object id; a manifest's fragments name only
    `data/<name>.lance` files with a size and a SHA-256, and metadata that agrees with them;
    and it encodes to bytes that decode to the same object (what is stored reads back).
    """
    from funes.model.ids import is_object_id
    from funes.model.objects import Commit, Link, Manifest, Tombstone, decode, encode
    from funes.storage.transfer import DATA_PATH_RE

    kinds = {"commit": Commit, "manifest": Manifest, "tombstone": Tombstone, "link": Link}
    assert isinstance(obj, tuple(kinds.values()))
    if kind is not None:
        assert isinstance(obj, kinds[kind])
    _, raw = encode(obj)
    assert decode(raw) == obj
    if isinstance(obj, Commit):
        named = (*obj.parents, *obj.manifests, *obj.tombstones, *obj.links)
        assert all(is_object_id(oid) for oid in named)
    elif isinstance(obj, Tombstone):
        assert all(is_object_id(t) for t in obj.targets)  # none is harmless: it hides nothing
    elif isinstance(obj, Manifest):
        assert all(is_object_id(i) for i in obj.ids)
        for record in obj.fragments:
            assert record.files
            names = [f.get("path") for f in record.meta["files"]]
            assert names == [f.path.removeprefix("data/") for f in record.files]
            for f in record.files:
                assert DATA_PATH_RE.match(f.path) and ".." not in f.path
                assert len(f.sha256) == 64 and set(f.sha256) <= set(HEX) and f.size >= 0
            assert record.meta.get("deletion_file") is None
            assert all(f.get("base_id") is None for f in record.meta["files"])
            rows = record.meta["physical_rows"]
            assert isinstance(rows, int) and not isinstance(rows, bool) and rows >= 0
    elif isinstance(obj, Link):
        assert len(obj.commit) in (40, 64) and set(obj.commit) <= set(HEX)
        assert all(all(isinstance(v, str) and v for v in t) for t in obj.turns)


def assert_refused_clearly(exc: FunesError, source: str) -> None:
    """A refusal is the transfer's own error and names where the bad object came from."""
    from funes.storage.transfer import TransferError

    assert isinstance(exc, TransferError), repr(exc)
    assert source in exc.message


def _h(text: str) -> int:
    return sum(map(ord, text))  # deterministic (str hashes are salted per process)


def _mutate(obj: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    if isinstance(obj, dict):
        key = path[0] if path[0] in obj or not obj else sorted(obj)[_h(path[0]) % len(obj)]
        return {**obj, key: _mutate(obj.get(key), path[1:], value)}
    if isinstance(obj, list) and obj:
        i = _h(path[0]) % len(obj)
        return [*obj[:i], _mutate(obj[i], path[1:], value), *obj[i + 1 :]]
    return value


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_ref_files(raw: bytes) -> None:
    try:
        oid = parse_ref_file(raw, "refs/heads/main", "fuzz")
    except FunesError:
        return
    assert len(oid) == 64 and set(oid) <= set(HEX)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_ref_paths_and_lance_names(path: str) -> None:
    try:
        ref = branch_of(path)
    except FunesError:
        ref = None
    if ref is not None:
        assert ".." not in ref.split("/") and not ref.startswith("/") and "\\" not in ref
    version = lance_version(path)
    assert version is None or 0 <= version < 2**64
    latest_manifest([path, "_versions/18446744073709551614.manifest"])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_urls(text: str) -> None:
    try:
        spec = parse_url(text, Path("/nonexistent-cwd"))
    except FunesError:
        return
    assert spec.kind in ("hf", "dir")
    if spec.kind == "hf":
        assert ".." not in spec.repo_id and ".." not in spec.subpath.split("/")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(range(len(VALID))),
    st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4),
    json_value,
    st.sampled_from([None, "commit", "manifest", "tombstone", "link"]),
)
def test_objects_parse_or_refuse(which: int, path: list[str], value: Any, kind: str | None) -> None:
    data = _mutate(VALID[which], path, value)
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


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value: each dict key and list index, at every depth."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out += _paths(value, (*prefix, i))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    """A copy of `obj` with the value at `path` replaced (or its key deleted)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        copy = dict(obj)
        if delete and not rest:
            copy.pop(head, None)
        else:
            copy[head] = _set(obj[head], rest, value, delete)
        return copy
    copy_list = list(obj)
    copy_list[head] = _set(obj[head], rest, value, delete)
    return copy_list


STRUCTURE = [(which, path) for which, obj in enumerate(VALID) for path in _paths(obj)]


#: Values that are nearly right, where a missing check would let them through.
NEAR_MISSES: list[Any] = [
    -1, 0, True, 1.5, 2**64, "", "0" * 63 + "g", "A" * 64, "0" * 65, "data/x.lance",
    "data/../x.lance", "x.lance", "../x.lance", "data/.lance", [], {}, None, ["a" * 64],
    {"path": "x"},
]


def test_every_field_of_real_objects_with_every_near_miss() -> None:
    """Exhaustively: every field of a real commit and manifest deleted, or set to each value
    that is nearly right. Random values rarely hit these; a dropped check would let one in."""
    for which, path in STRUCTURE:
        for value, delete in [(None, True), *((v, False) for v in NEAR_MISSES)]:
            data = _set(VALID[which], path, value, delete)
            raw = canonical_json(data)
            try:
                obj = parse_received(hash_bytes(raw), raw, None, "fuzz")
            except FunesError as exc:
                assert_refused_clearly(exc, "fuzz")
                continue
            assert_well_formed(obj, None)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(STRUCTURE), json_value, st.booleans(),
       st.sampled_from([None, "commit", "manifest"]))
def test_every_field_of_real_objects_parse_or_refuse(
    where: tuple[int, tuple[Any, ...]], value: Any, delete: bool, kind: str | None
) -> None:
    """Each field of a real commit and manifest, at any depth (a fragment's file names, sizes,
    hashes, Lance metadata), replaced by any JSON value or deleted: refused, or well formed."""
    which, path = where
    data = _set(VALID[which], path, value, delete)
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


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), oid_text)
def test_arbitrary_bytes_and_wrong_ids(raw: bytes, oid: str) -> None:
    for claimed in (oid, "../" + oid[3:], "/" + oid[1:]):
        if claimed != hash_bytes(raw):
            with pytest.raises(FunesError):
                parse_received(claimed, raw, None, "fuzz")
    with contextlib.suppress(FunesError):
        parse_received(hash_bytes(raw), raw, None, "fuzz")


# -- end to end: a fetch from a directory remote holding fuzzed objects ----------------------


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(st.sampled_from(FIELDS), min_size=1, max_size=4),
    json_value,
    st.sampled_from(["../../../escaped.lance", "/tmp/escaped-abs.lance", "data/ok.lance"]),
)
def test_fetching_fuzzed_objects_writes_nothing_outside(
    tmp_path_factory: pytest.TempPathFactory, path: list[str], value: Any, data_path: str
) -> None:
    from funes import api
    from funes._env import settings as load
    from funes.storage.repo import Repository

    base = tmp_path_factory.mktemp("fuzz")
    remote = base / "remote"
    for sub in ("objects", "refs/heads"):
        (remote / sub).mkdir(parents=True)
    manifest = json.loads(json.dumps(VALID[1]))
    manifest["fragments"][0]["files"][0]["path"] = data_path
    manifest["fragments"][0]["meta"]["files"][0]["path"] = data_path.removeprefix("data/")
    manifest = _mutate(manifest, path, value)
    try:
        mraw = canonical_json(manifest)
    except (TypeError, ValueError):
        return
    mid = hash_bytes(mraw)
    commit = {**VALID[0], "manifests": [mid], "parents": []}
    craw = canonical_json(commit)
    cid = hash_bytes(craw)
    for oid, raw in ((mid, mraw), (cid, craw)):
        (remote / "objects" / oid[:2]).mkdir(exist_ok=True)
        (remote / "objects" / oid[:2] / oid[2:]).write_bytes(raw)
    (remote / "refs" / "heads" / "main").write_text(cid + "\n")
    (remote / "chunks.lance" / "data").mkdir(parents=True)
    (remote / "chunks.lance" / "data" / "ok.lance").write_bytes(b"x" * 10)

    repo = Repository.init(base / "local" / ".funes", load())
    api.remote_add(repo, "origin", str(remote))
    before = {p for p in base.rglob("*") if not p.is_relative_to(repo.path)}
    inside = repository_state(repo)
    try:
        api.pull(repo)
    except FunesError:
        # Refused: the memory is as it was (no object, file, ref or table of the fuzzed data).
        assert repository_state(repo) == inside
    else:
        # Accepted: what came in is whole and checks out.
        assert repo.head() == cid
        assert fsck(repo).ok
    after = {p for p in base.rglob("*") if not p.is_relative_to(repo.path)}
    assert after == before
    assert not Path("/tmp/escaped-abs.lance").exists()


def repository_state(repo: Any) -> dict[str, Any]:
    """Every file of a repository that a refused fetch must leave alone, with its bytes' hash.

    Left out: `tmp/` (staging, emptied after each fetch), `logs/`, and the record of the last
    sync's outcome (`remotes/<r>/last-sync.json`: a refused fetch writes that it failed, so
    `funes status` can show it).
    """
    out = {}
    for path in sorted(repo.path.rglob("*")):
        rel = path.relative_to(repo.path)
        if rel.parts[0] in ("tmp", "logs") or not path.is_file() or rel.name == "last-sync.json":
            continue
        out[str(rel)] = hash_bytes(path.read_bytes())
    return out
