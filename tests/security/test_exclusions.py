"""Exclusions reach back: what is indexed already, what comes later, and the other machine.

Real transcripts (tests/fixtures/traces) are indexed from working directories inside git
repositories whose `origin` names the project, so project identities are the real ones
(`github.com/acme/client-x`), and the rule is the short name a person types (`client-x`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.api import security as sec
from funes.errors import UsageError
from funes.storage import exclusions
from funes.storage.repo import Repository
from tests.conftest import OWN_FIXTURES
from tests.remotes.conftest import visible

TRACES = OWN_FIXTURES / "traces"
CLIENT_X = "github.com/acme/client-x"


def _git_project(root: Path, name: str) -> Path:
    """A work tree whose `origin` is github.com/acme/<name> (what project identity reads)."""
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".git" / "config").write_text(
        f'[remote "origin"]\n\turl = git@github.com:acme/{name}.git\n')
    return root


def _session_at(src: Path, dest: Path, cwd: Path) -> Path:
    """A real transcript, its working directory moved to `cwd` (every `cwd` key)."""
    def move(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (str(cwd) if k == "cwd" else move(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [move(v) for v in value]
        return value

    cwd.mkdir(parents=True, exist_ok=True)
    out = []
    for line in src.read_text("utf-8").splitlines():
        try:
            out.append(json.dumps(move(json.loads(line))))
        except ValueError:
            out.append(line)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(out) + "\n", "utf-8")
    return dest


def _index(repo: Repository, path: Path, agent: str) -> api.IndexSummary:
    return api.index(repo.settings, memory=str(repo.path), paths=[str(path)], agents=[agent])


def _texts(repo: Repository, project: str) -> list[str]:
    return [r["text"] for r in visible(repo).values() if r["project"] == project]


def _blob(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def _windows(texts: list[str], *, besides: Sequence[str] = ()) -> set[bytes]:
    """16-character windows of `texts` that none of `besides` holds (shared scaffolding like
    `[tool_result Bash] ` is not what identifies a session)."""
    def every(ts: list[str]) -> set[bytes]:
        return {t[i:i + 16].encode() for t in ts for i in range(len(t) - 15)}

    return every(texts) - every(list(besides))


def test_exclude_project_reaches_back_forward_and_to_the_other_machine(
        tmp_path: Path, settings: Any) -> None:
    remote = tmp_path / "remote"
    client = _git_project(tmp_path / "code" / "client-x", "client-x")
    widget = _git_project(tmp_path / "code" / "widget", "widget")
    a = Repository.init(tmp_path / "a" / ".funes", settings)
    api.remote_add(a, "origin", str(remote))
    # A month of indexing: a client-x session and a widget session, never pushed.
    _index(a, _session_at(TRACES / "claude" / "simonw__claude-code-transcripts__sample_session"
                          ".jsonl", tmp_path / "t" / "a-client.jsonl", client), "claude")
    _index(a, _session_at(TRACES / "claude" / "huggingface__funes__claude_session.jsonl",
                          tmp_path / "t" / "a-widget.jsonl", widget / "src"), "claude")
    secret = _texts(a, CLIENT_X)
    assert secret and _texts(a, "github.com/acme/widget")
    probe = max(secret, key=len)[:80]
    first = next(r for r in visible(a).values() if r["project"] == CLIENT_X)
    assert api.get(a, first["session_id"], first["turn_id"])
    hits = api.recall(a.settings, a, probe, vector=False, rerank=False).hits
    assert any(h.row["project"] == CLIENT_X for h in hits)  # the control

    # The second machine indexed its own client-x session meanwhile.
    b = Repository.init(tmp_path / "b" / ".funes", settings)
    api.remote_add(b, "origin", str(remote))
    _index(b, _session_at(TRACES / "codex" / "huggingface__funes__codex_session.jsonl",
                          tmp_path / "t" / "b-client.jsonl", client / "lib"), "codex")
    _index(b, _session_at(TRACES / "pi" / "huggingface__funes__pi_session.jsonl",
                          tmp_path / "t" / "b-widget.jsonl", widget), "pi")
    b_secret = _texts(b, CLIENT_X)
    assert b_secret

    # One command.
    assert api.config_set(a, "exclude.projects", "client-x") == "client-x"
    assert _texts(a, CLIENT_X) == []
    hits = api.recall(a.settings, a, probe, vector=False, rerank=False).hits
    assert not any(h.row["project"] == CLIENT_X for h in hits)
    assert api.get(a, first["session_id"], first["turn_id"]) == []
    status = api.status(a)
    (rule,) = status.exclusions
    assert (rule.kind, rule.pattern, rule.recorded, rule.config) == ("project", "client-x",
                                                                     True, True)
    assert rule.hidden == len(set(r for r in secret)) or rule.hidden >= len(secret) - 1
    assert rule.sessions == 1
    # A push sends none of it (the rows stay home), the rest goes.
    api.push(a)
    kept = _texts(a, "github.com/acme/widget") + _texts(b, "github.com/acme/widget")
    sent = _blob(remote)
    leaks = [w for w in _windows(secret, besides=kept) if w in sent]
    assert not leaks, leaks[:3]
    assert any(w in sent for w in _windows(_texts(a, "github.com/acme/widget"),
                                           besides=secret))
    # A new client-x session is never indexed.
    later = _index(a, _session_at(TRACES / "codex" / "supermaciz__sessions-chronicle__rollout-"
                                  "2026-01-18T02-01-28-019bce9f-0a40-79e2-8351-8818e8487fb6"
                                  ".jsonl", tmp_path / "t" / "a-later.jsonl", client), "codex")
    assert later.excluded > 0 and later.added == 0 and _texts(a, CLIENT_X) == []

    # The rule reaches B through pull: its own client-x chunks hide, later ones are skipped.
    api.pull(b)
    assert _texts(b, CLIENT_X) == [] and _texts(b, "github.com/acme/widget")
    assert b.config.get("exclude.projects") == "client-x"
    assert [x.pattern for x in api.status(b).exclusions] == ["client-x"]
    b_later = _index(b, _session_at(TRACES / "codex" / "supermaciz__sessions-chronicle__"
                                    "rollout-2026-01-18T02-01-28-019bce9f-0a40-79e2-8351-"
                                    "8818e8487fb6.jsonl", tmp_path / "t" / "b-later.jsonl",
                                    client), "codex")
    assert b_later.excluded > 0 and b_later.added == 0
    api.push(b)
    sent = _blob(remote)
    leaks = [w for w in _windows(secret + b_secret, besides=kept) if w in sent]
    assert not leaks, leaks[:3]
    assert api.fsck(a).ok and api.fsck(b).ok

    # Ending it brings back what it hid, here and (through pull) there.
    ended = api.config_unset(a, "exclude.projects")
    assert ended and _texts(a, CLIENT_X) and a.config.get("exclude.projects") is None
    api.pull(a)
    api.push(a)
    api.pull(b)
    assert b.config.get("exclude.projects") is None and _texts(b, CLIENT_X)


def test_matching_rules(tmp_path: Path) -> None:
    rule = exclusions.make_rule
    m = exclusions.rule_matches
    assert m(rule("project", "client-x"), harness="claude", session="s",
             project="github.com/acme/client-x")
    assert m(rule("project", "github.com/acme/*"), harness="claude", session="s",
             project="github.com/acme/client-x")
    assert not m(rule("project", "client"), harness="claude", session="s",
                 project="github.com/acme/client-x")
    # a project without git: its working directory stands for it
    assert m(rule("project", "client-x"), harness="claude", session="s",
             workdir="/home/u/client-x")
    assert m(rule("project", "client-x"), harness="claude", session="s",
             project="/srv/git/client-x/.git")
    assert m(rule("path", "/work/acme"), harness="claude", session="s",
             workdir="/work/acme/api/src")
    assert m(rule("path", "/work/acme-*"), harness="claude", session="s",
             workdir="/work/acme-2/src")
    assert m(rule("path", "*/secret/*"), harness="claude", session="s",
             source="/home/u/.claude/projects/secret/a.jsonl:0-99")
    assert not m(rule("path", "/work/acme"), harness="claude", session="s",
                 workdir="/work/acme2")
    assert m(rule("agent", "hermes"), harness="hermes", session="s")
    assert not m(rule("agent", "hermes"), harness="claude", session="s")
    assert m(rule("session", "abc*"), harness="claude", session="abc-123")
    assert m(rule("session", "abc*"), harness="claude", session="sub-9", parent_session="abc-1")
    with pytest.raises(UsageError, match="unknown agent"):
        rule("agent", "nobody")
    with pytest.raises(UsageError, match="bad project pattern"):
        rule("project", " ")


def test_forget_by_project_path_agent_is_once(repo: Repository) -> None:
    from tests.builders import make_chunk

    rows = [make_chunk(1, session="a"), make_chunk(2, session="b", harness="codex")]
    repo.commit_chunks(rows, "seed")
    assert sec.forget(repo, agent="codex", dry_run=True).chunks == [rows[1].id]
    assert sec.forget(repo, project="project", path="/work/*").chunks == sorted(
        c.id for c in rows)
    assert not visible(repo)
    # a forget records no rule: nothing is kept out of later runs
    assert exclusions.recorded(repo) == {} and not api.status(repo).exclusions


def test_exclude_cli_lists_adds_and_removes(repo: Repository, run: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.builders import make_chunk

    repo.commit_chunks([make_chunk(1, session="keep"), make_chunk(2, session="drop-1")], "seed")
    monkeypatch.chdir(repo.path.parent)
    assert run("exclude").stdout.strip() == "no exclusions"
    out = run("exclude", "--session", "drop-*", "-n")
    assert out.exit_code == 0 and "would exclude session drop-*: 1 chunk(s)" in out.stdout
    assert len(visible(repo)) == 2
    out = run("exclude", "--session", "drop-*")
    assert out.exit_code == 0 and "1 chunk(s) in 1 session(s) hidden" in out.stdout
    assert "session drop-*: hides 1 chunk(s) in 1 session(s)" in run("exclude").stdout
    assert "exclude  session drop-*" in run("status").stdout
    assert run("config", "get", "exclude.sessions").stdout.strip() == "drop-*"
    out = run("exclude", "--remove", "--session", "drop-*")
    assert out.exit_code == 0 and "1 chunk(s) visible again" in out.stdout
    assert len(visible(repo)) == 2
    assert run("exclude", "--remove", "--session", "drop-*").exit_code == 2
    assert run("exclude", "--agent", "nobody").exit_code == 2
