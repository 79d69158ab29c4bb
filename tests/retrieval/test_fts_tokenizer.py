"""The full-text tokenizer per memory (funes.retrieval.indexes.TOKENIZERS) on real Lance memories.

The chats are bench/data/cjk_recall.json's (written for funes): under the default "simple"
tokenizer a Chinese or Japanese question does not find its chat through BM25; stamped "icu"
(`funes reindex --tokenizer icu`) it does, English still does, and the stamp travels with the
memory: a clone, and a pull into a memory with its own commits, search the same way.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.model.chunk import Chunk
from funes.retrieval import indexes
from funes.storage.repo import Repository

DATA = json.loads((Path(__file__).resolve().parents[2] / "bench" / "data" /
                   "cjk_recall.json").read_text(encoding="utf-8"))
SESSIONS = {s["id"]: s for s in DATA["sessions"]}
#: Four chats per language are enough to tell the tokenizers apart.
KEPT = ("zh-cache", "zh-login", "zh-retry", "zh-backup", "ja-cache", "ja-login", "ja-retry",
        "ja-backup", "en-cache", "en-retry")
QUESTIONS = [q for q in DATA["questions"] if q["gold"] in KEPT]


def chunks(ids: tuple[str, ...] = KEPT) -> list[Chunk]:
    out = []
    for day, sid in enumerate(ids):
        for seq, (role, text) in enumerate(SESSIONS[sid]["turns"]):
            out.append(Chunk(text=text, harness="claude", session_id=sid, turn_id=f"{sid}-{seq}",
                             seq=seq, ts=f"2026-10-{day + 1:02d}T10:0{seq}:00Z", role=role,
                             block_type="text", block_idx=0, split_idx=0, workdir="/src/app",
                             project="github.com/acme/app"))
    return out


@pytest.fixture
def memory(tmp_path: Path, settings: Any) -> Repository:
    repo = Repository.init(tmp_path / "a" / ".funes", settings)
    repo.commit_chunks(chunks(), "seed")
    return repo


def top_sessions(settings: Any, repo: Repository, lang: str) -> list[tuple[str, str | None]]:
    out = []
    for q in QUESTIONS:
        if q["lang"] == lang:
            hits = api.recall(settings, repo, q["q"], k=3, vector=False, neighbors=0).hits
            out.append((q["gold"], hits[0].row["session_id"] if hits else None))
    return out


def found(pairs: list[tuple[str, str | None]]) -> int:
    return sum(gold == top for gold, top in pairs)


def test_icu_finds_chinese_and_japanese_that_simple_cannot(settings: Any,
                                                            memory: Repository) -> None:
    assert memory.tokenizer() == "simple"
    assert found(top_sessions(settings, memory, "zh")) == 0
    assert found(top_sessions(settings, memory, "ja")) <= 1
    before = memory.head()
    api.reindex(settings, memory, tokenizer="icu")
    assert memory.head() != before and memory.tokenizer() == "icu"
    assert memory.head_commit().to_dict()["tokenizer"] == "icu"  # type: ignore[union-attr]
    assert indexes.state(memory).tokenizer == "icu/split"
    for lang in ("zh", "ja", "en"):
        pairs = top_sessions(settings, memory, lang)
        assert found(pairs) == len(pairs), pairs
    # later commits carry the stamp forward; back to simple on purpose
    memory.commit_chunks(chunks(("zh-ci",)), "more")
    assert memory.tokenizer() == "icu"
    api.reindex(settings, memory, tokenizer="simple")
    assert memory.tokenizer() == "simple" and "tokenizer" not in memory.head_commit().to_dict()  # type: ignore[union-attr]
    assert found(top_sessions(settings, memory, "zh")) == 0


def test_the_default_stamp_leaves_commit_ids_as_they_were(memory: Repository) -> None:
    head = memory.head_commit()
    assert head is not None and head.tokenizer is None and "tokenizer" not in head.to_dict()


def test_bad_tokenizer_and_nothing_to_do_are_refused(run: Any, memory: Repository) -> None:
    bad = run("reindex", "--tokenizer", "klingon", "--memory", str(memory.path))
    assert bad.exit_code == 2
    none = run("reindex", "--memory", str(memory.path))
    assert none.exit_code == 2 and "--tokenizer" in none.stderr
    ok = run("reindex", "--tokenizer", "icu", "--memory", str(memory.path))
    assert ok.exit_code == 0, ok.stderr
    assert Repository.open(memory.path, memory.settings).tokenizer() == "icu"


def test_the_stamp_travels_by_clone_and_by_merge(settings: Any, memory: Repository,
                                                 tmp_path: Path) -> None:
    remote = str(tmp_path / "remote")
    api.remote_add(memory, "origin", remote)
    api.push(memory)
    other = Repository.open(api.clone(replace(settings, cwd=tmp_path), remote, "b").path,
                            settings)
    other.commit_chunks(chunks(("zh-ci",)), "b's own")
    assert found(top_sessions(settings, other, "zh")) == 0  # its index is built: "simple"
    api.reindex(settings, memory, tokenizer="icu")
    api.push(memory)
    assert api.pull(other).merge.kind == "merge"
    assert other.tokenizer() == "icu"
    assert found(top_sessions(settings, other, "zh")) == 4  # its index was rebuilt
    fresh = Repository.open(api.clone(replace(settings, cwd=tmp_path), remote, "c").path,
                            settings)
    assert fresh.tokenizer() == "icu" and found(top_sessions(settings, fresh, "ja")) == 4
