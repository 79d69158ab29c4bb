"""Signed commits: keys, signing, verification, tampering, --require-signed."""

from __future__ import annotations

import json
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from funes import api
from funes.api import security as sec
from funes.model.ids import canonical_json
from funes.storage import signing
from funes.storage.repo import Repository
from funes.storage.signing import SignatureError
from tests.builders import make_batch
from tests.remotes.conftest import World, visible


def _person(world: World, name: str) -> object:
    """Settings for another person: their own FUNES_HOME (and so their own keys)."""
    home = world.tmp / f"home-{name}"
    home.mkdir(exist_ok=True)
    return replace(world.settings, home=home)


def test_keys_generate_sign_and_verify(repo: Repository, settings: object) -> None:
    key = sec.keys_generate(settings, "Ada <ada@example.org>")  # type: ignore[arg-type]
    private = signing.keys_dir(settings) / "signing.key"  # type: ignore[arg-type]
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.parent.joinpath("signing.pub").read_text().strip() == key.export()
    repo.commit_chunks(make_batch(0, 3), "index: signed")
    head = repo.head_commit()
    assert head is not None and head.signature is not None
    assert head.signature["alg"] == "ed25519" and head.signature["key"] == key.id
    assert [c.status for c in sec.check_signatures(repo)] == ["good"]
    report = api.fsck(repo, verify=True)
    assert report.ok and not report.warnings


def _tampered(repo: Repository, **changes: object) -> str:
    """Write HEAD's commit again with `changes` (signature kept) and move main to it."""
    head = repo.head()
    assert head is not None
    data = json.loads(repo.objects.get_raw(head))
    for key, value in changes.items():
        if key == "sig_key":
            data["signature"]["key"] = value
        else:
            data[key] = value
    raw = canonical_json(data)
    from funes.model.ids import hash_bytes

    oid = hash_bytes(raw)
    path = repo.path / "objects" / oid[:2] / oid[2:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    (repo.path / "refs" / "heads" / "main").write_text(oid + "\n")
    return oid


def test_tampering_is_detected(repo: Repository, settings: object, tmp_path: Path) -> None:
    sec.keys_generate(settings, "me")  # type: ignore[arg-type]
    repo.commit_chunks(make_batch(0, 3), "index: honest")
    # A changed body: the signature no longer matches.
    oid = _tampered(repo, message="index: dishonest", chunk_count=99)
    checks = {c.commit: c.status for c in sec.check_signatures(repo)}
    assert checks[oid] == "bad"
    report = api.fsck(repo, rows=False, verify=True)
    assert not report.ok and any(p.kind == "signature" and p.name == oid
                                 for p in report.problems)
    # A swapped key: another trusted key's id on this signature.
    other_home = tmp_path / "other"
    other_home.mkdir()
    other = signing.generate(replace(settings, home=other_home), "mallory")  # type: ignore[type-var]
    sec.keys_trust(settings, other.export())  # type: ignore[arg-type]
    _tampered(repo, message="index: honest")  # restore the body first
    swapped = _tampered(repo, sig_key=other.id)
    assert {c.commit: c.status for c in sec.check_signatures(repo)}[swapped] == "bad"
    # A key nobody trusts: reported as unknown.
    unknown = _tampered(repo, sig_key="0" * 32)
    assert {c.commit: c.status for c in sec.check_signatures(repo)}[unknown] == "unknown-key"
    report = api.fsck(repo, rows=False, verify=True)
    assert any(w.kind == "signature" and "unknown key" in w.detail for w in report.warnings)


def test_require_signed_refuses_unsigned_pull_and_clone(world: World) -> None:
    a = world.machine("a")  # A has no key: unsigned commits
    a.commit_chunks(make_batch(0, 5), "index: unsigned")
    api.push(a)
    bob = _person(world, "bob")
    sec.keys_generate(bob, "bob")  # type: ignore[arg-type]
    b = Repository.init(world.tmp / "b" / ".funes", bob)  # type: ignore[arg-type]
    api.remote_add(b, "origin", world.url)
    with pytest.raises(SignatureError, match="1 unsigned"):
        api.pull(b, require_signed=True)
    assert b.head() is None and not visible(b)
    # Without the flag the pull goes through and reports the unsigned commit.
    pulled = api.pull(b)
    assert [c.status for c in pulled.signatures] == ["unsigned"]
    # A signs from now on; Bob trusts A's key: a signed pull passes --require-signed.
    ada = world.settings
    key = sec.keys_generate(ada, "ada")
    sec.keys_trust(bob, key.export())  # type: ignore[arg-type]
    a.commit_chunks(make_batch(5, 2), "index: signed")
    api.push(a)
    pulled = api.pull(b, require_signed=True)
    assert [c.status for c in pulled.signatures] == ["good"] and len(visible(b)) == 7
    # A clone that requires signatures refuses the unsigned history and leaves nothing.
    with pytest.raises(SignatureError):
        api.clone(replace(bob, cwd=world.tmp), world.url, "c",  # type: ignore[type-var]
                  require_signed=True)
    assert not (world.tmp / "c").exists()


def test_keys_cli(run: object, settings: object, repo: Repository, tmp_path: Path,
                  monkeypatch: pytest.MonkeyPatch) -> None:
    # monkeypatch restores the directory: a later test must not find this project memory
    monkeypatch.chdir(repo.path.parent)
    r = run("keys", "generate", "--comment", "Ada")  # type: ignore[operator]
    assert r.exit_code == 0 and "generated signing key" in r.stdout
    r = run("keys", "export")  # type: ignore[operator]
    line = r.stdout.strip()
    assert line.startswith("funes-ed25519 ") and line.endswith("Ada")
    r = run("keys", "generate")  # type: ignore[operator]
    assert r.exit_code == 2
    other_home = tmp_path / "o"
    other_home.mkdir()
    other = signing.generate(replace(settings, home=other_home), "Bo")  # type: ignore[type-var]
    keyfile = tmp_path / "bo.pub"
    keyfile.write_text(other.export())
    r = run("keys", "trust", str(keyfile))  # type: ignore[operator]
    assert r.exit_code == 0 and other.id in r.stdout
    r = run("keys", "trust", "funes-ed25519 not-base64!")  # type: ignore[operator]
    assert r.exit_code == 2
    r = run("keys", "list")  # type: ignore[operator]
    assert r.stdout.splitlines()[0].startswith("own") and other.id in r.stdout
    repo.commit_chunks(make_batch(0, 2), "index")
    r = run("fsck", "--verify")  # type: ignore[operator]
    assert r.exit_code == 0
