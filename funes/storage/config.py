"""Repository configuration: a small INI file (`config`), git-style `section.key` names.

Keys are declared here with a type and a one-line meaning, so a typo is an error that lists
the valid keys instead of a setting that silently does nothing. Remotes use git's subsection
form (`remote.origin.url`).
"""

from __future__ import annotations

import configparser
import io
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from funes.errors import FunesError, UsageError
from funes.storage.atomic import write_atomic


class UnknownConfigKeyError(UsageError):
    """A config key funes does not know."""


class ConfigFileError(FunesError):
    """The config file exists but cannot be read."""


def _bool(value: str) -> str:
    low = value.strip().lower()
    if low in {"true", "yes", "on", "1"}:
        return "true"
    if low in {"false", "no", "off", "0"}:
        return "false"
    raise ValueError("expected true or false")


def _ranged_float(high: float) -> Callable[[str], str]:
    """A parser for a finite number in [0, high] (inf and nan are refused: they poison maths)."""

    def parse(value: str) -> str:
        number = float(value)
        if not math.isfinite(number) or not 0 <= number <= high:
            raise ValueError(f"expected a number between 0 and {high:g}")
        return repr(number) if "." in value or "e" in value.lower() else str(int(number))

    return parse


def _ranged_int(low: int, high: int) -> Callable[[str], str]:
    """A parser for a whole number in [low, high]: a value no command accepts is refused here."""

    def parse(value: str) -> str:
        try:
            number = int(value.strip())
        except ValueError:
            raise ValueError(f"expected a whole number between {low} and {high}") from None
        if not low <= number <= high:
            raise ValueError(f"expected a whole number between {low} and {high}")
        return str(number)

    return parse


def _representation(value: str) -> str:
    if value.strip() not in ("1", "2"):
        raise ValueError("expected 1 (chunk text) or 2 (context header + chunk text)")
    return value.strip()


def _text(value: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError("expected a single line")
    return value


def _patterns(value: str) -> str:
    """A list of exclusion patterns, comma-separated (stored as `a, b`)."""
    items = [item.strip() for item in value.replace("\n", ",").split(",")]
    items = [item for item in items if item]
    if any("\r" in item or len(item) > 1024 for item in items):
        raise ValueError("expected comma-separated patterns on one line")
    return ", ".join(dict.fromkeys(items))


@dataclass(frozen=True)
class Key:
    """A declared configuration key."""

    name: str
    parse: Callable[[str], str]
    help: str
    default: str | None = None


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key("user.name", _text, "author name recorded in commits"),
        Key("user.email", _text, "author email recorded in commits"),
        Key("core.lockTimeout", _ranged_float(86400), "seconds a writer waits for the lock", "5"),
        Key("core.owned", _bool, "whether this memory is yours (trusted)", "true"),
        Key("index.maxTokens", _ranged_int(16, 8192), "chunk size in embedding-model tokens",
            "256"),
        Key("index.toolResults", _bool, "index tool output (false: calls only)", "true"),
        Key("index.representation", _representation,
            "what is embedded: 1 = chunk text, 2 = context header + text", "1"),
        Key("index.batchChunks", _ranged_int(1, 10_000_000), "chunks per commit of an index run",
            "20000"),
        Key("index.batchBytes", _ranged_int(1, 1 << 40), "text bytes per commit of an index run",
            "67108864"),
        Key("pack.threshold", _ranged_int(0, 1_000_000),
            "fragments per table that trigger a pack (0 = off)", "8"),
        # The bounds are recall's own (funes.retrieval.recall.MAX_K, MAX_RERANK_POOL).
        Key("recall.k", _ranged_int(1, 200), "passages returned by default", "8"),
        Key("recall.halfLife", _ranged_float(365_000), "recency half-life in days (0 = off)",
            "90"),
        Key("recall.rerankPool", _ranged_int(0, 200),
            "passages the reranker scores (0 = no reranking)", "4"),
        Key("recall.budget", _ranged_float(60_000),
            "ms a recall may take before reranking stops (0 = never stop)", "300"),
        Key("recall.pool", _text,
            "more memories every recall here also reads, space-separated (pooled recall)"),
        Key("model.embed", _text, "embedding model name", "minilm-l6-v2"),
        Key("model.rerank", _text, "reranker model name"),
        Key("sync.interval", _ranged_float(31_536_000),
            "seconds between hook syncs for agents without a session end", "900"),
        Key("sync.staleAfter", _ranged_float(31_536_000),
            "seconds without a sync before agent output notes it", "86400"),
        # Exclusions (funes.storage.exclusions): `config set` hides what is indexed already.
        Key("exclude.projects", _patterns,
            "projects never indexed: identities, last components or globs (comma-separated)"),
        Key("exclude.paths", _patterns,
            "globs on working directories or transcript paths never indexed"),
        Key("exclude.agents", _patterns, "agents (harnesses) never indexed"),
        Key("exclude.sessions", _patterns, "globs on session ids never indexed"),
    )
}

