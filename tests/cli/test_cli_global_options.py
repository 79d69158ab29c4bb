"""The CLI forgives habits: global options anywhere, query words unquoted, a grouped --help."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from funes.cli import app
from funes.storage.repo import Repository
from tests.builders import make_batch


def test_global_options_work_before_and_after_the_command(run: Any, project_dir: Path,
                                                          tmp_path: Path) -> None:
    assert run("init").exit_code == 0
    before = run("--format", "json", "status")
    after = run("status", "--format", "json")
    assert before.exit_code == after.exit_code == 0
    assert json.loads(before.stdout) == json.loads(after.stdout)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run("-C", str(elsewhere), "init").exit_code == 0
    moved = json.loads(run("status", "-C", str(elsewhere), "--format", "json").stdout)
    assert moved["path"] == str((elsewhere / ".funes").resolve())
    by_memory = json.loads(run("log", "--memory", str(elsewhere), "--format", "json").stdout)
    assert by_memory == []
    nested = run("config", "list", "--format", "json")  # a subcommand of a group too
    assert nested.exit_code == 0, nested.stderr
    json.loads(nested.stdout)


def test_recall_joins_the_words_of_its_query(run: Any, project_dir: Path,
                                             settings: Any) -> None:
    assert run("init").exit_code == 0
    repo = Repository.open(project_dir, settings)
    repo.commit_chunks(make_batch(0, 6), "seed")
    words = run("recall", "why", "did", "we", "drop", "it", "--format", "json", "--no-rerank")
    quoted = run("recall", "why did we drop it", "--no-rerank", "--format", "json")
    assert words.exit_code == quoted.exit_code == 0, words.stderr
    assert json.loads(words.stdout)["query"] == "why did we drop it"
    assert ([h["id"] for h in json.loads(words.stdout)["hits"]]
            == [h["id"] for h in json.loads(quoted.stdout)["hits"]])
    between = run("recall", "why", "-k", "2", "did", "we", "--format", "json")
    assert json.loads(between.stdout)["query"] == "why did we"
    assert run("recall").exit_code == 2  # still needs a query


def test_help_is_grouped_short_and_loads_no_command(run: Any) -> None:
    shown = run("--help")
    assert shown.exit_code == 0
    text = shown.stdout
    heads = [text.index(f"\n{section}:\n") for section in app.SECTIONS]
    assert heads == sorted(heads)
    start = text[heads[0]:heads[1]]
    assert [line.split()[0] for line in start.strip().splitlines()[1:]] == [
        "quickstart", "add", "recall", "get", "sessions", "sketch", "scan", "status", "ui"]
    for line in text.splitlines():
        assert len(line) <= 100 and "…" not in line, line
    assert "org/name" in text  # the root --memory names remote memories too
    assert "\n  hook " not in text  # internal


def test_the_command_table_matches_the_command_modules() -> None:
    """Every command a module exports is in the lazy table, under its own module, and back."""
    modules = {entry.module for entry in app.COMMANDS.values()}
    exported: dict[str, str] = {}
    for name in modules:
        for command in importlib.import_module(name).COMMANDS:
            exported[command.name] = name
    assert exported == {name: entry.module for name, entry in app.COMMANDS.items()}
    ctx = click.Context(app.cli, info_name="funes")
    for name, entry in app.COMMANDS.items():
        command = app.cli.get_command(ctx, name)
        assert command is not None and command.short_help == entry.short
        assert len(f"  {name:<12}{entry.short}") <= 80, name  # fits a narrow terminal


def test_version_without_click_prints_what_click_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from funes.cli.app import cli
    from funes.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    fast = capsys.readouterr().out
    clicked = CliRunner().invoke(cli, ["--version"])
    assert clicked.exit_code == 0 and fast == clicked.output
    assert fast.startswith("funes, version ")
