"""GitHub Copilot CLI: ``<COPILOT_HOME or ~/.copilot>/session-state/<session id>/events.jsonl``.

Copilot CLI (1.0.11 and later; flat ``session-state/<session id>.jsonl`` before) appends one
event per line: ``{type, data, id, timestamp, parentId}``, ``parentId`` linking each event to
the one before it. The first event is ``session.start`` (``data.sessionId``,
``data.context.cwd``, ``data.copilotVersion``). Conversation lives in:

* ``user.message``: ``data.content`` (the prompt as typed; ``transformedContent`` is what the
  model saw, with attachments expanded, and is not kept twice);
* ``assistant.message``: ``data.content``, ``data.reasoningText`` (reasoning, when not
  encrypted), ``data.toolRequests[]`` (``toolCallId``, ``name``, ``arguments`` as an object or
  a JSON string);
* ``tool.execution_complete``: ``data.toolCallId``, ``data.success``,
  ``data.result.content`` (or ``data.error``), the tool named by the request or by
  ``tool.execution_start``;
* ``assistant.reasoning``: a reasoning summary, kept as thinking;
* ``system.message``: the system prompt, kept as ``system`` noise; ``system.notification``
  (a background agent finished …) as ``meta`` noise;
* ``session.compaction_complete``/``session.summary``-like events with a summary: recaps,
  kept as ``compaction`` noise.

Decisions: ``turn_id`` is the event id (``<session>#<line index>`` when an id repeats, as in
trimmed or anonymised files) and ``parent_turn_id`` its ``parentId`` resolved
through events that carry no conversation (``assistant.turn_start``, ``session.info``,
``hook.start`` …), so parents point at turns. Lifecycle, telemetry and usage events
(``session.*``, ``assistant.turn_*``, ``hook.*``, ``tool.execution_start``) are counted as
``ignored:<type>``; event types not listed here are ``unknown-type:<type>`` (format drift).
"""

from __future__ import annotations

import contextlib
import json
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
    walk_files,
)
from funes.ingest.parsers.skeleton import Parser, Shape, parser_spec
from funes.model.turns import Block

#: Events that carry no conversation: lifecycle, telemetry, hooks.
_IGNORED_PREFIXES = ("session.", "assistant.turn_", "hook.", "subagent.", "skill.")
_IGNORED = frozenset({"tool.execution_start", "tool.execution_partial_result",
                      "assistant.message_delta", "assistant.reasoning_delta",
                      "assistant.usage", "pending_messages.modified", "abort"})
_SUMMARY_EVENTS = frozenset({"session.compaction_complete", "session.summary"})


def session_from_path(path: Path) -> str:
    """The session id a file's location implies (``<id>/events.jsonl`` or ``<id>.jsonl``)."""
    return path.parent.name if path.name == "events.jsonl" else path.stem


