"""Signed commits (Ed25519, via `cryptography`) and the keys behind them.

Keys live under `$FUNES_HOME/keys/`:

    signing.key          this user's private key (raw 32 bytes, hex), mode 0600
    signing.pub          its public key, in the exported form below
    trusted/<key id>.pub public keys of teammates (`funes keys trust`)

A public key is exported as one line, `funes-ed25519 <base64 raw key> <comment>`; its **key
id** is the first 32 hex digits of the SHA-256 of the raw 32 key bytes.

When `signing.key` exists every commit this machine writes (index, merge, forget, scrub, and the
publish gate's images) carries `signature = {"alg": "ed25519", "key": <key id>, "sig": <base64>}`
over the commit's canonical bytes *without* the `signature` field (docs/format.md). A
signature changes the commit's id like any other field.

Verification sorts each commit into one of: `good` (a trusted or own key, valid signature),
`unsigned`, `unknown-key` (a key id nobody here trusts: cannot be checked), `bad` (a known key
whose signature does not verify: the body or the key id was changed), `malformed`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from funes._env import Settings
from funes.errors import FunesError, UsageError
from funes.model.ids import ObjectId, canonical_json
from funes.model.objects import Commit, kind_of
from funes.storage.atomic import write_atomic
from funes.storage.idset import IdSet

if TYPE_CHECKING:
    from funes.storage.repo import Repository

ALG = "ed25519"
PREFIX = "funes-ed25519"
_KEY_ID_RE = re.compile(r"^[0-9a-f]{32}$")

Status = Literal["good", "unsigned", "unknown-key", "bad", "malformed"]


class SignatureError(FunesError):
    """Commits whose signatures are required and missing, unknown or bad."""


class SigningKeyError(UsageError):
    """A key that cannot be read, generated or trusted."""


def keys_dir(settings: Settings) -> Path:
    """`$FUNES_HOME/keys`."""
    return settings.home / "keys"


def key_id(raw_public: bytes) -> str:
    """The id of a raw 32-byte Ed25519 public key."""
    return hashlib.sha256(raw_public).hexdigest()[:32]


@dataclass(frozen=True)
class PublicKey:
    """A public key: its id, raw bytes and comment."""

    id: str
    raw: bytes
    comment: str
    own: bool = False

    def export(self) -> str:
        """The one-line exported form."""
        text = f"{PREFIX} {base64.b64encode(self.raw).decode()}"
        return f"{text} {self.comment}" if self.comment else text


def parse_public(text: str) -> PublicKey:
    """Read an exported public key line."""
    parts = text.strip().split(None, 2)
    if len(parts) < 2 or parts[0] != PREFIX:
        raise SigningKeyError(
            "not a funes public key", hint=f"expected `{PREFIX} <base64> [comment]` "
            "(what `funes keys export` prints)",
        )
    try:
        raw = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        raise SigningKeyError("the public key is not valid base64") from None
    if len(raw) != 32:
        raise SigningKeyError("an Ed25519 public key is 32 bytes")
    return PublicKey(key_id(raw), raw, parts[2] if len(parts) > 2 else "")


def _private_path(settings: Settings) -> Path:
    return keys_dir(settings) / "signing.key"


def generate(settings: Settings, comment: str, *, force: bool = False) -> PublicKey:
    """Create this user's signing key (refused when one exists, unless `force`)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = _private_path(settings)
    if path.exists() and not force:
        raise SigningKeyError(
            f"a signing key already exists ({path})",
            hint="`funes keys list` shows it; --force replaces it (old signatures then read "
            "as unknown unless you trust the old public key)",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        path.parent.chmod(0o700)
    key = Ed25519PrivateKey.generate()
    raw_priv = key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    raw_pub = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    write_atomic(path, (raw_priv.hex() + "\n").encode("ascii"), mode=0o600)
    public = PublicKey(key_id(raw_pub), raw_pub, comment, own=True)
    (path.parent / "signing.pub").write_text(public.export() + "\n", "utf-8")
    return public


def _private(settings: Settings) -> Any | None:
    path = _private_path(settings)
    if not path.exists():  # the common case: no import of `cryptography` on the hook path
        return None
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        text = path.read_text("utf-8").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SigningKeyError(f"cannot read the signing key {path}: {exc.strerror}") from None
    try:
        return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(text))
    except ValueError:
        raise SigningKeyError(f"the signing key {path} is damaged",
                        hint="`funes keys generate --force` makes a new one") from None


