"""Model verbs: list, install, import, verify."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from funes._env import Settings
from funes.inference import models as _models
from funes.inference.models import ModelEntry, ModelInfo, VerifyResult

__all__ = ["ModelEntry", "ModelInfo", "VerifyResult", "models_import", "models_install",
           "models_install_defaults", "models_list", "models_verify"]


def models_list(settings: Settings) -> list[ModelEntry]:
    """Known and installed models."""
    return _models.list_models(settings)


def models_install(
    settings: Settings, name: str, progress: Callable[[str], None] | None = None
) -> ModelInfo:
    """Install a known model (cache, pinned download, or local conversion)."""
    return _models.install(name, settings, progress)


def models_install_defaults(
    settings: Settings, progress: Callable[[str], None] | None = None
) -> list[ModelInfo]:
    """Install the default embedding model and reranker (`funes models install` with no name)."""
    return _models.install_defaults(settings, progress)


def models_import(
    settings: Settings, path: Path, *, name: str | None = None, kind: str | None = None
) -> ModelInfo:
    """Import a GGUF file or convert a safetensors model directory into the cache."""
    return _models.import_model(path, settings, name=name, kind=kind)  # type: ignore[arg-type]


def models_verify(settings: Settings) -> list[VerifyResult]:
    """Re-hash every cached model."""
    return _models.verify(settings)
