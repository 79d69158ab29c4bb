"""A shared memory that tells the truth (issue #29): each numbered case, on both remotes.

Machines are HOMEs of their own (tests/remotes/truth_support.py); sessions arrive only through
the agents' hooks; the reads go through the CLI and through a real MCP client. On the Hub,
tokens decide who owns what: alice and carol belong to `acme`, bob collaborates with write
access everywhere but owns only his own namespace, and a stranger belongs to nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from funes import api
from tests.builders import make_chunk
from tests.remotes.conftest import REPO_ID, World, _load_settings
from tests.remotes.truth_support import Machine, headers

TEAM = "acme/team"


@pytest.fixture(params=["dir", pytest.param("hf", marks=pytest.mark.slow)])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    """Each case on a directory remote (quick suite) and on the loopback Hub (slow: CI)."""
    if request.param == "hf":
        hub = request.getfixturevalue("hub")
        return World("hf", f"hf://datasets/{REPO_ID}", tmp_path, _load_settings(), hub)
    return World("dir", str(tmp_path / "remote"), tmp_path, _load_settings())


@pytest.fixture
def machines(world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             run: Callable[..., Any]) -> Iterator[Callable[..., Machine]]:
    """`machine(name)`: a user with a HOME (and, on the Hub, a token) of their own."""
    tokens = {}
    if world.hub is not None:
        tokens = {
            "alice": world.hub.add_token("hf_alice", "alice", orgs=("acme",)),
            "carol": world.hub.add_token("hf_carol", "carol", orgs=("acme",)),
            "bob": world.hub.add_token("hf_bob", "bob", orgs="*"),  # writes, owns only "bob"
            "stranger": world.hub.add_token("hf_nobody", "nobody", orgs=()),
        }
    made: dict[str, Machine] = {}

    def machine(name: str) -> Machine:
        if name not in made:
            home = tmp_path / f"home-{name}"
            home.mkdir()
            made[name] = Machine(name, home, tokens.get(name), monkeypatch, run)
        return made[name]

    yield machine


def _team_url(world: World) -> str:
    """The team remote: a Hub dataset, or a directory (as `file://`: it need not exist yet)."""
    return f"hf://datasets/{TEAM}" if world.kind == "hf" else f"file://{world.tmp / 'team'}"


def _published(world: World, alice: Machine, text: str) -> str:
    """alice's memory with `text`, pushed to the team remote (public on the Hub)."""
    url = _team_url(world)
    from funes.storage.repo import Repository

    repo = Repository.init(alice.home / "work" / ".funes", alice.settings())
    repo.commit_chunks([make_chunk(1, session="alice-s", text=text)], "index")
    api.remote_add(repo, "origin", url)
    api.push(repo)
    if world.hub is not None:
        world.hub.set_private(TEAM, False)
    return url


# -- 1. `--memory X` reads X or fails ------------------------------------------------------------


