"""Every refusal of incoming fragments, driven through `funes pull` from a directory remote.

A teammate pushes a real memory; then someone with write access to the remote rewrites one of
its manifests (and the commit naming it, and the ref) so that the objects still hash to their
names but the fragment they describe is dangerous: a deletion file or an external base path
that no hash covers, metadata naming other files than the hashed ones, no row count, metadata
Lance cannot read, or files of another schema than the local table. Each pull must be refused
with exit 5 and one line saying what is wrong, and leave the memory as it was: HEAD, every
table, the objects. The tests check behaviour only (what `funes pull` does), not which function
refuses, so they hold however the checks are arranged.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.model.ids import canonical_json, hash_bytes
from funes.storage.repo import Repository
from funes.storage.tables import LanceTable
from tests.builders import make_batch, make_chunk

Mutation = Callable[[dict[str, Any], Path], None]


@dataclass
class Remote:
    """A directory remote holding a teammate's pushed memory, and ways to rewrite it."""

    path: Path

    def object_path(self, oid: str) -> Path:
        return self.path / "objects" / oid[:2] / oid[2:]

    def read(self, oid: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.object_path(oid).read_bytes())
        return data

    def write(self, data: dict[str, Any]) -> str:
        raw = canonical_json(data)
        oid = hash_bytes(raw)
        target = self.object_path(oid)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(raw)
        return oid

    def head(self) -> str:
        return (self.path / "refs" / "heads" / "main").read_text().strip()

    def rewrite_chunks_manifest(self, mutate: Mutation) -> None:
        """Apply `mutate` to the head commit's chunks manifest; re-point the commit and ref.

        The forged objects hash to their new names (anyone can compute a hash), and the forged
        commit is unsigned, as one written by someone without the teammate's key would be.
        """
        commit = self.read(self.head())
        manifests = []
        for mid in commit["manifests"]:
            manifest = self.read(mid)
            if manifest["table"] == "chunks":
                mutate(manifest, self.path / "chunks.lance")
                mid = self.write(manifest)
            manifests.append(mid)
        commit["manifests"] = manifests
        commit.pop("signature", None)
        (self.path / "refs" / "heads" / "main").write_text(self.write(commit) + "\n")


@pytest.fixture
def remote(tmp_path: Path, settings: Any) -> Remote:
    teammate = Repository.init(tmp_path / "teammate" / ".funes", settings)
    api.remote_add(teammate, "origin", str(tmp_path / "remote"))
    teammate.commit_chunks(make_batch(0, 4, session="theirs"), "index: teammate")
    api.push(teammate)
    return Remote(tmp_path / "remote")


@pytest.fixture
def mine(tmp_path: Path, settings: Any) -> Repository:
    """The user's own memory, with chunks of its own, tracking the shared remote."""
    repo = Repository.init(tmp_path / "mine" / ".funes", settings)
    repo.commit_chunks([make_chunk(10, session="mine")], "index: mine")
    api.remote_add(repo, "origin", str(tmp_path / "remote"))
    return repo


def state(repo: Repository, *, objects: bool = True) -> dict[str, Any]:
    """What a refused pull must not change: HEAD, the local tables, and (when the refusal
    comes while fetching) the objects: nothing of what was refused is stored."""
    tables = {}
    for name in ("chunks", "vectors"):
        table = repo.table(name)
        if table.exists():
            ds = table.dataset()
            tables[name] = (int(ds.version), ds.count_rows(), sorted(table.file_paths()))
    return {
        "head": repo.head(),
        "branch": repo.head_branch(),
        "tables": tables,
        "objects": sorted(repo.objects) if objects else None,
        "pending": (repo.path / "PENDING").exists(),
    }


def pull_refused(run: Any, repo: Repository, *, fetched: bool = False) -> str:
    """`funes pull` fails with exit 5 and one line naming the remote; nothing changed.

    The wording of the reason is not pinned (the checks may be reorganised); that the pull is
    refused, and harmlessly, is.

    `fetched`: the objects themselves are sound and may be stored (as `funes fetch` would);
    what is refused is merging them into the branch and its tables.
    """
    before = state(repo, objects=not fetched)
    out = run("--memory", str(repo.path), "pull")
    assert out.exit_code == 5, (out.exit_code, out.stdout, out.stderr)
    message = out.stderr.strip()
    assert message.startswith("funes: ") and len(message.splitlines()) == 1, message
    assert "origin" in message, message  # it names the remote that sent the bad data
    assert state(repo, objects=not fetched) == before
    assert not (repo.path / "PENDING").exists()
    # And the memory still works: a later commit is not disturbed by what was refused.
    assert repo.commit_chunks([make_chunk(11, session="mine")], "index: later").commit
    return message


