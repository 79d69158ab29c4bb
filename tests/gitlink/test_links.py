"""Which turns a commit gets: repository matching, windows between linked commits, the first
window, tombstones; and links as ordinary memory objects that survive copying the memory."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from funes import api
from funes.errors import FunesError
from funes.gitlink.links import FIRST_WINDOW, NotLinkedError
from funes.ingest.project import clear_cache
from funes.model.objects import Commit, Link, MalformedObjectError, Tombstone, decode, encode
from funes.storage.fsck import fsck
from funes.storage.repo import Repository
from tests.gitlink.conftest import (
    CLAUDE_A,
    CLAUDE_B,
    CODEX,
    T0,
    dulwich_commit,
    git,
    init_git,
    needs_git,
    needs_traces,
    session_at,
    settings_at,
)

SHA = "0123456789abcdef0123456789abcdef01234567"


def _link(**changes: object) -> Link:
    fields: dict[str, object] = dict(
        commit=SHA, repository="github.com/a/b", branch="main", author="Ada <a@b>",
        time="2026-03-01T12:00:00.000Z", message="Fix it\n\nbecause", paths=("a.py",),
        turns=(("claude", "s1", "t1"), ("codex", "s2", "t9")), since=None,
        until="2026-03-01T12:00:01.000Z",
    )
    fields.update(changes)
    return Link(**fields)  # type: ignore[arg-type]


# -- the objects ----------------------------------------------------------------------------


def test_link_round_trips_and_parses_strictly() -> None:
    link = _link()
    _, raw = encode(link)
    assert decode(raw) == link
    assert link.sessions == {("claude", "s1"): 1, ("codex", "s2"): 1}
    for bad in (
        raw.replace(SHA.encode(), b"HEAD"),
        raw.replace(b'["claude","s1","t1"]', b'["claude","s1"]'),
        raw.replace(b'["claude","s1","t1"]', b'["claude","s1",7]'),
        raw.replace(b'"paths":["a.py"]', b'"paths":"a.py"'),
        raw.replace(b',"until":"2026-03-01T12:00:01.000Z"', b""),
    ):
        assert bad != raw
        with pytest.raises(MalformedObjectError):
            decode(bad)


def test_commits_without_links_keep_their_ids() -> None:
    plain = Commit((), (), (), None, "A <a@b>", "h", "2026-03-01T12:00:00.000Z", "m", 0)
    oid, raw = encode(plain)
    assert b'"links"' not in raw
    linked = Commit((), (), (), None, "A <a@b>", "h", "2026-03-01T12:00:00.000Z", "m", 0,
                    links=(encode(_link())[0],))
    lid, lraw = encode(linked)
    assert lid != oid and decode(lraw) == linked and decode(raw) == plain


def test_fsck_checks_the_links_a_commit_names(repo: Repository) -> None:
    result = repo.commit_chunks([], "link: test", links=[_link()])
    assert result.commit is not None and fsck(repo).ok
    commit = repo.objects.commit(result.commit)
    assert [repo.objects.link(lid) for lid in commit.links] == [_link()]
    repo.objects.path_of(commit.links[0]).unlink()
    report = fsck(repo)
    assert not report.ok and any("link" in p.detail for p in report.problems)


def test_links_are_reachable_from_commits_like_every_other_object(repo: Repository) -> None:
    """The generic walk a transfer does (every id a commit names) reaches links."""
    repo.commit_chunks([], "link: one", links=[_link()])
    repo.commit_chunks([], "t", tombstones=[Tombstone(("a" * 64,), "r", "A <a@b>", "t")])
    reached = set()
    for oid, commit in repo.walk():
        reached.add(oid)
        data = commit.to_dict()
        for key in ("parents", "manifests", "tombstones", "links"):
            reached.update(data.get(key, ()))
    assert reached == set(repo.objects)


# -- choosing turns (real sessions, real indexing) -----------------------------------------


@pytest.fixture
def two_repos(tmp_path: Path, agents_env: dict[str, Path], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Two code repositories sharing the global memory, each with its own agent sessions."""
    a = init_git(tmp_path / "a")
    b = init_git(tmp_path / "b")
    (a / "sub").mkdir()
    settings = settings_at(a)
    Repository.init(settings.home, settings, is_global=True)
    monkeypatch.chdir(a)
    return a, b, agents_env


