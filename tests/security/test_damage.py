"""Damaged disks and hand edits (issue 14, item 5): one line naming the fix, never a
traceback; a corrupt disposable cache is rebuilt."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk
from tests.security.hostile import scene, snapshot_tree

WORD = "passage"


@pytest.fixture
def memory(repo: Repository) -> Repository:
    repo.commit_chunks(make_batch(0, 5), "index")
    os.chdir(repo.path.parent)
    return repo


def _one_line(result: Any, code: int, *needles: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("funes: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def _fragment_files(repo: Repository) -> list[Path]:
    return sorted((repo.chunks.path / "data").iterdir())


DAMAGE = {
    "missing fragment file": lambda r: [p.unlink() for p in _fragment_files(r)],
    "truncated fragment file": lambda r: [os.truncate(p, 100) for p in _fragment_files(r)],
    "missing _versions": lambda r: shutil.rmtree(r.chunks.path / "_versions"),
    "missing chunks.lance": lambda r: shutil.rmtree(r.chunks.path),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_table_is_one_line(memory: Repository, run: Any, damage: str) -> None:
    DAMAGE[damage](memory)
    for args in (("status",), ("recall", WORD, "--no-rerank"),
                 ("--format", "json", "recall", WORD, "--no-rerank")):
        _one_line(run(*args), 1, "fsck")
    assert run("fsck").exit_code == 1


def test_a_corrupt_id_index_is_rebuilt(memory: Repository, run: Any) -> None:
    cache = memory.path / "index" / "ids.sqlite"
    cache.parent.mkdir(exist_ok=True)
    cache.write_bytes(b"this is not a database" * 10)
    memory.commit_chunks(make_batch(0, 7), "index")  # dedup reads the cache
    head = memory.head_commit()
    assert head is not None and head.chunk_count == 7  # 5 known, 2 new: rebuilt right
    assert run("status").exit_code == 0


def test_a_lock_that_is_a_directory(memory: Repository, run: Any) -> None:
    lock = memory.path / "lock"
    lock.unlink(missing_ok=True)
    lock.mkdir()
    _one_line(run("forget", "--session", "s1"), 1, "lock file", "rm -r")


def test_hand_edited_config_values_are_checked_when_read(memory: Repository, run: Any) -> None:
    with open(memory.path / "config", "a") as fh:
        fh.write("[recall]\nk = banana\n")
    _one_line(run("recall", WORD, "--no-rerank"), 1, "recall.k", "banana",
              "funes config set recall.k")
    _one_line(run("config", "get", "recall.k"), 1, "recall.k")
    assert run("config", "unset", "recall.k").exit_code == 0
    assert run("recall", WORD, "--no-rerank").exit_code == 0


@pytest.mark.parametrize(("key", "value"), [
    ("recall.halfLife", "inf"), ("recall.halfLife", "nan"), ("recall.k", "10^20"),
    ("recall.k", "100000000000000000000"), ("recall.rerankPool", "1000"),
    ("core.lockTimeout", "1e300"),
])
def test_config_set_refuses_values_no_command_accepts(memory: Repository, run: Any, key: str,
                                                      value: str) -> None:
    _one_line(run("config", "set", key, value), 2, f"bad value for {key}")
    assert run("recall", WORD, "--no-rerank").exit_code == 0


def test_recall_options_out_of_range_are_one_line(memory: Repository, run: Any) -> None:
    _one_line(run("recall", WORD, "--since", "99999999999d", "--no-rerank"), 2, "--since")
    for value in ("nan", "inf", "-1"):
        result = run("--format", "json", "recall", WORD, "--half-life", value, "--no-rerank")
        assert result.exit_code != 0 and "NaN" not in result.stdout
        _one_line(result, result.exit_code, "--half-life")


def test_a_250_character_remote_ref_name(tmp_path: Path, settings: Any, run: Any) -> None:
    sc = scene(tmp_path, settings)
    long = sc.remote / "refs" / "heads" / ("b" * 250)
    long.write_text(sc.tip() + "\n")
    before = snapshot_tree(sc.victim.path)
    os.chdir(sc.victim.path.parent)
    _one_line(run("pull"), 5, "invalid ref name")
    assert snapshot_tree(sc.victim.path) == before


def test_a_remote_name_of_250_characters(memory: Repository, run: Any) -> None:
    _one_line(run("remote", "add", "a" * 250, "/tmp/nowhere"), 2, "invalid remote name")


def test_an_honest_memory_is_untouched(memory: Repository) -> None:
    assert api.status(memory).chunks == 5
    memory.commit_chunks([make_chunk(9)], "index")
    assert api.status(memory).chunks == 6


def test_non_utf8_bytes_in_a_transcript_keep_the_turn(tmp_path: Path) -> None:
    from funes.ingest.parsers import parse_file

    path = tmp_path / "chat.jsonl"
    good = b'{"role": "user", "content": "plain words"}\n'
    bad = b'{"role": "assistant", "content": "bytes \xff\xfe from a binary tool"}\n'
    path.write_bytes(good + bad)
    result = parse_file(path, "import", final=True)
    texts = [block.text for turn in result.turns for block in turn.blocks]
    assert len(result.turns) == 2, result.skipped
    assert any("bytes \ufffd\ufffd from a binary tool" in t for t in texts)
