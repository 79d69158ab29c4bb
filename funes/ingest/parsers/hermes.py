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

import collections
import hashlib
import json
import os
import re
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import Any

from funes.ingest import noise
from funes.ingest.parsers.base import (
    STATE_VERSION,
    TOOL_MAP_LIMIT,
    CursorKind,
    LineParser,
    ParseError,
    ParseResult,
    ParserSpec,
    as_dict,
    as_list,
    as_str,
    bounded_put,
    harness_literal,
    make_block,
    norm_ts,
    render_json,
    state_map,
)
from funes.model.turns import Block, Source, Turn

_SQLITE_MAGIC = b"SQLite format 3\x00"
_BATCH = 2000
_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_TOOL_RESPONSE_RE = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "tool": "tool", "function": "tool", "observation": "tool"}


_SESSION_NAME_RE = re.compile(r"(\d{8}_\d{6}_[0-9A-Za-z]+)$")


def _session_from_name(path: Path) -> str:
    """A gateway transcript's session id: its file name (``YYYYMMDD_HHMMSS_<hex>``)."""
    m = _SESSION_NAME_RE.search(path.stem)
    return m.group(1) if m else path.stem


def is_sqlite(path: Path) -> bool:
    """True if the file starts with SQLite's magic header."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# OpenAI-style message -> blocks (shared with the generic importer)
# --------------------------------------------------------------------------------------------


def tool_call_blocks(tool_calls: object) -> list[tuple[Block, str | None, str | None]]:
    """Blocks for OpenAI ``tool_calls`` (a list, or its JSON text), with (id, name) of each."""
    if isinstance(tool_calls, str):
        try:
            tool_calls = json.loads(tool_calls)
        except (ValueError, RecursionError):
            return []
    out: list[tuple[Block, str | None, str | None]] = []
    for call in as_list(tool_calls) or []:
        c = as_dict(call)
        if c is None:
            continue
        fn = as_dict(c.get("function")) or c
        name = as_str(fn.get("name"))
        call_id = as_str(c.get("id")) or as_str(c.get("call_id"))
        args = fn.get("arguments", fn.get("input", {}))
        block = make_block("tool_use", render_json(args), tool_name=name, tool_call_id=call_id)
        if block is not None:
            out.append((block, call_id, name))
    return out


def content_blocks(content: object, reason: str | None) -> list[Block]:
    """Text blocks for an OpenAI ``content`` (a string or a list of parts)."""
    blocks: list[Block | None] = []
    if isinstance(content, str):
        blocks.append(make_block("text", content, noise=reason))
    for part in as_list(content) or []:
        if isinstance(part, str):
            blocks.append(make_block("text", part, noise=reason))
            continue
        p = as_dict(part)
        if p is None:
            continue
        kind = p.get("type")
        if kind in ("text", "input_text", "output_text") and isinstance(p.get("text"), str):
            blocks.append(make_block("text", p["text"], noise=reason))
        elif kind in ("image_url", "input_image", "image"):
            url = p.get("image_url")
            url_s = as_str(url.get("url") if isinstance(url, dict) else url)
            text = (
                noise.elide_base64(url_s)
                if url_s and url_s.startswith("data:")
                else noise.image_placeholder("image", None)
            )
            blocks.append(make_block("text", text, noise=noise.IMAGE))
        elif kind in ("thinking", "reasoning") and isinstance(p.get(kind), str):
            blocks.append(make_block("thinking", p[kind]))
    return [b for b in blocks if b is not None]


def content_text(content: object) -> str:
    """Plain text of an OpenAI ``content``, for noise checks."""
    if isinstance(content, str):
        return content
    texts = []
    for part in as_list(content) or []:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts)


def sharegpt_messages(conversation: list[Any]) -> list[tuple[str, list[Block], str | None]]:
    """(role, blocks, skip reason) for each ShareGPT ``{from, value}`` message.

    ``gpt`` values are split into ``<think>`` (thinking), ``<tool_call>`` (tool_use, the call
    JSON's ``arguments`` rendered as JSON) and the remaining text; ``tool`` values into one
    ``tool_result`` per ``<tool_response>``. System prompts (the fixed tool schema) are
    dropped with reason ``ignored:system-prompt``.
    """
    out: list[tuple[str, list[Block], str | None]] = []
    pending: collections.deque[tuple[str | None, str | None]] = collections.deque()
    for item in conversation:
        msg = as_dict(item)
        if msg is None:
            out.append(("", [], "not-an-object"))
            continue
        speaker = as_str(msg.get("from")) or as_str(msg.get("role")) or ""
        value = msg.get("value", msg.get("content"))
        if speaker == "system":
            out.append(("system", [], "ignored:system-prompt"))
            continue
        role = _SHAREGPT_ROLES.get(speaker)
        if role is None or not isinstance(value, str):
            out.append(("", [], "missing-field"))
            continue
        blocks: list[Block | None] = []
        if role == "assistant":
            for m in _THINK_RE.finditer(value):
                blocks.append(make_block("thinking", m.group(1).strip()))
            rest = _THINK_RE.sub("", value)
            for m in _TOOL_CALL_RE.finditer(rest):
                name, call_id, args = _parse_call(m.group(1))
                pending.append((call_id, name))
                blocks.append(make_block("tool_use", args, tool_name=name, tool_call_id=call_id))
            rest = _TOOL_CALL_RE.sub("", rest)
            blocks.insert(
                sum(1 for b in blocks if b is not None and b.type == "thinking"),
                make_block("text", rest.strip()),
            )
        elif role == "tool":
            responses = _TOOL_RESPONSE_RE.findall(value) or [value]
            for raw in responses:
                name, call_id, text = _parse_response(raw)
                if name is None and pending:
                    call_id = call_id or pending[0][0]
                    name = pending[0][1]
                if pending:
                    pending.popleft()
                blocks.append(make_block("tool_result", text, tool_name=name, tool_call_id=call_id))
        else:
            blocks.append(make_block("text", value, noise=noise.hermes_text_noise(role, value)))
        out.append((role, [b for b in blocks if b is not None], None))
    return out


def _loads_loose(raw: str) -> Any:
    raw = raw.strip()
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        pass
    # Trajectories sometimes hold Python-literal dicts ({'name': …}); try a JSON-ish repair.
    try:
        return json.loads(raw.replace("'", '"'))
    except (ValueError, RecursionError):
        return None


def _parse_call(raw: str) -> tuple[str | None, str | None, str]:
    call = as_dict(_loads_loose(raw))
    if call is None:
        return None, None, raw.strip()
    args = call.get("arguments", call.get("parameters", {}))
    text = args if isinstance(args, str) else render_json(args)
    return as_str(call.get("name")), as_str(call.get("id")), text


def _parse_response(raw: str) -> tuple[str | None, str | None, str]:
    resp = as_dict(_loads_loose(raw))
    if resp is None:
        return None, None, raw.strip()
    content = resp.get("content", resp.get("result"))
    text = content if isinstance(content, str) else render_json(content)
    return as_str(resp.get("name")), as_str(resp.get("tool_call_id")), text


# --------------------------------------------------------------------------------------------
# JSONL: gateway transcripts and trajectories
# --------------------------------------------------------------------------------------------


class HermesJsonlParser(LineParser):
    """Hermes gateway transcripts and ShareGPT trajectory exports."""

    harness = "hermes"

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
        session = as_str(self.state.get("session")) or _session_from_name(self.path)
        self.state["session"] = session
        blocks = self._message_blocks(role, record)
        turn_id = f"{session}#{index}"
        turn = self.emit(
            session_id=session,
            turn_id=turn_id,
            ts=self.ts(record.get("timestamp")),
            role=role if role in ("user", "assistant", "tool", "system") else "system",
            blocks=blocks,
            start=start,
            end=end,
            parent_turn_id=as_str(self.state.get("last_turn")),
            workdir=as_str(self.state.get("cwd")),
        )
        if turn is not None:
            self.state["last_turn"] = turn_id

    def _message_blocks(self, role: str, record: dict[str, Any]) -> list[Block]:
        blocks: list[Block | None] = []
        for key in ("reasoning", "reasoning_content"):
            if isinstance(record.get(key), str):
                blocks.append(make_block("thinking", record[key]))
                break
        content = record.get("content")
        if role == "tool":
            call_id = as_str(record.get("tool_call_id"))
            name = as_str(record.get("tool_name")) or as_str(record.get("name"))
            blocks.append(
                make_block(
                    "tool_result",
                    content_text(content),
                    tool_name=name or self.tool_name_for(call_id),
                    tool_call_id=call_id,
                )
            )
        else:
            reason = noise.hermes_text_noise(role, content_text(content))
            blocks.extend(content_blocks(content, reason))
        for block, call_id, name in tool_call_blocks(record.get("tool_calls")):
            self.remember_tool(call_id, name)
            blocks.append(block)
        return [b for b in blocks if b is not None]

    def _trajectory(
        self, record: dict[str, Any], conversation: list[Any], start: int, end: int
    ) -> None:
        raw = json.dumps(record, sort_keys=True, ensure_ascii=False).encode()
        session = (
            as_str(record.get("session_id"))
            or as_str(record.get("id"))
            or "traj-" + hashlib.sha256(raw).hexdigest()[:16]
        )
        ts = self.ts(record.get("timestamp"))
        extra = {"model": model} if (model := as_str(record.get("model"))) else None
        previous: str | None = None
        emitted = 0
        for i, (role, blocks, reason) in enumerate(sharegpt_messages(conversation)):
            if reason is not None:
                self.skip(reason)
                continue
            turn_id = f"{session}#{i}"
            turn = self.emit(
                session_id=session,
                turn_id=turn_id,
                ts=ts,
                role=role,
                blocks=blocks,
                start=start,
                end=end,
                parent_turn_id=previous,
                workdir=as_str(record.get("cwd")),
                extra=extra,
            )
            if turn is not None:
                previous = turn_id
                emitted += 1
        if not conversation:
            self.skip("empty")


# --------------------------------------------------------------------------------------------
# state.db
# --------------------------------------------------------------------------------------------


def connect_readonly(db: Path, attempts: int = 3) -> sqlite3.Connection:
    """Open a SQLite database read-only through a URI (WAL-safe; never creates or writes it).

    A reader can briefly see ``disk I/O error`` while a WAL writer checkpoints; a few short
    retries ride that out.

    Raises:
        ParseError: The database cannot be opened.
    """
    uri = "file:" + urllib.parse.quote(os.path.abspath(db)) + "?mode=ro"
    last: sqlite3.Error | None = None
    for attempt in range(attempts):
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=5.0)
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.Error as exc:
            last = exc
            time.sleep(0.05 * (attempt + 1))
    raise ParseError(f"cannot open {db} read-only: {last}")


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


_MESSAGE_COLUMNS = (
    "id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name",
    "timestamp", "reasoning", "reasoning_content", "_compressed_summary", "display_kind",
)
_SESSION_COLUMNS = ("cwd", "parent_session_id", "source")


def _parse_db(path: Path, start: int, state: dict[str, Any] | None) -> ParseResult:
    st: dict[str, Any] = dict(state) if state else {}
    st["parser"] = "hermes"
    st["v"] = STATE_VERSION
    st["db"] = True
    turns: list[Turn] = []
    skipped: collections.Counter[str] = collections.Counter()
    conn = connect_readonly(path)
    source_path = os.path.abspath(path)
    project_cache: dict[str | None, str | None] = {}
    last_id = start
    try:
        mcols = _columns(conn, "messages")
        if not {"id", "session_id", "role"} <= mcols:
            raise ParseError(f"{path} has no Hermes messages table")
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
        tools = state_map(st, "tools")
        while True:
            rows = conn.execute(query, (last_id, _BATCH)).fetchall()
            if not rows:
                break
            for row in rows:
                rec = dict(zip(_MESSAGE_COLUMNS + _SESSION_COLUMNS, row, strict=True))
                msg_id = rec["id"]
                if not isinstance(msg_id, int):
                    skipped["missing-field"] += 1
                    continue
                last_id = msg_id
                turn = _db_turn(conn, rec, source_path, previous, tools, project_cache)
                if turn is None:
                    skipped["empty"] += 1
                else:
                    turns.append(turn)
            if len(rows) < _BATCH:
                break
    except sqlite3.Error as exc:
        raise ParseError(f"cannot read {path}: {exc}") from exc
    finally:
        conn.close()
    st["last_id"] = last_id
    return ParseResult(turns, skipped, last_id, st)


def _db_turn(
    conn: sqlite3.Connection,
    rec: dict[str, Any],
    source_path: str,
    previous: dict[str, str | None],
    tools: dict[str, Any],
    project_cache: dict[str | None, str | None],
) -> Turn | None:
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
        name = as_str(rec["tool_name"])
        if name is None and call_id:
            known = tools.get(call_id)
            name = known if isinstance(known, str) else None
        blocks.append(make_block("tool_result", content, tool_name=name, tool_call_id=call_id))
    else:
        if rec["_compressed_summary"]:
            reason: str | None = noise.COMPACTION
        elif rec["display_kind"] == "hidden":
            reason = noise.HIDDEN
        else:
            reason = noise.hermes_text_noise(role, content)
        blocks.append(make_block("text", content, noise=reason))
    for block, call_id, name in tool_call_blocks(rec["tool_calls"]):
        if call_id and name:
            bounded_put(tools, call_id, name, TOOL_MAP_LIMIT)
        blocks.append(block)
    kept = tuple(b for b in blocks if b is not None)
    if not kept:
        return None
    if session not in previous:
        row = conn.execute(
            "SELECT MAX(id) FROM messages WHERE session_id = ? AND id < ?",
            (rec["session_id"], msg_id),
        ).fetchone()
        previous[session] = f"{session}#{row[0]}" if row and row[0] is not None else None
    parent = previous[session]
    turn_id = f"{session}#{msg_id}"
    previous[session] = turn_id
    workdir = as_str(rec["cwd"])
    if workdir not in project_cache:
        from funes.ingest.project import project_identity

        project_cache[workdir] = project_identity(workdir)
    extra = {"platform": src} if (src := as_str(rec["source"])) else {}
    return Turn(
        harness=harness_literal("hermes"),
        session_id=session,
        turn_id=turn_id,
        seq=msg_id,
        ts=norm_ts(rec["timestamp"]) or "",
        role=role if role in ("user", "assistant", "tool", "system") else "system",
        blocks=kept,
        parent_turn_id=parent,
        workdir=workdir,
        project=project_cache[workdir],
        source=Source(source_path, msg_id, msg_id + 1),
        parent_session_id=as_str(rec["parent_session_id"]),
        extra=extra,
    )


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------


def _parse(path: Path, start: int, state: dict[str, Any] | None, final: bool) -> ParseResult:
    if is_sqlite(path):
        return _parse_db(path, start, state)
    return HermesJsonlParser(path, state).run(start, final)


def _cursor(path: Path) -> CursorKind:
    return "rowid" if is_sqlite(path) else "bytes"


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if records is None:
        if not is_sqlite(path):
            return False
        try:
            conn = connect_readonly(path, attempts=1)
        except ParseError:
            return False
        try:
            return {"id", "session_id", "role"} <= _columns(conn, "messages") and bool(
                _columns(conn, "sessions")
            )
        except sqlite3.Error:
            return False
        finally:
            conn.close()
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


SPEC = ParserSpec("hermes", _parse, _sniff, priority=10, cursor=_cursor)
