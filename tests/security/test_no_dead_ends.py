"""No dead ends between ingest, scrub and the publish gate (issue #28), through the real CLI.

A Claude Code session that printed a database URL with a password used to be stored as
``postgres://admin:[REDACTED:url-password]@…``; every push then held it back (the gate's second
engine read the marker as a password), `funes scrub` found nothing to redact, and `funes
status` said the last sync was ok. Here the session pushes on the first try; and a chunk the
gate does hold back (stored by an older funes) is visible in `status` and its JSON, the record
is not ok, and the fix the message names, run as printed, ends in a clean push.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk
from tests.remotes.conftest import World, visible

pytest.importorskip("betterleaks")

PASSWORD = "Xq7vT2mPz9LkW4rB"
DB_URL = f"postgres://admin:{PASSWORD}@db.internal:5432/app"
#: A Docker Hub token: only the second engine knows the format (tests/security/test_gate_engines).
DOCKER_PAT = "dckr_pat_" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9"


def _session(path: Path) -> Path:
    """A Claude Code transcript: `cat .env` prints the URL, the assistant repeats it."""
    def line(uuid: str, role: str, content: Any, **extra: Any) -> str:
        return json.dumps({"type": role, "timestamp": f"2026-11-24T10:00:0{uuid[-1]}.000Z",
                           "sessionId": "db-session", "uuid": uuid, **extra,
                           "message": {"role": role, "content": content}})

    path.write_text("\n".join([
        line("m1", "user", "Connect the app to the database", cwd=str(path.parent)),
        line("m2", "assistant", [{"type": "tool_use", "id": "t1", "name": "Bash",
                                  "input": {"command": "cat .env"}}]),
        line("m3", "user", [{"type": "tool_result", "tool_use_id": "t1",
                             "content": f"DATABASE_URL={DB_URL}\nDEBUG=1\n"}]),
        line("m4", "assistant", [{"type": "text", "text": f"The app reads DATABASE_URL={DB_URL}"
                                  " from .env; export TOKEN=" + DOCKER_PAT + " is set too."}]),
    ]) + "\n", "utf-8")
    return path


def _sent(world: World) -> bytes:
    root = Path(world.hub.storage_dir) if world.hub is not None else Path(world.url)
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def _status_json(run: Any) -> dict[str, Any]:
    res = run("--format", "json", "status", "--offline")
    assert res.exit_code == 0, res.stderr
    remotes = json.loads(res.stdout)["remotes"]
    assert len(remotes) == 1
    return remotes[0]  # type: ignore[no-any-return]


def test_a_database_url_session_pushes_clean_on_the_first_try(world: World, run: Any) -> None:
    a = world.machine("a")
    os.chdir(a.path.parent)
    session = _session(world.tmp / "db-session.jsonl")
    res = run("index", "--agent", "claude", str(session))
    assert res.exit_code == 0, res.stderr
    stored = "\n".join(r["text"] for r in visible(a).values())
    assert "postgres://admin:[REDACTED:url-password]@db.internal:5432/app" in stored
    assert PASSWORD not in stored and DOCKER_PAT[9:] not in stored  # both engines ran at ingest
    res = run("push")
    assert res.exit_code == 0, res.stdout + res.stderr
    assert "held back" not in res.stdout
    sent = _sent(world)
    assert sent and PASSWORD.encode() not in sent and DOCKER_PAT[9:].encode() not in sent
    last = _status_json(run)["last"]
    assert last["ok"] is True and last["withheld"] == []
    res = run("scrub")
    assert res.exit_code == 0 and "nothing to redact" in res.stdout  # one verdict: all clean


def test_a_withholding_push_shows_in_status_and_its_fix_works(world: World, run: Any) -> None:
    a = world.machine("a")
    leaky = make_chunk(50, session="leaky", text=f"echo {DOCKER_PAT} | docker login -u me "
                       "--password-stdin\nDATABASE_URL=postgres://admin:[REDACTED:url-password]"
                       "@db.internal:5432/app")
    a.commit_chunks([*make_batch(0, 6), leaky], "index: from an older funes")
    os.chdir(a.path.parent)

    res = run("push")
    assert res.exit_code == 1
    assert "held back 1 chunk(s)" in res.stdout
    assert "betterleaks:dockerhub-personal-access-token" in res.stdout
    assert "generic-credential-uri" not in res.stdout  # the marker is not a finding
    assert "`funes scrub && funes push origin`" in res.stdout

    human = run("status", "--offline")
    assert "INCOMPLETE: push: the publish gate held back 1 chunk(s)" in human.stdout, human.stdout
    assert "(its copy lacks 1 withheld chunk(s))" in human.stdout
    assert "betterleaks:dockerhub-personal-access-token" in human.stdout
    assert "ok (push)" not in human.stdout
    remote = _status_json(run)
    last = remote["last"]
    assert last["ok"] is False and last["held"] == 1
    assert [h["chunk"] for h in last["withheld"]] == [leaky.id]
    # funes's own random-token detector (funes.ingest.detectors) may name it too
    assert "betterleaks:dockerhub-personal-access-token" in last["withheld"][0]["detectors"]
    fix = last["fix"]
    assert fix == "funes scrub && funes push origin"

    again = run("push")  # nothing new to send: still not a silent success
    assert again.exit_code == 1 and "still withheld" in again.stderr
    assert _status_json(run)["last"]["withheld"]
    assert "INCOMPLETE: push: nothing new to send; 1 chunk(s) still withheld" in run(
        "status", "--offline").stdout

    for step in fix.split(" && "):  # the fix, run as printed
        argv = shlex.split(step)
        assert argv[0] == "funes"
        res = run(*argv[1:])
        assert res.exit_code == 0, (step, res.stdout, res.stderr)
    assert "held back" not in res.stdout
    last = _status_json(run)["last"]
    assert last["ok"] is True and last["withheld"] == [] and last["fix"] is None
    assert "INCOMPLETE" not in run("status", "--offline").stdout
    assert run("push").exit_code == 0
    assert DOCKER_PAT[9:].encode() not in _sent(world)

    b = world.clone("b")
    texts = [r["text"] for r in visible(b).values()]
    assert len(texts) == 7
    assert any(re.search(r"\[REDACTED:[a-z-]+\] \| docker login", t) for t in texts)


def test_a_sync_that_withholds_is_not_ok(world: World, run: Any) -> None:
    a = world.machine("a")
    a.commit_chunks([*make_batch(0, 3), make_chunk(9, text=f"token {DOCKER_PAT}")], "index")
    os.chdir(a.path.parent)
    res = run("sync")
    assert res.exit_code == 1 and "held back 1 chunk(s)" in res.stdout
    last = api.last_sync(Repository.open(a.path, world.settings), "origin")
    assert last is not None and not last.ok and len(last.withheld) == 1
    note = api.sync_note(Repository.open(a.path, world.settings))
    assert note is not None and "withheld" in note and "funes scrub" in note
    assert run("scrub").exit_code == 0
    assert run("sync").exit_code == 0
    last = api.last_sync(Repository.open(a.path, world.settings), "origin")
    assert last is not None and last.ok and not last.withheld