@needs_traces
def test_a_link_takes_only_its_repositorys_turns_from_every_agent(two_repos) -> None:  # type: ignore[no-untyped-def]
    a, b, agents = two_repos
    session_at(CLAUDE_A, agents["claude"] / "projects" / "a" / "s.jsonl", a / "sub",
               T0 - 300, T0 - 10)
    session_at(CODEX, agents["codex"] / "sessions" / "rollout-a.jsonl", a, T0 - 200, T0 - 5)
    session_at(CLAUDE_B, agents["claude"] / "projects" / "b" / "s.jsonl", b, T0 - 300, T0 - 10)
    sha = dulwich_commit(a, {"x": "1\n"}, "in a", T0)
    result = api.link_commit(settings_at(a))
    assert result.sha == sha and result.note is not None and not result.warnings
    harnesses = {h for h, _, _ in result.link.turns}
    assert harnesses == {"claude", "codex"}
    memory = Repository.open(settings_at(a).home, settings_at(a))
    rows = memory.chunks.dataset().to_table(columns=["session_id", "workdir"]).to_pylist()
    b_sessions = {r["session_id"] for r in rows if r["workdir"] == str(b)}
    assert b_sessions and not b_sessions & {s for _, s, _ in result.link.turns}
    assert result.link.paths == ("x",) and result.link.repository == str(
        (a / ".git").resolve())


@needs_traces
def test_consecutive_links_split_the_session_between_them(two_repos) -> None:  # type: ignore[no-untyped-def]
    a, _, agents = two_repos
    session_at(CLAUDE_A, agents["claude"] / "projects" / "a" / "s.jsonl", a,
               T0 - 100, T0 + 100)
    dulwich_commit(a, {"x": "1\n"}, "first", T0)
    first = api.link_commit(settings_at(a))
    dulwich_commit(a, {"x": "2\n"}, "second", T0 + 200)
    second = api.link_commit(settings_at(a))
    assert first.link.turns and second.link.turns
    assert not set(first.link.turns) & set(second.link.turns)
    assert second.link.since == first.link.until == "2026-03-01T12:00:01.000Z"
    memory = Repository.open(settings_at(a).home, settings_at(a))
    rows = memory.chunks.dataset().to_table(columns=["session_id", "turn_id", "time"])
    dated = {(r["session_id"], r["turn_id"]) for r in rows.to_pylist() if r["time"]}
    assert {(s, t) for _, s, t in first.link.turns + second.link.turns} == dated
    # linking a commit again records a second link; `why` shows the union, once
    again = api.link_commit(settings_at(a), "HEAD~1", index=False)
    assert again.link.turns == first.link.turns
    assert api.linked_turns(memory, "HEAD~1") == {(s, t) for _, s, t in first.link.turns}


@needs_traces
def test_the_first_link_looks_back_to_the_parent_commit(two_repos) -> None:  # type: ignore[no-untyped-def]
    a, _, agents = two_repos
    session_at(CLAUDE_A, agents["claude"] / "projects" / "a" / "s.jsonl", a,
               T0 - 1000, T0 - 10)
    dulwich_commit(a, {"x": "1\n"}, "made before the hooks", T0 - 500)
    dulwich_commit(a, {"x": "2\n"}, "first linked", T0)
    result = api.link_commit(settings_at(a))
    assert result.link.since == "2026-03-01T11:51:41.000Z"  # the parent's second, plus one
    assert result.link.turns
    root = init_git(a.parent / "c")
    dulwich_commit(root, {"y": "1\n"}, "root", T0)
    alone = api.link_commit(settings_at(root), index=False)
    assert alone.link.turns == ()
    assert alone.link.since == "2026-02-28T12:00:01.000Z"  # until − FIRST_WINDOW
    assert FIRST_WINDOW.total_seconds() == 86400


@needs_traces
def test_forgotten_turns_are_not_linked(two_repos) -> None:  # type: ignore[no-untyped-def]
    a, _, agents = two_repos
    session_at(CLAUDE_A, agents["claude"] / "projects" / "a" / "s.jsonl", a, T0 - 300, T0 - 10)
    settings = settings_at(a)
    api.index(settings)
    memory = Repository.open(settings.home, settings)
    rows = memory.chunks.dataset().to_table(columns=["id", "turn_id"]).to_pylist()
    victim = rows[0]["turn_id"]
    memory.commit_chunks([], "forget", tombstones=[Tombstone(
        tuple(sorted(r["id"] for r in rows if r["turn_id"] == victim)), "test", "A <a@b>", "t")])
    dulwich_commit(a, {"x": "1\n"}, "first", T0)
    link = api.link_commit(settings).link
    assert link.turns and victim not in {t for _, _, t in link.turns}


