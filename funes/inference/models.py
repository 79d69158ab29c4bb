"""The model registry's public face: the catalog, the cache and installing, in one namespace.

The work is split by idea: `catalog` (which models funes knows and their pins), `registry`
(the local cache, sidecars, verification, GGUF metadata) and `installer` (the sources, imports
and `resolve`). Callers that want "the models" import this module; it re-exports their public
names and holds no logic of its own.
"""

from __future__ import annotations

from funes.inference.catalog import (
    BGE_SMALL_MODEL,
    DEFAULT_EMBED_MODEL,
    DEFAULT_RERANK_MODEL,
    E5_SMALL_MODEL,
    KNOWN_MODELS,
    MINILM_L6_V2_SHA256,
    HubFile,
    HubSnapshot,
    Kind,
    KnownModel,
    Progress,
    PyPIWeights,
    Source,
    default_model,
)
from funes.inference.installer import import_model, install, install_defaults, resolve
from funes.inference.registry import (
    ModelEntry,
    ModelInfo,
    VerifyResult,
    find_installed,
    installed,
    list_models,
    models_dir,
    remove,
    verify,
)

__all__ = [
    "BGE_SMALL_MODEL",
    "DEFAULT_EMBED_MODEL",
    "DEFAULT_RERANK_MODEL",
    "E5_SMALL_MODEL",
    "KNOWN_MODELS",
    "MINILM_L6_V2_SHA256",
    "HubFile",
    "HubSnapshot",
    "Kind",
    "KnownModel",
    "ModelEntry",
    "ModelInfo",
    "Progress",
    "PyPIWeights",
    "Source",
    "VerifyResult",
    "default_model",
    "find_installed",
    "import_model",
    "install",
    "install_defaults",
    "installed",
    "list_models",
    "models_dir",
    "remove",
    "resolve",
    "verify",
]
