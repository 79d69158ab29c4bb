"""Encrypted remotes: objects and fragment files sealed client-side with AES-256-GCM.

`funes remote add --encrypt NAME URL` marks a remote `remote.<name>.encrypt=true` and makes
(or reuses) a per-memory key, kept at `$FUNES_HOME/keys/memories/<url digest>.key` (mode 0600)
and exported to teammates as one line, `funes-memkey <base64 key> <url>` (`funes keys export
--remote NAME`, `funes keys import LINE`).

An encrypted remote wraps the ordinary one (`EncryptedRemote`): every object is stored at its
usual path `objects/ab/cdef…` as `MAGIC || nonce(12) || AES-GCM(plaintext, aad=id)`, and every
fragment file is stored the same way as a blob named by its SHA-256 (the hash its manifest
records), so the remote holds no Lance dataset and no plaintext of any chunk: **it is not
Lance-readable**. Refs (commit ids) and the dataset card's counts stay readable. Binding each
ciphertext to its id (the AAD) means a blob cannot be swapped for another. Reading decrypts,
then verifies hashes as for any remote; a missing key or a wrong one is a clear error before
anything is stored locally.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from funes._env import Settings
from funes.errors import FunesError, RemoteError, UsageError
from funes.model.ids import ObjectId
from funes.model.objects import MalformedObjectError, Manifest, decode
from funes.remotes.base import (
    Progress,
    PushPlan,
    PushReport,
    Remote,
    RemoteDataError,
    RemoteSpec,
    RemoteState,
)
from funes.remotes.layout import MAX_FILE_BYTES, MAX_OBJECT_BYTES, object_path, table_file
from funes.storage.atomic import write_atomic
from funes.storage.signing import read_key_argument

MAGIC = b"FUNESENC1\n"
PREFIX = "funes-memkey"
NONCE = 12
#: What sealing adds to a blob: the magic, the nonce and the GCM tag.
SEAL_BYTES = len(MAGIC) + NONCE + 16


class EncryptionKeyError(RemoteError):
    """An encrypted remote without its key here, or with the wrong one."""


def _key_path(settings: Settings, url: str) -> Path:
    digest = hashlib.sha256(url.encode()).hexdigest()[:24]
    return settings.home / "keys" / "memories" / f"{digest}.key"


def load_key(settings: Settings, url: str) -> bytes | None:
    """The key of the memory at `url`, if this machine has it."""
    path = _key_path(settings, url)
    try:
        text = path.read_text("utf-8").split()[0]
    except (FileNotFoundError, IndexError):
        return None
    except OSError as exc:
        raise EncryptionKeyError(f"cannot read the memory key {path}: {exc.strerror}") from None
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise EncryptionKeyError(f"the memory key {path} is damaged")
    return key


def _write_key(settings: Settings, url: str, key: bytes) -> Path:
    path = _key_path(settings, url)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        path.parent.parent.chmod(0o700)
    write_atomic(path, f"{key.hex()} {url}\n".encode(), mode=0o600)
    return path


def ensure_key(settings: Settings, url: str) -> tuple[bytes, bool]:
    """The key for `url`, made now when there is none; returns (key, created)."""
    key = load_key(settings, url)
    if key is not None:
        return key, False
    key = os.urandom(32)
    _write_key(settings, url, key)
    return key, True


def export_key(settings: Settings, url: str) -> str:
    """The one-line form of the key for `url` (hand it to teammates over a safe channel)."""
    key = load_key(settings, url)
    if key is None:
        raise UsageError(f"no memory key for {url}",
                         hint="`funes remote add --encrypt NAME URL` makes one")
    return f"{PREFIX} {base64.b64encode(key).decode()} {url}"


def import_key(settings: Settings, text: str, url: str | None = None) -> str:
    """Store a key line (or a file holding one); `url` overrides the line's URL."""
    text = read_key_argument(text)
    parts = text.strip().split(None, 2)
    if len(parts) < 2 or parts[0] != PREFIX:
        raise UsageError("not a funes memory key",
                         hint=f"expected `{PREFIX} <base64> <url>` (`funes keys export --remote`)")
    try:
        key = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != 32:
        raise UsageError("the memory key is not 32 bytes of base64")
    target = url or (parts[2] if len(parts) > 2 else "")
    if not target:
        raise UsageError("the key line names no URL", hint="give the remote's URL")
    _write_key(settings, target, key)
    return target


