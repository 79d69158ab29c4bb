"""The default reranker's install path end to end: loopback Hub → pinned download → convert →
`funes recall` with `rerank` in its signals; and `funes models install` with no name.

The Hub is tests/support/hubserver.py driven by the real huggingface_hub client. It serves a
cross-encoder in the pinned repository's file layout (the MiniLM body plus a seeded head:
no real cross-encoder weights can be downloaded here), and the pin is overridden for the test
only: the catalog entry keeps its repository and file list, the revision and sha256s become
those of the served files.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from funes.inference import catalog
from funes.inference.catalog import DEFAULT_RERANK_MODEL, HubSnapshot
from tests.inference.conftest import serve_pinned
from tests.support.hubserver import HubServer

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")


@pytest.fixture
def served_reranker(hub: HubServer, cross_encoder_dir: Path,
                    monkeypatch: pytest.MonkeyPatch) -> HubSnapshot:
    """Serve a cross-encoder at the pinned repository and pin the catalog to it."""
    pinned: HubSnapshot = serve_pinned(hub, DEFAULT_RERANK_MODEL, cross_encoder_dir, monkeypatch)
    return pinned


@pytest.mark.slow
def test_models_install_without_a_name_installs_both_defaults(
    run: Callable[..., Any], hub: HubServer, served_reranker: HubSnapshot
) -> None:
    result = run("--format", "json", "models", "install")
    assert result.exit_code == 0, result.stderr
    infos = json.loads(result.stdout)
    assert [(i["name"], i["kind"]) for i in infos] == [
        ("minilm-l6-v2", "embed"), (DEFAULT_RERANK_MODEL, "rerank")]
    assert infos[1]["source"] == f"hf:{served_reranker.repo}@{served_reranker.revision}"
    downloaded = set(hub.downloaded_files(served_reranker.repo))
    assert {rel for rel, _ in served_reranker.files} <= downloaded
    listed = json.loads(run("--format", "json", "models", "list").stdout)
    assert {e["name"] for e in listed if e["installed"]} >= {"minilm-l6-v2", DEFAULT_RERANK_MODEL}
    # Installed: a second run downloads nothing.
    before = len(hub.downloads(served_reranker.repo))
    assert run("models", "install").exit_code == 0
    assert len(hub.downloads(served_reranker.repo)) == before


@pytest.mark.slow
def test_install_then_recall_reranks(
    run: Callable[..., Any], hub: HubServer, served_reranker: HubSnapshot, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert run("models", "install", DEFAULT_RERANK_MODEL).exit_code == 0
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert run("init").exit_code == 0
    transcript = project / "chat.jsonl"
    lines = [
        {"session_id": "s1", "id": "s1_1", "role": "user",
         "content": "Which database should the cache use?", "timestamp": "2026-11-01T10:00:00Z"},
        {"session_id": "s1", "id": "s1_2", "role": "assistant",
         "content": "Use sqlite for the cache: one file, no server.",
         "timestamp": "2026-11-01T10:00:01Z"},
        {"session_id": "s2", "id": "s2_1", "role": "user",
         "content": "The login page loops after sign in.", "timestamp": "2026-11-02T10:00:00Z"},
    ]
    transcript.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert run("index", "--agent", "import", str(transcript)).exit_code == 0
    assert run("embed").exit_code == 0
    # no deadline: on a loaded machine the default 300 ms budget may rerank nothing, and this
    # test is about the installed model being the one that reranks
    result = run("--format", "json", "recall", "--budget", "0", "database for the cache")
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert "rerank" in out["signals"] and "vector" in out["signals"]
    assert any(h.get("rerank") is not None for h in out["hits"])


def test_a_corrupt_download_is_refused(
    run: Callable[..., Any], hub: HubServer, served_reranker: HubSnapshot,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    known = catalog.KNOWN_MODELS[DEFAULT_RERANK_MODEL]
    (source,) = known.sources
    assert isinstance(source, HubSnapshot)
    bad = tuple((rel, "0" * 64 if rel == "config.json" else sha) for rel, sha in source.files)
    monkeypatch.setitem(catalog.KNOWN_MODELS, DEFAULT_RERANK_MODEL, dataclasses.replace(
        known, sources=(dataclasses.replace(source, files=bad),)))
    result = run("models", "install", DEFAULT_RERANK_MODEL)
    assert result.exit_code == 1
    assert "does not match the pinned" in result.stderr
    assert "models install" in result.stderr