#: Keys of the form section.<subsection>.key.
SUBSECTION_KEYS: dict[str, dict[str, Key]] = {
    "remote": {
        "url": Key("remote.<name>.url", _text, "where the remote lives"),
        "encrypt": Key("remote.<name>.encrypt", _bool, "encrypt objects sent to it", "false"),
        "selection": Key("remote.<name>.selection", _bool,
                         "it holds sessions `funes publish` chose: push and sync refuse it",
                         "false"),
    },
    "branch": {
        "remote": Key("branch.<name>.remote", _text, "remote a branch tracks"),
    },
}

_SUB_RE = re.compile(r"^([a-z]+)\.([A-Za-z0-9._/-]+)\.([A-Za-z]+)$")


def _lookup(name: str) -> tuple[str, str, Key]:
    """Map a dotted name to (INI section, option, Key)."""
    if name in KEYS:
        section, option = name.split(".", 1)
        return section, option, KEYS[name]
    m = _SUB_RE.match(name)
    if m and m.group(1) in SUBSECTION_KEYS and m.group(3) in SUBSECTION_KEYS[m.group(1)]:
        return f'{m.group(1)} "{m.group(2)}"', m.group(3), SUBSECTION_KEYS[m.group(1)][m.group(3)]
    known = ", ".join(sorted(KEYS))
    raise UnknownConfigKeyError(
        f"unknown config key {name!r}",
        hint=f"known keys: {known}, remote.<name>.url, branch.<name>.remote",
    )


class Config:
    """The `config` file of one repository."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> configparser.ConfigParser:
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return parser
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigFileError(
                f"cannot read {self.path}: {exc.__class__.__name__}",
                hint="fix its permissions or encoding, or remove it to start over",
            ) from None
        try:
            parser.read_string(text, source=str(self.path))
        except configparser.Error as exc:
            first = str(exc).splitlines()[0]
            raise ConfigFileError(
                f"cannot parse {self.path}: {first}", hint="fix the file by hand (INI syntax)"
            ) from None
        return parser

    def get(self, name: str) -> str | None:
        """A value, or the key's default, or None.

        A value set by hand in the file is checked like `set` checks it, so a bad one is an
        error naming the key and the fix here, not a failure later in whatever uses it.
        """
        section, option, key = _lookup(name)
        parser = self._load()
        if parser.has_option(section, option):
            raw = parser.get(section, option)
            try:
                return key.parse(raw)
            except ValueError as exc:
                raise ConfigFileError(
                    f"bad value for {name} in {self.path}: {raw[:40]!r} ({exc})",
                    hint=f"fix it with `funes config set {name} VALUE`, or "
                    f"`funes config unset {name}` for the default",
                ) from None
        return key.default

    def set(self, name: str, value: str) -> str:
        """Validate and store a value; returns the normalised value."""
        section, option, key = _lookup(name)
        try:
            normal = key.parse(value)
        except ValueError as exc:
            raise UsageError(f"bad value for {name}: {value!r} ({exc})") from None
        parser = self._load()
        if not parser.has_section(section):
            parser.add_section(section)
        parser.set(section, option, normal)
        self._save(parser)
        return normal

    def unset(self, name: str) -> bool:
        """Remove a value; False if it was not set."""
        section, option, _ = _lookup(name)
        parser = self._load()
        if not parser.has_option(section, option):
            return False
        parser.remove_option(section, option)
        if not parser.options(section):
            parser.remove_section(section)
        self._save(parser)
        return True

    def items(self) -> list[tuple[str, str]]:
        """Every value that is set, as dotted names."""
        parser = self._load()
        out = []
        for section in parser.sections():
            m = re.match(r'^(\w+) "(.+)"$', section)
            prefix = f"{m.group(1)}.{m.group(2)}" if m else section
            for option, value in parser.items(section):
                out.append((f"{prefix}.{option}", value))
        return out

    def subsections(self, section: str) -> list[str]:
        """Names of `[section "name"]` blocks (e.g. the remotes)."""
        parser = self._load()
        names = []
        for s in parser.sections():
            m = re.match(rf'^{re.escape(section)} "(.+)"$', s)
            if m:
                names.append(m.group(1))
        return names

    def _save(self, parser: configparser.ConfigParser) -> None:
        buf = io.StringIO()
        parser.write(buf)
        write_atomic(self.path, buf.getvalue().encode("utf-8"))
