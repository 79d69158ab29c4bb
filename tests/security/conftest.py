"""Fixtures for the security tests: the distribution fixtures (a directory remote and the
loopback Hub), and secrets that look real to every detector."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.remotes.conftest import hub, hub_world, world  # noqa: F401 - fixtures

HERE = Path(__file__).parent

#: Shaped like real credentials (the detectors flag them); never real.
AWS_KEY = "AKIA" + "QX7M2PL9WZ4K8RTB"
GH_TOKEN = "ghp_" + "Zq8vN3kL5pR7tY2wX9cB4mD6fH1jG0sA2eUi"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    quiet = pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(quiet)