def test_memory_reads_that_memory_or_fails_never_another(
        world: World, machines: Callable[..., Machine]) -> None:
    alice, bob = machines("alice"), machines("bob")
    url = _published(world, alice, "ospreyquill: the team decided on the line reader")
    assert bob.run("init", "--global").exit_code == 0
    from funes.storage.repo import Repository

    mine = Repository.open(bob.funes_home, bob.settings())
    mine.commit_chunks([make_chunk(2, session="bob-s", text="ospreyquill: bob's PRIVATE note")],
                       "index")
    label = TEAM if world.kind == "hf" else url

    def refused(args: tuple[str, ...], why: str) -> None:
        out = bob.run("--format", "agent", *args)
        assert out.exit_code == 5, (args, out.stdout, out.stderr)
        assert why in out.stderr and "PRIVATE" not in out.stdout, (args, out.stderr)

    recall = ("recall", "ospreyquill", "--no-rerank", "--memory")
    refused((*recall, f"{label}@no-such-tag"), "no tag 'no-such-tag'")
    refused(("get", "alice-s", "alice-s-t1", "--memory", f"{label}@no-such-tag"), "no tag")
    refused(("status", "--memory", f"{label}@no-such-tag"), "no tag")
    missing = "acme/missing" if world.kind == "hf" else f"file://{world.tmp / 'nowhere'}"
    refused((*recall, missing), "no funes memory there")

    good = bob.run("--format", "agent", *recall, label)
    assert good.exit_code == 0 and "the team decided" in good.stdout
    assert "PRIVATE" not in good.stdout

    # the same through MCP: the tool fails, it never answers from bob's own memory
    results = bob.mcp([("recall", {"query": "ospreyquill", "memory": f"{label}@no-such-tag"}),
                       ("get", {"session_id": "alice-s", "turn_id": "alice-s-t1",
                                "memory": missing}),
                       ("status", {"memory": f"{label}@no-such-tag"}),
                       ("recall", {"query": "ospreyquill", "memory": label})])
    assert [error for error, _ in results] == [True, True, True, False], results
    assert "no tag" in results[0][1] and "no funes memory" in results[1][1]
    assert "the team decided" in results[3][1] and "PRIVATE" not in results[3][1]

    if world.hub is None:
        # a directory remote that is gone is not "offline": its cached copy does not stand in
        shutil.move(world.tmp / "team", world.tmp / "team.moved")
        refused((*recall, label), "no funes memory there")
        return
    hub = world.hub
    bob.token = "hf_revoked"  # a bad token: the remote's answer, not a reason to read the cache
    refused((*recall, label), "not allowed")
    bob.token = "hf_bob"
    hub.fail_with(503, route="refs", times=None)  # the Hub is down: the cached copy, said so
    offline = bob.run("--format", "agent", *recall, label)
    assert offline.exit_code == 0, offline.stderr
    first = offline.stdout.splitlines()[0]
    assert first.startswith("# note: ") and "cached here, as of" in first, first
    assert "the team decided" in offline.stdout and "PRIVATE" not in offline.stdout
    assert json.loads(bob.run("--format", "json", *recall, label).stdout)["note"]
    refused((*recall, "acme/never-read"), "no copy of it is cached")
    results = bob.mcp([("recall", {"query": "ospreyquill", "memory": label}),
                       ("recall", {"query": "ospreyquill", "memory": "acme/never-read"})])
    assert results[0][1].startswith("# note: ") and "PRIVATE" not in results[0][1]
    assert results[1][0] and "no copy of it is cached" in results[1][1]


# -- 2. a project memory holds only its project ---------------------------------------------------


def test_a_project_memory_receives_only_its_projects_sessions(
        world: World, machines: Callable[..., Machine]) -> None:
    ada, reader = machines("alice"), machines("carol")
    project, other, third = (ada.home / "src" / n for n in ("app", "blog", "notes"))
    for d in (project, other, third):
        d.mkdir(parents=True)
    assert ada.run("add", "claude").exit_code == 0  # every session to the global memory
    url = _team_url(world)
    added = ada.run("--format", "json", "add", "claude", url, "--project", cwd=project)
    assert added.exit_code == 0, added.stderr
    out = json.loads(added.stdout)
    assert out["index_command"] == f"funes index --agent claude --workdir {project}"

    ada.end_claude_session("11111111-0000-4000-8000-00000000000a", project,
                           ["kestrelplum: how do we ship the app", "kestrelplum: the app ships"])
    ada.end_claude_session("22222222-0000-4000-8000-00000000000b", other,
                           ["kestrelplum: draft the blog post", "kestrelplum: the BLOG text"])
    ada.end_claude_session("33333333-0000-4000-8000-00000000000c", third,
                           ["kestrelplum: my diary", "kestrelplum: the DIARY text"])
    # a second agent bound to the same project memory follows the same rule
    assert ada.run("add", "codex", url, "--project", cwd=project).exit_code == 0
    ada.codex_turn_ends("0c0dec00-0000-4000-8000-0000000000b1", other,
                        "kestrelplum: the CODEX blog turn", 1)
    ada.codex_turn_ends("0c0dec00-0000-4000-8000-0000000000b2", project,
                        "kestrelplum: the codex app turn", 1)

    def texts(memory: Path) -> str:
        return str(ada.run("--format", "agent", "recall", "kestrelplum", "-k", "20",
                           "--no-rerank", "--memory", str(memory)).stdout)

    # the index command `add` printed copies in only the project's earlier sessions
    indexed = ada.run(*out["index_command"].split()[1:], cwd=project)
    assert indexed.exit_code == 0, indexed.stderr
    in_project = texts(project / ".funes")
    assert "the app ships" in in_project and "codex app turn" in in_project
    assert "BLOG" not in in_project and "DIARY" not in in_project and "CODEX" not in in_project
    everywhere_else = texts(ada.funes_home)
    assert "BLOG" in everywhere_else and "DIARY" in everywhere_else
    assert "CODEX blog" in everywhere_else
    assert "the app ships" not in everywhere_else

    # what the remote holds: a fresh machine clones it
    assert reader.run("clone", url, str(reader.home / "copy")).exit_code == 0
    remote = reader.run("--format", "agent", "recall", "kestrelplum", "-k", "20",
                        "--no-rerank", cwd=reader.home / "copy").stdout
    assert "the app ships" in remote and "BLOG" not in remote and "DIARY" not in remote
    assert "CODEX" not in remote

    # the agent's MCP server reads the memory of the directory it runs in (another
    # project's: the global memory), and the project memory holds none of it
    results = ada.mcp([("recall", {"query": "kestrelplum blog"}),
                       ("recall", {"query": "kestrelplum blog",
                                   "memory": str(project / ".funes")})], cwd=other)
    assert "BLOG" in results[0][1] and "BLOG" not in results[1][1]


