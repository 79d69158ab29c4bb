"""OpenCode: ``<XDG_DATA_HOME or ~/.local/share>/opencode/opencode.db`` and the older JSON tree.

OpenCode (anomalyco/opencode, formerly sst/opencode) keeps sessions in two generations:

* **SQLite** (1.2 and later, drizzle schema in ``packages/opencode/src/session/session.sql.ts``):
  ``session(id, project_id, parent_id, directory, title, version, time_created, …)``,
  ``message(id, session_id, time_created, time_updated, data)`` and
  ``part(id, message_id, session_id, time_created, time_updated, data)``, ``data`` being the
  JSON of ``MessageV2.Info`` / ``MessageV2.Part`` without their ids. Opened read-only through
  a ``file:…?mode=ro`` URI (WAL-safe while OpenCode writes). Incremental by the message
  table's rowid: ``start_offset``/``end_offset`` are the last rowid read.
* **JSON files** (before 1.2): ``storage/session/<project>/<session>.json``,
  ``storage/message/<session>/<message>.json`` and ``storage/part/<message>/<part>.json``
  (some versions nest parts under ``part/<session>/<message>/``). The source is the session
  file; the whole session is read again when it changes (``rows`` cursor). A session the
  database already holds is not listed twice (funes.ingest.sources).

A message is one turn (``turn_id`` = message id, ``parent_turn_id`` = ``data.parentID`` for
an answer, else the session's previous message). Its parts become blocks: ``text`` (``synthetic``
text is OpenCode's own injection: ``meta`` noise; ``ignored`` parts are dropped), ``reasoning``
(thinking), ``tool`` (a ``tool_use`` with ``state.input`` and a ``tool_result`` with
``state.output`` or ``state.error``), ``file`` (a placeholder), ``subtask``/``agent`` (the
delegated prompt, text), ``compaction`` (noise). ``step-start``, ``step-finish``,
``snapshot``, ``patch`` and ``retry`` carry no conversation.

A message still being written is not read yet: an assistant message without
``time.completed`` or ``error``, or a message without parts, that is the newest of its session
and was updated in the last ``SETTLE_MS``. The read stops before it and resumes there.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.ingest import noise
from funes.ingest.parsers.base import (
    ParseError,
    ParseResult,
    as_dict,
    as_str,
    is_sqlite,
    make_block,
    norm_ts,
    read_json_file,
    render_json,
    sqlite_schema,
    store_and_older,
    type_label,
    walk_files,
)
from funes.ingest.parsers.skeleton import Parser, Shape, SqliteParser, parser_spec
from funes.model.turns import Block, Source

#: A message untouched for this long is read even if it never completed (a crash, a kill).
SETTLE_MS = 10 * 60 * 1000
_BATCH = 500
_NO_CONVERSATION = frozenset({"step-start", "step-finish", "snapshot", "patch", "retry"})
#: Largest JSON file of the old tree read (messages and parts are small; a bound all the same).
MAX_JSON_BYTES = 64 << 20


def part_blocks(part: dict[str, Any], skipped: collections.Counter[str]) -> list[Block | None]:
    """The blocks of one part (see the module docstring)."""
    kind = part.get("type")
    if kind == "text":
        if part.get("ignored") is True:
            skipped["ignored:part:ignored-text"] += 1
            return []
        reason = noise.META if part.get("synthetic") is True else None
        return [make_block("text", as_str(part.get("text")) or "", noise=reason)]
    if kind == "reasoning":
        return [make_block("thinking", as_str(part.get("text")) or "")]
    if kind == "tool":
        state = as_dict(part.get("state")) or {}
        name = as_str(part.get("tool"))
        call_id = as_str(part.get("callID"))
        output = as_str(state.get("output"))
        if output is None:
            output = as_str(state.get("error")) or ""
        return [
            make_block("tool_use", render_json(state.get("input", {})), tool_name=name,
                       tool_call_id=call_id),
            make_block("tool_result", output, tool_name=name, tool_call_id=call_id),
        ]
    if kind == "file":
        label = as_str(part.get("filename")) or as_str(part.get("url")) or ""
        if label.startswith("data:"):
            label = noise.image_placeholder(as_str(part.get("mime")), label)
        return [make_block("text", f"[file {as_str(part.get('mime')) or ''} {label}]",
                           noise=noise.IMAGE if label.startswith("[") else None)]
    if kind == "subtask":
        return [make_block("text", as_str(part.get("prompt")) or "")]
    if kind == "agent":
        return [make_block("text", f"@{as_str(part.get('name')) or ''}", noise=noise.META)]
    if kind == "compaction":
        return [make_block("text", "[compaction]", noise=noise.COMPACTION)]
    if isinstance(kind, str) and kind in _NO_CONVERSATION:
        skipped[f"ignored:part:{kind}"] += 1
        return []
    skipped[f"unknown-type:part:{type_label(kind)}"] += 1
    return []


class _Messages(Parser):
    """What both OpenCode readers share: one message and its parts → one turn."""

    harness = "opencode"

    def message(
        self,
        info: dict[str, Any],
        parts: list[dict[str, Any]],
        *,
        message_id: str,
        session_id: str,
        session: dict[str, Any],
        previous: str | None,
        seq: int,
        source: Source,
    ) -> None:
        """Emit the turn of one message (nothing, with the reason counted, when none is left)."""
        role = as_str(info.get("role")) or ""
        if role not in ("user", "assistant"):
            self.skip(f"unknown-type:message:{type_label(role)}")
            return
        blocks: list[Block | None] = []
        for part in parts:
            blocks += part_blocks(part, self.skipped)
        error = as_dict(info.get("error"))
        if error is not None and role == "assistant":
            data = as_dict(error.get("data")) or {}
            text = as_str(data.get("message")) or as_str(error.get("name")) or ""
            blocks.append(make_block("text", text, noise=noise.API_ERROR))
        times = as_dict(info.get("time")) or {}
        path = as_dict(info.get("path")) or {}
        extra: dict[str, str] = {}
        if model := as_str(info.get("modelID")):
            extra["model"] = model
        if title := as_str(session.get("title")):
            extra["title"] = title
        parent = as_str(info.get("parentID")) if role == "assistant" else None
        self.emit(
            session_id=session_id,
            turn_id=message_id,
            ts=norm_ts(times.get("created")) or "",
            role=role,
            blocks=blocks,
            start=source.start,
            end=source.end,
            parent=parent or previous,
            workdir=as_str(path.get("cwd")) or as_str(session.get("directory")),
            parent_session_id=as_str(session.get("parent_id")) or as_str(session.get("parentID")),
            extra=extra,
            seq=seq,
            source=source,
        )


def _unsettled(info: dict[str, Any], parts: int, updated: object, now_ms: int) -> bool:
    """A message OpenCode may still be writing (see the module docstring)."""
    recent = isinstance(updated, int | float) and now_ms - updated < SETTLE_MS
    if not recent:
        return False
    if parts == 0:
        return True
    times = as_dict(info.get("time")) or {}
    return info.get("role") == "assistant" and not times.get("completed") and not info.get("error")


def _loads(raw: object) -> dict[str, Any] | None:
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str):
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


# --------------------------------------------------------------------------------------------
# opencode.db
# --------------------------------------------------------------------------------------------


class OpencodeDbParser(SqliteParser, _Messages):
    """``opencode.db``, resumed by the message table's rowid."""

    def read(self, conn: sqlite3.Connection, start: int) -> int:
        """The messages after rowid ``start``, stopping before one still being written."""
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"session", "message", "part"} <= tables:
            raise ParseError(f"{self.path} has no OpenCode session tables")
        last = start
        now_ms = int(time.time() * 1000)
        sessions: dict[str, dict[str, Any]] = {}
        previous: dict[str, str | None] = {}
        while True:
            rows = conn.execute(
                "SELECT rowid, id, session_id, time_updated, data FROM message "
                "WHERE rowid > ? ORDER BY rowid LIMIT ?", (last, _BATCH)).fetchall()
            for rowid, msg_id, session_id, updated, data in rows:
                info = _loads(data)
                if info is None or not isinstance(msg_id, str) or not isinstance(session_id, str):
                    self.skip("invalid-json" if info is None else "missing-field")
                    last = rowid
                    continue
                parts = [p for p in (_loads(r[0]) for r in conn.execute(
                    "SELECT data FROM part WHERE message_id = ? ORDER BY id", (msg_id,)))
                    if p is not None]
                newest = conn.execute(
                    "SELECT 1 FROM message WHERE session_id = ? AND rowid > ? LIMIT 1",
                    (session_id, rowid)).fetchone() is None
                if newest and _unsettled(info, len(parts), updated, now_ms):
                    return last
                last = rowid
                if session_id not in sessions:
                    sessions[session_id] = _db_session(conn, session_id)
                    row = conn.execute(
                        "SELECT id FROM message WHERE session_id = ? AND rowid < ? "
                        "ORDER BY rowid DESC LIMIT 1", (session_id, rowid)).fetchone()
                    previous[session_id] = row[0] if row else None
                self.message(info, parts, message_id=msg_id, session_id=session_id,
                             session=sessions[session_id], previous=previous[session_id],
                             seq=rowid, source=Source(self.source_path, rowid, rowid + 1))
                previous[session_id] = msg_id
            if len(rows) < _BATCH:
                return last


