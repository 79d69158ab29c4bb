"""Which memory a command works on, what output calls it, and whether it is the user's.

Every command asks these three questions; they are answered here once and handed back whole
(`MemoryChoice`) so the CLI, the MCP server and `ask` never recompute them:

- **which**: `--memory PATH` (a `.funes` directory or its parent), `--memory org/name` (or
  `hf://datasets/…`, `file://…`: a remote memory, read through a private read-only copy under
  `$FUNES_HOME/cache/remotes/` at its current revision), else discovery from the current
  directory like git, then the global memory. That memory or an error, never another one
  (`choose_memory`): only a remote that does not answer is read from its cached copy, and
  the output says so.
- **label**: what `--memory` takes to open the same memory again (`org/name` for a remote's
  copy, the path otherwise).
- **owned**: a memory is the user's when it was created here (`init`, or `funes add AGENT
  REMOTE` creating the remote), or when the user owns its remote: on the Hub, the remote's
  namespace is the user's name or one of their organisations (the Hub's `whoami`, cached a day
  under `$FUNES_HOME/cache/whoami.json`); a directory remote is the user's when it belongs to
  their Unix user. A clone records the decision in its config (`core.owned`) so it holds after
  every pull; the read-only copies behind `--memory org/name` are decided on each open. Recall
  marks the passages of a memory that is not the user's untrusted, except the user's own
  turns (funes.api.trust decides, for every output).

A memory the Rust funes wrote (a bare `chunks.lance`, no refs) is detected by its layout and
read the same way, through a copy converted from it (funes.api.foreign), never the user's.

A read-only copy is never a write target: `writable_memory` refuses it with the command that
does what the user meant (`funes clone`, `funes add AGENT org/name`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes.errors import FunesError, RemoteError, UsageError
from funes.ingest import backlog
from funes.ingest.scrub import note_merged
from funes.model.ids import ObjectId
from funes.model.refs import RefName, branch_ref, check_ref_name
from funes.remotes import sync as _sync
from funes.remotes.base import (
    RemoteNotFoundError,
    RemoteSpec,
    RemoteUnreachableError,
    cache_root,
    looks_like_remote,
    parse_url,
)
from funes.remotes.foreign import table_in
from funes.retrieval import indexes
from funes.storage.atomic import write_atomic
from funes.storage.lock import WriteLock
from funes.storage.repo import Repository
from funes.storage.transfer import MergeResult, is_ancestor
from funes.storage.transfer import merge as _merge

__all__ = [
    "MemoryChoice",
    "ReadOnlyMemoryError",
    "check_writable",
    "choose_memory",
    "is_cache",
    "is_remote_memory",
    "memory_label",
    "merge_in",
    "open_memory",
    "open_remote_memory",
    "owned",
    "owns_remote",
    "pick_tip",
    "remote_label",
    "split_tag",
    "writable_memory",
]

#: Seconds the Hub's answer to "who am I" is reused (an organisation change shows within a day).
WHOAMI_TTL = 86400.0
#: Largest cached whoami file read back (it holds a name and a list of organisations).
_WHOAMI_MAX = 1 << 16


class ReadOnlyMemoryError(UsageError):
    """A command that writes was pointed at the read-only copy of a remote memory."""


@dataclass(frozen=True)
class MemoryChoice:
    """The memory a command works on, how output names it, and whether it is the user's."""

    repo: Repository
    label: str
    owned: bool
    #: Set when the remote `--memory org/name` could not be reached and the copy cached here
    #: is read instead: one line saying so, which heads the output (never another memory).
    warning: str | None = None


# -- which memory ------------------------------------------------------------------------------


def is_remote_memory(text: str, cwd: Path | None = None) -> bool:
    """True when `--memory TEXT` names a remote (`org/name`, `hf://…`, `file://…`, `…@TAG`)."""
    return looks_like_remote(split_tag(text, cwd)[0], cwd or Path.cwd())


def split_tag(text: str, cwd: Path | None = None) -> tuple[str, str | None]:
    """`org/name@TAG` → (`org/name`, `TAG`): a remote memory at one of its tags.

    Only a remote URL takes a tag (a local path may contain `@`); the tag must be a valid
    ref name.
    """
    base, sep, tag = text.rpartition("@")
    if not sep or not base or not tag or not looks_like_remote(base, cwd or Path.cwd()):
        return text, None
    check_ref_name(f"refs/tags/{tag}")
    return base, tag