def test_a_binding_to_a_project_memory_an_older_funes_wrote_is_scoped(tmp_path: Path,
                                                                      settings: Any) -> None:
    from funes.agents.wiring import Record, replace_file
    from funes.api.routing import routing_for

    project = tmp_path / "app"
    api.init(settings, project)
    old = Record("claude", memory=str(project / ".funes"))  # bound user-wide, as before
    replace_file(Record.path(settings, "claude"), old.to_bytes())
    routing = routing_for(settings, "claude")
    assert routing.memory is None  # other sessions: the per-session rule
    assert routing.project_of(str(project / "sub")) == project / ".funes"
    assert routing.project_of(str(tmp_path / "elsewhere")) is None


# -- 3. one trust decision on every path ----------------------------------------------------------


@pytest.mark.slow  # the quick suite's marks: tests/security/test_untrusted.py
def test_marks_on_every_path_and_the_users_own_turns(
        world: World, machines: Callable[..., Machine], tmp_path: Path) -> None:
    alice, bob, carol = machines("alice"), machines("bob"), machines("carol")
    key = alice.run("--format", "json", "keys", "generate", "--comment", "alice")
    assert key.exit_code == 0, key.stderr
    url = _published(world, alice, "heronfig: alice's signed decision")

    # bob writes to the team memory, which is not his (another namespace on the Hub)
    assert bob.run("add", "claude", url).exit_code == 0
    if world.hub is None:  # one Unix user here: say so the way a clone of another's would
        assert bob.run("config", "set", "core.owned", "false").exit_code == 0
    bob.end_claude_session("44444444-0000-4000-8000-00000000000d", bob.home,
                           ["heronfig: bob asks", "heronfig: bob's own answer"])
    out = bob.run("--format", "agent", "recall", "heronfig", "--no-rerank").stdout
    assert out.splitlines()[0].startswith("# untrusted memory")
    marks = {("alice" in h, h.endswith(" untrusted")) for h in headers(out)}
    assert marks == {(True, True), (False, False)}, out  # his own turns are not marked
    agent = bob.run("--format", "agent", "get", "alice-s", "alice-s-t1").stdout
    assert agent.startswith("# untrusted memory") and "turn alice-s-t1 untrusted" in agent
    own = bob.run("--format", "agent", "get", "44444444-0000-4000-8000-00000000000d",
                  "44444444-1").stdout
    assert " untrusted\n" not in own.split("\n", 1)[1]  # the header says whose memory; no mark
    turns = json.loads(bob.run("--format", "json", "get", "alice-s", "alice-s-t1").stdout)
    assert turns[0]["untrusted"] is True
    results = bob.mcp([("get", {"session_id": "alice-s", "turn_id": "alice-s-t1"}),
                       ("recall", {"query": "heronfig"})])
    assert results[0][1].startswith("# untrusted memory") and " untrusted\n" in results[0][1]
    assert {("alice" in h, h.endswith(" untrusted")) for h in headers(results[1][1])} == marks

    # carol trusts alice's key and has none of her own: unsigned commits vouch for nothing
    carol.use()
    pub = alice.run("keys", "export").stdout.strip()
    assert carol.run("keys", "trust", pub).exit_code == 0
    assert carol.run("clone", url, str(carol.home / "team")).exit_code == 0
    copy = carol.home / "team"
    status = carol.run("--format", "agent", "status", cwd=copy).stdout
    assert "signing team" in status and "unsigned and unknown-key commits vouch for nothing" \
        in status
    out = carol.run("--format", "agent", "recall", "heronfig", "--no-rerank", cwd=copy).stdout
    assert not out.startswith("# untrusted memory")
    marks = {("alice" in h, h.endswith(" untrusted")) for h in headers(out)}
    assert marks == {(True, False), (False, True)}, out  # bob's unsigned turns are marked
    assert headers(carol.mcp([("recall", {"query": "heronfig"})], cwd=copy)[0][1]) == \
        headers(out)

    # `ask` hands the same marks to the agent (a stand-in `claude` that prints its prompt)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text("#!/bin/sh\ncat > /dev/null\necho 'from the passages: yes'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    carol.monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    asked = carol.run("ask", "claude", "heronfig answer", "--show-prompt", cwd=copy)
    assert asked.exit_code == 0, asked.stderr
    prompt_lines = [line for line in asked.stderr.splitlines() if line.startswith("[")]
    assert any("44444444" in line and line.endswith("| UNTRUSTED") for line in prompt_lines)
    assert any("alice-s" in line and not line.endswith("UNTRUSTED") for line in prompt_lines)