def seal(key: bytes, name: str, data: bytes) -> bytes:
    """Encrypt `data` stored under `name` (the name is authenticated too)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(NONCE)
    return MAGIC + nonce + AESGCM(key).encrypt(nonce, data, name.encode())


def open_sealed(key: bytes, name: str, blob: bytes, where: str) -> bytes:
    """Decrypt a sealed blob; a wrong key or a changed blob is an EncryptionKeyError."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + NONCE + 16:
        raise RemoteDataError(f"{where}: {name[:16]} is not encrypted, but this remote is",
                              hint="someone pushed to it without encryption; do not trust it")
    body = blob[len(MAGIC):]
    try:
        return AESGCM(key).decrypt(body[:NONCE], body[NONCE:], name.encode())
    except InvalidTag:
        raise EncryptionKeyError(
            f"{where}: cannot decrypt {name[:12]}: wrong memory key (or a tampered blob)",
            hint="import the right key with `funes keys import LINE`; nothing was stored",
        ) from None


def is_sealed(raw: bytes) -> bool:
    """True for bytes an encrypted remote stored."""
    return raw.startswith(MAGIC)


class EncryptedRemote:
    """A `Remote` that seals everything it writes and opens everything it reads."""

    def __init__(self, inner: Remote, key: bytes) -> None:
        self.inner = inner
        self.name = inner.name
        self.spec: RemoteSpec = inner.spec
        self._key = key
        self._files: dict[str, str] = {}  # remote fragment path -> sha256 (from manifests)

    @property
    def display(self) -> str:
        """As the wrapped remote, marked encrypted."""
        return f"{self.inner.display} [encrypted]"

    def state(self) -> RemoteState:
        """The wrapped remote's refs (commit ids are not encrypted)."""
        return self.inner.state()

    def create(self) -> None:
        """Create the wrapped remote."""
        self.inner.create()

    def present(self, state: RemoteState, paths: Sequence[str]) -> set[str]:
        """Which paths exist (objects keep their paths)."""
        return self.inner.present(state, paths)

    def object_ids(self, state: RemoteState) -> set[ObjectId] | None:
        """None: the listing would include fragment blobs; walk from the refs instead."""
        return None

    def read_objects(
        self, state: RemoteState, oids: Sequence[ObjectId], *, limit: int = MAX_OBJECT_BYTES
    ) -> dict[ObjectId, bytes]:
        """Decrypted object bytes (verified by the caller); manifests teach fragment names."""
        out: dict[ObjectId, bytes] = {}
        for oid, blob in self.inner.read_objects(state, oids, limit=limit + SEAL_BYTES).items():
            raw = open_sealed(self._key, oid, blob, self.inner.display)
            out[oid] = raw
            with contextlib.suppress(MalformedObjectError, FunesError):
                obj = decode(raw)
                if isinstance(obj, Manifest):
                    for record in obj.fragments:
                        for f in record.files:
                            self._files[table_file(obj.table, f.path)] = f.sha256
        return out

    def download(
        self,
        state: RemoteState,
        files: Sequence[tuple[str, Path]],
        progress: Progress,
        *,
        sizes: Mapping[str, int] | None = None,
    ) -> None:
        """Fetch each fragment's sealed blob, decrypt it to the local path (unverified)."""
        for done, (name, dest) in enumerate(files, 1):
            sha = self._files.get(name)
            if sha is None:
                raise RemoteDataError(f"{self.display}: no manifest names {name}")
            limit = (sizes or {}).get(name, MAX_FILE_BYTES)
            blob = self.inner.read_objects(state, [ObjectId(sha)], limit=limit + SEAL_BYTES)[
                ObjectId(sha)]
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(open_sealed(self._key, sha, blob, self.inner.display))
            progress(done, len(files), name)

    def push(self, state: RemoteState, plan: PushPlan, progress: Progress) -> PushReport:
        """Seal the plan's objects and fragment files; push them as objects, no Lance."""
        objects = {oid: seal(self._key, oid, raw) for oid, raw in plan.objects.items()}
        blobs: dict[str, Path] = {}
        for update in plan.tables:
            for record in update.records:
                for f in record.files:
                    blobs.setdefault(f.sha256, update.source / f.path)
        there = self.inner.present(state, [object_path(ObjectId(s)) for s in blobs])
        for sha, path in blobs.items():
            if object_path(ObjectId(sha)) in there:
                continue
            objects[ObjectId(sha)] = seal(self._key, sha, path.read_bytes())
        return self.inner.push(state, replace(plan, objects=objects, tables=()), progress)


def wrap(remote: Remote, settings: Settings, *, required: bool) -> Remote:
    """`remote` encrypted when this machine has a key for its URL (or `required`)."""
    if isinstance(remote, EncryptedRemote):
        return remote
    key = load_key(settings, remote.spec.url)
    if key is None:
        if required:
            raise EncryptionKeyError(
                f"remote {remote.name!r} is encrypted and this machine has no key for "
                f"{remote.spec.url}",
                hint="ask a teammate for `funes keys export --remote NAME` and run "
                "`funes keys import LINE`; nothing was sent or stored",
            )
        return remote
    return EncryptedRemote(remote, key)
