"""Errors the model layer raises.

They live beside their raisers (dulwich's rule) and all derive from `FunesError`, so the CLI
maps them to a message, a hint and exit code 1 without knowing this package.
"""

from __future__ import annotations

from funes.errors import FunesError


class ModelError(FunesError):
    """A model could not be found, fetched, converted, verified or loaded."""


class ConversionError(ModelError):
    """Weights or tokenizer files that the converter cannot turn into a faithful GGUF."""

    def __init__(self, source: str, detail: str) -> None:
        super().__init__(
            f"cannot convert {source}: {detail}",
            hint="only BERT-family safetensors (BertModel, BertForSequenceClassification) "
            "with a WordPiece or SentencePiece Unigram vocabulary are supported; import a ready "
            "GGUF instead",
        )
        self.source = source


class ModelNotFoundError(ModelError):
    """No model by that name is known or installed."""

    def __init__(self, name: str, known: list[str]) -> None:
        listed = ", ".join(known) if known else "none"
        super().__init__(
            f"unknown model: {name} (known: {listed})",
            hint="run `funes models list`, or import a GGUF file with `funes models import PATH`",
        )
        self.name = name


class ModelNotInstalledError(ModelError):
    """A known model is not in the cache and funes may not or could not fetch it."""

    def __init__(self, name: str, detail: str = "") -> None:
        tail = f": {detail}" if detail else ""
        super().__init__(
            f"model {name} is not installed{tail}",
            hint=f"run `funes models install {name}`",
        )
        self.name = name


class ChecksumMismatchError(ModelError):
    """Bytes on disk or from the network do not hash to the pinned sha256."""

    def __init__(self, what: str, expected: str, actual: str) -> None:
        super().__init__(
            f"{what}: sha256 {actual} does not match the pinned {expected}",
            hint="the file is corrupt or was tampered with; remove it and run "
            "`funes models install` again",
        )
        self.expected = expected
        self.actual = actual


class ModelLoadError(ModelError):
    """llama.cpp refused to load a GGUF file, or the runtime is missing."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(
            f"cannot load model {path}: {detail}",
            hint="run `funes models verify`; reinstall llama-cpp-python==0.3.36 if it is missing",
        )
        self.path = path
