"""Fixtures for the distribution tests: real repositories, a real directory remote, and the
loopback Hub (tests/support/hubserver.py) driven by the real huggingface_hub client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.storage.repo import Repository
from tests.support.hubserver import HubServer, client_env

REPO_ID = "org/mem"

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # huggingface_hub's LFS upload passes a file object as `data=`, which httpx2 deprecates.
    quiet = pytest.mark.filterwarnings("ignore:Use 'content=<...>':DeprecationWarning")
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(quiet)


class CardHub(HubServer):
    """The loopback Hub plus `POST /api/validate-yaml`, which the client calls before any
    commit that changes README.md (the Hub checks a card's YAML front matter there).

    Modelled as: the front matter must parse as a YAML mapping, else 400 with `errors`.
    """

    def _h_unknown(self, req: Any) -> Any:
        if req.method == "POST" and req.record.path == "/api/validate-yaml":
            import json

            import yaml

            from tests.support import hubserver

            content = str(json.loads(req.body or b"{}").get("content", ""))
            errors = []
            if content.startswith("---\n"):
                front = content[4:].split("\n---", 1)[0]
                try:
                    if not isinstance(yaml.safe_load(front), dict):
                        errors.append({"message": "metadata is not a mapping"})
                except yaml.YAMLError as exc:
                    errors.append({"message": str(exc)})
            return hubserver._json({"errors": errors, "warnings": []}, 400 if errors else 200)
        return super()._h_unknown(req)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    with CardHub(tmp_path / "hub") as server:
        client_env(monkeypatch, tmp_path / "hf-home", server)
        monkeypatch.setenv("HF_TOKEN", server.write_token)
        yield server


@dataclass
class World:
    """Two (or more) machines sharing one remote."""

    kind: str  # "dir" | "hf"
    url: str
    tmp: Path
    settings: Any
    hub: HubServer | None = None

    def machine(self, name: str) -> Repository:
        """A fresh memory with `origin` configured."""
        repo = Repository.init(self.tmp / name / ".funes", self.settings)
        api.remote_add(repo, "origin", self.url)
        return repo

    def clone(self, name: str) -> Repository:
        """`funes clone URL name` run in the test's directory."""
        result = api.clone(replace(self.settings, cwd=self.tmp), self.url, name)
        return Repository.open(result.path, self.settings)

    def remote_head(self) -> str | None:
        """The remote's `refs/heads/main`, read behind funes's back."""
        if self.hub is not None:
            files = self.hub.files(REPO_ID)
            if "refs/heads/main" not in files:
                return None
            return self.hub.read_file(REPO_ID, "refs/heads/main").decode().strip()
        path = Path(self.url) / "refs" / "heads" / "main"
        return path.read_text().strip() if path.exists() else None


def _load_settings() -> Any:
    from funes._env import settings as load

    return load()


@pytest.fixture(params=["dir", "hf"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    """The scenario suite runs once against a directory remote and once against the Hub."""
    if request.param == "hf":
        server = request.getfixturevalue("hub")
        return World("hf", f"hf://datasets/{REPO_ID}", tmp_path, _load_settings(), server)
    return World("dir", str(tmp_path / "remote"), tmp_path, _load_settings())


@pytest.fixture
def hub_world(hub: HubServer, tmp_path: Path) -> World:
    return World("hf", f"hf://datasets/{REPO_ID}", tmp_path, _load_settings(), hub)


def visible(repo: Repository) -> dict[str, dict[str, Any]]:
    """What a reader sees: rows deduplicated by id, tombstoned ids hidden."""
    hidden = repo.tombstoned_ids()
    rows = repo.chunks.dataset().to_table().to_pylist() if repo.chunks.exists() else []
    return {r["id"]: r for r in rows if r["id"] not in hidden}
