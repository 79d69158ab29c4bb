"""The publish gate: secrets that slipped past ingest never leave the machine."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from funes import api
from funes.remotes import gate
from funes.remotes.gate import ScannerError
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk
from tests.remotes.conftest import World, visible
from tests.security.conftest import AWS_KEY, GH_TOKEN


def _seed(repo: Repository) -> list[str]:
    """Twenty clean chunks and two dirty ones, written straight through the repository API
    (as if stored before a detector existed): ingest's redaction never saw them."""
    dirty = [
        make_chunk(100, session="leaky", text=f"export AWS_ACCESS_KEY_ID={AWS_KEY}"),
        make_chunk(101, session="leaky", text=f"use token {GH_TOKEN} for the api"),
    ]
    repo.commit_chunks([*make_batch(0, 20), *dirty], "index: seeded")
    return [c.id for c in dirty]


def _remote_bytes(world: World) -> bytes:
    if world.hub is not None:
        return world.hub.uploaded_bytes()
    return b"".join(p.read_bytes() for p in Path(world.url).rglob("*") if p.is_file())


def _head(world: World) -> str | None:
    try:
        return world.remote_head()
    except KeyError:  # the loopback Hub has no such repository: nothing was created
        return None


def _secret_bytes() -> list[bytes]:
    # Any fragment of the secret would do; the distinctive bodies are what a leak would carry.
    return [AWS_KEY.encode(), GH_TOKEN.encode(), AWS_KEY[4:].encode(), GH_TOKEN[4:].encode()]


def test_push_holds_dirty_chunks_and_sends_the_rest(world: World) -> None:
    a = world.machine("a")
    dirty = _seed(a)
    result = api.push(a)
    assert {h.chunk for h in result.held} == set(dirty)
    assert {h.session for h in result.held} == {"leaky"}
    detectors = {d for h in result.held for d in h.detectors}
    builtin = {d for d in detectors if ":" not in d}
    assert builtin == {"aws-access-key-id", "github-token"}
    # the other engines name themselves: "betterleaks:github-pat"
    assert all(d.split(":", 1)[0] in ("betterleaks", "gitleaks", "trufflehog")
               for d in detectors - builtin)
    sent = _remote_bytes(world)
    assert sent, "something was pushed"
    for secret in _secret_bytes():
        assert secret not in sent
    # The rest arrived: a clone sees the twenty clean chunks, none of the held ones.
    b = world.clone("b")
    seen = visible(b)
    assert len(seen) == 20 and not set(dirty) & set(seen)
    assert api.fsck(b).ok and api.fsck(a).ok
    # The local branch is untouched; the next push continues from the published image.
    assert len(visible(a)) == 22
    a.commit_chunks(make_batch(20, 3), "index: more")
    again = api.push(a)
    assert not again.held and again.commits == 1
    api.pull(b)
    assert len(visible(b)) == 23
    for secret in _secret_bytes():
        assert secret not in _remote_bytes(world)
    assert api.push(a).up_to_date


def test_push_cli_reports_held_chunks_and_exits_nonzero(world: World, run: object) -> None:
    a = world.machine("a")
    _seed(a)
    os.chdir(a.path.parent)
    res = run("push")  # type: ignore[operator]
    assert res.exit_code == 1
    assert "held back 2 chunk(s)" in res.stdout and "leaky" in res.stdout
    assert AWS_KEY not in res.stdout + res.stderr and GH_TOKEN not in res.stdout + res.stderr


def test_dry_run_sends_nothing(world: World, run: object) -> None:
    a = world.machine("a")
    _seed(a)
    os.chdir(a.path.parent)
    res = run("push", "--dry-run")  # type: ignore[operator]
    assert res.exit_code == 1 and "would hold 2 chunk(s)" in res.stdout
    assert "22 chunk(s) scanned" in res.stdout
    assert _head(world) is None
    assert a.refs.read("refs/remotes/origin/main") is None  # type: ignore[arg-type]


