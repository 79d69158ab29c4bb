"""The indexing run end to end: real fixtures → real repository, incremental and idempotent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from funes import api
from funes.storage.fsck import fsck
from funes.storage.repo import Repository
from tests.conftest import FIXTURES, needs_shared

TRACES = FIXTURES / "traces"
pytestmark = needs_shared

CLAUDE = TRACES / "claude" / "marot__spotter__tool_heavy.jsonl"


def _repo(tmp_path: Path, settings, name: str = "p") -> Repository:  # type: ignore[no-untyped-def]
    return Repository.init(tmp_path / name / ".funes", settings)


def _rows(repo: Repository) -> list[dict]:  # type: ignore[type-arg]
    return repo.chunks.dataset().to_table().to_pylist()


def test_index_all_fixtures_then_again_adds_nothing(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    repo = _repo(tmp_path, settings)
    first = api.index(settings, memory=str(repo.path), paths=[str(TRACES)])
    assert first.errors == []
    assert first.added > 500 and first.sessions >= 15
    assert set(first.by_harness) == {"claude", "codex", "pi", "hermes"}
    head = repo.head_commit()
    assert head and head.message.startswith("index: claude ")
    assert head.message.endswith(f", {first.added} chunks")
    second = api.index(settings, memory=str(repo.path), paths=[str(TRACES)])
    assert second.added == 0 and second.files_unchanged == second.files
    assert not second.commits or all(r.commit is None for r in second.commits.values())
    # forgetting the read positions re-reads everything, and still adds nothing
    for suffix in ("", "-wal", "-shm"):
        (repo.path / "index" / f"sources.sqlite{suffix}").unlink(missing_ok=True)
    third = api.index(settings, memory=str(repo.path), paths=[str(TRACES)])
    assert third.chunks == first.chunks and third.added == 0
    assert fsck(repo).ok


def test_same_input_gives_same_ids_in_two_fresh_repositories(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    a, b = _repo(tmp_path, settings, "a"), _repo(tmp_path, settings, "b")
    copy = tmp_path / "elsewhere" / CLAUDE.name
    copy.parent.mkdir()
    shutil.copy(CLAUDE, copy)  # a different path on "another machine"
    api.index(settings, memory=str(a.path), paths=[str(CLAUDE)])
    api.index(settings, memory=str(b.path), paths=[str(copy)])
    assert a.chunk_ids() == b.chunk_ids() and len(a.chunk_ids()) > 10


def test_appended_turns_add_exactly_their_chunks(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    cut = len(lines) * 2 // 3
    growing = tmp_path / "session.jsonl"
    growing.write_bytes(b"".join(lines[:cut]))
    whole = tmp_path / "whole" / "session.jsonl"
    whole.parent.mkdir()
    whole.write_bytes(b"".join(lines))

    repo = _repo(tmp_path, settings)
    api.index(settings, memory=str(repo.path), paths=[str(growing)])
    before = repo.chunk_ids()
    with open(growing, "ab") as fh:
        fh.write(b"".join(lines[cut:]))
    grown = api.index(settings, memory=str(repo.path), paths=[str(growing)])
    assert grown.files_reread == 0  # resumed from the offset, not re-read

    reference = _repo(tmp_path, settings, "ref")
    api.index(settings, memory=str(reference.path), paths=[str(whole)])
    assert repo.chunk_ids() == reference.chunk_ids()
    assert grown.added == len(reference.chunk_ids() - before) > 0


def test_a_half_written_last_line_is_read_once_complete(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    lines = CLAUDE.read_bytes().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    repo = _repo(tmp_path, settings)
    api.index(settings, memory=str(repo.path), paths=[str(path)])
    with open(path, "ab") as fh:
        fh.write(lines[-1][len(lines[-1]) // 2 :])
    api.index(settings, memory=str(repo.path), paths=[str(path)])
    reference = _repo(tmp_path, settings, "ref")
    api.index(settings, memory=str(reference.path), paths=[str(CLAUDE)])
    assert repo.chunk_ids() == reference.chunk_ids()


def test_a_rewritten_file_is_re_read(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.jsonl"
    shutil.copy(CLAUDE, path)
    repo = _repo(tmp_path, settings)
    api.index(settings, memory=str(repo.path), paths=[str(path)])
    other = TRACES / "claude" / "marot__spotter__short.jsonl"
    shutil.copy(other, path)
    again = api.index(settings, memory=str(repo.path), paths=[str(path)])
    assert again.files_reread == 1 and again.added > 0


SECRETS = {
    "aws": "AKIAIOSFODNN7EXAMPLQ",
    "github": "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A",
    "hf": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567",
    "openai": "sk-proj-" + "Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90Uv12Wx34",
    "password": "hunter2-Correct-Horse-42",
}


def test_secrets_never_reach_the_stored_rows(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    text = (
        f"my key is {SECRETS['aws']} and token {SECRETS['github']}\n"
        f"export HF_TOKEN={SECRETS['hf']}\nOPENAI_API_KEY={SECRETS['openai']}\n"
        f"db: postgres://admin:{SECRETS['password']}@db.internal:5432/app\n"
    )
    session = tmp_path / "secret.jsonl"
    records = [
        {"role": "user", "content": text, "timestamp": "2026-01-01T00:00:00Z"},
        {"role": "assistant", "content": "noted", "timestamp": "2026-01-01T00:00:01Z"},
    ]
    session.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    repo = _repo(tmp_path, settings)
    summary = api.index(settings, memory=str(repo.path), paths=[str(session)], agents=["import"])
    assert summary.added >= 1 and sum(summary.redactions.values()) >= 5
    blob = json.dumps(_rows(repo), default=str)
    for name, secret in SECRETS.items():
        assert secret not in blob, name
    assert "[REDACTED:" in blob


def test_bad_lines_are_counted_not_fatal(tmp_path: Path, settings) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.jsonl"
    path.write_bytes(CLAUDE.read_bytes() + b"{not json\n[1,2]\n\xff\xfe garbage\n")
    repo = _repo(tmp_path, settings)
    summary = api.index(settings, memory=str(repo.path), paths=[str(path)], agents=["claude"])
    assert summary.added > 0 and sum(summary.skipped.values()) >= 3


def _claude_session_at(src: Path, dest: Path, cwd: Path) -> None:
    """Copy a real Claude session, moving its working directory to `cwd`."""
    out = []
    for line in src.read_text("utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if isinstance(record, dict) and "cwd" in record:
            record["cwd"] = str(cwd)
        out.append(json.dumps(record))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(out) + "\n", "utf-8")


def test_bare_index_routes_sessions_to_project_or_global_memory(
    tmp_path: Path, settings, monkeypatch  # type: ignore[no-untyped-def]
) -> None:
    from dataclasses import replace

    project = tmp_path / "code" / "proj"
    (project / "src").mkdir(parents=True)
    Repository.init(project / ".funes", settings)
    other = tmp_path / "code" / "other"
    other.mkdir()
    claude_dir = tmp_path / "claude-config"
    _claude_session_at(CLAUDE, claude_dir / "projects" / "p1" / "s1.jsonl", project / "src")
    _claude_session_at(TRACES / "claude" / "marot__spotter__short.jsonl",
                       claude_dir / "projects" / "p2" / "s2.jsonl", other)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_dir))
    from funes._env import settings as load

    s = replace(load(), cwd=project)
    no_global = api.index(s)
    assert no_global.unroutable > 0  # the other session has nowhere to go yet
    project_repo = Repository.open(project, s)
    in_project = project_repo.chunk_ids()
    assert in_project
    assert all(r["workdir"] == str(project / "src") for r in _rows(project_repo))

    Repository.init(s.home, s, is_global=True)
    api.index(s)
    global_repo = Repository.open(s.home, s)
    rows = _rows(global_repo)
    assert rows and all(r["workdir"] == str(other) for r in rows)
    assert project_repo.chunk_ids() == in_project
