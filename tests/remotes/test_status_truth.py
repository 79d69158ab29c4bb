"""What `status` says after chunks travel (issue #29, case 4): the redaction-rules note and a
sync the publish gate held chunks back from, on a directory remote and on the loopback Hub.

The rules note must appear only for chunks older than the installed rules: a clone, a pull or a
sync of what this version wrote asks for no `funes scrub`; chunks an older funes wrote (chunk
manifests without a rules stamp, or stamped with other rules) still do, and a merge of current
chunks does not make them look current.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.api import security
from funes.api.agent_format import status_text
from funes.api.syncstate import last_sync
from funes.ingest.redact import rules_version
from funes.ingest.scrub import UNRECORDED, stored_rules
from funes.storage.repo import Repository
from tests.agents.conftest import funes_mcp, mcp_session
from tests.builders import make_batch, make_chunk
from tests.remotes.conftest import World
from tests.security.conftest import AWS_KEY

OLD_RULES = "funes-1+gitleaks@000000000000"


def _index(repo: Repository, tmp: Path, name: str, text: str) -> None:
    """Index one session into `repo` the way ingest does (its commit carries the rules)."""
    session = tmp / f"{name}.jsonl"
    session.write_text(json.dumps({"role": "user", "content": text,
                                   "timestamp": "2026-01-01T00:00:00Z"}) + "\n")
    api.index(repo.settings, memory=str(repo.path), paths=[str(session)], agents=["import"])


def _status(repo: Repository) -> str:
    return status_text(api.status(repo), api.search_status(repo.settings, repo))


def test_chunks_this_version_wrote_need_no_scrub_wherever_they_travel(world: World) -> None:
    a = world.machine("a")
    _index(a, world.tmp, "a1", "the first session, written by this funes")
    api.push(a)
    commit = a.head_commit()
    assert commit is not None and "redaction" not in commit.to_dict()  # older peers verify it
    stamps = {m.redaction for m in map(a.objects.manifest, commit.manifests) if m.table == "chunks"}
    assert stamps == {rules_version()}

    b = world.clone("b")  # a clone: no ingest ran there
    assert stored_rules(b) == rules_version()
    assert api.status(b).redaction_outdated is None and "funes scrub" not in _status(b)

    c = world.machine("c")  # a memory of its own first, then synced with the team's
    _index(c, world.tmp, "c1", "c's own session")
    api.sync(c)
    assert api.status(c).redaction_outdated is None and "funes scrub" not in _status(c)

    _index(a, world.tmp, "a2", "a second session")
    api.sync(a)
    api.pull(b)
    assert api.status(b).redaction_outdated is None

    # a remote's read-only copy (`--memory URL`) says the same
    label = "org/mem" if world.hub is not None else f"file://{world.url}"
    copy = api.choose_memory(world.settings, label).repo
    assert api.status(copy).redaction_outdated is None


def test_chunks_an_older_funes_wrote_still_ask_for_scrub_after_they_travel(
        world: World) -> None:
    a = world.machine("a")
    a.commit_chunks(make_batch(0, 2), "index: by a funes older than the rules stamp")
    api.push(a)
    b = world.clone("b")
    assert api.status(b).redaction_outdated == UNRECORDED
    assert "run `funes scrub`" in _status(b)

    # chunks stamped with other rules: the note names them, and current chunks merged in
    # later do not make the old ones look current
    c = world.machine("c")
    _index(c, world.tmp, "c1", "c's session under the installed rules")
    a.commit_chunks([make_chunk(7, session="old")], "index: older rules", redaction=OLD_RULES)
    api.sync(a)
    api.sync(c)
    assert api.status(c).redaction_outdated in (UNRECORDED, OLD_RULES)
    _index(a, world.tmp, "a2", "a current session")
    api.sync(a)
    api.pull(c)
    assert api.status(c).redaction_outdated in (UNRECORDED, OLD_RULES)
    security.scrub(c)
    assert api.status(c).redaction_outdated is None


def test_a_sync_the_gate_held_chunks_back_from_is_not_ok(world: World, run: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    a = world.machine("a")
    dirty = make_chunk(100, session="leaky", text=f"export AWS_ACCESS_KEY_ID={AWS_KEY}")
    a.commit_chunks([*make_batch(0, 3), dirty], "index: stored before a detector existed")
    monkeypatch.chdir(a.path.parent)
    synced = run("sync")
    assert synced.exit_code == 1 and "held back 1 chunk(s)" in synced.stdout, synced.stdout
    last = last_sync(a, "origin")
    assert last is not None and not last.ok and last.held == 1
    line = next(x for x in _status(a).splitlines() if x.startswith("remote   origin"))
    assert " ok (" not in line and "INCOMPLETE: sync: the publish gate held back 1 chunk(s)" \
        in line and "fix: `funes scrub && funes sync origin`" in line, line
    remote = json.loads(run("--format", "json", "status", "--offline").stdout)["remotes"][0]
    assert remote["last"]["ok"] is False and remote["last"]["held"] == 1
    tools = mcp_session(funes_mcp(), [("status", {})], cwd=a.path.parent,
                        env={k: v for k, v in os.environ.items() if k.startswith("HF_")})[2]
    assert "INCOMPLETE: sync: the publish gate held back 1 chunk(s)" in tools[0][1], tools[0][1]

    security.scrub(a)  # the fix the line names
    api.sync(a)
    last = last_sync(a, "origin")
    assert last is not None and last.ok and not last.held


def test_a_manifest_keeps_its_rules_stamp_and_older_manifests_parse() -> None:
    from funes.model.objects import MalformedObjectError, Manifest, decode, encode

    stamped = Manifest("chunks", ("a" * 64,), (), rules_version())
    assert decode(encode(stamped)[1]) == stamped
    older = Manifest("chunks", ("a" * 64,), ())
    assert "redaction" not in older.to_dict()  # manifests written before keep their ids
    assert decode(encode(older)[1]).redaction is None
    with pytest.raises(MalformedObjectError, match="too long"):
        Manifest.from_dict({**older.to_dict(), "redaction": "x" * 201})
