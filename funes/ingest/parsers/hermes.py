"""Hermes Agent: the ``state.db`` SQLite store, gateway transcripts and trajectory exports.

Three shapes, one harness:

* **state.db** (``~/.hermes/state.db``, schema of NousResearch/hermes-agent ``hermes_state``):
  ``sessions(id, source, parent_session_id, started_at, cwd?, …)`` and
  ``messages(id INTEGER PRIMARY KEY, session_id, role, content, tool_call_id, tool_calls,
  tool_name, timestamp REAL, reasoning?, reasoning_content?, _compressed_summary?,
  display_kind?, …)``. Opened read-only through a ``file:…?mode=ro`` URI, which is WAL-safe:
  it reads committed rows while the agent keeps writing. Columns are probed with
  ``pragma table_info`` (``cwd`` and the newer columns are missing in older schema versions).
  Incremental by message id: ``start_offset``/``end_offset`` are the last message id read,
  and ``Source(path, id, id + 1)`` names a row. ``turn_id`` is ``<session>#<message id>``,
  ``seq`` is the message id (ordered within a session, stable even when Hermes later deletes
  rows), ``parent_turn_id`` is the session's previous message.
* **Gateway transcripts** (``~/.hermes/sessions/<session id>.jsonl``): a ``session_meta`` line
  (tool schema, model, platform), then OpenAI-style messages with ``timestamp``,
  ``reasoning``, ``tool_calls``. The session id is the file name; ``turn_id`` is
  ``<session>#<line index>``.
* **Trajectory exports** (ShareGPT): one conversation per line,
  ``{conversations: [{from: system|human|gpt|tool, value}], timestamp, model}``, where ``gpt``
  values hold ``<think>…</think>`` and ``<tool_call>{…}</tool_call>`` and ``tool`` values
  ``<tool_response>{…}</tool_response>``. A line has no id, so its session id is
  ``traj-<first 16 hex of sha256(line)>`` and turns are ``<session>#<message index>``.

Noise decisions are documented in :mod:`funes.ingest.noise`.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.ingest import noise
from funes.ingest.parsers.base import (
    ParseError,
    as_list,
    as_str,
    is_sqlite,
    make_block,
    norm_ts,
    sqlite_schema,
    store_and_older,
)
from funes.ingest.parsers.chat import (
    content_text,
    emit_conversation,
    message_blocks,
    tool_call_blocks,
)
from funes.ingest.parsers.skeleton import Parser, Shape, SqliteParser, parser_spec
from funes.model.turns import Block

_BATCH = 2000
_SESSION_NAME_RE = re.compile(r"(\d{8}_\d{6}_[0-9A-Za-z]+)$")
_ROLES = ("user", "assistant", "tool", "system")


def _session_from_name(path: Path) -> str:
    """A gateway transcript's session id: its file name (``YYYYMMDD_HHMMSS_<hex>``)."""
    m = _SESSION_NAME_RE.search(path.stem)
    return m.group(1) if m else path.stem


# --------------------------------------------------------------------------------------------
# JSONL: gateway transcripts and trajectories
# --------------------------------------------------------------------------------------------


class HermesJsonlParser(Parser):
    """Hermes gateway transcripts and ShareGPT trajectory exports."""

    harness = "hermes"
    chain = "file"

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """One message of a gateway transcript, or a whole trajectory conversation."""
        conversations = as_list(record.get("conversations"))
        if conversations is not None:
            self._trajectory(record, conversations, start, end)
            return
        role = as_str(record.get("role"))
        if role is None:
            self.skip("missing-field")
            return
        if role == "session_meta":
            self.ts(record.get("timestamp"))
            if cwd := as_str(record.get("cwd")):
                self.state["cwd"] = cwd
            self.skip("ignored:session_meta")
            return
        reason = noise.hermes_text_noise(role, content_text(record.get("content")))
        self.turn(role if role in _ROLES else "system", message_blocks(self, record, role, reason),
                  ts=record.get("timestamp"))

    def default_session(self) -> str:
        """The transcript's file name."""
        return _session_from_name(self.path)

    def _trajectory(
        self, record: dict[str, Any], conversation: list[Any], start: int, end: int
    ) -> None:
        raw = json.dumps(record, sort_keys=True, ensure_ascii=False).encode()
        session = (
            as_str(record.get("session_id"))
            or as_str(record.get("id"))
            or "traj-" + hashlib.sha256(raw).hexdigest()[:16]
        )
        extra = {"model": model} if (model := as_str(record.get("model"))) else None
        emit_conversation(self, session, conversation, ts=self.ts(record.get("timestamp")),
                          workdir=as_str(record.get("cwd")), start=start, end=end, extra=extra)
        if not conversation:
            self.skip("empty")


# --------------------------------------------------------------------------------------------
# state.db
# --------------------------------------------------------------------------------------------


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


_MESSAGE_COLUMNS = (
    "id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
    "timestamp", "reasoning", "reasoning_content", "_compressed_summary", "display_kind",
)
_SESSION_COLUMNS = ("cwd", "parent_session_id", "source")


