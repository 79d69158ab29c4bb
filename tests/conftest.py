"""Shared fixtures: every test runs with its own HOME and FUNES_HOME.

funes reads its environment through funes._env.settings() on each call, so pointing the
variables at a temporary directory is all the isolation a test needs.

The suite sets its own environment: variables a developer may have set for their own use of
the Hugging Face Hub (`HF_HUB_OFFLINE=1`, `HF_TOKEN`, `HF_ENDPOINT`, …), git or colours are
removed before any test module is imported, because huggingface_hub reads its variables
once, at import, and the Hub tests talk to a loopback server (tests/support/hubserver.py).

Fixtures: `tests/fixtures/` holds the small transcripts the core suite needs (with their
licences, tests/fixtures/README.md). The large optional sets live outside the repository in
`../shared/fixtures` (a sibling checkout); tests that need them skip with `needs_shared`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
#: The large optional fixture sets (a sibling checkout, absent in a plain clone).
FIXTURES = SHARED / "fixtures"
#: The small fixtures that ship with the repository (always present).
OWN_FIXTURES = REPO_ROOT / "tests" / "fixtures"

#: Why a test that needs ../shared skips, in words a newcomer understands.
SHARED_MISSING = (
    "needs the large optional fixture sets in ../shared/fixtures (real agent transcripts and "
    "benchmark data kept outside this repository); the core suite runs without them"
)
needs_shared = pytest.mark.skipif(not (FIXTURES / "traces").is_dir(), reason=SHARED_MISSING)

#: Prefixes of variables the user's environment must not leak into the suite.
_FOREIGN_ENV = ("HF_", "HUGGINGFACE_", "HUGGING_FACE_", "GIT_CONFIG", "NO_COLOR", "FORCE_COLOR")


def _scrub_environment() -> None:
    for name in list(os.environ):
        if name.startswith(_FOREIGN_ENV):
            del os.environ[name]
    # Nothing in the suite may reach the real Hub; the loopback tests set HF_ENDPOINT.
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_UPDATE_CHECK"] = "1"


_scrub_environment()


def trace_path(rel: str) -> Path:
    """A transcript by its path under traces/: the repository's own copy, else ../shared's."""
    own = OWN_FIXTURES / "traces" / rel
    return own if own.is_file() else FIXTURES / "traces" / rel


def needs_trace(rel: str) -> pytest.MarkDecorator:
    """Skip unless the transcript `rel` is present (in tests/fixtures or ../shared)."""
    return pytest.mark.skipif(not trace_path(rel).is_file(), reason=SHARED_MISSING)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FUNES_HOME", str(home / ".funes"))
    monkeypatch.setenv("FUNES_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("FUNES_AUTHOR_EMAIL", "test@example.org")
    # No test may leave a warm server behind: tests/serve turns it on where it is tested.
    monkeypatch.setenv("FUNES_SERVE", "off")
    for var in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "HERMES_HOME",
        "PI_CODING_AGENT_DIR",
        "FUNES_DEBUG",
        "FUNES_LOCK_TIMEOUT",
        "XDG_CONFIG_HOME",
        "HF_HUB_OFFLINE",
        "HF_TOKEN",
        "HF_ENDPOINT",
        "NO_COLOR",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def settings(isolated_env: Path):  # type: ignore[no-untyped-def]
    from funes._env import settings as load

    return load()


@pytest.fixture
def repo(tmp_path: Path, settings):  # type: ignore[no-untyped-def]
    from funes.storage.repo import Repository

    return Repository.init(tmp_path / "project" / ".funes", settings)


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "project"
    path.mkdir(exist_ok=True)
    monkeypatch.chdir(path)
    yield path


@pytest.fixture(scope="session")
def shared_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default embedding model, converted once per test session from the PyPI package."""
    from dataclasses import replace

    from funes._env import settings as load
    from funes.inference import models

    home = tmp_path_factory.mktemp("model-home")
    models.install(models.DEFAULT_EMBED_MODEL, replace(load(), home=home))
    return home / "models"


@pytest.fixture
def with_models(shared_models: Path, isolated_env: Path) -> Path:
    """Make the session's converted models visible in this test's FUNES_HOME."""
    funes_home = isolated_env / ".funes"
    funes_home.mkdir(exist_ok=True)
    link = funes_home / "models"
    if not link.exists():
        link.symlink_to(shared_models, target_is_directory=True)
    return link


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run the real entry point (error mapping included) in-process."""

    def _run(*args: str) -> Result:
        from funes.cli.main import main

        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return _run
