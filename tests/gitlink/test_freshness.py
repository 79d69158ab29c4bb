"""Freshness against the code: recalled passages about files that changed since are marked.

A real git repository (dulwich), a real memory, a real link recorded by `api.link_commit`, the
real CLI: a hit whose linked commit's file changed in two later commits says so, a hit that
names a file says whether it changed since the turn, `--fresh` and `--fresh-only` order and
drop them, and the history read from git is cached and caught up when HEAD moves.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.gitlink import freshness
from funes.gitlink.coderepo import find_code_repo
from funes.model.chunk import Chunk
from funes.storage.repo import Repository
from tests.gitlink.conftest import T0, dulwich_commit, init_git, iso


def _turn(session: str, seq: int, text: str, when: int, identity: str, workdir: Path) -> Chunk:
    return Chunk(text=text, harness="claude", session_id=session, turn_id=f"{session}-t{seq}",
                 seq=seq, ts=iso(when), role="assistant", block_type="text", block_idx=0,
                 split_idx=0, workdir=str(workdir), project=identity)


@pytest.fixture
def code_and_memory(tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """src/parser.py committed and linked to the turn that wrote it, then changed twice."""
    code = init_git(tmp_path / "app")
    monkeypatch.chdir(code)
    identity = find_code_repo(code).identity
    memory = Repository.init(code / ".funes", settings)
    memory.config.set("recall.halfLife", "0")
    memory.commit_chunks([
        _turn("s-linked", 0, "The tokenizer now retries twice before giving up on a stream.",
              T0 - 600, identity, code),
    ], "index")
    first = dulwich_commit(code, {"src/parser.py": "retries = 2\n", "README.md": "app\n"},
                           "parser: retry twice", T0)
    linked = api.link_commit(replace(settings, cwd=code), "HEAD", index=False)
    assert linked.link.turns  # the turn above is the one behind the commit
    memory.commit_chunks([
        _turn("s-mention", 0, "The retry count lives in src/parser.py and in docs/gone.md.",
              T0 + 150, identity, code),
        _turn("s-other", 0, "The tokenizer README says nothing about retries at all.",
              T0 + 150, identity, code),
    ], "index")
    second = dulwich_commit(code, {"src/parser.py": "retries = 3\n"}, "three", T0 + 100)
    third = dulwich_commit(code, {"src/parser.py": "retries = 4\n"}, "four", T0 + 200)
    dulwich_commit(code, {"README.md": "app!\n"}, "readme", T0 + 300)
    return code, memory, first, second, third


def test_hits_whose_files_changed_since_are_marked(code_and_memory: Any, run: Any) -> None:
    _, memory, first, second, _ = code_and_memory
    out = run("--format", "agent", "recall", "tokenizer retries", "--memory", str(memory.path))
    assert out.exit_code == 0, out.stderr
    hits = out.stdout.split("\n---\n")
    linked = next(h for h in hits if "retries twice before giving up" in h)
    # The linked commit touched src/parser.py (and README.md); two later commits changed the
    # parser, one the README.
    assert f"  ! changed since {first[:12]}: src/parser.py (2 commits)" in linked
    assert f"  ! changed since {first[:12]}: README.md (1 commit)" in linked
    mention = next(h for h in hits if "lives in src/parser.py" in h)
    # Said at T0+150, when HEAD's line was at the second commit: one change since; the
    # other path named never existed there.
    assert f"  ! changed since {second[:12]}: src/parser.py (1 commit)" in mention
    assert "docs/gone.md" not in mention.split("\n")[2]
    other = next(h for h in hits if "README says nothing" in h)
    assert "! changed since" not in other

    data = run("--format", "json", "recall", "tokenizer retries", "--memory",
               str(memory.path))
    fresh = {h["session_id"]: h.get("fresh") for h in json.loads(data.stdout)["hits"]}
    assert fresh["s-linked"]["linked"] and fresh["s-linked"]["base"] == first
    assert fresh["s-mention"]["checked"] == ["src/parser.py"]
    assert fresh["s-other"] is None or fresh["s-other"]["changes"] == []


def test_fresh_only_drops_and_fresh_puts_stale_hits_last(code_and_memory: Any, run: Any) -> None:
    _, memory, *_ = code_and_memory
    only = run("--format", "agent", "recall", "tokenizer retries", "--fresh-only",
               "--memory", str(memory.path))
    assert "README says nothing" in only.stdout
    assert "retries twice before giving up" not in only.stdout
    assert "! changed since" not in only.stdout
    prefer = run("--format", "agent", "recall", "tokenizer retries", "--fresh",
                 "--memory", str(memory.path))
    order = [h for h in prefer.stdout.split("\n---\n") if h.strip()]
    stale = ["! changed since" in h for h in order]
    assert stale == sorted(stale)  # fresh hits first, then the stale ones
    assert any(stale) and not all(stale)


def test_outside_a_git_work_tree_nothing_is_marked(code_and_memory: Any, run: Any,
                                                  tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    _, memory, *_ = code_and_memory
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    out = run("--format", "agent", "recall", "tokenizer retries", "--memory", str(memory.path))
    assert out.exit_code == 0 and "retries twice" in out.stdout
    assert "! changed since" not in out.stdout


def test_the_history_is_cached_and_caught_up_when_head_moves(code_and_memory: Any,
                                                            settings: Any) -> None:
    code, _, first, _, third = code_and_memory
    cache = settings.home / "cache" / "code"
    freshness._memo.clear()
    line = freshness.history(find_code_repo(code), cache)
    assert line is not None
    line.read_back_to(T0 - 3600)
    assert [sha for sha, _, _ in line.chain][-1] == first and line.complete
    assert list(cache.glob("*.json"))
    # A new process reads the cache; a new commit is read alone, on top of it.
    freshness._memo.clear()
    fourth = dulwich_commit(code, {"src/parser.py": "retries = 5\n"}, "five", T0 + 400)
    again = freshness.history(find_code_repo(code), cache)
    assert again is not None and again.head == fourth
    assert [sha for sha, _, _ in again.chain][:1] == [fourth] and again.complete
    changes = again.changes(["src/parser.py"], third, linked=True)
    assert changes is not None and [(c.path, c.commits) for c in changes] == \
        [("src/parser.py", 1)]


def test_mentioned_paths_inside_the_work_tree() -> None:
    root = Path("/w/app")
    text = ("see /w/app/src/a.py:12, ./docs/b.md and lib/c.rs; not /etc/passwd, not ../x/y.py,"
            " and `pkg/d.py`.")
    assert freshness.mentioned_paths(text, root, "/w/app/sub") == [
        "src/a.py", "docs/b.md", "sub/docs/b.md", "lib/c.rs", "sub/lib/c.rs", "pkg/d.py",
        "sub/pkg/d.py"]
