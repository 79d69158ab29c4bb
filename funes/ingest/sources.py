"""Where transcripts live: default discovery per agent, and explicit paths.

Default locations (docs/design.md §4), each rooted at a directory from
:func:`funes._env.settings`, which honours the agents' own variables. Each agent's parser
module says where its files are (``locate`` in its ``SPEC``); this module only asks them:

==========  =================================================================================
claude      ``<CLAUDE_CONFIG_DIR or ~/.claude>/projects/<project>/<session>.jsonl``, older
            ``projects/<project>/agent-<id>.jsonl`` subagents, and
            ``projects/<project>/<session>/subagents/agent-<id>.jsonl``
codex       ``<CODEX_HOME or ~/.codex>/sessions/**/rollout-*.jsonl``
pi          ``<PI_CODING_AGENT_DIR or ~/.pi/agent>/sessions/**/*.jsonl``
hermes      ``<HERMES_HOME or ~/.hermes>/state.db`` and ``sessions/*.jsonl``
opencode    ``<XDG_DATA_HOME or ~/.local/share>/opencode/opencode.db`` and the older
            ``storage/session/<project>/<session>.json`` tree
gemini      ``<GEMINI_CLI_HOME or ~>/.gemini/tmp/<project>/chats/**/*.jsonl`` (and ``.json``)
cursor      ``~/.cursor/projects/<project>/agent-transcripts/**/*.jsonl``
copilot     ``<COPILOT_HOME or ~/.copilot>/session-state/<id>/events.jsonl`` (and ``<id>.jsonl``)
turn files  ``$FUNES_HOME/spool/<producer>/**/*.funes.jsonl`` (format ``funes-jsonl``: any
            agent's converter writes them, funes.ingest.parsers.turnfile)
==========  =================================================================================

OpenCode 1.2 moved its JSON sessions into ``opencode.db``; a JSON session the database holds
is not listed again. Gemini CLI rewrites an old ``.json`` session as ``.jsonl`` when it is
resumed; only the ``.jsonl`` is listed then.

Hermes writes a session to both ``state.db`` and ``sessions/<session id>.jsonl``; indexing
both would store every message twice under different turn ids, so a JSONL transcript is only
listed when ``state.db`` does not know its session (older sessions, or no database at all).

Discovery never follows symlinked directories (no cycles) and returns files sorted by path,
so two runs over the same tree list the same sources in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes._env import settings as load_settings
from funes.ingest.parsers.base import ParseError, UnknownHarnessError, walk_files
from funes.ingest.parsers.registry import FORMATS, detect_harness, registered, spec

_IMPORT_SUFFIXES = (".jsonl", ".json", ".parquet", ".db", ".sqlite", ".sqlite3")
#: The agents whose transcripts `funes index` finds on its own.
AGENT_SOURCES = ("claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor", "copilot",
                 "funes-jsonl")


@dataclass(frozen=True, order=True)
class SourceFile:
    """One transcript to index, and the harness whose parser reads it."""

    path: Path
    harness: str


def default_sources(
    settings: Settings | None = None, *, harnesses: Iterable[str] | None = None
) -> list[SourceFile]:
    """Every transcript in the agents' default locations (each agent's ``SPEC.locate``).

    Args:
        settings: Where the agents keep their files; None reads the environment now.
        harnesses: Restrict to these agents (default: all of AGENT_SOURCES).

    Returns:
        Sources in AGENT_SOURCES order, then by path. Missing directories contribute nothing.
    """
    s = settings or load_settings()
    wanted = set(harnesses) if harnesses is not None else set(AGENT_SOURCES)
    out: list[SourceFile] = []
    for name in AGENT_SOURCES:
        locate = spec(name).locate if name in wanted else None
        if locate is not None:
            out += [SourceFile(p, name) for p in locate(s)]
    return out


def agent_files(settings: Settings, harness: str) -> list[Path]:
    """The files one agent keeps in its default location (none for a format without one)."""
    locate = spec(harness).locate
    return locate(settings) if locate is not None else []


def explicit_sources(paths: Iterable[str | Path], harness: str | None = None) -> list[SourceFile]:
    """Sources for paths a user named: files as given, directories searched recursively.

    Args:
        paths: Files or directories.
        harness: The harness of every file; None sniffs each file's content.

    Returns:
        Sources in the order the paths were given (directory contents sorted), without
        duplicates. Inside a directory, files no parser recognises are left out.

    Raises:
        UnknownHarnessError: ``harness`` is not registered, or a named *file* is not
            recognised.
        ParseError: A named path does not exist.
    """
    if harness is not None and harness not in registered():
        raise UnknownHarnessError(
            f"no parser for harness {harness!r}", hint=f"use one of: {', '.join(FORMATS)}"
        )
    out: list[SourceFile] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            for child in sorted(walk_files(path)):
                if child.suffix.lower() not in _IMPORT_SUFFIXES or child in seen:
                    continue
                kind = harness or detect_harness(child)
                if kind is not None:
                    seen.add(child)
                    out.append(SourceFile(child, kind))
        elif path.is_file():
            if path in seen:
                continue
            kind = harness or detect_harness(path)
            if kind is None:
                raise UnknownHarnessError(
                    f"cannot tell which agent wrote {path}",
                    hint=f"pass the harness explicitly ({', '.join(FORMATS)})",
                )
            seen.add(path)
            out.append(SourceFile(path, kind))
        else:
            raise ParseError(f"no such file or directory: {path}")
    return out
