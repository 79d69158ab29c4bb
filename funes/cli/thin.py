"""The thin client: the read commands agents call, handed whole to the running warm server.

`funes recall`, `get` (a turn or a range), `sessions`, `scan` and `sketch`: agents call them
dozens of times a session and wait for each. Importing the
click command tree and the library costs more than the search itself, so before any of that
`funes.cli.main` gives the command line to `run` here, which uses the standard library,
`funes._env` and `funes.protocol` only (tests/test_architecture.py lists what it imports). It
reads the few options these commands take, sends them to the server (op `run`), and prints the
bytes the server made with the CLI's own rendering (funes.api.render), exiting with the CLI's
exit code.

Anything it is not sure of returns None and the full CLI runs as if this module did not exist:
no server (or `FUNES_SERVE=off`), a terminal on stdout (the human format, colours), an option
it does not know, `--help`, a value the CLI would reject, a remote memory name (`org/name`
needs the library to resolve), `FUNES_DEBUG`. So the output is the CLI's output, byte for byte,
whichever path printed it (tests/serve/test_serve_output.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["run"]

#: Root options these commands may carry anywhere on the line: option → field.
_GLOBAL = {"--format": "fmt", "--memory": "memory", "-m": "memory", "-C": "chdir"}
_FORMATS = ("agent", "human", "json")


def _multi(value: str) -> list[str]:
    return [value]


#: `funes recall` options: option → (request field, converter). Converters raise ValueError on
#: what click would reject; the CLI then runs and says so.
_RECALL: dict[str, tuple[str, Callable[[str], Any]]] = {
    "-k": ("k", int),
    "--candidates": ("candidates", int),
    "--half-life": ("half_life", float),
    "--neighbors": ("neighbors", int),
    "--harness": ("harness", _multi),
    "--type": ("block_type", _multi),
    "--project": ("project", _multi),
    "--session": ("session", _multi),
    "--since": ("since", str),
    "--until": ("until", str),
    "--as-of": ("as_of", str),
    "--rerank-pool": ("rerank_pool", int),
    "--budget": ("budget_ms", float),
}
_RECALL["--role"] = ("role", _multi)
_RECALL_FLAGS = {"--no-rerank": ("rerank", False), "--fresh": ("fresh", "prefer"),
                 "--fresh-only": ("fresh", "only")}
_GET: dict[str, tuple[str, Callable[[str], Any]]] = {
    "--window": ("window", int), "--from": ("first", int), "--to": ("last", int),
    "--max-chars": ("max_chars", int)}
#: The browsing commands' options (funes.cli.commands.browse), as library keyword arguments.
_BROWSE: dict[str, dict[str, tuple[str, Callable[[str], Any]]]] = {
    "sessions": {"--project": ("project", _multi), "--harness": ("harness", _multi),
                 "--since": ("since", str), "--until": ("until", str),
                 "--limit": ("limit", int), "--offset": ("offset", int)},
    "scan": {"--limit": ("limit", int), "--offset": ("offset", int),
             "--context": ("context", int)},
    "sketch": {"--max-chars": ("max_chars", int)},
}
_COMMANDS = ("recall", "get", *_BROWSE)


class _Unsure(Exception):
    """The full CLI must handle this command line."""


def _parse(argv: Sequence[str]) -> tuple[dict[str, Any], str, list[str], dict[str, Any]]:
    """(root options, command, positional words, command options) or `_Unsure`.

    `--memory` may be given several times to `recall` (a pooled recall): `roots["memory"]` is
    then a list.
    """
    roots: dict[str, Any] = {}
    words: list[str] = []
    options: dict[str, Any] = {}
    command = ""
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not command and not token.startswith("-"):
            if token not in _COMMANDS:
                raise _Unsure(token)
            command = token
            continue
        if not token.startswith("-") or token == "-":
            words.append(token)
            continue
        name, eq, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        if not name.startswith("--") and len(name) > 2:
            raise _Unsure(token)  # -k3 and bundled short flags: click's business
        table = _RECALL if command == "recall" else _GET if command == "get" \
            else _BROWSE.get(command, {})
        if name in _GLOBAL:
            field = _GLOBAL[name]
            twice = field in roots and not (field == "memory" and command == "recall")
            if twice or (field == "chdir" and command):
                raise _Unsure(token)  # given twice, or -C after the command: keep the CLI's order
        elif command == "recall" and name in _RECALL_FLAGS and not eq:
            field, value = _RECALL_FLAGS[name]
            options[field] = value
            continue
        elif command and name in table:
            field = table[name][0]
        else:
            raise _Unsure(token)  # --help, --version, --, unknown options
        if eq:
            value_text = inline
        elif i < len(argv):
            value_text = argv[i]
            i += 1
        else:
            raise _Unsure(token)
        if name in _GLOBAL:
            if field == "memory" and field in roots:
                roots[field] = [*_listed(roots[field]), value_text]
            else:
                roots[field] = value_text
            continue
        try:
            value = table[name][1](value_text)
        except ValueError:
            raise _Unsure(token) from None
        if isinstance(value, list):
            options.setdefault(field, []).extend(value)
        else:
            options[field] = value
    if not command:
        raise _Unsure("no command")
    return roots, command, words, options


def _listed(value: Any) -> list[str]:
    return list(value) if isinstance(value, list) else [value]


def _local(memory: str, cwd: str) -> str | None:
    """A `--memory` value as an absolute path; None when it may name a remote (`org/name`)."""
    if "/" in memory and not memory.startswith(("/", ".", "~")):
        return None  # perhaps org/name: the library decides what it names
    return os.path.realpath(os.path.join(cwd, os.path.expanduser(memory)))


def _request(argv: Sequence[str]) -> dict[str, Any] | None:
    """The arguments of the `run` request for this command line, or None."""
    try:
        roots, command, words, options = _parse(argv)
    except _Unsure:
        return None
    fmt = roots.get("fmt") or "agent"
    if fmt not in _FORMATS or fmt == "human":
        return None
    cwd = os.getcwd()
    if "chdir" in roots:
        target = os.path.join(cwd, roots["chdir"])
        if not os.path.isdir(target):
            return None
        cwd = os.path.realpath(target)
    given = [_local(m, cwd) for m in _listed(roots.get("memory") or [])]
    if None in given:
        return None
    memories = [m for m in given if m is not None]
    memory = memories[-1] if memories else None
    args: dict[str, Any] = {"command": command, "cwd": cwd, "memory": memory, "fmt": fmt}
    if command == "recall":
        if not words:
            return None
        args["request"] = {"query": " ".join(words), **options}
        if len(memories) > 1:
            args["memories"] = memories
    elif command == "get" and len(words) == 1 and "window" not in options:
        args.update(command="get-range", fields={"session_id": words[0], **options})
    elif command == "get":
        if len(words) != 2 or set(options) - {"window"}:
            return None
        args.update(session_id=words[0], turn_id=words[1], window=options.get("window", 0))
    elif command == "sessions" and not words:
        args["fields"] = options
    elif command == "scan" and words:
        args["fields"] = {"needle": words[0], "sessions": words[1:], **options}
    elif command == "sketch" and len(words) == 1:
        args["fields"] = {"session_id": words[0], **options}
    else:
        return None
    # Where click would strip ANSI escapes: streams that are not terminals.
    args["strip"] = ["stdout"] + ([] if _isatty(sys.stderr) else ["stderr"])
    return args


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def run(argv: Sequence[str]) -> int | None:
    """Answer `funes recall`/`funes get` through the warm server; None: run the full CLI.

    Returns the exit code once the output is printed.
    """
    if "funes.protocol" in sys.modules:  # a new command line (tests run many in a process)
        sys.modules["funes.protocol"].note_failure(None)
    if _isatty(sys.stdout):
        return None  # a person at a terminal: the human format and its colours are the CLI's
    args = _request(argv)  # before any import: --version and --help pass straight through
    if args is None:
        return None
    from funes import protocol
    from funes._env import client_env  # not `Settings`: no `dataclasses` import (funes._settings)

    settings = client_env()
    if settings.serve == "off" or settings.debug:
        return None
    try:
        ep = protocol.endpoint(settings.home)
        answer = protocol.exchange(ep, protocol.message("run", settings.home, None, args),
                                   settings.serve_timeout)
    except protocol.Unavailable as exc:
        protocol.note_failure(exc)  # the CLI does not ask the same server a second time
        return None
    result = answer.get("result")
    if not answer.get("ok") or not isinstance(result, dict):
        return None
    try:
        out, err, code = str(result["stdout"]), str(result["stderr"]), int(result["exit"])
    except (KeyError, TypeError, ValueError):
        return None
    try:
        if out:
            sys.stdout.write(out)
            sys.stdout.flush()
        if err:
            sys.stderr.write(err)
            sys.stderr.flush()
    except BrokenPipeError:
        # The reader went away (`funes recall … | head`): say nothing, as the CLI does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    return code