def open_memory(settings: Settings, memory: str | Path | None = None) -> Repository:
    """The repository a command works on: `--memory` if given, else discovery from cwd.

    A remote `--memory` is read through its local copy (`open_remote_memory`); unlike
    `choose_memory`, an unreachable remote is an error here, never a fallback. A `Path` is
    always a local directory (library callers that built the path need no remote parsing).
    """
    if isinstance(memory, Path):
        return Repository.open(memory, settings)
    if memory:
        if is_remote_memory(memory, settings.cwd):
            return open_remote_memory(settings, memory)
        path = Path(memory).expanduser()
        if table_in(path if path.is_absolute() else settings.cwd / path) is not None:
            return open_remote_memory(settings, memory)  # a Rust funes' memory: its copy
        return Repository.open(Path(memory), settings)
    return Repository.discover(settings)


def choose_memory(settings: Settings, memory: str | None = None) -> MemoryChoice:
    """Open the memory `--memory` names for reading, with its label and ownership.

    That memory or an error, never another one: an agent that asked a public memory must not
    get the user's private passages as its answer. A remote `memory` that does not answer
    (`RemoteUnreachableError`: no network, a timeout, the Hub failing) is read from the copy
    an earlier call cached here (a Rust funes' memory's converted copy too), and
    `MemoryChoice.warning` says so (the output's first line); with no cached copy, or when
    the remote answered with a refusal (a bad token), no such memory or no such tag, the
    error propagates (exit 5) with its fix. Every reader (the CLI, MCP, the warm server,
    `ask`) comes through here, so they agree.

    Raises:
        RemoteError: the remote memory cannot be read and no copy of it can stand in.
        NotARepositoryError: a local `memory` (or the one found from the current directory)
            is not a funes memory.
    """
    if not memory or not is_remote_memory(memory, settings.cwd):
        repo = open_memory(settings, memory)
        return MemoryChoice(repo, memory_label(repo), owned(repo))
    url, tag = split_tag(memory, settings.cwd)
    spec = parse_url(url, settings.cwd)
    try:
        repo = open_remote_memory(settings, memory)
    except RemoteUnreachableError as exc:
        return _cached_copy(settings, spec, tag, exc)
    return MemoryChoice(repo, remote_label(repo) or spec.display, owned(repo))


def _cached_copy(settings: Settings, spec: RemoteSpec, tag: str | None,
                 exc: RemoteUnreachableError) -> MemoryChoice:
    """The copy of an unreachable remote cached by an earlier read, said to be one.

    Raises:
        RemoteUnreachableError: `exc`, with a hint saying no copy is cached here yet.
    """
    cached = cache_root(settings) / _cache_name(spec, tag)
    commit = None
    if (cached / "FORMAT").is_file():
        repo = Repository.open(cached, settings)
        commit = repo.head_commit()
    if commit is None:
        raise RemoteUnreachableError(
            f"{exc.message}; no copy of it is cached on this machine",
            hint=f"run it again once {spec.display} can be reached; a copy is kept then, "
            "for the next time it cannot",
        ) from None
    label = remote_label(repo) or spec.display
    return MemoryChoice(
        repo, label, owned(repo),
        f"{exc.message}: answering from the copy of {label} cached here, as of {commit.time}",
    )


def writable_memory(settings: Settings, memory: str | None, *, command: str) -> Repository:
    """The memory a writing command (`index`, `embed`, `add`) works on; never a read-only copy.

    Raises:
        ReadOnlyMemoryError: `memory` names a remote or its cached copy; the hint names
            `command`'s way of doing what the user meant.
    """
    if memory and is_remote_memory(memory, settings.cwd):
        name = parse_url(split_tag(memory, settings.cwd)[0], settings.cwd).display
        raise ReadOnlyMemoryError(
            f"{name} is a remote memory: `--memory {memory}` reads a read-only copy of it",
            hint=_writable_hint(command, memory),
        )
    return check_writable(open_memory(settings, memory), command=command)


def check_writable(repo: Repository, *, command: str) -> Repository:
    """`repo`, unless it is the read-only copy of a remote memory (ReadOnlyMemoryError)."""
    label = remote_label(repo)
    if label is not None:
        raise ReadOnlyMemoryError(
            f"{repo.path} is the read-only copy of the remote memory {label}",
            hint=_writable_hint(command, label),
        )
    return repo