class HermesDbParser(SqliteParser):
    """``state.db``: messages in id order, each a turn ``<session>#<message id>``."""

    harness = "hermes"

    def read(self, conn: sqlite3.Connection, start: int) -> int:
        """Every message after id ``start``, in batches; the last id read."""
        mcols = _columns(conn, "messages")
        if not {"id", "session_id", "role"} <= mcols:
            raise ParseError(f"{self.path} has no Hermes messages table")
        scols = _columns(conn, "sessions")
        select = [f"m.{c}" if c in mcols else "NULL" for c in _MESSAGE_COLUMNS]
        select += [f"s.{c}" if c in scols else "NULL" for c in _SESSION_COLUMNS]
        join = "LEFT JOIN sessions s ON s.id = m.session_id" if "id" in scols else ""
        if not join:
            select = select[: len(_MESSAGE_COLUMNS)] + ["NULL"] * len(_SESSION_COLUMNS)
        query = (
            f"SELECT {', '.join(select)} FROM messages m {join} "
            "WHERE m.id > ? ORDER BY m.id LIMIT ?"
        )
        previous: dict[str, str | None] = {}
        last_id = start
        while True:
            rows = conn.execute(query, (last_id, _BATCH)).fetchall()
            for row in rows:
                rec = dict(zip(_MESSAGE_COLUMNS + _SESSION_COLUMNS, row, strict=True))
                if not isinstance(rec["id"], int):
                    self.skip("missing-field")
                    continue
                last_id = rec["id"]
                self._message(conn, rec, previous)
            if len(rows) < _BATCH:
                return last_id

    def _message(
        self, conn: sqlite3.Connection, rec: dict[str, Any], previous: dict[str, str | None]
    ) -> None:
        msg_id: int = rec["id"]
        session = str(rec["session_id"]) if rec["session_id"] is not None else "unknown"
        role = as_str(rec["role"]) or "system"
        blocks: list[Block | None] = []
        for key in ("reasoning", "reasoning_content"):
            if isinstance(rec[key], str) and rec[key].strip():
                blocks.append(make_block("thinking", rec[key]))
                break
        content = rec["content"] if isinstance(rec["content"], str) else ""
        if role == "tool":
            call_id = as_str(rec["tool_call_id"])
            name = as_str(rec["tool_name"]) or self.tool_name_for(call_id)
            blocks.append(make_block("tool_result", content, tool_name=name,
                                     tool_call_id=call_id))
        else:
            if rec["_compressed_summary"]:
                reason: str | None = noise.COMPACTION
            elif rec["display_kind"] == "hidden":
                reason = noise.HIDDEN
            else:
                reason = noise.hermes_text_noise(role, content)
            blocks.append(make_block("text", content, noise=reason))
        for block, call_id, name in tool_call_blocks(rec["tool_calls"]):
            self.remember_tool(call_id, name)
            blocks.append(block)
        if not any(b is not None for b in blocks):
            self.skip("empty")
            return
        if session not in previous:
            row = conn.execute(
                "SELECT MAX(id) FROM messages WHERE session_id = ? AND id < ?",
                (rec["session_id"], msg_id),
            ).fetchone()
            previous[session] = f"{session}#{row[0]}" if row and row[0] is not None else None
        parent = previous[session]
        turn_id = f"{session}#{msg_id}"
        previous[session] = turn_id
        self.emit(
            session_id=session,
            turn_id=turn_id,
            ts=norm_ts(rec["timestamp"]) or "",
            role=role if role in _ROLES else "system",
            blocks=blocks,
            start=msg_id,
            end=msg_id + 1,
            parent=parent,
            workdir=as_str(rec["cwd"]),
            parent_session_id=as_str(rec["parent_session_id"]),
            extra={"platform": src} if (src := as_str(rec["source"])) else {},
            seq=msg_id,
        )


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------


def locate(settings: Settings) -> list[Path]:
    """``state.db`` and the ``sessions/*.jsonl`` transcripts it does not already hold."""
    sessions = settings.hermes_home / "sessions"
    try:
        entries = sorted(p for p in sessions.iterdir() if p.suffix == ".jsonl" and p.is_file())
    except OSError:
        entries = []
    return store_and_older(settings.hermes_home / "state.db", "SELECT id FROM sessions", entries)


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if records is None:
        tables = sqlite_schema(path)
        return {"id", "session_id", "role"} <= tables.get("messages", set()) and bool(
            tables.get("sessions"))
    if not records:
        return False
    first = records[0]
    if isinstance(first, dict) and first.get("role") == "session_meta":
        return True
    # A ShareGPT line is a Hermes trajectory when it carries Hermes' marks (the batch runner's
    # ``completed`` flag, or its function-calling system prompt); other ShareGPT files are
    # left to the generic importer.
    conv = first.get("conversations") if isinstance(first, dict) else None
    if not (isinstance(conv, list) and conv and isinstance(conv[0], dict) and "from" in conv[0]):
        return False
    if "completed" in first:
        return True
    system = conv[0].get("value") if conv[0].get("from") == "system" else None
    return isinstance(system, str) and "<tools>" in system


SPEC = parser_spec(
    "hermes", _sniff,
    Shape(HermesDbParser, is_sqlite, "rowid"), Shape(HermesJsonlParser),
    priority=10, locate=locate,
)
