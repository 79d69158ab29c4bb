"""The CLI prints the same bytes whether the warm server or the process itself did the work."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from funes.storage.repo import Repository
from tests.serve.helpers import child_env, funes_cmd

#: Every case starts a server process of its own: the quick suite (`-m "not slow"`) keeps one
#: per output format and per exit code, the full suite runs them all.
SLOW = pytest.mark.slow

RECALLS = [
    ("--format", "agent", "recall", "streaming parser leaked memory"),
    pytest.param(("--format", "agent", "recall", "why was startup slow", "--neighbors", "2",
                  "-k", "3"), marks=SLOW),
    ("--format", "json", "recall", "ERR_MODULE_NOT_FOUND", "--half-life", "0"),
    pytest.param(("--format", "json", "recall", "cache on disk", "--project", "/src/tools",
                  "--half-life", "0"), marks=SLOW),
    ("--format", "human", "recall", "isValidUuidFilename", "--type", "text"),
    pytest.param(("--format", "agent", "recall", "nothing like this was ever said zyzzyva"),
                 marks=SLOW),
]

ERRORS = [
    ("recall", ""),  # empty query: usage error, exit 2
    pytest.param(("recall", "parser", "-k", "0"), marks=SLOW),  # absurd k
    ("get", "sess-parser", "no-such-turn"),  # unknown turn, exit 1
    pytest.param(("recall", "parser", "--since", "the day before yesterday"), marks=SLOW),
]


def _both(run: Any, monkeypatch: pytest.MonkeyPatch, memory: Repository,
          args: tuple[str, ...]) -> tuple[Any, Any]:
    monkeypatch.setenv("FUNES_SERVE", "use")
    served = run("--memory", str(memory.path), *args)
    monkeypatch.setenv("FUNES_SERVE", "off")
    local = run("--memory", str(memory.path), *args)
    return served, local


@pytest.mark.parametrize("args", RECALLS, ids=lambda a: " ".join(a[:2] + a[3:4]))
def test_recall_via_server_prints_what_in_process_prints(
    memory: Repository, settings: Any, start_server: Any, run: Any,
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...],
) -> None:
    server = start_server(memory)
    served, local = _both(run, monkeypatch, memory, args)
    assert server.status(settings).requests.get("recall") == 1  # the server did answer
    assert served.exit_code == local.exit_code == 0
    assert served.stdout == local.stdout and served.stderr == local.stderr
    assert served.stdout.strip()


def test_get_via_server_prints_what_in_process_prints(
    memory: Repository, settings: Any, start_server: Any, run: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = start_server(memory)
    found = run("--memory", str(memory.path), "--format", "json", "recall", "line reader")
    hits = json.loads(found.stdout)["hits"]
    assert hits
    for hit in hits[:3]:
        for fmt in ("agent", "json", "human"):
            args = ("--format", fmt, "get", hit["session_id"], hit["turn_id"], "--window", "1")
            served, local = _both(run, monkeypatch, memory, args)
            assert (served.exit_code, served.stdout, served.stderr) == (
                local.exit_code, local.stdout, local.stderr)
            assert served.exit_code == 0 and hit["turn_id"] in served.stdout
    assert server.status(settings).requests.get("get") == 9


@pytest.mark.parametrize("args", ERRORS, ids=lambda a: " ".join(a))
def test_errors_come_back_as_the_same_error(
    memory: Repository, settings: Any, start_server: Any, run: Any,
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...],
) -> None:
    server = start_server(memory)
    served, local = _both(run, monkeypatch, memory, args)
    assert (served.exit_code, served.stdout, served.stderr) == (
        local.exit_code, local.stdout, local.stderr)
    assert served.exit_code in (1, 2) and served.stderr.startswith("funes: ")
    assert sum(server.status(settings).requests.values()) == 1  # ...and came from the server


def test_real_cli_processes_print_identical_bytes(memory: Repository, settings: Any,
                                                  start_server: Any) -> None:
    server = start_server(memory)
    hit = None
    for args in (("--format", "agent", "recall", "relative import config loader"),
                 ("--format", "json", "recall", "embeddings cache", "--half-life", "0")):
        outputs = []
        for mode in ("use", "off"):
            done = subprocess.run(funes_cmd("--memory", str(memory.path), *args),
                                  capture_output=True, env=child_env(FUNES_SERVE=mode),
                                  timeout=120, check=False)
            outputs.append((done.returncode, done.stdout, done.stderr))
        assert outputs[0] == outputs[1]
        assert outputs[0][0] == 0 and outputs[0][1]
        if args[1] == "json":
            hit = json.loads(outputs[0][1])["hits"][0]
    assert hit is not None
    outputs = []
    for mode in ("use", "off"):
        done = subprocess.run(
            funes_cmd("--memory", str(memory.path), "get", hit["session_id"], hit["turn_id"]),
            capture_output=True, env=child_env(FUNES_SERVE=mode), timeout=120, check=False)
        outputs.append((done.returncode, done.stdout, done.stderr))
    assert outputs[0] == outputs[1] and outputs[0][0] == 0
    assert server.status(settings).requests == {"recall": 2, "get": 1}


#: Empty recalls, each with the reason the CLI gives on stderr (and the same through the server).
EMPTY = [
    ("filtered", ("recall", "parser", "--session", "no-such-session"),
     "funes: no results: nothing matches within --session no-such-session"),
    ("empty memory", ("recall", "parser"), "funes: no results: the memory holds no passages yet"),
    ("not embedded", ("recall", "zyzzyva"), "none could match by meaning"),
]


@pytest.mark.parametrize("fmt", ["agent", "json"])
@pytest.mark.parametrize("case", EMPTY, ids=lambda c: c[0])
def test_an_empty_recall_says_why_through_the_server_too(
    memory: Repository, settings: Any, start_server: Any, run: Any, tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch, case: tuple[str, tuple[str, ...], str], fmt: str,
) -> None:
    from tests.builders import make_chunk

    what, args, reason = case
    target = memory
    if what != "filtered":
        target = Repository.init(tmp_path / what.replace(" ", "-") / ".funes", settings)
        if what == "not embedded":
            target.commit_chunks([make_chunk(1, text="a passage waiting for its vector")],
                                 "index")
    server = start_server(memory)  # one server answers for every memory
    served, local = _both(run, monkeypatch, target, ("--format", fmt, *args))
    assert server.status(settings).requests.get("recall") == 1
    assert (served.exit_code, served.stdout, served.stderr) == (
        local.exit_code, local.stdout, local.stderr)
    assert served.exit_code == 0 and reason in served.stderr, served.stderr


def test_the_stale_sync_note_is_printed_through_the_server_too(
    memory: Repository, settings: Any, start_server: Any, run: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from funes import api

    memory.config.set("remote.origin.url", "file:///nowhere/origin")
    api.record_sync(memory, "origin", False, "cannot reach it", "funes sync origin")
    assert api.sync_note(memory) is not None
    server = start_server(memory)
    served, local = _both(run, monkeypatch, memory, ("--format", "agent", "recall", "parser"))
    assert server.status(settings).requests.get("recall") == 1
    assert (served.exit_code, served.stdout, served.stderr) == (
        local.exit_code, local.stdout, local.stderr)
    assert served.stdout.startswith("# note: this memory has not synced with origin")


def test_the_server_marks_another_owners_passages_as_the_cli_does(
    memory: Repository, settings: Any, start_server: Any, run: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory.config.set("core.owned", "false")  # another owner's memory, its rows from elsewhere
    (memory.path / "written-here").unlink(missing_ok=True)
    start_server(memory)
    found = run("--memory", str(memory.path), "--format", "json", "recall", "line reader")
    hit = json.loads(found.stdout)["hits"][0]
    for args in (("--format", "agent", "recall", "line reader"),
                 ("--format", "agent", "get", hit["session_id"], hit["turn_id"]),
                 ("--format", "json", "get", hit["session_id"], hit["turn_id"])):
        served, local = _both(run, monkeypatch, memory, args)
        assert (served.exit_code, served.stdout) == (local.exit_code, local.stdout)
        assert served.exit_code == 0 and "untrusted" in served.stdout, args


def test_browsing_verbs_via_server_print_what_in_process_prints(
    memory: Repository, settings: Any, start_server: Any, run: Any, tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import shutil

    other = tmp_path / "other" / ".funes"
    shutil.copytree(memory.path, other, symlinks=True)
    server = start_server(memory)
    cases = [
        ("--format", "agent", "sessions", "--limit", "2"),
        ("--format", "json", "sessions", "--since", "2026-10-01"),
        ("--format", "agent", "get", "sess-cache", "--from", "1"),
        ("--format", "json", "get", "sess-parser", "--from", "-2", "--max-chars", "200"),
        ("--format", "agent", "scan", "LINE READER"),
        ("--format", "json", "scan", "err_module", "sess-ci", "--context", "10"),
        ("--format", "agent", "sketch", "sess-parser"),
        ("--format", "agent", "recall", "line reader", "--memory", str(other)),
        ("--format", "agent", "get", "no-such-session", "--from", "0"),  # an error, exit 1
    ]
    for args in cases:
        served, local = _both(run, monkeypatch, memory, args)
        assert (served.exit_code, served.stdout, served.stderr) == (
            local.exit_code, local.stdout, local.stderr), args
    counts = server.status(settings).requests
    assert {k: counts.get(k) for k in ("sessions", "get-range", "scan", "sketch", "recall")} \
        == {"sessions": 2, "get-range": 3, "scan": 2, "sketch": 1, "recall": 1}
    # Pooled over the memory and its copy: the same bytes both ways, every chunk once, named
    # by the first memory that holds it.
    served, local = _both(run, monkeypatch, memory, cases[-2])
    assert served.stdout == local.stdout and served.stdout.count("→ funes get") >= 1
    assert f"--memory {other}" not in served.stdout
    assert served.stdout.count(f"--memory {memory.path}") == served.stdout.count("→ funes get")
    assert server.status(settings).requests.get("recall") == 2
