"""`funes publish REMOTE --linked-to v1.0..v1.1 --tag v1.1`: a release's sessions, alone.

A private memory of three projects; one of them is a code repository whose commits are linked
to the turns behind them. The published memory must hold exactly the sessions linked to the
release's commits (a raw scan of every remote file finds no other session's text), read back
at its tag, and the private memory must be untouched.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.errors import UsageError
from funes.gitlink.links import record
from funes.model.objects import Link
from funes.storage.repo import Repository
from tests.builders import make_chunk
from tests.remotes.conftest import REPO_ID, World, visible

WIDGET = "github.com/acme/widget"


def _text(session: str, i: int) -> str:
    # distinctive per session, so a raw scan tells the sessions apart
    return f"notes of session {session} turn {i}: the {session}-{i * 7919} design decision"


def _chunks(session: str, project: str, n: int = 3) -> list[Any]:
    return [replace(make_chunk(i, session=session, text=_text(session, i)), project=project,
                    workdir=f"/work/{project.rsplit('/', 1)[-1]}") for i in range(n)]


def _code_repo(path: Path) -> dict[str, str]:
    """widget's history: c1 (v1.0), c2, c3 (v1.1), c4, c5 (v1.2); returns name → sha."""
    from dulwich import porcelain

    path.mkdir(parents=True)
    repo = porcelain.init(str(path))
    repo.close()
    shas: dict[str, str] = {}
    for n in range(1, 6):
        (path / "f.txt").write_text(f"version {n}\n")
        porcelain.add(str(path), [str(path / "f.txt")])
        shas[f"c{n}"] = porcelain.commit(str(path), message=f"c{n}".encode(),
                                         author=b"Ada <ada@example.org>",
                                         committer=b"Ada <ada@example.org>").decode()
        tag = {1: "v1.0", 3: "v1.1", 5: "v1.2"}.get(n)
        if tag:
            porcelain.tag_create(str(path), tag.encode())
    return shas


def _link(sha: str, sessions: list[str]) -> Link:
    turns = tuple(sorted(("claude", s, f"{s}-t{i}") for s in sessions for i in range(2)))
    return Link(sha, WIDGET, "main", "Ada <ada@example.org>", "2026-03-01T12:00:00.000Z",
                f"commit {sha[:7]}", ("f.txt",), turns, None, "2026-03-01T12:00:01.000Z")


def _memory(world: World) -> tuple[Repository, dict[str, str]]:
    code = world.tmp / "widget"
    shas = _code_repo(code)
    settings = replace(world.settings, cwd=code)
    repo = Repository.init(world.tmp / "private" / ".funes", settings)
    repo.commit_chunks([*_chunks("w1", WIDGET), *_chunks("w2", WIDGET), *_chunks("w3", WIDGET),
                        *_chunks("w4", WIDGET), *_chunks("w5", WIDGET),
                        *_chunks("p1", "github.com/acme/payroll"),
                        *_chunks("q1", "github.com/client/quiet")], "index: three projects")
    for name, sessions in (("c1", ["w1"]), ("c2", ["w2"]), ("c3", ["w3", "q1"]),
                           ("c4", ["w4"]), ("c5", ["w5"])):
        record(repo, _link(shas[name], sessions))
    return repo, shas


def _remote_bytes(world: World) -> bytes:
    if world.hub is None:
        return b"".join(p.read_bytes() for p in Path(world.url).rglob("*") if p.is_file())
    files = world.hub.files(REPO_ID)
    return b"".join(world.hub.read_file(REPO_ID, p) for p in files)


def _sessions_in(data: bytes,
                 names: tuple[str, ...] = ("w1", "w2", "w3", "w4", "w5", "p1", "q1")) -> set[str]:
    return {s for s in names if any(_text(s, i).encode() in data for i in range(3))}