def own_key(settings: Settings) -> PublicKey | None:
    """This user's public key, when a signing key exists."""
    key = _private(settings)
    if key is None:
        # No import of `cryptography` either: every recall asks, and in a warm server the
        # library and OpenSSL's are 10 MB of resident memory a user without keys never uses.
        return None
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    comment = ""
    with contextlib.suppress(OSError, FunesError):
        comment = parse_public((keys_dir(settings) / "signing.pub").read_text("utf-8")).comment
    return PublicKey(key_id(raw), raw, comment, own=True)


def trusted_keys(settings: Settings) -> dict[str, PublicKey]:
    """Every key whose signatures count as good: trusted teammates' and this user's own."""
    keys: dict[str, PublicKey] = {}
    folder = keys_dir(settings) / "trusted"
    if folder.is_dir():
        for path in sorted(folder.glob("*.pub")):
            with contextlib.suppress(OSError, FunesError):
                key = parse_public(path.read_text("utf-8"))
                keys[key.id] = key
    own = own_key(settings)
    if own is not None:
        keys[own.id] = own
    return keys


def read_key_argument(text: str) -> str:
    """A key given on the command line: the line itself, or the contents of a file naming it."""
    if "\n" in text or len(text) >= 4096:
        return text
    try:
        candidate = Path(text).expanduser()
        if candidate.is_file():
            return candidate.read_text("utf-8")
    except (OSError, RuntimeError, ValueError, UnicodeDecodeError):
        pass  # `~nosuchuser`, NUL bytes, unreadable: treat it as the line itself
    return text


def trust(settings: Settings, text: str) -> PublicKey:
    """Trust a public key (its exported line, or a file holding it)."""
    text = read_key_argument(text)
    key = parse_public(text)
    folder = keys_dir(settings) / "trusted"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{key.id}.pub").write_text(key.export() + "\n", "utf-8")
    return key


def signed_bytes(commit: Commit) -> bytes:
    """The canonical bytes a signature covers: the commit without its `signature` field."""
    data = {"type": kind_of(commit), **commit.to_dict()}
    data.pop("signature", None)
    return canonical_json(data)


def sign_commit(repo: Repository, commit: Commit) -> Commit:
    """`commit` signed with this user's key, or unchanged when there is none."""
    from dataclasses import replace

    key = _private(repo.settings)
    if key is None:
        return commit
    from cryptography.hazmat.primitives import serialization

    raw = key.public_key().public_bytes(serialization.Encoding.Raw,
                                        serialization.PublicFormat.Raw)
    unsigned = replace(commit, signature=None)
    sig = key.sign(signed_bytes(unsigned))
    return replace(unsigned, signature={
        "alg": ALG, "key": key_id(raw), "sig": base64.b64encode(sig).decode(),
    })


def verify(commit: Commit, keys: dict[str, PublicKey]) -> tuple[Status, str | None]:
    """Check a commit's signature against `keys`; returns (status, key id)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    sig = commit.signature
    if sig is None:
        return "unsigned", None
    kid = sig.get("key")
    if sig.get("alg") != ALG or not isinstance(kid, str) or not _KEY_ID_RE.match(kid):
        return "malformed", kid if isinstance(kid, str) else None
    try:
        raw_sig = base64.b64decode(str(sig.get("sig", "")), validate=True)
    except (binascii.Error, ValueError):
        return "malformed", kid
    key = keys.get(kid)
    if key is None:
        return "unknown-key", kid
    try:
        Ed25519PublicKey.from_public_bytes(key.raw).verify(raw_sig, signed_bytes(commit))
    except (InvalidSignature, ValueError):
        return "bad", kid
    return "good", kid


@dataclass(frozen=True)
class CommitCheck:
    """One commit's signature status."""

    commit: ObjectId
    status: Status
    key: str | None
    summary: str


def check_commits(
    repo: Repository, commits: list[tuple[ObjectId, Commit]]
) -> list[CommitCheck]:
    """The signature status of each commit."""
    keys = trusted_keys(repo.settings)
    out = []
    for oid, commit in commits:
        status, kid = verify(commit, keys)
        out.append(CommitCheck(oid, status, kid, commit.summary))
    return out