# -- 4. status knows when it is behind ------------------------------------------------------------


def test_status_says_behind_after_another_machine_synced(
        world: World, machines: Callable[..., Machine]) -> None:
    a, b = machines("alice"), machines("carol")
    url = _team_url(world)
    assert a.run("add", "claude", url).exit_code == 0
    assert b.run("add", "claude", url).exit_code == 0
    a.end_claude_session("55555555-0000-4000-8000-00000000000e", a.home,
                         ["plovercress: a's session", "plovercress: a's answer"])
    b.end_claude_session("66666666-0000-4000-8000-00000000000f", b.home,
                         ["plovercress: b's session", "plovercress: b's answer"])

    status = a.run("--format", "agent", "status").stdout
    line = next(x for x in status.splitlines() if x.startswith("remote   origin"))
    assert "behind: origin has commits not fetched yet (checked now" in line, status
    offline = a.run("--format", "agent", "status", "--offline").stdout
    line = next(x for x in offline.splitlines() if x.startswith("remote   origin"))
    assert "up to date as of the last fetch, " in line and " ago" in line, line
    data = json.loads(a.run("--format", "json", "status").stdout)
    assert data["remotes"][0]["moved"] is True and data["remotes"][0]["checked"] is True
    results = a.mcp([("status", {})])
    assert "behind: origin has commits not fetched yet" in results[0][1]
    # b's memory is a clone of what a's hooks pushed: chunks this version wrote need no scrub
    assert "funes scrub" not in status and "funes scrub" not in results[0][1]
    assert "funes scrub" not in b.run("--format", "agent", "status", "--offline").stdout

    assert a.run("pull").exit_code == 0
    line = next(x for x in a.run("--format", "agent", "status").stdout.splitlines()
                if x.startswith("remote   origin"))
    assert "up to date (checked now)" in line, line
    assert "funes scrub" not in a.run("--format", "agent", "status", "--offline").stdout
    if world.hub is not None:
        world.hub.clear_requests()  # checking costs one small request when nothing moved
        assert a.run("--format", "agent", "status").exit_code == 0
        assert [r.route for r in world.hub.requests] == ["refs"]
        world.hub.fail_with(503, route="refs", times=None)
        line = next(x for x in a.run("--format", "agent", "status").stdout.splitlines()
                    if x.startswith("remote   origin"))
        assert "as of the last fetch" in line and "not checked now" in line, line


