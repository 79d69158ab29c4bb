"""A way back (issue 14): `reset --hard` through the reflog or ORIG_HEAD, and HEAD damage."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from funes import api
from funes.storage.repo import Repository
from tests.builders import make_chunk
from tests.security.hostile import WORD, scene


def _ids_seen(repo: Repository) -> set[str]:
    """What a reader sees: the table's ids minus tombstoned ones."""
    fresh = Repository.open(repo.path, repo.settings)
    return fresh.chunk_ids() - fresh.tombstoned_ids()


def test_reset_hard_orig_head_undoes_a_pull(tmp_path: Path, settings: Any, run: Any) -> None:
    sc = scene(tmp_path, settings)
    mine = make_chunk(1, session="mine", text=f"{WORD} my own notes")
    # Mallory indexes the same transcript and forgets it: the tombstone hides my chunk too.
    sc.attacker.commit_chunks([mine, make_chunk(80, session="evil", text="evil row")], "index")
    from funes.storage.forget import tombstone

    tombstone(sc.attacker, [mine.id], "forget --session mine")
    api.push(sc.attacker)
    before = sc.victim.head()
    api.pull(sc.victim)
    assert mine.id not in _ids_seen(sc.victim)
    evil = make_chunk(80, session="evil", text="evil row").id
    assert evil in _ids_seen(sc.victim)

    os.chdir(sc.victim.path.parent)
    result = run("reset", "--hard", "ORIG_HEAD")
    assert result.exit_code == 0, result.stderr
    assert sc.victim.head() == before
    seen = _ids_seen(sc.victim)
    assert mine.id in seen and evil not in seen  # the pulled rows left the tables
    recall = run("--format", "json", "recall", WORD, "--no-rerank")
    assert recall.exit_code == 0 and "my own notes" in recall.stdout
    assert run("fsck").exit_code == 0

    # And forward again through the reflog: HEAD@{1} is the merge just undone.
    log = run("reflog")
    assert "HEAD@{1}" in log.stdout
    assert run("reset", "--hard", "HEAD@{1}").exit_code == 0
    assert mine.id not in _ids_seen(sc.victim) and evil in _ids_seen(sc.victim)
    assert run("fsck").exit_code == 0


def test_a_missing_head_is_damage_with_a_fix(repo: Repository, run: Any) -> None:
    repo.commit_chunks([make_chunk(1, text=f"{WORD} kept")], "index")
    from funes.storage.forget import tombstone

    hidden = make_chunk(2, text=f"{WORD} forgotten secret")
    repo.commit_chunks([hidden], "index")
    tombstone(repo, [hidden.id], "forget")
    tip = repo.head()
    (repo.path / "HEAD").unlink()
    os.chdir(repo.path.parent)

    fsck = run("fsck")
    assert fsck.exit_code == 1 and "HEAD" in fsck.stdout
    for args in (("status",), ("recall", WORD, "--no-rerank"), ("log",)):
        result = run(*args)
        assert result.exit_code == 1, (args, result.stdout, result.stderr)
        assert "HEAD is damaged" in result.stderr and "reset --hard main" in result.stderr
        assert "forgotten secret" not in result.stdout
    # Writers refuse too: no parentless commit on a detached HEAD.
    import pytest

    from funes.storage.refs import CorruptRefError

    with pytest.raises(CorruptRefError):
        repo.commit_chunks([make_chunk(3)], "index")

    assert run("reset", "--hard", "main").exit_code == 0
    assert repo.head() == tip
    assert (repo.path / "HEAD").read_text() == "ref: refs/heads/main\n"
    assert run("fsck").exit_code == 0


def test_a_forged_pending_journal_cannot_move_a_branch(repo: Repository) -> None:
    import json

    repo.commit_chunks([make_chunk(1)], "index")
    tip = repo.head()
    (repo.path / "PENDING").write_text(json.dumps(
        {"ref": "refs/heads/main", "old": tip, "commit": "e" * 64, "tables": {},
         "message": "forged"}))
    repo.commit_chunks([make_chunk(2)], "index")  # takes the lock: recovery runs first
    head = repo.head_commit()
    assert head is not None and head.parents == (tip,)
    assert not (repo.path / "PENDING").exists()


