"""What a newcomer meets in the first hour (issue #17): colours, bare groups, empty recalls,
`ask` with an agent it cannot run, who commits, and the quickstart's own advice."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from funes.cli.main import cli
from funes.storage.repo import Repository
from tests.builders import make_batch


def _commit_author(settings, path: Path) -> str:  # type: ignore[no-untyped-def]
    """The author recorded by a new commit in the memory at `path`."""
    repo = Repository.open(path, settings)
    done = sum(1 for _ in repo.walk()) if repo.head() else 0
    repo.commit_chunks(make_batch(0, 2, session=f"s{done}"), "index: test")
    head = repo.head_commit()
    assert head is not None
    return head.author


# -- NO_COLOR ----------------------------------------------------------------------------------


def test_no_color_turns_colours_off_even_on_a_terminal(project_dir: Path, settings) -> None:  # type: ignore[no-untyped-def]
    Repository.init(project_dir / ".funes", settings).commit_chunks(make_batch(0, 2), "index")
    runner = CliRunner()
    # color=True is what click does on a terminal: styles stay in the output.
    coloured = runner.invoke(cli, ["--format", "human", "log"], color=True)
    assert coloured.exit_code == 0 and "\x1b[" in coloured.output
    plain = runner.invoke(cli, ["--format", "human", "log"], color=True, env={"NO_COLOR": "1"})
    assert plain.exit_code == 0 and "\x1b[" not in plain.output
    assert plain.output.strip() and plain.output.split()[0] in coloured.output
    # An empty NO_COLOR does not count (no-color.org).
    empty = runner.invoke(cli, ["--format", "human", "log"], color=True, env={"NO_COLOR": ""})
    assert "\x1b[" in empty.output


# -- bare groups list, like `git remote` ---------------------------------------------------------


def test_bare_groups_list_instead_of_printing_help(run, project_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert run("init").exit_code == 0
    assert run("remote", "add", "origin", str(tmp_path / "elsewhere")).exit_code == 0
    assert run("config", "set", "recall.k", "12").exit_code == 0

    remote = run("--format", "human", "remote")
    assert remote.exit_code == 0 and remote.stdout.startswith("origin\t")
    assert remote.stdout == run("--format", "human", "remote", "list").stdout

    config = run("--format", "human", "config")
    assert config.exit_code == 0 and "recall.k=12" in config.stdout
    assert config.stdout == run("--format", "human", "config", "list").stdout

    keys = run("--format", "human", "keys")
    assert keys.exit_code == 0 and keys.stdout.strip() == "no keys"
    assert run("keys", "generate").exit_code == 0
    assert run("--format", "human", "keys").stdout.startswith("own ")

    models = run("--format", "human", "models")
    assert models.exit_code == 0 and "minilm-l6-v2" in models.stdout
    assert models.stdout == run("--format", "human", "models", "list").stdout

    subprocess.run(["git", "init", "-q", str(project_dir)], check=True)
    hooks = run("--format", "human", "hooks")
    assert hooks.exit_code == 0 and "post-commit" in hooks.stdout
    assert hooks.stdout == run("--format", "human", "hooks", "status").stdout

    for group in ("remote", "config", "keys", "models", "hooks"):
        helped = run(group, "--help")
        assert helped.exit_code == 0 and "Commands:" in helped.stdout


# -- an empty recall says why -----------------------------------------------------------------


def test_empty_recall_on_an_empty_memory_says_to_index(run, project_dir: Path) -> None:  # type: ignore[no-untyped-def]
    assert run("init").exit_code == 0
    result = run("--format", "human", "recall", "anything at all")
    assert result.exit_code == 0 and result.stdout.strip() == "no results"
    assert "holds no passages yet" in result.stderr and "funes index" in result.stderr


def test_empty_recall_names_the_filters_and_the_backlog(run, project_dir: Path, settings) -> None:  # type: ignore[no-untyped-def]
    repo = Repository.init(project_dir / ".funes", settings)
    repo.commit_chunks(make_batch(0, 3, harness="claude"), "index: claude")
    # Nothing is embedded: a word that no chunk holds cannot match by meaning either.
    unmatched = run("--format", "agent", "recall", "zebrafish")
    assert unmatched.exit_code == 0
    assert "not embedded yet" in unmatched.stderr and "funes embed" in unmatched.stderr
    filtered = run("--format", "json", "recall", "passage", "--harness", "codex", "--since", "1d")
    assert filtered.exit_code == 0
    assert "--harness codex" in filtered.stderr and "--since 1d" in filtered.stderr
    assert "without those filters" in filtered.stderr
    found = run("--format", "agent", "recall", "passage")
    assert found.exit_code == 0 and "no results" not in found.stderr


# -- ask ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["pi", "hermes", "gemini", "emacs"])
def test_ask_with_an_agent_it_cannot_run_explains(run, project_dir: Path, agent: str) -> None:  # type: ignore[no-untyped-def]
    result = run("ask", agent, "why did we drop the parser")
    assert result.exit_code == 2 and result.stdout == ""
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "funes ask claude" in line and "codex" in line
    if agent != "emacs":  # not an agent funes knows at all
        assert "MCP" in line and f"funes add {agent}" in line


def test_ask_help_names_its_argument_agent(run) -> None:  # type: ignore[no-untyped-def]
    helped = run("ask", "--help")
    assert "AGENT QUESTION" in helped.stdout and "{claude|codex}" not in helped.stdout


# -- who commits -------------------------------------------------------------------------------


def test_author_falls_back_to_gits_global_identity(  # type: ignore[no-untyped-def]
    project_dir: Path, isolated_env: Path, monkeypatch
) -> None:
    from funes._env import settings as load

    monkeypatch.delenv("FUNES_AUTHOR_NAME")
    monkeypatch.delenv("FUNES_AUTHOR_EMAIL")
    monkeypatch.setenv("USER", "ada")
    Repository.init(project_dir / ".funes", load())
    assert _commit_author(load(), project_dir).startswith("ada <ada@localhost>")

    (isolated_env / ".gitconfig").write_text(
        "[core]\n\tautocrlf = false\n[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n")
    assert _commit_author(load(), project_dir) == "Ada Lovelace <ada@example.org>"

    # git reads $XDG_CONFIG_HOME/git/config first and ~/.gitconfig last (it wins per key);
    # GIT_CONFIG_GLOBAL replaces both.
    other = isolated_env / "other.gitconfig"
    other.write_text("[user]\n\temail = lovelace@example.net\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(other))
    assert _commit_author(load(), project_dir) == "ada <lovelace@example.net>"


def test_config_global_sets_the_author_of_every_memory(  # type: ignore[no-untyped-def]
    run, project_dir: Path, isolated_env: Path, monkeypatch, tmp_path: Path
) -> None:
    from funes._env import settings as load

    monkeypatch.delenv("FUNES_AUTHOR_NAME")
    monkeypatch.delenv("FUNES_AUTHOR_EMAIL")
    (isolated_env / ".gitconfig").write_text("[user]\n\tname = Git Name\n\temail = g@example.org\n")
    assert run("config", "--global", "set", "user.name", "Ada Lovelace").exit_code == 0
    assert run("config", "set", "--global", "user.email", "ada@example.org").exit_code == 0
    assert (isolated_env / ".funes" / "user.config").is_file()
    assert run("config", "--global", "get", "user.name").stdout == "Ada Lovelace\n"
    listed = run("--format", "human", "config", "--global")
    assert listed.stdout.splitlines() == ["user.name=Ada Lovelace", "user.email=ada@example.org"]

    for where in (project_dir, tmp_path / "second"):
        assert run("init", str(where)).exit_code == 0
        assert _commit_author(load(), where) == "Ada Lovelace <ada@example.org>"
    # A memory's own setting wins over the user's, and the environment over the user config.
    assert run("config", "set", "user.name", "Project Ada").exit_code == 0
    assert _commit_author(load(), project_dir) == "Project Ada <ada@example.org>"
    monkeypatch.setenv("FUNES_AUTHOR_EMAIL", "env@example.org")
    assert _commit_author(load(), tmp_path / "second") == "Ada Lovelace <env@example.org>"

    assert run("config", "--global", "unset", "user.name").exit_code == 0
    assert run("config", "--global", "get", "user.name").exit_code == 1
    bad = run("config", "--global", "set", "recall.k", "3")
    assert bad.exit_code == 2 and "without --global" in bad.stderr


def test_keys_generate_names_the_resolved_author(run, isolated_env: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("FUNES_AUTHOR_NAME")
    monkeypatch.delenv("FUNES_AUTHOR_EMAIL")
    assert run("config", "--global", "set", "user.name", "Ada").exit_code == 0
    assert run("config", "--global", "set", "user.email", "ada@example.org").exit_code == 0
    assert run("keys", "generate").exit_code == 0
    listed = run("--format", "human", "keys", "list").stdout
    assert "Ada <ada@example.org>" in listed


# -- quickstart ------------------------------------------------------------------------------


def test_quickstart_recall_line_works_when_typed_and_next_steps_follow(run, with_models) -> None:  # type: ignore[no-untyped-def]
    # The budget is a ceiling (embedding 19 chunks takes seconds), high for a loaded machine.
    done = run("--format", "agent", "quickstart", "--budget", "600")
    assert done.exit_code == 0
    lines = done.stdout.splitlines()
    shown = next(line for line in lines if line.startswith("# funes recall "))
    argv = shlex.split(shown[2:])
    assert argv[:2] == ["funes", "recall"] and "--memory" in argv
    again = run("--format", "agent", *argv[1:])
    assert again.exit_code == 0 and "no results" not in again.stdout
    first_hit = next(line for line in again.stdout.splitlines() if "funes get" in line)
    assert first_hit in done.stdout
    tail = "\n".join(lines[-4:])
    assert "funes add claude|codex|pi|hermes" in tail
    assert "funes recall" in tail and "funes status" in tail


# -- the suite sets its own environment ----------------------------------------------------------


def test_the_suite_clears_the_users_hub_settings() -> None:
    """tests/conftest.py removes HF_* before huggingface_hub is imported (it reads them once)."""
    import os

    from huggingface_hub import constants

    assert not any(name.startswith(("HF_HUB_OFFLINE", "HF_TOKEN")) for name in os.environ)
    assert constants.HF_HUB_OFFLINE is False