def test_the_untouched_remote_pulls(remote: Remote, mine: Repository, run: Any) -> None:
    """The baseline the refusals below differ from by one field each."""
    out = run("--memory", str(mine.path), "pull")
    assert out.exit_code == 0, out.stderr
    assert mine.head_commit().chunk_count == 5  # type: ignore[union-attr]


def _first_fragment(manifest: dict[str, Any]) -> dict[str, Any]:
    fragment: dict[str, Any] = manifest["fragments"][0]
    return fragment


def test_a_deletion_file_is_refused(remote: Remote, mine: Repository, run: Any) -> None:
    def add_deletion_file(manifest: dict[str, Any], table: Path) -> None:
        _first_fragment(manifest)["meta"]["deletion_file"] = {
            "file_type": "array", "read_version": 1, "id": 7, "num_deleted_rows": 1,
        }

    remote.rewrite_chunks_manifest(add_deletion_file)
    pull_refused(run, mine)


def test_an_external_base_path_is_refused(remote: Remote, mine: Repository, run: Any) -> None:
    def add_base_id(manifest: dict[str, Any], table: Path) -> None:
        _first_fragment(manifest)["meta"]["files"][0]["base_id"] = 1

    remote.rewrite_chunks_manifest(add_base_id)
    pull_refused(run, mine)


def test_metadata_naming_another_file_is_refused(remote: Remote, mine: Repository,
                                                 run: Any) -> None:
    """The hashes cover one file; the metadata Lance would read names another."""

    def rename(manifest: dict[str, Any], table: Path) -> None:
        fragment = _first_fragment(manifest)
        name = fragment["meta"]["files"][0]["path"]
        other = "0" + name  # a file that exists on the remote, under a name no hash covers
        shutil.copy(table / "data" / name, table / "data" / other)
        fragment["meta"]["files"][0]["path"] = other

    remote.rewrite_chunks_manifest(rename)
    pull_refused(run, mine)


@pytest.mark.parametrize("rows", [None, -1, True, "4"])
def test_a_missing_or_bad_row_count_is_refused(remote: Remote, mine: Repository, run: Any,
                                               rows: Any) -> None:
    def set_rows(manifest: dict[str, Any], table: Path) -> None:
        meta = _first_fragment(manifest)["meta"]
        if rows is None:
            del meta["physical_rows"]
        else:
            meta["physical_rows"] = rows

    remote.rewrite_chunks_manifest(set_rows)
    pull_refused(run, mine)


def _drop_field_ids(meta: dict[str, Any]) -> None:
    del meta["files"][0]["fields"]


def _garble_field_ids(meta: dict[str, Any]) -> None:
    meta["files"][0]["fields"] = "not a list of field ids"


@pytest.mark.parametrize("garble", [
    _drop_field_ids,
    _garble_field_ids,
], ids=["missing", "mistyped"])
def test_metadata_lance_cannot_read_is_refused(remote: Remote, mine: Repository, run: Any,
                                               garble: Callable[[dict[str, Any]], None]) -> None:
    remote.rewrite_chunks_manifest(
        lambda manifest, table: garble(_first_fragment(manifest)["meta"]))
    pull_refused(run, mine)


def _other_schema(remote: Remote, tmp_path: Path) -> None:
    """Rewrite the remote's chunks manifest to name well-hashed files of another schema: Lance
    would read the field ids in their metadata as other columns of the local table."""
    import pyarrow as pa

    forged = LanceTable(tmp_path / "forge" / "chunks.lance")
    records = forged.write_fragments(pa.table({"id": ["x" * 64], "payload": ["not a chunk"]}))

    def replace_fragments(manifest: dict[str, Any], table: Path) -> None:
        for record in records:
            for f in record.files:
                os.makedirs(table / "data", exist_ok=True)
                shutil.copy(forged.path / f.path, table / f.path)
        manifest["fragments"] = [r.to_dict() for r in records]

    remote.rewrite_chunks_manifest(replace_fragments)


def test_fragments_of_another_schema_never_reach_the_table(remote: Remote, mine: Repository,
                                                           run: Any, tmp_path: Path) -> None:
    _other_schema(remote, tmp_path)
    before = state(mine, objects=False)
    del before["pending"]
    out = run("--memory", str(mine.path), "pull")
    assert out.exit_code != 0 and out.stderr.startswith("funes: "), out.stderr
    after = state(mine, objects=False)
    del after["pending"]
    assert after == before
    rows = mine.chunks.dataset().to_table(columns=["id"]).column("id").to_pylist()
    assert rows == [make_chunk(10, session="mine").id]


def test_fragments_of_another_schema_are_refused(remote: Remote, mine: Repository,
                                                 run: Any, tmp_path: Path) -> None:
    _other_schema(remote, tmp_path)
    pull_refused(run, mine, fetched=True)
