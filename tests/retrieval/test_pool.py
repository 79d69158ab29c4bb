"""Pooled recall: several memories ranked in one list, each hit naming its memory and trust."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.model.chunk import Chunk
from funes.storage.repo import Repository


def _c(session: str, seq: int, text: str) -> Chunk:
    return Chunk(text=text, harness="claude", session_id=session, turn_id=f"{session}-{seq}",
                 seq=seq, ts=f"2026-02-0{seq + 1}T09:00:00Z", role="assistant",
                 block_type="text", block_idx=0, split_idx=0, workdir="/src/app",
                 project="github.com/acme/app")


SHARED = _c("shared", 0, "The deploy script retries three times before paging anyone.")


@pytest.fixture
def memories(tmp_path: Path, settings: Any) -> tuple[Repository, Repository, Repository]:
    own = Repository.init(tmp_path / "own" / ".funes", settings)
    team = Repository.init(tmp_path / "team" / ".funes", settings)
    public = Repository.init(tmp_path / "public" / ".funes", settings)
    own.commit_chunks([SHARED, _c("mine", 0, "Our deploy script lives in ops/deploy.sh.")], "a")
    team.commit_chunks([SHARED, _c("team", 1, "The team agreed deploy retries stay at three.")],
                       "b")
    public.commit_chunks([_c("pub", 2, "Upstream deploy docs say retries default to five.")],
                         "c")
    for repo in (own, team, public):
        repo.config.set("recall.halfLife", "0")
    team.config.set("core.owned", "false")
    # a teammate's rows: not written on this machine (funes.api.trust trusts the user's own
    # turns wherever they live)
    (team.path / "written-here").unlink()
    return own, team, public


def test_one_ranking_over_three_memories_with_labels_and_marks(memories: Any, run: Any) -> None:
    own, team, public = memories
    args = ["recall", "deploy retries", "--memory", str(own.path), "--memory", str(team.path),
            "--memory", str(public.path)]
    out = run("--format", "agent", *args)
    assert out.exit_code == 0, out.stderr
    hits = [h for h in out.stdout.split("---\n") if "→ funes get" in h]
    labels = [h.split("--memory ", 1)[1].split("\n", 1)[0] for h in hits]
    assert sorted(set(labels)) == sorted({str(own.path), str(team.path), str(public.path)})
    # The chunk both own and team hold is listed once, under the memory that is the user's.
    shared = [h for h in hits if "retries three times before paging" in h]
    assert len(shared) == 1 and f"--memory {own.path}" in shared[0]
    header = next(line for line in shared[0].split("\n") if line.startswith("["))
    assert not header.endswith(" untrusted")
    team_hit = next(h for h in hits if "team agreed" in h)
    header = next(line for line in team_hit.split("\n") if line.startswith("["))
    assert header.endswith(" untrusted")
    assert out.stdout.startswith(f"# untrusted memory {team.path}: not yours.")
    assert out.stdout.count("# untrusted memory") == 1

    data = json.loads(run("--format", "json", *args).stdout)
    assert {m["memory"]: m["trusted"] for m in data["memories"]} == {
        str(own.path): True, str(team.path): False, str(public.path): True}
    by_text = {h["text"]: h for h in data["hits"]}
    assert by_text["The team agreed deploy retries stay at three."]["trusted"] is False
    assert by_text[SHARED.text]["memory"] == str(own.path)
    assert "pool" in data["signals"]
    assert len(data["hits"]) == len({h["id"] for h in data["hits"]})


def test_a_memorys_recall_pool_widens_every_recall_there(memories: Any, run: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    own, team, public = memories
    own.config.set("recall.pool", f"../team/.funes {public.path}")
    monkeypatch.chdir(own.path.parent)
    out = run("--format", "agent", "recall", "deploy retries")
    assert f"--memory {team.path}" in out.stdout and f"--memory {public.path}" in out.stdout
    # Naming one memory reads that memory alone.
    alone = run("--format", "agent", "recall", "deploy retries", "--memory", str(own.path))
    assert f"--memory {team.path}" not in alone.stdout


def test_pooled_and_single_recall_agree_on_one_memory(memories: Any, settings: Any) -> None:
    own, *_ = memories
    choice = api.choose_memory(settings, str(own.path))
    request = api.RecallRequest("deploy retries", rerank=False)
    pooled = api.recall_pooled(settings, [choice], request)
    single = api.recall(settings, own, request)
    assert [h.id for h in pooled.hits] == [h.id for h in single.hits]