@needs_traces
@needs_git
def test_turns_indexed_before_the_repository_had_a_remote_still_match(two_repos) -> None:  # type: ignore[no-untyped-def]
    a, _, agents = two_repos
    session_at(CLAUDE_A, agents["claude"] / "projects" / "a" / "s.jsonl", a, T0 - 300, T0 - 10)
    api.index(settings_at(a))  # project identity: the common git directory
    git(a, "remote", "add", "origin", "git@github.com:acme/widget.git")
    clear_cache()
    dulwich_commit(a, {"x": "1\n"}, "first", T0)
    link = api.link_commit(settings_at(a)).link
    assert link.repository == "github.com/acme/widget"
    assert link.turns  # matched by working directory


# -- links travel with the memory ------------------------------------------------------------


@needs_traces
def test_why_works_on_a_copy_of_the_memory_without_the_code(two_repos, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                             monkeypatch, run) -> None:
    a, _, agents = two_repos
    session_at(CLAUDE_A, agents["claude"] / "projects" / "a" / "s.jsonl", a, T0 - 300, T0 - 10)
    sha = dulwich_commit(a, {"x": "1\n"}, "first", T0)
    settings = settings_at(a)
    expected = {(s, t) for _, s, t in api.link_commit(settings).link.turns}
    elsewhere = tmp_path / "machine-b" / ".funes"
    shutil.copytree(settings.home, elsewhere, ignore=shutil.ignore_patterns("logs", "state"))
    empty = tmp_path / "machine-b" / "work"
    empty.mkdir()
    monkeypatch.chdir(empty)  # no git repository here: the commit is named by its id
    copy = Repository.open(elsewhere, settings_at(empty))
    assert api.linked_turns(copy, sha[:10]) == expected
    shown = run("why", sha[:10], "--limit", "0", "--full", "--memory", str(elsewhere))
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.count("→ funes get ") == len(expected)
    assert f"--memory {elsewhere}" in shown.stdout
    missing = run("why", "deadbeef", "--memory", str(elsewhere))
    assert missing.exit_code == 1 and "not linked" in missing.stderr
    with pytest.raises(FunesError):
        api.why(copy, "HEAD")  # a symbolic name needs the code repository


def test_an_unlinked_commit_says_how_to_link_it(code_repo: Path, run) -> None:  # type: ignore[no-untyped-def]
    api.init(settings_at(code_repo))
    sha = dulwich_commit(code_repo, {"x": "1\n"}, "first", T0)
    result = run("why", "HEAD")
    assert result.exit_code == 1
    assert "is not linked" in result.stderr and "funes link HEAD" in result.stderr
    with pytest.raises(NotLinkedError):
        api.linked_turns(Repository.open(code_repo, settings_at(code_repo)), sha)
    bad = run("why", "no-such-branch")
    assert bad.exit_code == 2 and "names no commit" in bad.stderr


def test_blame_arguments_are_checked(code_repo: Path, run) -> None:  # type: ignore[no-untyped-def]
    api.init(settings_at(code_repo))
    dulwich_commit(code_repo, {"x.py": "1\n2\n"}, "first", T0)
    assert run("blame", "x.py:3").exit_code == 2
    assert run("blame", "x.py:2-1").exit_code == 2
    assert run("blame", "nope.py").exit_code == 2
    shown = run("blame", "x.py")
    assert shown.exit_code == 0, shown.stderr
    assert "not linked (`funes link" in shown.stdout and " 2: 2" in shown.stdout


@needs_traces
def test_links_survive_push_and_clone_to_another_machine(two_repos, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          monkeypatch, run) -> None:
    from dataclasses import replace

    from dulwich import porcelain

    a, _, agents = two_repos
    session_at(CLAUDE_A, agents["claude"] / "projects" / "a" / "s.jsonl", a, T0 - 300, T0 - 10)
    sha = dulwich_commit(a, {"x": "1\n"}, "first", T0)
    settings = settings_at(a)
    expected = {(s, t) for _, s, t in api.link_commit(settings).link.turns}
    assert expected
    memory = Repository.open(settings.home, settings)
    api.remote_add(memory, "origin", str(tmp_path / "shared-memory"))
    api.push(memory)

    # machine B: a clone of the code and a clone of the memory
    machine_b = tmp_path / "machine-b"
    machine_b.mkdir()
    porcelain.clone(str(a), str(machine_b / "code"), errstream=io.BytesIO())
    cloned = api.clone(replace(settings, cwd=machine_b), str(tmp_path / "shared-memory"), "mem")
    copy = Repository.open(cloned.path, settings_at(machine_b / "code"))
    assert api.linked_turns(copy, "HEAD") == expected
    assert api.why(copy, "HEAD").sha == sha
    monkeypatch.chdir(machine_b / "code")
    shown = run("why", "HEAD", "--limit", "0", "--full", "--memory", str(copy.path))
    assert shown.exit_code == 0, shown.stderr
    assert shown.stdout.count("→ funes get ") == len(expected)
    assert fsck(copy).ok