# -- 5. machines set up with `funes add` embed and push -----------------------------------------


def test_add_installs_the_embedder_so_hooks_embed_and_push_vectors(
        world: World, machines: Callable[..., Machine]) -> None:
    a, reader = machines("alice"), machines("carol")
    url = _team_url(world)
    added = a.run("add", "claude", url)
    assert added.exit_code == 0, added.stderr
    assert "installed the embedding model minilm-l6-v2" in added.stdout, added.stdout
    a.end_claude_session("77777777-0000-4000-8000-000000000001", a.home,
                         ["wagtailrye: an embedded question", "wagtailrye: an embedded answer"])
    log = "\n".join(a.log)
    assert "embed: 2 chunks" in log and "not installed" not in log, log
    assert reader.run("clone", url, str(reader.home / "copy")).exit_code == 0
    data = json.loads(reader.run("--format", "json", "status", cwd=reader.home / "copy").stdout)
    assert data["search"]["embedded"] == 2 and data["search"]["backlog"] == 0


def test_codex_last_turns_sync_when_its_next_session_starts(
        world: World, machines: Callable[..., Machine]) -> None:
    a, reader = machines("alice"), machines("carol")
    url = _team_url(world)
    assert a.run("add", "codex", url).exit_code == 0
    first, second = "0c0dec00-0000-4000-8000-0000000000a1", "0c0dec00-0000-4000-8000-0000000000a2"
    a.codex_turn_ends(first, a.home, "siskinoat: the first turn", 1)
    a.codex_turn_ends(first, a.home, "siskinoat: the LAST turn of the session", 2)

    def remote_text() -> str:
        copy = reader.home / "copy"
        shutil.rmtree(copy, ignore_errors=True)
        assert reader.run("clone", url, str(copy)).exit_code == 0
        return str(reader.run("--format", "agent", "recall", "siskinoat", "-k", "10",
                              "--no-rerank", cwd=copy).stdout)

    assert "LAST turn" not in remote_text()  # within sync.interval: not synced yet
    a.codex_turn_ends(second, a.home, "siskinoat: a new session", 1)
    assert "LAST turn" in remote_text()


# -- 6. a failed add or clone leaves the machine as it found it -----------------------------------


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_failed_add_or_clone_leaves_the_machine_as_it_was(
        world: World, machines: Callable[..., Machine]) -> None:
    who = machines("stranger")
    if world.hub is not None:
        bad = "acme/does-not-exist"  # the stranger may not create a repository in acme
    else:
        blocker = world.tmp / "a-file"
        blocker.write_text("not a directory")
        bad = f"file://{blocker / 'remote'}"
    before = _tree(who.home)
    failed = who.run("add", "claude", bad)
    assert failed.exit_code == 5, (failed.stdout, failed.stderr)
    assert _tree(who.home) == before and not who.funes_home.exists()
    assert who.run("clone", bad, str(who.home / "copy")).exit_code == 5
    assert _tree(who.home) == before and not (who.home / "copy").exists()

    # with a memory already there: no `origin`, no changed config, HEAD where it was
    assert who.run("add", "claude").exit_code == 0
    settle = _tree(who.funes_home)
    from funes.agents.wiring import read_bytes

    config = read_bytes(who.funes_home / "config")
    claude = (who.home / ".claude.json").read_bytes()
    assert who.run("add", "codex", bad).exit_code == 5
    assert read_bytes(who.funes_home / "config") == config
    assert (who.home / ".claude.json").read_bytes() == claude
    assert not (who.home / ".codex").exists()
    assert set(_tree(who.funes_home)) <= set(settle) | {"logs/agent-hooks.log"}
    remotes = who.mcp([("status", {})])
    assert not remotes[0][0] and "remote   " not in remotes[0][1]
