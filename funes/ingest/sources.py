"""Where transcripts live: default discovery per agent, and explicit paths.

Default locations (docs/design.md §4), each rooted at a directory from
:func:`funes._env.settings`, which honours the agents' own variables:

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

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes._env import settings as load_settings
from funes.ingest.parsers.base import ParseError, UnknownHarnessError
from funes.ingest.parsers.registry import detect_harness, registered
from funes.model.turns import HARNESSES

_IMPORT_SUFFIXES = (".jsonl", ".json", ".parquet", ".db", ".sqlite", ".sqlite3")
#: The agents whose transcripts `funes index` finds on its own.
AGENT_SOURCES = ("claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor", "copilot")


@dataclass(frozen=True, order=True)
class SourceFile:
    """One transcript to index, and the harness whose parser reads it."""

    path: Path
    harness: str


def default_sources(
    settings: Settings | None = None, *, harnesses: Iterable[str] | None = None
) -> list[SourceFile]:
    """Every transcript in the agents' default locations.

    Args:
        settings: Where the agents keep their files; None reads the environment now.
        harnesses: Restrict to these agents (default: claude, codex, pi, hermes).

    Returns:
        Sources sorted by harness, then path. Missing directories simply contribute nothing.
    """
    s = settings or load_settings()
    wanted = set(harnesses) if harnesses is not None else set(AGENT_SOURCES)
    out: list[SourceFile] = []
    if "claude" in wanted:
        out += [SourceFile(p, "claude") for p in claude_files(s.claude_config_dir)]
    if "codex" in wanted:
        out += [SourceFile(p, "codex") for p in codex_files(s.codex_home)]
    if "pi" in wanted:
        out += [SourceFile(p, "pi") for p in pi_files(s.pi_home)]
    if "hermes" in wanted:
        out += [SourceFile(p, "hermes") for p in hermes_files(s.hermes_home)]
    if "opencode" in wanted:
        out += [SourceFile(p, "opencode") for p in opencode_files(s.opencode_data_dir)]
    if "gemini" in wanted:
        out += [SourceFile(p, "gemini") for p in gemini_files(s.gemini_dir)]
    if "cursor" in wanted:
        out += [SourceFile(p, "cursor") for p in cursor_files(s.cursor_dir)]
    if "copilot" in wanted:
        out += [SourceFile(p, "copilot") for p in copilot_files(s.copilot_dir)]
    return out


def claude_files(config_dir: Path) -> list[Path]:
    """Claude Code sessions and subagent transcripts under ``<config_dir>/projects``."""
    projects = config_dir / "projects"
    found: list[Path] = []
    for path in _walk(projects):
        if path.suffix != ".jsonl":
            continue
        rel = path.relative_to(projects).parts
        if len(rel) == 2:
            found.append(path)  # <project>/<session>.jsonl (or an old agent-<id>.jsonl)
        elif (
            len(rel) == 4
            and rel[2] == "subagents"
            and rel[3].startswith("agent-")
        ):
            found.append(path)  # <project>/<session>/subagents/agent-<id>.jsonl
    return sorted(found)


def codex_files(codex_home: Path) -> list[Path]:
    """Codex rollouts under ``<codex_home>/sessions`` (any depth, ``rollout-*.jsonl``)."""
    return sorted(
        p
        for p in _walk(codex_home / "sessions")
        if p.name.startswith("rollout-") and p.suffix == ".jsonl"
    )


def pi_files(pi_home: Path) -> list[Path]:
    """Sessions of pi under ``<pi_home>/sessions`` (any depth, ``*.jsonl``)."""
    return sorted(p for p in _walk(pi_home / "sessions") if p.suffix == ".jsonl")


def hermes_files(hermes_home: Path) -> list[Path]:
    """Hermes ``state.db`` and the ``sessions/*.jsonl`` transcripts it does not already hold."""
    out: list[Path] = []
    db = hermes_home / "state.db"
    known: set[str] = set()
    if db.is_file():
        out.append(db)
        known = hermes_db_session_ids(db)
    sessions = hermes_home / "sessions"
    try:
        entries = sorted(sessions.iterdir())
    except OSError:
        entries = []
    for path in entries:
        if path.suffix == ".jsonl" and path.is_file() and path.stem not in known:
            out.append(path)
    return out


def hermes_db_session_ids(db: Path) -> set[str]:
    """Session ids stored in a Hermes ``state.db`` (empty if it cannot be read)."""
    import sqlite3

    from funes.ingest.parsers.hermes import connect_readonly

    try:
        conn = connect_readonly(db)
    except ParseError:
        return set()
    try:
        return {str(row[0]) for row in conn.execute("SELECT id FROM sessions")}
    except sqlite3.Error:
        return set()
    finally:
        conn.close()


def opencode_files(data_dir: Path) -> list[Path]:
    """``opencode.db`` and the older JSON sessions it does not already hold."""
    from funes.ingest.parsers.opencode import db_session_ids

    out: list[Path] = []
    db = data_dir / "opencode.db"
    known: set[str] = set()
    if db.is_file():
        out.append(db)
        known = db_session_ids(db)
    sessions = data_dir / "storage" / "session"
    out += [p for p in sorted(_walk(sessions))
            if p.suffix == ".json" and p.parent.parent == sessions and p.stem not in known]
    return out


def gemini_files(gemini_dir: Path) -> list[Path]:
    """Chat logs under ``tmp/<project>/chats`` (``.jsonl``, and ``.json`` not yet migrated)."""
    out: list[Path] = []
    tmp = gemini_dir / "tmp"
    for path in _walk(tmp):
        rel = path.relative_to(tmp).parts
        if len(rel) < 3 or rel[1] != "chats" or path.suffix not in (".jsonl", ".json"):
            continue
        if path.suffix == ".json" and path.with_suffix(".jsonl").exists():
            continue  # Gemini migrated it to JSONL on resume: read that one only
        out.append(path)
    return sorted(out)


def cursor_files(cursor_dir: Path) -> list[Path]:
    """Agent transcripts under ``projects/<project>/agent-transcripts`` (JSONL)."""
    projects = cursor_dir / "projects"
    return sorted(p for p in _walk(projects)
                  if p.suffix == ".jsonl" and "agent-transcripts" in p.relative_to(projects).parts)


def copilot_files(copilot_dir: Path) -> list[Path]:
    """``session-state/<id>/events.jsonl`` and the older flat ``session-state/<id>.jsonl``."""
    state = copilot_dir / "session-state"
    out = []
    for path in _walk(state):
        rel = path.relative_to(state).parts
        if (len(rel) == 2 and rel[1] == "events.jsonl") or (len(rel) == 1
                                                            and path.suffix == ".jsonl"):
            out.append(path)
    return sorted(out)


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
            f"no parser for harness {harness!r}", hint=f"use one of: {', '.join(HARNESSES)}"
        )
    out: list[SourceFile] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            for child in sorted(_walk(path)):
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
                    hint=f"pass the harness explicitly ({', '.join(HARNESSES)})",
                )
            seen.add(path)
            out.append(SourceFile(path, kind))
        else:
            raise ParseError(f"no such file or directory: {path}")
    return out


_HIDDEN_RE = re.compile(r"^\.")


def _walk(root: Path) -> Iterator[Path]:
    """Regular files under ``root``, not following symlinked directories.

    Top-down, each directory's files in name order before its subdirectories (in name order),
    hidden directories skipped. `os.scandir` rather than `os.walk` and a stat per file: the
    entry types come with the listing, which made listing 19,000 sessions three times cheaper
    (a `funes add` on an indexed memory lists them all; bench/results/day0.md).
    """
    if root.is_dir():
        yield from _walk_dir(str(root))


def _walk_dir(top: str) -> Iterator[Path]:
    try:
        with os.scandir(top) as listing:
            entries = list(listing)
    except OSError:
        return
    files, dirs = [], []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                if not _HIDDEN_RE.match(entry.name):
                    dirs.append(entry.name)
            elif entry.is_file():
                files.append(entry.name)
        except OSError:
            continue
    base = Path(top)
    for name in sorted(files):
        yield base / name
    for name in sorted(dirs):
        yield from _walk_dir(os.path.join(top, name))
