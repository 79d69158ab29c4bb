"""Shared fixtures: every test runs with its own HOME and FUNES_HOME.

funes reads its environment through funes._env.settings() on each call, so pointing the
variables at a temporary directory is all the isolation a test needs.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FUNES_HOME", str(home / ".funes"))
    monkeypatch.setenv("FUNES_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("FUNES_AUTHOR_EMAIL", "test@example.org")
    for var in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "HERMES_HOME",
        "PI_CODING_AGENT_DIR",
        "FUNES_DEBUG",
        "FUNES_LOCK_TIMEOUT",
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
