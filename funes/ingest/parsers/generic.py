"""The generic import (harness ``import``): OpenAI-style messages as JSONL or Parquet.

This is how any other agent joins funes; the format is specified for its authors in
``docs/import.md``. In short, each JSONL line (or Parquet row) is either

* **one message**: ``{"session_id", "role", "content", "tool_calls", "tool_call_id", "name",
  "timestamp", "id", "parent_id", "cwd"}`` (only ``role`` is required), or
* **one conversation**: ``{"session_id" | "id", "cwd", "timestamp", "messages": [message, …]}``
  (ShareGPT ``{"conversations": [{"from", "value"}]}`` is accepted too).

Ids: a message's ``id`` is its turn id; otherwise ``<session>#<line index>`` (message per line)
or ``<session>#<message index>`` (conversation per line). A message without a session id
belongs to the file's default session, ``import-<first 16 hex of sha256(first line)>``, so it
is a function of the content, not of the file name. A conversation without an id gets
``import-<sha256 of its line>``. ``parent_turn_id`` is ``parent_id`` when given, else the
previous message of the same session.

Parquet files are read with pyarrow (imported only here, only then). They have no appendable
byte offsets: ``start_offset``/``end_offset`` are row indexes and ``Source(path, row,
row + 1)`` names a row.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from funes.ingest import noise
from funes.ingest.parsers.base import (
    ParseError,
    ParseResult,
    as_dict,
    as_list,
    as_str,
    bounded_put,
    has_magic,
    state_map,
)
from funes.ingest.parsers.chat import emit_conversation, message_blocks
from funes.ingest.parsers.skeleton import FOLLOW, Parser, Shape, parser_spec

_ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}
#: Messages that are scaffolding by their role: a system prompt, developer instructions.
_ROLE_NOISE = {"system": noise.SYSTEM, "developer": noise.INSTRUCTIONS}
_SESSION_KEYS = ("session_id", "conversation_id", "thread_id")
_CWD_KEYS = ("cwd", "workdir")
_TS_KEYS = ("timestamp", "created_at", "ts", "time")


def _first_str(record: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = record.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def _first(record: dict[str, Any], keys: tuple[str, ...]) -> object:
    for key in keys:
        if record.get(key) is not None:
            return record[key]
    return None


class ImportParser(Parser):
    """JSONL of OpenAI-style messages or conversations."""

    harness = "import"
    chain = "session"  # a message answers the previous message of its session

    def file_session(self, raw: bytes) -> str:
        """The file's default session id, fixed by its first line's bytes."""
        session = as_str(self.state.get("default_session"))
        if not session:
            session = "import-" + hashlib.sha256(raw).hexdigest()[:16]
            self.state["default_session"] = session
        return session

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Like :meth:`Parser.run`, but fixes the default session from the first line."""
        if start == 0 and "default_session" not in self.state:
            try:
                with open(self.path, "rb") as f:
                    first = f.readline()
            except OSError as exc:
                raise ParseError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
            if first.endswith(b"\n") or (final and first):
                self.file_session(first.rstrip(b"\r\n"))
        return super().run(start, final)

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """A message, or a conversation of messages."""
        messages = as_list(record.get("messages"))
        conversations = as_list(record.get("conversations"))
        if messages is not None or conversations is not None:
            self._conversation(record, messages, conversations, start, end)
            return
        if as_str(record.get("role")) is None:
            self.skip("missing-field")
            return
        session = _first_str(record, _SESSION_KEYS) or self.file_session(b"")
        self._message(record, session, f"{session}#{index}", start, end, {})

    def _message(
        self,
        msg: dict[str, Any],
        session: str,
        fallback_id: str,
        start: int,
        end: int,
        context: dict[str, Any],
    ) -> bool:
        raw_role = as_str(msg.get("role")) or ""
        role = _ROLES.get(raw_role.lower())
        if role is None:
            self.skip(f"unknown-type:role:{raw_role[:32]}")
            return False
        cwd = _first_str(msg, _CWD_KEYS) or as_str(context.get("cwd"))
        if cwd:
            cwds = state_map(self.state, "cwd")
            bounded_put(cwds, session, cwd, 64)
        else:
            known = state_map(self.state, "cwd").get(session)
            cwd = known if isinstance(known, str) else None
        turn = self.emit(
            session_id=session,
            turn_id=_first_str(msg, ("id", "message_id")) or fallback_id,
            ts=self.ts(_first(msg, _TS_KEYS) or context.get("timestamp")),
            role=role,
            blocks=message_blocks(self, msg, role, _ROLE_NOISE.get(raw_role)),
            start=start,
            end=end,
            parent=_first_str(msg, ("parent_id", "parent_message_id")) or FOLLOW,
            workdir=cwd,
            parent_session_id=as_str(msg.get("parent_session_id"))
            or as_str(context.get("parent_session_id")),
        )
        return turn is not None

    def _conversation(
        self,
        record: dict[str, Any],
        messages: list[Any] | None,
        conversations: list[Any] | None,
        start: int,
        end: int,
    ) -> None:
        raw = json.dumps(record, sort_keys=True, ensure_ascii=False, default=str).encode()
        session = (
            _first_str(record, (*_SESSION_KEYS, "id"))
            or "import-" + hashlib.sha256(raw).hexdigest()[:16]
        )
        context = {
            "cwd": _first_str(record, _CWD_KEYS),
            "timestamp": _first(record, _TS_KEYS),
            "parent_session_id": as_str(record.get("parent_session_id")),
        }
        if messages is not None:
            if not messages:
                self.skip("empty")
            for i, item in enumerate(messages):
                msg = as_dict(item)
                if msg is None:
                    self.skip("not-an-object")
                    continue
                self._message(msg, session, f"{session}#{i}", start, end, context)
            return
        emit_conversation(self, session, conversations or [], ts=self.ts(context["timestamp"]),
                          workdir=as_str(context["cwd"]), start=start, end=end)