def require_signed(checks: list[CommitCheck], what: str) -> None:
    """Raise SignatureError unless every check is good."""
    bad = [c for c in checks if c.status != "good"]
    if not bad:
        return
    counts: dict[str, int] = {}
    for c in bad:
        counts[c.status] = counts.get(c.status, 0) + 1
    detail = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    first = bad[0]
    raise SignatureError(
        f"refusing {what}: {len(bad)} commit(s) not signed by a trusted key ({detail}; "
        f"first: {first.commit[:12]} {first.status})",
        hint="`funes keys trust <pubkey>` for a teammate's key, or drop --require-signed",
    )


#: `<repo>/written-here`: the commits this machine wrote, one id a line (local, never sent).
WRITTEN_HERE = "written-here"
#: Largest written-here file read back (a line is 65 bytes: a million commits).
_WRITTEN_MAX = 64 << 20


def note_written(repo_path: Path, oid: ObjectId) -> None:
    """Record that this machine wrote commit `oid` (its rows are the user's own turns).

    Called before the ref moves, so a commit that is on a branch was recorded; one that
    never got there (a crash) is a line that names nothing reachable.
    """
    with open(repo_path / WRITTEN_HERE, "a", encoding="ascii") as fh:
        fh.write(f"{oid}\n")


#: How far before the size recorded with the marks a catch-up starts reading `written-here`:
#: a commit is noted before its ref moves, so the notes of commits still in flight when the
#: marks were saved (one writer at a time: at most one) lie just before that size.
_WRITTEN_MARGIN = 65 * 64


def written_here(repo: Repository, start: int = 0) -> frozenset[str]:
    """The commits `note_written` recorded in this repository (empty when none or unreadable).

    From byte `start` on: a recall reads only the notes added since its cached marks (the
    file grows by a line a commit, and reading it whole made every recall's cost grow with
    the history). A line `start` cuts is shorter than an id and is dropped.
    """
    try:
        with open(repo.path / WRITTEN_HERE, "rb") as fh:
            fh.seek(start)
            raw = fh.read(_WRITTEN_MAX)
    except OSError:
        return frozenset()
    return frozenset(line for line in raw.decode("ascii", "replace").split()
                     if _OID_RE.match(line))


_OID_RE = re.compile(r"^[0-9a-f]{64}$")


def _written_size(repo: Repository) -> int:
    try:
        return (repo.path / WRITTEN_HERE).stat().st_size
    except OSError:
        return 0


@dataclass(frozen=True)
class Marks:
    """What the history says about each chunk id (funes.api.trust turns it into marks).

    `doubtful`: ids no commit vouches for (see `chunk_marks`). `own`: ids a commit of the
    user's own added: written on this machine (`written-here`), or signed with their key.
    """

    doubtful: IdSet
    own: IdSet


_UNTRUSTED_CACHE: dict[tuple[str, str | None, frozenset[str], bool], Marks] = {}


def untrusted_chunk_ids(repo: Repository) -> IdSet:
    """Chunk ids that no commit this user can vouch for added (`chunk_marks(repo).doubtful`)."""
    return chunk_marks(repo).doubtful