def _writable_hint(command: str, remote: str) -> str:
    if command.startswith("add"):
        agent = command.split()[1] if len(command.split()) > 1 else "AGENT"
        return f"run `funes add {agent} {remote}`: it clones the memory and wires the agent to it"
    return (f"clone it first (`funes clone --global {remote}`, or `funes add AGENT {remote}`), "
            f"then run `funes {command}` there")


def is_cache(repo: Repository) -> bool:
    """Whether `repo` is one of the read-only copies of a remote memory."""
    return repo.path.resolve().parent == cache_root(repo.settings).resolve()


def remote_label(repo: Repository) -> str | None:
    """What `--memory` takes to read this memory again, if it is a remote's cached copy."""
    if not is_cache(repo):
        return None
    url = repo.config.get("remote.origin.url")
    if not url:
        return None
    spec = parse_url(url, repo.settings.cwd)
    label = spec.display if spec.kind == "hf" else f"file://{spec.path}"
    tag = _pinned_tag(repo.path)
    return f"{label}@{tag}" if tag else label


def memory_label(repo: Repository) -> str:
    """How output names a memory: what `--memory` takes to open it again."""
    return remote_label(repo) or str(repo.path)


def merge_in(repo: Repository, tip: ObjectId, label: str) -> MergeResult:
    """Merge `tip` into HEAD, then make the vectors that came searchable.

    Vectors from a history that stored another width are re-encoded into the home table
    (`backlog.adopt`: seconds, not the hours a re-embed would take), and the ANN index is
    brought up to date. Which redaction rules the incoming chunks met is recorded
    (`funes status` asks for `funes scrub` only when they are older than the installed ones).

    A memory that grows by pulling never runs `funes embed`, which is where the index is
    otherwise built; without this a pulled 100k-chunk memory would search exactly (≈200 ms a
    query instead of ≈40 ms, bench/results/recall.md).
    """
    before = repo.head_commit()
    result = _merge(repo, tip, label=label)
    note_merged(repo, result.redaction, bool(before and before.chunk_count))
    backlog.adopt(repo)  # vectors of a history that stored another width (float32)
    indexes.ensure_vectors(repo)
    return result


def open_remote_memory(settings: Settings, url: str) -> Repository:
    """A remote memory at its current revision (or at `…@TAG`), as a local read-only copy.

    The copy lives in `$FUNES_HOME/cache/remotes/<name>/` (one per tag read); only missing
    immutable files are downloaded, so a call when the remote has not moved costs one small
    request (its refs). Its `core.owned` follows the remote's owner (`owns_remote`), decided
    on each open.

    Raises:
        RemoteError: the remote cannot be reached or read, or has no such tag (the message
            names it).
    """
    url, tag = split_tag(url, settings.cwd)
    spec = parse_url(url, settings.cwd)
    if spec.kind == "dir" and spec.path is not None and table_in(spec.path) is not None:
        from funes.api.foreign import local_copy

        return local_copy(settings, spec, tag)
    root = cache_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    name = _cache_name(spec, tag)
    cache = root / name
    # One process fills a cache at a time; readers of a filled cache never wait long.
    with WriteLock(root / f"{name}.lock", timeout=60):
        for attempt in (1, 2):
            repo = _open_cache(settings, cache, spec, tag)
            remote = _sync.open_remote(spec, "origin", settings, repo.path)
            try:
                state = remote.state()
            except FunesError:
                if repo.head() is None:  # never filled: leave no empty copy behind
                    shutil.rmtree(cache, ignore_errors=True)
                raise
            if state.exists and not state.branches and spec.kind == "hf":
                from funes.api.foreign import hub_copy

                copy = hub_copy(settings, repo, remote, state, tag)  # a Rust funes' memory?
                if copy is not None:
                    return copy
            if not state.exists or not state.branches:
                raise RemoteNotFoundError(
                    f"{remote.display}: no funes memory there",
                    hint="check the name; a private memory needs a token (HF_TOKEN)",
                )
            _record_owner(repo, owns_remote(settings, spec))
            tip = pick_tip(state.refs, tag, remote.display)
            head = repo.head()
            if head == tip:
                return repo
            _sync.fetch(repo, remote, state=state)
            if head is None or is_ancestor(repo, head, tip):
                merge_in(repo, tip, "origin")
                return repo
            # The remote was rewritten (a forced push): start the copy over.
            shutil.rmtree(cache, ignore_errors=True)
            if attempt == 2:
                break
    raise RemoteError(f"{spec.display}: cannot make a consistent local copy")