def _db_session(conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
    cols = [str(r[1]) for r in conn.execute("PRAGMA table_info(session)")]
    wanted = [c for c in ("directory", "title", "parent_id") if c in cols]
    if not wanted:
        return {}
    row = conn.execute(f"SELECT {', '.join(wanted)} FROM session WHERE id = ?",
                       (session_id,)).fetchone()
    return dict(zip(wanted, row, strict=True)) if row else {}


# --------------------------------------------------------------------------------------------
# The JSON tree (before 1.2)
# --------------------------------------------------------------------------------------------


def _read_json(path: Path, skipped: collections.Counter[str]) -> dict[str, Any] | None:
    value, reason = read_json_file(path, MAX_JSON_BYTES)
    if isinstance(value, dict):
        return value
    skipped[reason or "invalid-json"] += 1
    return None


def storage_root(session_file: Path) -> Path | None:
    """``storage/`` for ``storage/session/<project>/<session>.json``."""
    if session_file.parent.parent.name == "session":
        return session_file.parent.parent.parent
    return None


class OpencodeTreeParser(_Messages):
    """A session of the JSON tree, read whole whenever it changes (``rows`` cursor)."""

    rereads_whole = True

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Every settled message of the session; the count of messages as the offset."""
        session = _read_json(self.path, self.skipped)
        root = storage_root(self.path)
        if session is None or root is None:
            if root is None:
                self.skip("missing-field")
            return self.result(0)
        session_id = as_str(session.get("id")) or self.path.stem
        infos: list[tuple[str, dict[str, Any], Path]] = []
        for file in sorted((root / "message" / session_id).glob("*.json")):
            info = _read_json(file, self.skipped)
            if info is not None:
                infos.append((as_str(info.get("id")) or file.stem, info, file))
        infos.sort(key=lambda m: (_created(m[1]), m[0]))
        previous: str | None = None
        now_ms = int(time.time() * 1000)
        flat: dict[str, list[dict[str, Any]]] | None = None
        for seq, (msg_id, info, file) in enumerate(infos):
            part_files = sorted((root / "part" / msg_id).glob("*.json")) or sorted(
                (root / "part" / session_id / msg_id).glob("*.json"))
            parts = [p for p in (_read_json(f, self.skipped) for f in part_files) if p is not None]
            if not part_files:
                if flat is None:
                    flat = _flat_parts(root, self.skipped)
                parts = flat.get(msg_id, [])
            parts.sort(key=lambda p: as_str(p.get("id")) or "")
            if seq == len(infos) - 1 and _unsettled(info, len(parts), _updated(info, parts),
                                                    now_ms):
                break
            self.message(info, parts, message_id=msg_id, session_id=session_id, session=session,
                         previous=previous, seq=seq, source=Source(os.path.abspath(file), 0, 0))
            previous = msg_id
        return self.result(len(infos))


def _flat_parts(root: Path, skipped: collections.Counter[str]) -> dict[str, list[dict[str, Any]]]:
    """Parts stored flat as ``part/<part>.json`` (early versions), by message id."""
    out: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for file in sorted((root / "part").glob("*.json")):
        part = _read_json(file, skipped)
        if part is not None and isinstance(part.get("messageID"), str):
            out[part["messageID"]].append(part)
    return out


def _updated(info: dict[str, Any], parts: list[dict[str, Any]]) -> float:
    """The newest time a message or its parts carry (ms): a JSON file's own clock."""
    times = [_created(info)]
    msg_time = as_dict(info.get("time")) or {}
    for value in (msg_time.get("completed"),):
        if isinstance(value, int | float):
            times.append(float(value))
    for part in parts:
        part_time = as_dict(part.get("time")) or as_dict(
            (as_dict(part.get("state")) or {}).get("time")) or {}
        for key in ("start", "end"):
            if isinstance(part_time.get(key), int | float):
                times.append(float(part_time[key]))
    return max(times)


def _created(info: dict[str, Any]) -> float:
    created = (as_dict(info.get("time")) or {}).get("created")
    return float(created) if isinstance(created, int | float) else 0.0


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if is_sqlite(path):
        tables = sqlite_schema(path)
        return {"session", "message", "part"} <= set(tables) and {"session_id", "data"} <= \
            tables["message"]
    if path.suffix != ".json" or storage_root(path) is None:
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return '"id"' in head and ('"projectID"' in head or '"directory"' in head)


def locate(settings: Settings) -> list[Path]:
    """``opencode.db`` and the older JSON sessions it does not already hold."""
    sessions = settings.opencode_data_dir / "storage" / "session"
    older = [p for p in walk_files(sessions) if p.suffix == ".json" and p.parent.parent == sessions]
    return store_and_older(settings.opencode_data_dir / "opencode.db",
                           "SELECT id FROM session", sorted(older))


SPEC = parser_spec(
    "opencode", _sniff,
    Shape(OpencodeDbParser, is_sqlite, "rowid"), Shape(OpencodeTreeParser, cursor="rows"),
    priority=20, locate=locate,
)