def test_a_clone_killed_half_way_does_not_block_the_retry(tmp_path: Path, settings: Any,
                                                          run: Any) -> None:
    """SIGKILL (or power loss) mid-clone leaves a memory marked CLONING: the retry replaces
    it instead of refusing with "a memory already exists"."""
    from dataclasses import replace

    from funes.api.remotes import CLONING

    sc = scene(tmp_path, settings)
    target = tmp_path / "work" / "copy" / ".funes"
    Repository.init(target, settings)  # what a killed clone leaves: a memory, half fetched
    (target / CLONING).write_text("x\n")
    (target / "objects" / "zz").mkdir()
    result = api.clone(replace(settings, cwd=tmp_path / "work"), str(sc.remote), "copy")
    assert result.path == target
    assert not (target / CLONING).exists() and not (target / "objects" / "zz").exists()
    assert Repository.open(target, settings).head() == sc.tip()


def test_sigterm_during_a_clone_removes_the_half_made_memory(tmp_path: Path, settings: Any,
                                                             monkeypatch: Any) -> None:
    import importlib
    import signal
    from dataclasses import replace

    import pytest

    api_remotes = importlib.import_module("funes.api.remotes")

    sc = scene(tmp_path, settings)
    real = api_remotes._clone_into

    def killed(*args: Any, **kwargs: Any) -> Any:
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while the clone runs
        return real(*args, **kwargs)

    monkeypatch.setattr(api_remotes, "_clone_into", killed)
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(SystemExit):
        api.clone(replace(settings, cwd=work), str(sc.remote), "copy")
    assert not (work / "copy").exists()
    monkeypatch.setattr(api_remotes, "_clone_into", real)
    api.clone(replace(settings, cwd=work), str(sc.remote), "copy")
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_unforget_lifts_a_tombstone_that_arrived_unsigned(tmp_path: Path, settings: Any,
                                                          run: Any) -> None:
    sc = scene(tmp_path, settings)
    mine = make_chunk(1, session="mine", text=f"{WORD} my own notes")
    from funes.storage.forget import tombstone

    # The teammate never pushes the row (a push keeps hidden rows home): only its tombstone,
    # which hides the victim's own copy of the same transcript.
    forgot = tombstone(sc.attacker, [mine.id], "forget --session mine").commit
    assert forgot is not None
    api.push(sc.attacker)
    api.pull(sc.victim)
    assert mine.id not in _ids_seen(sc.victim)
    count = api.status(sc.victim).chunks

    os.chdir(sc.victim.path.parent)
    result = run("unforget", forgot[:12])
    assert result.exit_code == 0, result.stderr
    assert "1 chunk(s) visible again" in result.stdout
    assert mine.id in _ids_seen(sc.victim)
    head = sc.victim.head_commit()
    assert head is not None and head.chunk_count == count + 1 == api.status(sc.victim).chunks
    recall = run("--format", "json", "recall", WORD, "--no-rerank")
    assert "my own notes" in recall.stdout
    assert run("fsck").exit_code == 0
    # The id index (a cache) agrees: forgetting again hides it again.
    sc.victim.ids.sync(sc.victim, sc.victim.head())
    assert sc.victim.ids.visible([mine.id]) == {mine.id}
    again = run("unforget", forgot[:12])
    assert again.exit_code == 2 and "already lifted" in again.stderr
    # The lift travels: the attacker's memory sees the chunk again after a pull.
    api.push(sc.victim)
    api.pull(sc.attacker)
    assert mine.id in _ids_seen(sc.attacker)


def test_reset_undoes_a_pull_after_the_tables_were_packed(tmp_path: Path, settings: Any,
                                                          run: Any) -> None:
    from funes.storage import pack

    sc = scene(tmp_path, settings)
    for i in range(3):
        sc.victim.commit_chunks([make_chunk(300 + i, session="mine")], "index")
    evil = make_chunk(80, session="evil", text="evil row")
    sc.attacker.commit_chunks([evil], "index")
    api.push(sc.attacker)
    before = sc.victim.head()
    api.pull(sc.victim)
    pack.pack(sc.victim, force=True)
    assert len(sc.victim.chunks.dataset().get_fragments()) < 4  # packed
    seen_before = _ids_seen(sc.victim)
    assert evil.id in seen_before

    os.chdir(sc.victim.path.parent)
    assert run("reset", "--hard", "ORIG_HEAD").exit_code == 0
    assert sc.victim.head() == before
    seen = _ids_seen(sc.victim)
    assert evil.id not in seen and seen == seen_before - {evil.id}
    assert run("fsck").exit_code == 0
    assert run("reset", "--hard", "HEAD@{1}").exit_code == 0
    assert _ids_seen(sc.victim) == seen_before
    assert run("fsck").exit_code == 0