def _cache_name(spec: RemoteSpec, tag: str | None) -> str:
    if tag is None:
        return spec.cache_name
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in tag)[-40:]
    digest = hashlib.sha256(tag.encode()).hexdigest()[:8]
    return f"{spec.cache_name}@{safe}-{digest}"


def _pinned_tag(path: Path) -> str | None:
    try:
        text = (path / "PINNED").read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def pick_tip(refs: Mapping[RefName, ObjectId], tag: str | None, display: str) -> ObjectId:
    """The commit a remote memory is read at: `TAG`'s, else `main`'s, else the first branch's.

    Raises:
        RemoteNotFoundError: the remote has no tag `tag`.
    """
    if tag is not None:
        oid = refs.get(RefName(f"refs/tags/{tag}"))
        if oid is None:
            raise RemoteNotFoundError(f"{display} has no tag {tag!r}",
                                      hint="`funes tag` lists a memory's tags where it was made")
        return oid
    branches = sorted(r for r in refs if r.startswith("refs/heads/"))
    return refs.get(branch_ref("main")) or refs[branches[0]]


def _open_cache(settings: Settings, cache: Path, spec: RemoteSpec, tag: str | None) -> Repository:
    if (cache / "FORMAT").is_file():
        return Repository.open(cache, settings)
    shutil.rmtree(cache, ignore_errors=True)  # a copy that never finished
    repo = Repository.init(cache, settings)
    repo.config.set("core.owned", "false")
    repo.config.set("remote.origin.url", spec.url)
    if tag is not None:
        write_atomic(cache / "PINNED", f"{tag}\n".encode())
    return repo


def _record_owner(repo: Repository, mine: bool) -> None:
    value = "true" if mine else "false"
    if repo.config.get("core.owned") != value:
        repo.config.set("core.owned", value)


# -- who owns it -------------------------------------------------------------------------------


def owned(repo: Repository) -> bool:
    """Whether the memory is the user's own (recall marks others' passages untrusted)."""
    return (repo.config.get("core.owned") or "true") == "true"


def owns_remote(settings: Settings, spec: RemoteSpec) -> bool:
    """Whether the user owns the remote `spec` names (fails closed: unknown is "not yours").

    The Hub: its namespace is the token's user or one of their organisations. A directory:
    it (or, before it exists, its nearest existing parent) belongs to this Unix user.
    """
    if spec.kind == "hf":
        names = hub_namespaces(settings)
        return spec.repo_id.split("/", 1)[0] in names
    assert spec.path is not None
    path = spec.path
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return path.stat().st_uid == os.getuid()
    except OSError:
        return False


def hub_namespaces(settings: Settings) -> frozenset[str]:
    """The user's name and organisations on the Hub, cached `WHOAMI_TTL` seconds per token.

    Empty without a token or when the Hub cannot be asked and nothing is cached: ownership
    then fails closed.
    """
    from funes.remotes.hf import current_token, whoami

    token = current_token()
    if not token:
        return frozenset()
    key = hashlib.sha256(f"{settings.hf_endpoint or ''}\n{token}".encode()).hexdigest()[:32]
    path = settings.home / "cache" / "whoami.json"
    cached = _read_whoami(path)
    entry = cached.get(key)
    now = time.time()
    if isinstance(entry, dict) and now - float(entry.get("time", 0)) < WHOAMI_TTL:
        return frozenset(str(n) for n in entry.get("names", []) if isinstance(n, str))
    try:
        user, orgs = whoami(settings.hf_endpoint, token)
    except RemoteError:
        if isinstance(entry, dict):  # stale beats nothing while offline
            return frozenset(str(n) for n in entry.get("names", []) if isinstance(n, str))
        return frozenset()
    names = sorted({user, *orgs})
    cached[key] = {"time": now, "names": names}
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(cached, sort_keys=True).encode())
    return frozenset(names)


def _read_whoami(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as fh:
            raw = fh.read(_WHOAMI_MAX + 1)
        value = json.loads(raw) if len(raw) <= _WHOAMI_MAX else {}
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