def chunk_marks(repo: Repository, *, written: bool = True) -> Marks:
    """Which chunk ids no commit vouches for, and which the user's own commits added.

    `written=False` ignores `written-here`: a read-only copy of a remote is filled by fetching
    or converting rows (a Rust funes' memory), never by the user's own turns.

    A commit vouches for the chunks its manifests add when it was written on this machine,
    or is signed by a trusted key (the user's own included). A commit signed by an unknown
    key, or whose signature is bad or malformed, vouches for nothing. An unsigned commit
    vouches only while the user trusts no key at all: a declared key (their own, or a
    teammate's) means a signing team, where an unsigned commit is anyone's, except the
    history the user had before they started signing (the first-parent ancestors of the
    oldest commit signed with their own key on HEAD's first-parent chain; a commit cannot be
    placed behind one that already exists, so nothing pulled later gets there). A chunk's
    content hashes to its id, so one vouched addition of an id vouches for its text.

    Cached per HEAD and set of trusted keys, in the process and in `index/untrusted.json`
    (a disposable cache like `ids.sqlite`): when HEAD moved on by commits that all vouch (an
    index run's, a trusted teammate's), the sets are caught up from those commits alone, so
    a recall after each hook commit does not walk the whole history again.
    """
    head = repo.head()
    keys = trusted_keys(repo.settings)
    own = own_key(repo.settings)
    cache_key = (str(repo.path), head, frozenset(keys), written)
    cached = _UNTRUSTED_CACHE.get(cache_key)
    if cached is not None:
        return cached
    signature = {"version": 3, "keys": sorted(keys), "own": own.id if own else None,
                 "written": written}
    size = _written_size(repo) if written else 0
    where = (str(repo.path), repr(sorted(signature.items())))
    state = _LATEST.get(where)
    if state is None:
        state = _load_marks(repo, signature)
    caught_up = None
    if state is not None:
        since = state.written_size
        start = max(0, since - _WRITTEN_MARGIN) if 0 <= since <= size else 0
        recent = written_here(repo, start) if written else frozenset()
        caught_up = _catch_up(repo, head, state, keys, own, recent)
    if caught_up is not None:
        doubtful, signed_seen, mine, walked = caught_up
        assert state is not None
        unsaved = state.unsaved + walked
    else:
        mine_here = written_here(repo) if written else frozenset()
        doubtful, signed_seen, mine = _untrusted_from_scratch(repo, head, keys, own, mine_here)
        unsaved = _SAVE_AFTER
    if unsaved >= _SAVE_AFTER:
        _save_marks(repo, {**signature, "head": head, "signed_seen": signed_seen,
                           "ids": doubtful.dump(), "own_ids": mine.dump(),
                           "written_size": size})
        unsaved = 0
    _LATEST[where] = _State(head, doubtful, signed_seen, mine, unsaved, size)
    # Two HEADs per memory (a request may still read the older): each holds every own id.
    same = [k for k in _UNTRUSTED_CACHE if k[0] == cache_key[0] and k[2:] == cache_key[2:]]
    for other in same[:-1]:
        del _UNTRUSTED_CACHE[other]
    if len(_UNTRUSTED_CACHE) > 64:
        _UNTRUSTED_CACHE.clear()
    result = Marks(doubtful, mine)
    _UNTRUSTED_CACHE[cache_key] = result
    return result


def trust_rule(settings: Settings) -> str:
    """Which rule decides whether an unsigned commit vouches here (what `status` shows)."""
    keys = trusted_keys(settings)
    own = own_key(settings)
    if not keys:
        return ("no signing keys: every commit of a memory of yours vouches for its passages "
                "(`funes keys generate`, `funes keys trust` make it a signing team)")
    who = ("your key" if own is not None else "no key of your own") + (
        f" and {len(keys) - (own is not None)} teammate key(s)"
        if len(keys) - (own is not None) else "")
    return (f"signing team ({who}): only commits written here or signed by a trusted key "
            "vouch; unsigned and unknown-key commits vouch for nothing")


_MARKS = "untrusted.json"
_CATCH_UP_LIMIT = 5000
#: Commits a process catches up before it rewrites `untrusted.json` (every own chunk id: 100 ms
#: at 113k, after each hook commit); a process reading an older file walks them, cheaply.
_SAVE_AFTER = 32


@dataclass(frozen=True)
class _State:
    """The marks as of `head`, kept per memory between HEADs (the in-process `untrusted.json`)."""

    head: ObjectId | None
    doubtful: IdSet
    signed_seen: bool
    mine: IdSet  # every chunk of a memory the user indexed: compact (funes.storage.idset)
    unsaved: int  # commits caught up since `untrusted.json` was last written
    written_size: int  # how much of `written-here` the marks took in (-1: unknown)


#: The latest _State per memory and trust signature: a new HEAD is caught up from it.
_LATEST: dict[tuple[str, str], _State] = {}


