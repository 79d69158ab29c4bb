"""Security verbs: forget, scrub, gc (and keys, signature checks as they land).

Each returns a dataclass and never prints; funes.cli.commands.security renders them.
"""

from __future__ import annotations

from dataclasses import dataclass

from funes._env import Settings
from funes.errors import UsageError
from funes.ingest.scrub import ScrubbedChunk, ScrubResult
from funes.ingest.scrub import scrub as _scrub
from funes.storage import forget as _forget
from funes.storage import signing as _signing
from funes.storage.fsck import FsckReport, Problem
from funes.storage.gc import GcResult
from funes.storage.gc import gc as _gc
from funes.storage.repo import Repository
from funes.storage.signing import CommitCheck, PublicKey

__all__ = [
    "CommitCheck",
    "ForgetResult",
    "GcResult",
    "PublicKey",
    "ScrubResult",
    "ScrubbedChunk",
    "add_signature_problems",
    "check_signatures",
    "forget",
    "gc",
    "keys_export",
    "keys_generate",
    "keys_list",
    "keys_trust",
    "scrub",
]


@dataclass(frozen=True)
class ForgetResult:
    """What `forget` hid."""

    chunks: list[str]
    commit: str | None
    dry_run: bool = False


def forget(
    repo: Repository,
    *,
    session: str | None = None,
    chunk: str | None = None,
    before: str | None = None,
    match: str | None = None,
    project: str | None = None,
    path: str | None = None,
    agent: str | None = None,
    dry_run: bool = False,
) -> ForgetResult:
    """Hide the chunks matching every criterion given, with one tombstone commit.

    `project`, `path` and `agent` match as exclusions do (funes.storage.exclusions), once.
    """
    selection = _forget.Selection(session, chunk, before, match, project, path, agent)
    ids = _forget.select(repo, selection)
    if dry_run or not ids:
        return ForgetResult(ids, None, dry_run)
    result = _forget.tombstone(repo, ids, selection.describe())
    return ForgetResult(ids, result.commit, False)


def scrub(repo: Repository, *, dry_run: bool = False) -> ScrubResult:
    """Redact stored chunks again; replace dirty ones (tombstone + redacted copy)."""
    return _scrub(repo, dry_run=dry_run)


def gc(repo: Repository) -> GcResult:
    """Remove tombstoned rows and unreachable objects and files from this machine's disk."""
    return _gc(repo)


# -- signatures --------------------------------------------------------------------------------


def keys_generate(settings: Settings, comment: str | None = None, *,
                  force: bool = False) -> PublicKey:
    """Create this user's Ed25519 signing key under `$FUNES_HOME/keys/`."""
    from funes.storage.identity import author

    who = comment if comment is not None else str(author(settings))
    return _signing.generate(settings, who, force=force)


def keys_list(settings: Settings) -> list[PublicKey]:
    """This user's key (first, when there is one) and the trusted keys."""
    keys = _signing.trusted_keys(settings)
    return sorted(keys.values(), key=lambda k: (not k.own, k.comment, k.id))


def keys_export(settings: Settings) -> PublicKey:
    """This user's public key, to hand to teammates (`funes keys trust`)."""
    key = _signing.own_key(settings)
    if key is None:
        raise UsageError("no signing key yet", hint="create one with `funes keys generate`")
    return key


def keys_trust(settings: Settings, pubkey: str) -> PublicKey:
    """Trust a teammate's public key (its exported line, or a file holding it)."""
    return _signing.trust(settings, pubkey)


def check_signatures(repo: Repository, rev: str = "HEAD") -> list[CommitCheck]:
    """The signature status of every commit reachable from `rev`."""
    if repo.head() is None and rev == "HEAD":
        return []
    return _signing.check_commits(repo, list(repo.walk(repo.resolve(rev))))


def add_signature_problems(repo: Repository, report: FsckReport) -> None:
    """Add signature checks to an fsck report (bad = damage, unsigned/unknown = warnings)."""
    seen: set[str] = set()
    tips = [t for t in [repo.head()] if t]
    tips += [t for ref in repo.refs.names() if (t := repo.refs.read(ref))]
    for tip in tips:
        commits = [(oid, c) for oid, c in repo.walk(tip) if oid not in seen]
        seen.update(oid for oid, _ in commits)
        for check in _signing.check_commits(repo, commits):
            if check.status in ("bad", "malformed"):
                report.problems.append(Problem(
                    "signature", check.commit,
                    f"{check.status} signature (key {check.key or '?'}): the commit was "
                    "changed after signing, or the key id was swapped"))
            elif check.status != "good":
                what = "unsigned" if check.status == "unsigned" else (
                    f"signed by an unknown key {check.key}")
                report.warnings.append(Problem("signature", check.commit, what))


# -- memory keys (encrypted remotes) ------------------------------------------------------------


def memory_key_export(repo: Repository, remote: str) -> str:
    """The key line of an encrypted remote's memory, for teammates (keep it secret)."""
    from funes.remotes import crypt
    from funes.remotes.sync import remote_url

    return crypt.export_key(repo.settings, remote_url(repo, remote))


def memory_key_import(settings: Settings, line: str, url: str | None = None) -> str:
    """Store a memory key line (or a file holding one); returns the URL it is for."""
    from funes.remotes import crypt
    from funes.remotes.base import parse_url

    target = parse_url(url, settings.cwd).url if url else None
    return crypt.import_key(settings, line, target)
