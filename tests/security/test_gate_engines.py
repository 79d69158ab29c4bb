"""The publish gate's second engine (Betterleaks), on by default, driven through real pushes.

The secret used here is a Docker Hub personal access token. funes's own detectors know the
format too now (funes.ingest.providers), so the second engine is shown to find it on its own,
without them (asserted below). A chunk holding it is written straight through the repository
API, as if stored by an older funes.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from funes import api
from funes.ingest.redact import scan
from funes.remotes import gate
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk
from tests.remotes.conftest import World

pytest.importorskip("betterleaks")

#: A Docker Hub token (one digit only: funes's random-token detector alone would leave it).
DOCKER_PAT = "dckr_pat_" + "AbQdEkfGthJqkLzmNxpQwrSytU9"


def _seed(repo: Repository) -> str:
    leaky = make_chunk(50, session="leaky",
                       text=f"echo {DOCKER_PAT} | docker login -u me --password-stdin")
    repo.commit_chunks([*make_batch(0, 10), leaky], "index: from an older funes")
    return leaky.id


def _dir_files(url: str) -> list[Path]:
    return [p for p in Path(url).rglob("*") if p.is_file() and p.name != "lock"]


def test_the_second_engine_finds_this_format_on_its_own() -> None:
    text = {"c" * 64: f"echo {DOCKER_PAT} | docker login --password-stdin"}
    assert gate.scan_texts(text, [gate.betterleaks_scanner()]) == {
        "c" * 64: ["betterleaks:dockerhub-personal-access-token"]}
    assert [f.kind for f in scan(text["c" * 64])] == ["provider-token"]  # and funes's own


def test_betterleaks_is_a_default_engine() -> None:
    names = [getattr(s, "__qualname__", "") for s in gate.default_scanners()]
    assert any(n.startswith("betterleaks_scanner") for n in names), names


def test_a_push_holds_what_only_the_second_engine_finds(
    tmp_path: Path, settings: object, run: object
) -> None:
    a = Repository.init(tmp_path / "a" / ".funes", settings)  # type: ignore[arg-type]
    remote = tmp_path / "remote"
    api.remote_add(a, "origin", str(remote))
    leaky = _seed(a)
    os.chdir(a.path.parent)
    res = run("push")  # type: ignore[operator]
    assert res.exit_code == 1
    assert "held back 1 chunk(s)" in res.stdout
    assert "betterleaks:dockerhub-personal-access-token" in res.stdout  # engine and rule
    assert DOCKER_PAT not in res.stdout + res.stderr
    assert DOCKER_PAT[9:25] not in res.stdout + res.stderr
    sent = b"".join(p.read_bytes() for p in _dir_files(str(remote)))
    assert sent and DOCKER_PAT[9:].encode() not in sent
    b = api.clone(replace(a.settings, cwd=tmp_path), str(remote), "b")
    cloned = Repository.open(b.path, a.settings)
    ids = set(cloned.chunks.dataset().to_table(columns=["id"]).column("id").to_pylist())
    assert len(ids) == 10 and leaky not in ids


def test_a_crashing_engine_publishes_nothing(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: object
) -> None:
    """The Betterleaks library fails to load (a broken install): the push sends nothing."""
    import betterleaks._lib as lib

    broken = tmp_path / "libbetterleaks.so"
    broken.write_bytes(b"not a shared library")
    monkeypatch.setenv("BETTERLEAKS_LIB_PATH", str(broken))
    monkeypatch.setattr(lib, "_binding_instance", None)  # load it again, from the broken file
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 5), "index: clean")
    os.chdir(a.path.parent)
    res = run("push")  # type: ignore[operator]
    assert res.exit_code != 0
    assert "secret scanner failed" in res.stderr and "nothing was published" in res.stderr
    assert world.remote_head() is None if world.hub is None else _hub_untouched(world)
    if world.hub is None:
        assert not _dir_files(world.url)


def _hub_untouched(world: World) -> bool:
    assert world.hub is not None
    return not any(r.method == "POST" for r in world.hub.requests)


def test_batches_map_findings_back_to_their_chunk() -> None:
    texts = {f"{i:064x}": f"line one\nline two of chunk {i}\n" for i in range(200)}
    texts[f"{7:064x}"] = f"multi\nline\nthen {DOCKER_PAT}\nend"
    texts[f"{150:064x}"] = f"nul \x00 before {DOCKER_PAT.replace('Ab3', 'Zq8')}"
    for batch in (60, 10_000, gate.BETTERLEAKS_BATCH):
        found = gate.betterleaks_scanner(batch)(texts)
        assert set(found) == {f"{7:064x}", f"{150:064x}"}, batch
