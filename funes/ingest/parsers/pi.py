"""pi sessions: ``~/.pi/agent/sessions/<cwd slug>/<timestamp>_<uuid>.jsonl``.

The first line is the header ``{type: session, version, id, timestamp, cwd}`` (``version`` is
absent in v1). Conversation is in ``type: message`` entries whose ``message.role`` is
``user``, ``assistant``, ``toolResult`` (``toolCallId``, ``toolName``), ``bashExecution``
(a ``!command`` the user ran), ``custom``/``hookMessage`` (extension messages),
``branchSummary`` or ``compactionSummary``; content parts are ``text``, ``thinking``,
``toolCall`` (``id``, ``name``, ``arguments``) and ``image`` (base64).

Decisions:

* **v2/v3 trees.** Entries carry ``id``/``parentId``; ``turn_id`` is the entry id and
  ``parent_turn_id`` its ``parentId`` resolved through non-message entries
  (``model_change``, ``thinking_level_change``, ``label``…), so parents point at turns.
  Branches are kept as they are: every entry is a turn, its parent says which branch.
* **v1.** Linear, no ids: ``turn_id = "<session id>#<line index>"``, parent = previous turn.
* ``compaction`` and ``branch_summary`` entries become ``system`` turns tagged as noise
  (their summaries are recaps, not new words); ``custom_message`` entries are extension
  output (``extension``); ``custom``, ``label``, ``session_info`` and settings changes carry
  no conversation.
* A forked session's header names its parent file (``parentSession``); the uuid in that file
  name becomes ``parent_session_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.ingest import noise
from funes.ingest.parsers.base import (
    as_dict,
    as_str,
    dicts,
    make_block,
    render_json,
    type_label,
    uuid_in_name,
    walk_files,
)
from funes.ingest.parsers.skeleton import Parser, Shape, parser_spec
from funes.model.turns import Block

_IGNORED = frozenset(
    {"model_change", "thinking_level_change", "custom", "label", "session_info"}
)
_ROLE_MAP = {
    "user": "user",
    "assistant": "assistant",
    "toolResult": "tool",
    "bashExecution": "user",
    "custom": "system",
    "hookMessage": "system",
    "branchSummary": "system",
    "compactionSummary": "system",
}


class PiParser(Parser):
    """pi session files, format v1 (linear) and v2/v3 (trees)."""

    harness = "pi"
    chain = "file"  # v1 is linear; v2/v3 entries name their parent

    def default_session(self) -> str:
        """The uuid in the session file's name."""
        return uuid_in_name(self.path)

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """Turn one pi entry into a turn, or remember it as a tree link and skip it."""
        kind = self.kind(record)
        if kind is None:
            return
        if kind == "session":
            self._header(record)
            return
        if kind == "message":
            message = as_dict(record.get("message"))
            if message is None:
                self.link_record(record)
                self.skip("missing-field")
                return
            self._message(record, message)
        elif kind in ("compaction", "branch_summary"):
            reason = noise.COMPACTION if kind == "compaction" else noise.BRANCH_SUMMARY
            text = as_str(record.get("summary")) or ""
            block = make_block("text", text, noise=reason)
            self._emit(record, "system", [block])
        elif kind == "custom_message":
            blocks = self._content_blocks(record.get("content"), noise.EXTENSION)
            extra = {"custom_type": ct} if (ct := as_str(record.get("customType"))) else None
            self._emit(record, "system", blocks, extra)
        else:
            self.link_record(record)
            label = type_label(kind)
            self.skip(f"ignored:{label}" if kind in _IGNORED else f"unknown-type:{label}")

    def _header(self, record: dict[str, Any]) -> None:
        if not self.state.get("session"):
            session = as_str(record.get("id"))
            if session:
                self.state["session"] = session
            version = record.get("version")
            self.state["version"] = version if isinstance(version, int) else 1
            parent = as_str(record.get("parentSession"))
            if parent:
                self.state["parent_session"] = uuid_in_name(Path(parent))
        cwd = as_str(record.get("cwd"))
        if cwd:
            self.state["cwd"] = cwd
        self.ts(record.get("timestamp"))
        self.skip("ignored:session")

    # -- messages -----------------------------------------------------------------------------

    def _message(self, record: dict[str, Any], message: dict[str, Any]) -> None:
        role = as_str(message.get("role")) or ""
        turn_role = _ROLE_MAP.get(role)
        if turn_role is None:
            self.link_record(record)
            self.skip(f"unknown-type:message:{type_label(role)}")
            return
        blocks: list[Block | None]
        extra: dict[str, str] | None = None
        if role == "toolResult":
            call_id = as_str(message.get("toolCallId"))
            name = as_str(message.get("toolName")) or self.tool_name_for(call_id)
            text = "\n".join(self._content_texts(message.get("content")))
            blocks = [make_block("tool_result", text, tool_name=name, tool_call_id=call_id)]
        elif role == "bashExecution":
            command = as_str(message.get("command")) or ""
            output = as_str(message.get("output")) or ""
            blocks = [
                make_block("tool_use", render_json({"command": command}), tool_name="bash"),
                make_block("tool_result", output, tool_name="bash"),
            ]
        elif role in ("branchSummary", "compactionSummary"):
            reason = noise.COMPACTION if role == "compactionSummary" else noise.BRANCH_SUMMARY
            blocks = [make_block("text", as_str(message.get("summary")) or "", noise=reason)]
        elif role in ("custom", "hookMessage"):
            blocks = list(self._content_blocks(message.get("content"), noise.EXTENSION))
            if ct := as_str(message.get("customType")):
                extra = {"custom_type": ct}
        else:
            blocks = list(self._content_blocks(message.get("content"), None))
        if role == "assistant" and (model := as_str(message.get("model"))):
            extra = {"model": model}
        self._emit(record, turn_role, blocks, extra)

    def _content_texts(self, content: object) -> list[str]:
        if isinstance(content, str):
            return [content]
        texts: list[str] = []
        for p in dicts(content):
            if p.get("type") == "text" and isinstance(p.get("text"), str):
                texts.append(p["text"])
            elif p.get("type") == "image":
                texts.append(
                    noise.image_placeholder(as_str(p.get("mimeType")), as_str(p.get("data")))
                )
        return texts

    def _content_blocks(self, content: object, reason: str | None) -> list[Block]:
        blocks: list[Block | None] = []
        if isinstance(content, str):
            blocks.append(make_block("text", content, noise=reason))
        for p in dicts(content):
            kind = p.get("type")
            if kind == "text":
                blocks.append(make_block("text", as_str(p.get("text")) or "", noise=reason))
            elif kind == "thinking":
                blocks.append(make_block("thinking", as_str(p.get("thinking")) or ""))
            elif kind == "toolCall":
                call_id = as_str(p.get("id"))
                name = as_str(p.get("name"))
                self.remember_tool(call_id, name)
                blocks.append(
                    make_block(
                        "tool_use",
                        render_json(p.get("arguments", {})),
                        tool_name=name,
                        tool_call_id=call_id,
                    )
                )
            elif kind == "image":
                text = noise.image_placeholder(as_str(p.get("mimeType")), as_str(p.get("data")))
                blocks.append(make_block("text", text, noise=noise.IMAGE))
        return [b for b in blocks if b is not None]

    def _emit(self, record: dict[str, Any], role: str, blocks: Sequence[Block | None],
              extra: dict[str, str] | None = None) -> None:
        message = as_dict(record.get("message")) or {}
        ts = record.get("timestamp") or message.get("timestamp")
        self.node_turn(record, role, blocks, ts=ts, extra=extra)


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if not records:
        return False
    first = records[0]
    if isinstance(first, dict) and first.get("type") == "session" and "cwd" in first:
        return True
    for rec in records:
        if not isinstance(rec, dict):
            continue
        msg = rec.get("message")
        if rec.get("type") == "message" and isinstance(msg, dict) and (
            msg.get("role") in ("toolResult", "bashExecution")
            or "parentId" in rec
        ):
            return True
        if rec.get("type") in ("model_change", "thinking_level_change") and "sessionId" not in rec:
            return True
    return False


def locate(settings: Settings) -> list[Path]:
    """Sessions under ``<PI_CODING_AGENT_DIR or ~/.pi/agent>/sessions`` (any depth)."""
    return sorted(p for p in walk_files(settings.pi_home / "sessions") if p.suffix == ".jsonl")


SPEC = parser_spec("pi", _sniff, Shape(PiParser), priority=40, locate=locate)