def _load_marks(repo: Repository, signature: dict[str, Any]) -> _State | None:
    """The marks `index/untrusted.json` holds, when it was written under `signature`."""
    import json

    try:
        data = json.loads((repo.path / "index" / _MARKS).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or any(data.get(k) != v for k, v in signature.items()):
        return None
    head, size = data.get("head"), data.get("written_size")
    doubtful, mine = IdSet.load(data.get("ids")), IdSet.load(data.get("own_ids"))
    if doubtful is None or mine is None or not isinstance(head, str | None):
        return None
    return _State(data["head"], doubtful, bool(data.get("signed_seen")), mine, 0,
                  size if isinstance(size, int) else -1)


def _save_marks(repo: Repository, data: dict[str, Any]) -> None:
    import json

    from funes.storage.atomic import write_atomic

    with contextlib.suppress(OSError):
        write_atomic(repo.path / "index" / _MARKS, json.dumps(data).encode(), durable=False)


def _catch_up(
    repo: Repository, head: ObjectId | None, stored: _State,
    keys: dict[str, PublicKey], own: PublicKey | None, written: frozenset[str],
) -> tuple[IdSet, bool, IdSet, int] | None:
    """The stored sets moved on to `head`, and the commits walked (None: walk from scratch).

    Only commits that all vouch can be folded in (their ids stop being doubtful); a doubtful
    one, an unsigned one in a signing team, or the user's first own-signed commit (it moves
    the boundary of the history from before signing) needs the whole history.
    """
    start = stored.head
    before = stored.doubtful
    if start == head:
        return before, stored.signed_seen, stored.mine, 0
    if head is None or start is None:
        return None
    signed_seen = stored.signed_seen
    added_mine: set[str] = set()
    vouched: set[str] = set()
    stack: list[str] = [head]
    seen: set[str] = set()
    while stack:
        oid = stack.pop()
        if oid == start or oid in seen:
            continue
        seen.add(oid)
        if len(seen) > _CATCH_UP_LIMIT:
            return None
        commit = repo.objects.commit(oid)
        ours = oid in written
        if commit.signature is None:
            if keys and not ours:
                return None
        elif own is not None and commit.signature.get("key") == own.id and not signed_seen:
            return None  # the first own-signed commit moves the grandfathered boundary
        elif verify(commit, keys)[0] == "good":
            ours = ours or (own is not None and commit.signature.get("key") == own.id)
        elif not ours:
            return None
        if not commit.parents:
            return None  # the walk passed the stored head: not a descendant of it
        stack.extend(commit.parents)
        ids = _chunk_ids(repo, commit)
        vouched.update(ids)
        if ours:
            added_mine.update(ids)
    mine = stored.mine.union(added_mine) if added_mine else stored.mine
    return before.difference(vouched), signed_seen, mine, len(seen)


def _chunk_ids(repo: Repository, commit: Commit) -> set[str]:
    """The chunk ids a commit's manifests add."""
    out: set[str] = set()
    for mid in commit.manifests:
        manifest = repo.objects.manifest(mid)
        if manifest.table == "chunks":
            out.update(manifest.ids)
    return out


def _untrusted_from_scratch(
    repo: Repository, head: ObjectId | None, keys: dict[str, PublicKey], own: PublicKey | None,
    written: frozenset[str] = frozenset(),
) -> tuple[IdSet, bool, IdSet]:
    """Walk every commit: (doubtful ids, whether an own-signed commit was seen, own ids)."""
    grandfathered = _before_signing(repo, head, own) if own is not None and head else None
    doubtful: set[str] = set()
    vouched: set[str] = set()
    mine: set[str] = set()
    signed_seen = False
    for oid, commit in repo.walk(head) if head else ():
        ours = oid in written
        if commit.signature is None:
            good = ours or not keys or (grandfathered is not None and oid in grandfathered)
        else:
            good = verify(commit, keys)[0] == "good"
            if good and own is not None and commit.signature.get("key") == own.id:
                signed_seen = ours = True
            good = good or ours
        ids = _chunk_ids(repo, commit)
        (vouched if good else doubtful).update(ids)
        if ours:
            mine.update(ids)
    return IdSet(doubtful - vouched), signed_seen, IdSet(mine)


def _before_signing(repo: Repository, head: ObjectId, own: PublicKey) -> set[str]:
    """First-parent ancestors of the oldest own-signed commit on HEAD's first-parent chain."""
    chain: list[tuple[str, Commit]] = []
    oid: str | None = head
    while oid is not None:
        commit = repo.objects.commit(oid)
        chain.append((oid, commit))
        oid = commit.parents[0] if commit.parents else None
    oldest = None
    for index, (_, commit) in enumerate(chain):
        sig = commit.signature
        if sig is not None and sig.get("key") == own.id and verify(commit, {own.id: own})[0] \
                == "good":
            oldest = index
    if oldest is None:
        return set()
    return {cid for cid, _ in chain[oldest + 1:]}
