"""Building hostile directory remotes: forged commits, manifests and fragment files, and
snapshots of a victim's memory to prove a refused pull changed nothing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from funes import api
from funes.model.ids import canonical_json, hash_bytes
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk

WORD = "wombatquince"


def snapshot_tree(root: Path) -> dict[str, bytes]:
    """Every file under a memory with its bytes.

    Left out: `lock` (it holds the last writer's pid, not data), a Hub remote's
    `remotes/<r>/state.json`, the cache of the refs it last listed (docs/format.md: safe to
    delete), which records what the remote said even when funes refused what it sent, and
    `remotes/<r>/last-sync.json`, the record of the last sync's outcome: a refused pull must
    write that it failed (so `funes status` shows it with the fix), and nothing else.
    """
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        cache = rel.startswith("remotes/") and rel.endswith(("/state.json", "/last-sync.json"))
        if path.is_file() and not path.is_symlink() and rel != "lock" and not cache:
            out[rel] = path.read_bytes()
    return out


def put_object(remote: Path, data: dict[str, Any]) -> str:
    """Write a JSON object into a remote's store under the id its bytes hash to."""
    raw = canonical_json(data)
    oid = hash_bytes(raw)
    path = remote / "objects" / oid[:2] / oid[2:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return oid


def read_object(root: Path, oid: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / "objects" / oid[:2] / oid[2:]).read_bytes())
    return data


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Scene:
    """A victim who pulled an attacker's memory once through a directory remote."""

    tmp: Path
    settings: Any
    remote: Path
    victim: Repository
    attacker: Repository

    def tip(self) -> str:
        return (self.remote / "refs" / "heads" / "main").read_text().strip()

    def forge_commit(
        self, manifests: list[str], *, tombstones: list[str] | None = None,
        message: str = "forged", signature: dict[str, Any] | None = None,
    ) -> str:
        """A commit on top of the remote's tip naming `manifests`, and the ref moved to it."""
        parent = self.tip()
        base = read_object(self.remote, parent)
        commit = {
            "type": "commit", "format": 1, "parents": [parent], "manifests": manifests,
            "tombstones": tombstones or [], "model": base.get("model"),
            "author": "Mallory <m@example.org>", "host": "evil", "time": "2026-06-01T00:00:00.000Z",
            "message": message, "chunk_count": base["chunk_count"] + 1,
        }
        if signature is not None:
            commit["signature"] = signature
        oid = put_object(self.remote, commit)
        (self.remote / "refs" / "heads" / "main").write_text(f"{oid}\n")
        return oid

    def staged_manifest(self, chunks: list[Any]) -> tuple[dict[str, Any], Path]:
        """An honest manifest for new chunks written by the attacker (not pushed), with its
        fragment file copied into the remote's dataset directory."""
        self.attacker.commit_chunks(chunks, "index: more")
        head = self.attacker.head_commit()
        assert head is not None
        manifest = read_object(self.attacker.path, head.manifests[0])
        rel = manifest["fragments"][0]["files"][0]["path"]
        dest = self.remote / "chunks.lance" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.attacker.chunks.path / rel, dest)
        return manifest, dest

    def forge_manifest(self, mutate: Callable[[dict[str, Any]], None], *, chunks: Any = None
                       ) -> str:
        """Stage an honest new manifest, mutate it, and commit it on the remote."""
        manifest, _ = self.staged_manifest(chunks or [make_chunk(50, session="evil",
                                                                  text=f"{WORD} planted")])
        mutate(manifest)
        return self.forge_commit([put_object(self.remote, manifest)])


def scene(tmp: Path, settings: Any) -> Scene:
    """Attacker pushes two commits to a directory remote; the victim indexes its own chunks
    and pulls them once (an honest start)."""
    remote = tmp / "remote"
    home = tmp / "home-mallory"
    home.mkdir(parents=True, exist_ok=True)
    mallory = replace(settings, home=home)
    attacker = Repository.init(tmp / "mallory" / ".funes", mallory)
    api.remote_add(attacker, "origin", str(remote))
    attacker.commit_chunks(make_batch(0, 4, session="team", text=None), "index: team")
    api.push(attacker)
    victim = Repository.init(tmp / "victim" / ".funes", settings)
    api.remote_add(victim, "origin", str(remote))
    victim.commit_chunks([make_chunk(1, session="mine", text=f"{WORD} my own notes")], "index")
    api.pull(victim)
    return Scene(tmp, settings, remote, victim, attacker)


def fragment_meta(manifest: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = manifest["fragments"][0]["meta"]
    return meta


def rehash_file(manifest: dict[str, Any], path: Path) -> None:
    """Make the manifest's hash and size agree with a (changed) fragment file."""
    entry = manifest["fragments"][0]["files"][0]
    entry["size"] = os.path.getsize(path)
    entry["sha256"] = sha256(path)
    fragment_meta(manifest)["files"][0]["file_size_bytes"] = entry["size"]