class CopilotParser(Parser):
    """Copilot CLI ``events.jsonl`` (per-session directory) and the older flat files."""

    harness = "copilot"
    repeats_ids = True  # trimmed and anonymised event files repeat event ids

    def default_session(self) -> str:
        """The session directory's name (or the flat file's)."""
        return session_from_path(self.path)

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """Turn one event into a turn, or remember it as a link and count it."""
        kind = record.get("type")
        data = as_dict(record.get("data"))
        if not isinstance(kind, str) or data is None:
            self.link_record(record)
            self.skip("missing-field")
            return
        if kind in ("session.start", "session.resume"):
            self._header(data)
        elif kind == "user.message":
            text = as_str(data.get("content")) or as_str(data.get("transformedContent")) or ""
            self._event(record, "user", [make_block("text", text)])
            return
        elif kind == "assistant.message":
            self._event(record, "assistant", self._assistant(data),
                        {"model": m} if (m := as_str(data.get("model"))) else None)
            return
        elif kind == "tool.execution_complete":
            self._event(record, "tool", [self._result(data)])
            return
        elif kind == "assistant.reasoning":
            text = as_str(data.get("content")) or ""
            self._event(record, "assistant", [make_block("thinking", text)])
            return
        elif kind in ("system.message", "system.notification"):
            text = as_str(data.get("content")) or ""
            reason = noise.SYSTEM if kind == "system.message" else noise.META
            self._event(record, "system", [make_block("text", text, noise=reason)])
            return
        elif kind in _SUMMARY_EVENTS:
            text = as_str(data.get("summary")) or as_str(data.get("summaryContent")) or ""
            if text:
                self._event(record, "system", [make_block("text", text, noise=noise.COMPACTION)])
                return
        if kind == "tool.execution_start":
            self.remember_tool(as_str(data.get("toolCallId")), as_str(data.get("toolName")))
        self.link_record(record)
        if kind in _IGNORED or kind.startswith(_IGNORED_PREFIXES):
            self.skip(f"ignored:{type_label(kind)}")
        else:
            self.skip(f"unknown-type:{type_label(kind)}")

    def _event(self, record: dict[str, Any], role: str, blocks: list[Block | None],
               extra: dict[str, str] | None = None) -> None:
        self.node_turn(record, role, blocks, ts=record.get("timestamp"), extra=extra)

    def _header(self, data: dict[str, Any]) -> None:
        session = as_str(data.get("sessionId"))
        if session and not self.state.get("session"):
            self.state["session"] = session
        context = as_dict(data.get("context")) or {}
        cwd = as_str(context.get("cwd")) or as_str(data.get("cwd"))
        if cwd:
            self.state["cwd"] = cwd
        if version := as_str(data.get("copilotVersion")):
            self.state["version"] = version
        self.ts(data.get("startTime"))

    def _assistant(self, data: dict[str, Any]) -> list[Block | None]:
        blocks: list[Block | None] = [
            make_block("thinking", as_str(data.get("reasoningText")) or ""),
            make_block("text", as_str(data.get("content")) or ""),
        ]
        for request in dicts(data.get("toolRequests")):
            call_id = as_str(request.get("toolCallId"))
            name = as_str(request.get("name"))
            self.remember_tool(call_id, name)
            arguments = request.get("arguments")
            if isinstance(arguments, str):
                with contextlib.suppress(ValueError):
                    arguments = json.loads(arguments)
            blocks.append(make_block("tool_use", render_json(arguments if arguments is not None
                                                             else {}),
                                     tool_name=name, tool_call_id=call_id))
        return blocks

    def _result(self, data: dict[str, Any]) -> Block | None:
        call_id = as_str(data.get("toolCallId"))
        result = as_dict(data.get("result")) or {}
        text = as_str(result.get("content"))
        if text is None:
            error = data.get("error")
            detail = as_dict(error)
            text = as_str(detail.get("message")) if detail is not None else as_str(error)
        telemetry = as_dict(data.get("toolTelemetry")) or {}
        properties = as_dict(telemetry.get("properties")) or {}
        name = self.tool_name_for(call_id) or as_str(properties.get("tool"))
        return make_block("tool_result", text or "", tool_name=name, tool_call_id=call_id)


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if not records:
        return False
    for rec in records[:5]:
        if not isinstance(rec, dict) or not isinstance(rec.get("data"), dict):
            return False
        kind = rec.get("type")
        if kind == "session.start" and rec["data"].get("producer") in ("copilot-agent", None):
            return "copilotVersion" in rec["data"] or rec["data"].get("producer") is not None
        if isinstance(kind, str) and kind.startswith(("user.message", "assistant.")):
            return "parentId" in rec
    return False


def locate(settings: Settings) -> list[Path]:
    """``session-state/<id>/events.jsonl`` and the older flat ``session-state/<id>.jsonl``."""
    state = settings.copilot_dir / "session-state"
    out = []
    for path in walk_files(state):
        rel = path.relative_to(state).parts
        if (len(rel) == 2 and rel[1] == "events.jsonl") or (
            len(rel) == 1 and path.suffix == ".jsonl"
        ):
            out.append(path)
    return sorted(out)


SPEC = parser_spec("copilot", _sniff, Shape(CopilotParser), priority=30, locate=locate)
