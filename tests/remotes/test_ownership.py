"""Ownership decides trust: the user's memories are trusted, anyone else's are not, everywhere.

The loopback Hub answers `whoami` for each token: alice belongs to the organisation `acme`,
bob to none. A memory in `acme/…` is alice's, not bob's.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.storage.repo import Repository
from tests.agents.conftest import funes_mcp, mcp_session
from tests.builders import make_chunk
from tests.support.hubserver import HubServer

WORD = "quokkaparsnip"
MEMORY = "acme/notes"


def _headers(text: str) -> list[str]:
    return [line for line in text.splitlines() if "score=" in line]


@pytest.fixture
def published(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repository:
    """alice's memory, pushed to `acme/notes` (public, so bob can read it)."""
    monkeypatch.setenv("HF_TOKEN", hub.add_token("hf_alice", "alice", orgs=("acme",)))
    settings = api.load_settings()
    repo = Repository.init(tmp_path / "alice" / ".funes", settings)
    repo.commit_chunks([make_chunk(1, session="alice", text=f"{WORD}: alice's own notes")],
                       "index")
    api.remote_add(repo, "origin", MEMORY)
    api.push(repo)
    hub.set_private(MEMORY, False)
    return repo


def test_the_owner_reads_her_own_memory_trusted(published: Repository, run: Any) -> None:
    out = run("--format", "agent", "recall", WORD, "--memory", MEMORY, "--no-rerank")
    assert out.exit_code == 0, out.stderr
    assert "untrusted" not in out.stdout and "alice's own notes" in out.stdout
    clone = api.clone(api.load_settings(), MEMORY, str(published.path.parent.parent / "again"))
    assert api.owned(Repository.open(clone.path, api.load_settings()))


def test_a_clone_of_another_users_memory_is_untrusted_in_cli_and_mcp(
    published: Repository, hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    run: Any,
) -> None:
    monkeypatch.setenv("HF_TOKEN", hub.add_token("hf_bob", "bob", orgs=()))
    monkeypatch.chdir(tmp_path)
    out = run("clone", MEMORY, "bobs-copy")
    assert out.exit_code == 0, out.stderr
    copy = tmp_path / "bobs-copy"

    # alice adds more; bob pulls it: still not his
    monkeypatch.setenv("HF_TOKEN", "hf_alice")
    published.commit_chunks([make_chunk(2, session="alice2", text=f"{WORD}: a later note")],
                            "index")
    api.push(published)
    monkeypatch.setenv("HF_TOKEN", "hf_bob")
    monkeypatch.chdir(copy)
    assert run("pull").exit_code == 0

    agent = run("--format", "agent", "recall", WORD, "--no-rerank").stdout
    assert agent.startswith(f"# untrusted memory {copy / '.funes'}: not yours")
    assert len(_headers(agent)) == 2
    assert all(h.endswith(" untrusted") for h in _headers(agent))
    human = run("--format", "human", "recall", WORD, "--no-rerank").stdout
    assert human.startswith("# untrusted memory")
    assert '"trusted": false' in run("--format", "json", "recall", WORD, "--no-rerank").stdout

    # the real MCP server, started as an agent would
    _, _, results = mcp_session(funes_mcp(str(copy)), [("recall", {"query": WORD})])
    error, text = results[0]
    assert not error and text.startswith("# untrusted memory")
    assert _headers(text) and all(h.endswith(" untrusted") for h in _headers(text))

    # `--memory acme/notes` is not bob's either
    remote = run("--format", "agent", "recall", WORD, "--memory", MEMORY, "--no-rerank").stdout
    assert remote.startswith(f"# untrusted memory {MEMORY}: not yours")


def test_a_read_only_copy_is_never_a_write_target(published: Repository, run: Any) -> None:
    for args, fix in ((("--memory", MEMORY, "add", "codex"), f"funes add codex {MEMORY}"),
                      (("--memory", MEMORY, "index"), "funes clone --global"),
                      (("--memory", MEMORY, "embed"), "funes clone --global")):
        out = run(*args)
        assert out.exit_code == 2, (args, out.stderr)
        assert "read-only" in out.stderr and fix in out.stderr, out.stderr
    assert not (Path(os.environ["HOME"]) / ".codex" / "config.toml").exists()


def test_unsigned_commits_are_news_once_to_a_user_who_trusts_no_keys(
    published: Repository, hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    run: Any,
) -> None:
    monkeypatch.chdir(tmp_path)
    first = run("--format", "human", "clone", MEMORY, "copy")
    assert first.exit_code == 0, first.stderr
    assert "not signed by a trusted key" in first.stdout and "shown once" in first.stdout
    published.commit_chunks([make_chunk(3, text="more, unsigned")], "index")
    api.push(published)
    monkeypatch.chdir(tmp_path / "copy")
    again = run("--format", "human", "pull")
    assert again.exit_code == 0 and "signature" not in again.stdout  # said once, not again

    # a user who trusts keys hears about every unsigned commit
    from funes.api import security as sec

    (tmp_path / "teammate").mkdir()
    key = sec.keys_generate(replace(api.load_settings(), home=tmp_path / "teammate"), "mate")
    sec.keys_trust(api.load_settings(), key.export())  # alice's commits stay unsigned
    published.commit_chunks([make_chunk(4, text="still unsigned")], "index")
    api.push(published)
    third = run("--format", "human", "pull")
    assert "not signed by a trusted key" in third.stdout and "shown once" not in third.stdout
