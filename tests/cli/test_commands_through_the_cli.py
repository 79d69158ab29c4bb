"""Commands whose library calls are tested elsewhere, run here through the real entry point:
argument parsing, the one library call, rendering, exit codes and errors.

`models`, `embed`, `reindex`, `quickstart`, `link`, `completion`, `keys import` and
`remote add --encrypt`.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk
from tests.conftest import REPO_ROOT

MINILM = "minilm-l6-v2"


def _json(out: Any) -> Any:
    assert out.exit_code == 0, (out.stdout, out.stderr)
    return json.loads(out.stdout)


# -- models ----------------------------------------------------------------------------------


def test_models_list_install_import_verify(run: Any, shared_models: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("FUNES_HOME", str(home))
    listed = _json(run("--format", "json", "models", "list"))
    mini = next(e for e in listed if e["name"] == MINILM)
    assert mini["installed"] is False and mini["kind"] == "embed"
    human = run("--format", "human", "models", "list")
    assert human.exit_code == 0 and f"{MINILM}" in human.stdout and "not installed" in human.stdout

    unknown = run("models", "install", "no-such-model")
    assert unknown.exit_code != 0 and "no-such-model" in unknown.stderr

    # import a GGUF file under a name of its own, then verify catches damage to it
    copy = tmp_path / "mine.gguf"
    shutil.copy(shared_models / f"{MINILM}.gguf", copy)
    imported = _json(run("--format", "json", "models", "import", str(copy), "--name", "mine"))
    assert imported["name"] == "mine" and imported["kind"] == "embed"
    assert (home / "models" / "mine.gguf").is_file()
    ok = run("models", "verify")
    assert ok.exit_code == 0 and "ok  mine" in ok.stdout, ok.stdout
    listed = _json(run("--format", "json", "models", "list"))
    assert any(e["name"] == "mine" and e["installed"] for e in listed)
    with open(home / "models" / "mine.gguf", "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\0" * 64)
    bad = run("models", "verify")
    assert bad.exit_code == 1 and "BAD mine" in bad.stdout, bad.stdout

    missing = run("models", "import", str(tmp_path / "nothing.gguf"))
    assert missing.exit_code == 2


def test_models_install_reuses_the_cache(run: Any, with_models: Path) -> None:
    out = _json(run("--format", "json", "models", "install", MINILM))
    assert out["name"] == MINILM and len(out["sha256"]) == 64


# -- embed and reindex -------------------------------------------------------------------------


@pytest.fixture
def memory(tmp_path: Path, settings: Any) -> Repository:
    repo = Repository.init(tmp_path / "mem" / ".funes", settings)
    repo.commit_chunks(make_batch(0, 6), "index")
    return repo


def test_embed_drains_the_backlog(run: Any, memory: Repository, with_models: Path) -> None:
    mem = ("--memory", str(memory.path))
    before = _json(run(*mem, "--format", "json", "status"))
    out = run(*mem, "--format", "human", "embed", "--limit", "2")
    assert out.exit_code == 0, out.stderr
    assert out.stdout.startswith("embedded 2 chunks with minilm-l6-v2")
    assert out.stdout.rstrip().endswith("4 waiting")
    done = _json(run(*mem, "--format", "json", "embed"))
    assert done["embedded"] == 4 and done["remaining"] == 0
    after = _json(run(*mem, "--format", "json", "status"))
    assert before != after
    assert memory.model_stamp() is not None and memory.model_stamp().name == MINILM  # type: ignore[union-attr]
    again = run(*mem, "--format", "human", "embed")
    assert again.exit_code == 0 and "embedded 0 chunks" in again.stdout


def test_reindex_restamps_and_reembeds(run: Any, settings: Any, shared_models: Path,
                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = Repository.init(tmp_path / "small" / ".funes", settings)
    memory.commit_chunks(make_batch(0, 2), "index")
    home = tmp_path / "home"
    monkeypatch.setenv("FUNES_HOME", str(home))
    (home / "models").mkdir(parents=True)
    for suffix in (".gguf", ".json"):  # the shared cache stays untouched: twin is a copy
        (home / "models" / f"{MINILM}{suffix}").symlink_to(shared_models / f"{MINILM}{suffix}")
    mem = ("--memory", str(memory.path))
    assert run(*mem, "embed").exit_code == 0
    imported = run("models", "import", str(home / "models" / f"{MINILM}.gguf"), "--name", "twin")
    assert imported.exit_code == 0, imported.stderr
    out = _json(run(*mem, "--format", "json", "reindex", "--model", "twin"))
    assert out["model"].startswith("twin") and out["embedded"] == 2 and out["remaining"] == 0
    assert memory.model_stamp().name == "twin"  # type: ignore[union-attr]
    unknown = run(*mem, "reindex", "--model", "no-such-model")
    assert unknown.exit_code != 0 and "no-such-model" in unknown.stderr
    assert memory.model_stamp().name == "twin"  # type: ignore[union-attr]
    usage = run(*mem, "reindex")
    assert usage.exit_code == 2 and "--model" in usage.stderr


# -- quickstart --------------------------------------------------------------------------------


def test_quickstart_on_a_machine_without_history(run: Any, settings: Any) -> None:
    out = run("--format", "agent", "quickstart", "--budget", "0",
              "why did we drop the streaming parser")
    assert out.exit_code == 0, out.stderr
    assert "# memory: the bundled sample memory" in out.stdout + out.stderr
    assert "streaming parser" in out.stdout and "score=" in out.stdout
    sample = Repository.open(settings.home / "sample", settings)
    assert sample.stats().chunks > 0
    bad = run("quickstart", "--budget", "soon")
    assert bad.exit_code == 2


# -- link --------------------------------------------------------------------------------------


SESSION = "11111111-2222-3333-4444-555555555555"


def _codex_session(codex_home: Path, cwd: Path) -> None:
    day = codex_home / "sessions" / "2026" / "11" / "01"
    day.mkdir(parents=True)
    lines = [
        {"timestamp": "2026-11-01T10:00:00.000Z", "type": "session_meta",
         "payload": {"id": SESSION, "cwd": str(cwd), "timestamp": "2026-11-01T10:00:00.000Z",
                     "cli_version": "0.50.0"}},
        {"timestamp": "2026-11-01T10:00:01.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text",
                                  "text": "switch the cache to sqlite please"}]}},
        {"timestamp": "2026-11-01T10:00:02.000Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text",
                                  "text": "Done: the cache now lives in sqlite."}]}},
    ]
    (day / f"rollout-2026-11-01T10-00-00-{SESSION}.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n")


def test_link_records_the_turns_behind_a_commit(run: Any, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from dulwich import porcelain

    code = tmp_path / "code"
    code.mkdir()
    porcelain.init(str(code))
    monkeypatch.chdir(code)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    _codex_session(tmp_path / "codex", code)
    assert run("init").exit_code == 0
    (code / ".gitignore").write_text(".funes/\n")
    (code / "cache.py").write_text("BACKEND = 'sqlite'\n")
    porcelain.add(str(code), [str(code / "cache.py"), str(code / ".gitignore")])
    when = int(datetime(2026, 11, 1, 10, 5, tzinfo=UTC).timestamp())
    sha = porcelain.commit(str(code), message=b"cache: sqlite", author=b"A <a@x>",
                           committer=b"A <a@x>", commit_timestamp=when, author_timestamp=when,
                           commit_timezone=0, author_timezone=0).decode()

    linked = run("--format", "json", "link")
    data = _json(linked)
    assert json.dumps(data).count(SESSION) >= 1 and sha in json.dumps(data)
    why = run("--format", "agent", "why", "HEAD")
    assert why.exit_code == 0, why.stderr
    assert "switch the cache to sqlite" in why.stdout
    human = run("--format", "human", "link", "--no-index")
    assert human.exit_code == 0, human.stderr
    assert run("link", "no-such-rev").exit_code == 2


# -- completion --------------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(run: Any, shell: str) -> None:
    out = run("completion", shell)
    assert out.exit_code == 0 and "_FUNES_COMPLETE" in out.stdout
    assert run("completion", "tcsh").exit_code == 2


def test_the_bash_completion_completes(tmp_path: Path) -> None:
    """The script does what it says: bash, sourcing it, completes `funes remo`."""
    bash = shutil.which("bash")
    assert bash is not None
    shim = tmp_path / "bin" / "funes"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m funes "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO_ROOT)}
    script = ('eval "$(funes completion bash)"; COMP_WORDS=(funes remo); COMP_CWORD=1; '
              "_funes_completion funes; printf '%s\\n' \"${COMPREPLY[@]}\"")
    done = subprocess.run([bash, "-c", script], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["remote", "remove"], done.stdout


# -- encrypted remotes and their keys ----------------------------------------------------------


def test_remote_add_encrypt_and_keys_import(run: Any, tmp_path: Path, settings: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    remote = tmp_path / "remote"
    a = Repository.init(tmp_path / "a" / ".funes", settings)
    a.commit_chunks([make_chunk(1, session="enc", text="quincepaste recipe for the team")],
                    "index")
    mem = ("--memory", str(a.path))
    added = run(*mem, "remote", "add", "--encrypt", "origin", str(remote))
    assert added.exit_code == 0, added.stderr
    assert "(encrypted)" in added.stdout
    assert a.config.get("remote.origin.encrypt") == "true"
    keys = list((settings.home / "keys" / "memories").glob("*.key"))
    assert len(keys) == 1 and stat.S_IMODE(keys[0].stat().st_mode) == 0o600
    assert run(*mem, "push").exit_code == 0
    sent = b"".join(p.read_bytes() for p in remote.rglob("*") if p.is_file())
    assert sent and b"quincepaste" not in sent

    line = run(*mem, "keys", "export", "--remote", "origin").stdout.strip()
    assert line.startswith("funes-memkey ")

    # A teammate: without the key the clone fails and leaves nothing; with it, it works.
    monkeypatch.setenv("FUNES_HOME", str(tmp_path / "bob"))
    monkeypatch.chdir(tmp_path)
    refused = run("clone", str(remote), "b")
    assert refused.exit_code == 5 and "key" in refused.stderr
    assert not (tmp_path / "b").exists()
    bad = run("keys", "import", "funes-memkey not-base64 " + str(remote))
    assert bad.exit_code == 2 and "32 bytes" in bad.stderr
    key_file = tmp_path / "key.txt"
    key_file.write_text(line + "\n")
    imported = run("keys", "import", str(key_file))
    assert imported.exit_code == 0 and str(remote) in imported.stdout, imported.stderr
    cloned = run("clone", str(remote), "b")
    assert cloned.exit_code == 0, cloned.stderr
    found = run("--memory", str(tmp_path / "b"), "--format", "agent", "recall", "quincepaste",
                "--no-rerank")
    assert found.exit_code == 0 and "quincepaste recipe" in found.stdout