def test_publish_linked_to_a_release_holds_exactly_its_sessions(world: World) -> None:
    repo, shas = _memory(world)
    head, count = repo.head(), api.status(repo).chunks
    url = world.url
    seen: list[api.PublishCheck] = []

    def confirm(check: api.PublishCheck) -> bool:
        seen.append(check)
        return True

    first = api.publish_selection(repo, url, linked_to="v1.0..v1.1", tag="v1.1", confirm=confirm)
    # c2 and c3 are the release: sessions w2 and w3, and q1 (another project, also linked)
    assert {s for _, s in first.sessions} == {"w2", "w3", "q1"}
    assert first.added == 9 and first.chunks == 9 and first.tag == "v1.1"
    assert _sessions_in(_remote_bytes(world)) == {"w2", "w3", "q1"}
    if world.hub is not None:
        assert first.public is True and seen and seen[0].scanned == 9
    else:
        assert first.public is None
    # the private memory is untouched
    assert repo.head() == head and api.status(repo).chunks == count

    # read at the tag, without cloning
    at = world.url if world.kind == "hf" else f"file://{world.url}"
    choice = api.choose_memory(world.settings, f"{at}@v1.1")
    assert {r["session_id"] for r in visible(choice.repo).values()} == {"w2", "w3", "q1"}
    hits = api.recall(choice.repo.settings, choice.repo, "w2-7919 design decision",
                      vector=False, rerank=False).hits
    assert hits and hits[0].row["session_id"] == "w2"
    # the links travel, narrowed to the published turns: `why` works on the published memory
    linked = {lk.link.commit: lk.link.turns for lk in _links(choice.repo)}
    assert set(linked) == {shas["c2"], shas["c3"]}
    assert {t[1] for t in linked[shas["c3"]]} == {"w3", "q1"}

    # the next release appends; the first tag still reads the first release
    second = api.publish_selection(repo, first.remote, linked_to="v1.1..v1.2", tag="v1.2")
    assert {s for _, s in second.sessions} == {"w4", "w5"} and second.chunks == 15
    assert _sessions_in(_remote_bytes(world)) == {"w2", "w3", "q1", "w4", "w5"}
    later = api.choose_memory(world.settings, f"{at}@v1.2")
    assert len(visible(later.repo)) == 15 and later.repo.head_commit().parents  # type: ignore[union-attr]
    again = api.choose_memory(world.settings, f"{at}@v1.1")
    assert len(visible(again.repo)) == 9
    # nothing new: no commit; a tag that exists is never moved
    assert api.publish_selection(repo, first.remote, linked_to="v1.1..v1.2").commit is None
    with pytest.raises(UsageError, match=r"tag 'v1\.1' already"):
        api.publish_selection(repo, first.remote, sessions=("p1",), tag="v1.1")
    # the whole memory never goes there
    with pytest.raises(UsageError, match="published selection"):
        api.push(repo, first.remote)
    assert repo.head() == head and api.fsck(repo).ok


def _links(repo: Repository) -> list[Any]:
    from funes.gitlink.links import iter_links

    return list(iter_links(repo))


def test_publish_by_session_project_and_time(tmp_path: Path, settings: Any) -> None:
    repo = Repository.init(tmp_path / "m" / ".funes", settings)
    early = [replace(c, ts="2026-01-05T10:00:00Z") for c in _chunks("e1", WIDGET)]
    late = [replace(c, ts="2026-02-05T10:00:00Z") for c in _chunks("l1", WIDGET)]
    other = [replace(c, ts="2026-02-06T10:00:00Z") for c in _chunks("o1", "github.com/x/y")]
    repo.commit_chunks([*early, *late, *other], "index")
    remote = str(tmp_path / "pub")
    dry = api.publish_selection(repo, remote, project="widget", since="2026-02-01",
                                dry_run=True)
    assert {s for _, s in dry.sessions} == {"l1"} and dry.added == 3 and dry.commit is None
    assert not Path(remote).exists()
    done = api.publish_selection(repo, remote, sessions=("e1",))
    sent = b"".join(p.read_bytes() for p in Path(remote).rglob("*") if p.is_file())
    assert done.added == 3 and _sessions_in(sent, ("e1", "l1", "o1")) == {"e1"}
    with pytest.raises(UsageError, match="no session"):
        api.publish_selection(repo, remote, sessions=("zzzzzzzz",))
    with pytest.raises(UsageError, match="choose what to publish"):
        api.publish_selection(repo, remote)
    # a forgotten session leaves the published memory with the next publish
    from funes.api import security as sec

    sec.forget(repo, session="e1")
    gone = api.publish_selection(repo, remote, sessions=("l1",))
    assert gone.forgotten == 3 and gone.chunks == 3


def test_publish_refuses_a_remote_holding_a_whole_memory(world: World) -> None:
    repo, _ = _memory(world)
    api.remote_add(repo, "origin", world.url)
    api.push(repo)
    with pytest.raises(UsageError, match="holds a whole memory"):
        api.publish_selection(repo, "origin", sessions=("w2",))


def test_publish_cli(world: World, run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, _ = _memory(world)
    monkeypatch.chdir(world.tmp / "widget")
    out = run("--memory", str(repo.path), "publish", world.url, "--linked-to", "v1.0..v1.1",
              "--tag", "v1.1", "--dry-run")
    assert out.exit_code == 0, out.stderr
    assert "would publish" in out.stdout and "3 session(s) chosen: 9 new chunk(s)" in out.stdout
    out = run("--memory", str(repo.path), "publish", world.url, "--linked-to", "v1.0..v1.1",
              "--tag", "v1.1", "--yes")
    assert out.exit_code == 0, out.stderr
    assert "tagged v1.1" in out.stdout
    if world.hub is not None:
        assert "is public" in out.stdout


def test_criteria_combine_and_links_name_only_published_turns(world: World) -> None:
    if world.kind == "hf":
        pytest.skip("the directory case is enough: nothing here is about the transport")
    repo, shas = _memory(world)
    done = api.publish_selection(repo, world.url, linked_to="v1.0..v1.1", project="widget",
                                 tag="v1.1")
    assert {s for _, s in done.sessions} == {"w2", "w3"}
    assert _sessions_in(_remote_bytes(world)) == {"w2", "w3"}
    assert b"q1-t" not in _remote_bytes(world)  # not even a turn id in a link
    choice = api.choose_memory(world.settings, f"file://{world.url}@v1.1")
    turns = {lk.link.commit: lk.link.turns for lk in _links(choice.repo)}
    assert {t[1] for t in turns[shas["c3"]]} == {"w3"}
