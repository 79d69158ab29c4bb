"""Cursor: agent transcripts, ``~/.cursor/projects/<project>/agent-transcripts/<id>/<id>.jsonl``.

Cursor's agent (the ``cursor-agent`` CLI, and the editor's agent, which write the same
transcripts) keeps one JSONL file per conversation, ``<id>.jsonl`` directly under
``agent-transcripts/`` in older versions and ``<id>/<id>.jsonl`` now, with subagents in
``<id>/subagents/<child>.jsonl``. Each line is ``{role: user|assistant, message: {content:
[parts]}}`` or a marker such as ``{type: turn_ended}``; parts are ``text``, ``thinking``,
``tool_use``/``tool_call`` (``name``, ``input``) and ``tool_result``/``tool-result``
(``content``). Lines carry no ids and no times.

Beside the transcript, ``~/.cursor/chats/<md5 of the project path>/<id>/store.db`` (SQLite,
``meta`` table, hex-encoded JSON) holds the conversation's name and ``createdAt``; its
``blobs`` are protobuf and are not read. The editor's older chat history lives only inside
VS Code's ``state.vscdb`` and is not a transcript file: funes does not read it.

Decisions: ``turn_id`` is ``<session>#<line index>`` and ``parent_turn_id`` the previous turn;
every turn takes the conversation's ``createdAt`` from ``store.db`` when there is one (so
recency works at session granularity), else no time. The working directory is the project
folder name decoded against the file system (Cursor writes the path with ``/`` turned into
``-``), checked against the ``chats/<md5>`` folder when one exists; unresolved, None. User
text arrives wrapped in ``<user_query>`` with injected ``<user_info>``/``<rules>``/
``<attached_files>`` blocks: the query is kept as text, the rest as ``environment`` noise.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.ingest import noise
from funes.ingest.parsers.base import (
    ParseError,
    as_dict,
    as_list,
    as_str,
    connect_readonly,
    make_block,
    norm_ts,
    render_json,
    type_label,
    walk_files,
)
from funes.ingest.parsers.skeleton import Parser, Shape, parser_spec
from funes.model.turns import Block

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
_CONTEXT_TAGS = {
    "user_info": noise.ENVIRONMENT,
    "rules": noise.INSTRUCTIONS,
    "attached_files": noise.ENVIRONMENT,
    "system_reminder": noise.SYSTEM_REMINDER,
    "open_and_recently_viewed_files": noise.ENVIRONMENT,
    "project_layout": noise.ENVIRONMENT,
    "git_status": noise.ENVIRONMENT,
}
#: The user's own words inside Cursor's wrapper (kept as plain text, the tags dropped).
_QUERY = "user-query"
_QUERY_RE = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)
#: Deepest project path decoded from a folder name (components), and most candidates tried.
_MAX_DEPTH = 32
_MAX_PROBES = 2048


def transcripts_root(path: Path) -> Path | None:
    """The ``agent-transcripts`` folder a transcript lies in (at any depth)."""
    for parent in path.parents:
        if parent.name == "agent-transcripts":
            return parent
    return None


def session_ids(path: Path) -> tuple[str, str | None]:
    """``(session, parent session)`` from where a transcript lies."""
    if path.parent.name == "subagents":
        return path.stem, path.parent.parent.name
    return path.stem, None


def decode_project(slug: str, cursor_home: Path | None = None) -> str | None:
    """The absolute path a Cursor project folder name stands for, if it exists here.

    Cursor turns every ``/`` (and ``.``, `` ``) of the path into ``-``, so the name is
    ambiguous; the decoding walks the file system, joining components with ``/`` or keeping
    ``-``/``.`` inside a name, and takes the first existing directory that uses all of it. When
    ``~/.cursor/chats`` has a folder named by the md5 of a candidate, that candidate wins.
    """
    parts = [p for p in slug.split("-") if p != ""]
    if not parts or len(parts) > _MAX_DEPTH:
        return None
    chats = {p.name for p in (cursor_home / "chats").iterdir()} if cursor_home and \
        (cursor_home / "chats").is_dir() else set()
    found: list[str] = []
    probes = 0

    def walk(base: str, i: int) -> None:
        nonlocal probes
        if i == len(parts):
            found.append(base)
            return
        name = parts[i]
        for j in range(i + 1, len(parts) + 1):
            for joiner in ("-", ".", " ", "_") if j > i + 1 else ("",):
                probes += 1
                if probes > _MAX_PROBES:
                    return
                component = joiner.join(parts[i:j]) if joiner else name
                candidate = f"{base}/{component}"
                if os.path.isdir(candidate):
                    walk(candidate, j)

    walk("", 0)
    for candidate in found:
        if hashlib.md5(candidate.encode("utf-8"), usedforsecurity=False).hexdigest() in chats:
            return candidate
    return found[0] if found else None


def store_meta(cursor_home: Path, session: str) -> dict[str, Any]:
    """The ``meta`` JSON of ``chats/*/<session>/store.db`` (empty when there is none)."""
    chats = cursor_home / "chats"
    try:
        workspaces = sorted(p for p in chats.iterdir() if p.is_dir())
    except OSError:
        return {}
    for workspace in workspaces:
        db = workspace / session / "store.db"
        if not db.is_file():
            continue
        try:
            conn = connect_readonly(db, attempts=1)
        except ParseError:
            return {}
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = '0'").fetchone()
        except sqlite3.Error:
            return {}
        finally:
            conn.close()
        raw = row[0] if row else None
        try:
            text = bytes.fromhex(raw).decode("utf-8") if isinstance(raw, str) else ""
            value = json.loads(text) if text else {}
        except (ValueError, UnicodeDecodeError):
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def _cursor_home(path: Path) -> Path | None:
    root = transcripts_root(path)
    # ~/.cursor/projects/<slug>/agent-transcripts
    return root.parent.parent.parent if root is not None else None


class CursorParser(Parser):
    """Cursor agent transcripts (JSONL)."""

    harness = "cursor"
    chain = "file"  # lines carry no ids: each turn follows the one before

    def _init_session(self) -> None:
        if self.state.get("session"):
            return
        session, parent = session_ids(self.path)
        self.state["session"] = session
        if parent:
            self.state["parent_session"] = parent
        home = _cursor_home(self.path)
        root = transcripts_root(self.path)
        meta = store_meta(home, parent or session) if home else {}
        created = norm_ts(meta.get("createdAt"))
        if created:
            self.state["ts"] = created
        if isinstance(meta.get("name"), str) and meta["name"]:
            self.state["title"] = meta["name"]
        if root is not None:
            self.state["cwd"] = decode_project(root.parent.name, home)

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """One transcript line: a message, or a marker to count."""
        self._init_session()
        role = as_str(record.get("role"))
        if role is None:
            kind = record.get("type")
            self.skip(f"ignored:{type_label(kind)}" if isinstance(kind, str) else "missing-field")
            return
        if role not in _ROLES:
            self.skip(f"unknown-type:role:{type_label(role)}")
            return
        message = as_dict(record.get("message")) or {}
        content = message.get("content", record.get("content"))
        blocks = self._blocks(content, role)
        extra = {"model": m} if (m := as_str(record.get("model"))) else {}
        if title := as_str(self.state.get("title")):
            extra["title"] = title
        self.turn(_ROLES[role], blocks, ts=record.get("timestamp"), extra=extra)

    def _blocks(self, content: object, role: str) -> list[Block | None]:
        blocks: list[Block | None] = []
        parts = content if isinstance(content, list) else [content]
        for raw in parts:
            if isinstance(raw, str):
                blocks += self._text(raw, role)
                continue
            part = as_dict(raw)
            if part is None:
                continue
            kind = as_str(part.get("type")) or ""
            if kind == "text":
                blocks += self._text(as_str(part.get("text")) or "", role)
            elif kind in ("thinking", "reasoning"):
                text = as_str(part.get("thinking")) or as_str(part.get("text")) or ""
                blocks.append(make_block("thinking", text))
            elif kind in ("tool_use", "tool_call", "tool-call"):
                name = as_str(part.get("name"))
                call_id = as_str(part.get("id")) or as_str(part.get("toolCallId"))
                self.remember_tool(call_id, name)
                blocks.append(make_block("tool_use", render_json(part.get("input", {})),
                                         tool_name=name, tool_call_id=call_id))
            elif kind in ("tool_result", "tool-result"):
                call_id = as_str(part.get("tool_use_id")) or as_str(part.get("toolCallId"))
                name = as_str(part.get("name")) or self.tool_name_for(call_id)
                blocks.append(make_block("tool_result", _result_text(part.get("content")),
                                         tool_name=name, tool_call_id=call_id))
            elif isinstance(part.get("text"), str):
                blocks.append(make_block("text", part["text"]))
            else:
                self.skip(f"unknown-type:part:{type_label(kind)}")
        return blocks

    def _text(self, text: str, role: str) -> list[Block | None]:
        if role != "user" or "<" not in text:
            return [make_block("text", text)]
        out: list[Block | None] = []
        for body, reason in noise.split_tags(text, {**_CONTEXT_TAGS, "user_query": _QUERY}):
            if reason == _QUERY:
                query = _QUERY_RE.search(body)
                out.append(make_block("text", query.group(1) if query else body))
            else:
                out.append(make_block("text", body, noise=reason))
        return out


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for raw in as_list(content) or []:
        part = as_dict(raw)
        if part is not None and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(raw, str):
            texts.append(raw)
    return "\n".join(texts)


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if not records:
        return False
    if transcripts_root(path) is None:
        return False
    first = records[0]
    return isinstance(first, dict) and first.get("role") in _ROLES and isinstance(
        first.get("message"), dict)


def locate(settings: Settings) -> list[Path]:
    """Agent transcripts under ``~/.cursor/projects/<project>/agent-transcripts`` (JSONL)."""
    projects = settings.cursor_dir / "projects"
    return sorted(p for p in walk_files(projects)
                  if p.suffix == ".jsonl" and "agent-transcripts" in p.relative_to(projects).parts)


SPEC = parser_spec("cursor", _sniff, Shape(CursorParser), priority=45, locate=locate)