# --------------------------------------------------------------------------------------------
# Parquet
# --------------------------------------------------------------------------------------------


def is_parquet(path: Path) -> bool:
    """True if the file starts with Parquet's magic bytes."""
    return has_magic(path, b"PAR1")


def _decode_cells(row: dict[str, Any]) -> dict[str, Any]:
    """Parquet rows may hold nested JSON as text (``tool_calls``, ``messages``): decode it."""
    out = dict(row)
    for key in ("tool_calls", "messages", "conversations", "content", "function_call"):
        value = out.get(key)
        if isinstance(value, str) and value[:1] in ("[", "{") and key != "content":
            with contextlib.suppress(ValueError, RecursionError):
                out[key] = json.loads(value)
    return out


class ParquetImportParser(ImportParser):
    """A Parquet export: one message (or conversation) per row; offsets are row indexes."""

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Handle the rows from index ``start``; the default session comes from row 0."""
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
            raise ParseError("reading Parquet needs pyarrow", hint="pip install pyarrow") from exc
        try:
            pf = pq.ParquetFile(self.path)
        except (OSError, ValueError) as exc:
            raise ParseError(f"cannot read {self.path} as Parquet: {exc}") from exc
        row_index = 0
        end = start
        for batch in pf.iter_batches(batch_size=1024):
            rows: list[dict[str, Any]] = batch.to_pylist()
            for row in rows:
                if row_index == 0 and "default_session" not in self.state:
                    first = json.dumps(row, sort_keys=True, ensure_ascii=False, default=str)
                    self.file_session(first.encode())
                if row_index >= start:
                    self.state["n"] = row_index + 1
                    self.feed([(row_index, row_index, row_index + 1, _decode_cells(row))])
                    end = row_index + 1
                row_index += 1
        return self.result(end)


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if records is None:
        return is_parquet(path) or (path.suffix == ".parquet" and os.path.getsize(path) == 0)
    for rec in records:
        if not isinstance(rec, dict):
            continue
        if isinstance(rec.get("messages"), list):
            return True
        if isinstance(rec.get("conversations"), list):
            return True
        if isinstance(rec.get("role"), str) and "content" in rec and "type" not in rec:
            return True
    return False


SPEC = parser_spec(
    "import", _sniff, Shape(ParquetImportParser, is_parquet, "rows"), Shape(ImportParser),
    priority=90,
)