def test_scanner_crash_publishes_nothing(world: World) -> None:
    a = world.machine("a")
    _seed(a)

    def crash(texts: object) -> dict[str, list[str]]:
        raise RuntimeError("scanner blew up")

    from funes.remotes import sync

    remote = sync.configured_remote(a, "origin")
    with pytest.raises(ScannerError):
        sync.push(a, remote, "main", scanners=[gate.builtin_scanner, crash])
    assert _head(world) is None
    if world.hub is not None:
        assert not any(r.method == "POST" for r in world.hub.requests)
        for secret in _secret_bytes():
            assert secret not in world.hub.uploaded_bytes()
    else:
        assert not any(p.is_file() and p.name != "lock" for p in Path(world.url).rglob("*"))


def test_external_scanner_failure_fails_closed(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `gitleaks` on PATH that crashes stops the push (fail closed), via the default path."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "gitleaks"
    fake.write_text("#!/bin/sh\necho boom >&2\nexit 2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 5), "index: clean")
    with pytest.raises(ScannerError, match="gitleaks exited"):
        api.push(a)
    assert _head(world) is None


def test_external_scanner_findings_hold_chunks(tmp_path: Path) -> None:
    """A fake trufflehog that flags one file: its finding holds that chunk."""
    fake = tmp_path / "trufflehog"
    fake.write_text(
        "#!/bin/sh\nfor f in \"$2\"/*; do\n"
        "  if grep -q hunter2 \"$f\"; then\n"
        "    printf '{\"SourceMetadata\":{\"Data\":{\"Filesystem\":{\"file\":\"%s\"}}},"
        "\"DetectorName\":\"Custom\"}\\n' \"$f\"\n"
        "  fi\ndone\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    scanner = gate.external_scanner("trufflehog", str(fake), timeout=20)
    found = scanner({"a" * 64: "the password is hunter2", "b" * 64: "nothing here"})
    assert found == {"a" * 64: ["trufflehog:Custom"]}


def test_vectors_of_held_chunks_are_held_too(tmp_path: Path, settings: object) -> None:
    import pyarrow as pa

    from funes.model.objects import ModelStamp
    from funes.storage.tables import vector_schema

    a = Repository.init(tmp_path / "a" / ".funes", settings)  # type: ignore[arg-type]
    api.remote_add(a, "origin", str(tmp_path / "remote"))
    dirty = _seed(a)
    rows = a.chunks.dataset().to_table(columns=["id", "harness", "session_id", "block_type",
                                                "project", "workdir"]).to_pylist()
    n = len(rows)
    vectors = pa.Table.from_pydict({
        "id": [r["id"] for r in rows], "model": ["m"] * n, "vector": [[0.5] * 4] * n,
        **{c: [r[c] for r in rows] for c in ("harness", "session_id", "block_type", "project",
                                             "workdir")},
        "time": [None] * n, "noise": [None] * n,
    }, schema=vector_schema(4))
    a.commit_chunks([], "embed", model=ModelStamp("m", "c" * 64, 4), vectors=vectors)
    result = api.push(a)
    assert {h.chunk for h in result.held} == set(dirty)
    b = api.clone(replace(a.settings, cwd=tmp_path), str(tmp_path / "remote"), "b")
    cloned = Repository.open(b.path, a.settings)
    ids = set(cloned.vectors.dataset().to_table(columns=["id"]).column("id").to_pylist())
    assert len(ids) == 20 and not ids & set(dirty)
    assert api.fsck(cloned).ok


def test_external_scanner_timeout_and_garbage_fail_closed(tmp_path: Path) -> None:
    slow = tmp_path / "gitleaks"
    slow.write_text("#!/bin/sh\nsleep 5\n")
    slow.chmod(slow.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ScannerError, match="timed out"):
        gate.external_scanner("gitleaks", str(slow), timeout=0.5)({"a" * 64: "text"})
    garbage = tmp_path / "trufflehog"
    garbage.write_text("#!/bin/sh\necho 'not json'\n")
    garbage.chmod(garbage.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ScannerError, match="could not be read"):
        gate.external_scanner("trufflehog", str(garbage), timeout=10)({"a" * 64: "text"})
