"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``.

Two generations share this parser:

* **Current** (envelopes): ``{timestamp, type, payload}`` with ``type`` ``session_meta``
  (session id, cwd, cli version, parent thread for subagents), ``turn_context`` (cwd per
  turn), ``response_item`` (the conversation: ``message``, ``reasoning``, ``function_call``,
  ``custom_tool_call``, ``local_shell_call``, ``web_search_call``, ``*_output``),
  ``event_msg`` (UI events) and ``compacted``.
* **Legacy 2025** (no envelopes): a first line ``{id, timestamp, instructions}``, then bare
  items (``message``, ``function_call``, ``reasoning``…) and ``{record_type: state}`` lines.

Decisions:

* **Ids.** Items carry no usable ids, so ``turn_id = "<session id>#<line index>"``; the session
  id is ``session_meta.id`` (first one in the file; later ones, written by forks and resumes,
  are ignored), the legacy first line's ``id``, else the uuid in the file name.
  ``parent_turn_id`` is the previous turn (rollouts are linear).
* **One turn per item.** A tool call, its output and each message are separate turns, with
  roles ``assistant`` (calls, reasoning, replies), ``tool`` (outputs), ``user`` and ``system``
  (``developer`` instructions).
* **event_msg duplicates.** ``user_message``/``agent_message``/``agent_reasoning`` events
  repeat response items, in either order. Both are candidates; the second copy of the same
  (role, text) within a small window is dropped as ``duplicate``. Rollouts that only have the
  events (trimmed or very old) therefore still yield their conversation.
* **Tool calls.** ``function_call`` text is its ``arguments`` string verbatim; outputs that
  are the legacy ``{"output": …, "metadata": …}`` JSON are unwrapped to the output text.
* **Reasoning.** Summary and raw reasoning text become ``thinking``; encrypted-only
  reasoning has nothing to index and is counted as ``empty``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.ingest import noise
from funes.ingest.parsers.base import (
    as_dict,
    as_str,
    bounded_put,
    dicts,
    make_block,
    render_json,
    state_map,
    type_label,
    uuid_in_name,
    walk_files,
)
from funes.ingest.parsers.skeleton import Parser, Shape, parser_spec
from funes.model.turns import Block, BlockType

_ENVELOPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
_LEGACY_ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)
_CALL_TYPES = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "tool_search_call"}
)
_OUTPUT_TYPES = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
)
#: response_item payloads that are known and carry nothing to index.
_IGNORED_ITEMS = frozenset({"ghost_snapshot", "tool_search_output", "image_generation_call"})
_EVENT_TURNS = frozenset({"user_message", "agent_message", "agent_reasoning"})
_DEDUPE_WINDOW = 64


def _parts_text(content: object) -> list[tuple[str, str]]:
    """(kind, text) per content part: kind ``text`` or ``image``."""
    if isinstance(content, str):
        return [("text", content)]
    out: list[tuple[str, str]] = []
    for p in dicts(content):
        kind = p.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            text = as_str(p.get("text"))
            if text is not None:
                out.append(("text", text))
        elif kind in ("input_image", "image"):
            url = as_str(p.get("image_url"))
            if url and url.startswith("data:"):
                out.append(("image", noise.elide_base64(url)))
            else:
                out.append(("image", noise.image_placeholder("image", None)))
    return out


def _output_text(output: object) -> str:
    """Text of a tool output: a string (legacy JSON envelopes unwrapped) or content parts."""
    if isinstance(output, str):
        stripped = output.lstrip()
        if stripped.startswith("{") and '"output"' in output:
            try:
                decoded = json.loads(output)
            except (ValueError, RecursionError):
                return output
            if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
                return str(decoded["output"])
        return output
    single = as_dict(output)
    if single is not None:
        if isinstance(single.get("text"), str):
            return str(single["text"])
        if isinstance(single.get("output"), str):
            return str(single["output"])
        if isinstance(single.get("content"), list):
            output = single["content"]
    return "\n".join(text for _, text in _parts_text(output))


class CodexParser(Parser):
    """Codex rollouts, current and legacy."""

    harness = "codex"
    chain = "file"  # rollouts are linear: each turn follows the one before

    def default_session(self) -> str:
        """The uuid in the rollout's file name."""
        return uuid_in_name(self.path)

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """Dispatch one rollout line by its envelope (or, for legacy files, item) type."""
        kind = record.get("type")
        if kind is not None and not isinstance(kind, str):
            self.skip(f"unknown-type:{type_label(kind)}")
            return
        if kind in _ENVELOPES:
            self._envelope(kind, record)
            return
        if kind is None:
            if "record_type" in record:
                self.skip(f"ignored:record_type:{type_label(record.get('record_type'))}")
            elif "id" in record and ("instructions" in record or "timestamp" in record):
                self._legacy_meta(record)
            else:
                self.skip("missing-field")
            return
        if kind in _LEGACY_ITEMS:
            self.state["legacy"] = True
            self._item(kind, record, record.get("timestamp"))
            return
        self.skip(f"unknown-type:{type_label(kind)}")

    def _legacy_meta(self, record: dict[str, Any]) -> None:
        session = as_str(record.get("id"))
        if session and not self.state.get("session"):
            self.state["session"] = session
        self.ts(record.get("timestamp"))
        self.state["legacy"] = True
        self.skip("ignored:legacy-meta")

    def _envelope(self, kind: str, record: dict[str, Any]) -> None:
        payload = as_dict(record.get("payload"))
        if payload is None:
            self.skip("missing-field")
            return
        if kind == "session_meta":
            self._session_meta(payload, record)
        elif kind == "turn_context":
            cwd = as_str(payload.get("cwd"))
            if cwd:
                self.state["cwd"] = cwd
            self.ts(record.get("timestamp"))
            self.skip("ignored:turn_context")
        elif kind == "response_item":
            item_type = payload.get("type")
            self._item(item_type if isinstance(item_type, str) else "", payload,
                       record.get("timestamp"))
        elif kind == "event_msg":
            self._event(payload, record.get("timestamp"))
        else:  # compacted
            self._compacted(payload, record.get("timestamp"))

    def _session_meta(self, payload: dict[str, Any], record: dict[str, Any]) -> None:
        if not self.state.get("session"):
            session = as_str(payload.get("id")) or as_str(payload.get("session_id"))
            if session:
                self.state["session"] = session
            cwd = as_str(payload.get("cwd"))
            if cwd:
                self.state["cwd"] = cwd
            parent = as_str(payload.get("parent_thread_id"))
            source = as_dict(payload.get("source"))
            if parent is None and source is not None:
                sub = as_dict(source.get("subagent")) or {}
                spawn = as_dict(sub.get("thread_spawn")) or {}
                parent = as_str(spawn.get("parent_thread_id"))
            if parent:
                self.state["parent_session"] = parent
            self.ts(payload.get("timestamp") or record.get("timestamp"))
            self.skip("ignored:session_meta")
        else:
            self.skip("ignored:session_meta-repeat")

    # -- items -------------------------------------------------------------------------------

    def _item(self, item_type: str, item: dict[str, Any], timestamp: object) -> None:
        if item_type == "message":
            self._message(item, timestamp)
        elif item_type == "reasoning":
            texts = [t for _, t in _parts_text(item.get("summary"))]
            texts += [t for _, t in _parts_text(item.get("content"))]
            text = "\n\n".join(t for t in texts if t.strip())
            if text and self._is_duplicate("response", "thinking", text):
                return
            self.turn("assistant", [make_block("thinking", text)], ts=timestamp)
        elif item_type in _CALL_TYPES or item_type == "web_search_call":
            self._call(item_type, item, timestamp)
        elif item_type in _OUTPUT_TYPES:
            call_id = as_str(item.get("call_id"))
            block = make_block(
                "tool_result",
                _output_text(item.get("output")),
                tool_name=self.tool_name_for(call_id),
                tool_call_id=call_id,
            )
            self.turn("tool", [block], ts=timestamp)
        elif item_type == "agent_message":
            text = "\n".join(t for k, t in _parts_text(item.get("content")) if k == "text")
            extra = {
                k: v for k in ("author", "recipient") if (v := as_str(item.get(k))) is not None
            }
            self.turn("assistant", [make_block("text", text)], ts=timestamp, extra=extra)
        elif item_type in _IGNORED_ITEMS:
            self.skip(f"ignored:response_item:{item_type}")
        else:
            self.skip(f"unknown-type:response_item:{type_label(item_type)}")

    def _message(self, item: dict[str, Any], timestamp: object) -> None:
        role = as_str(item.get("role")) or ""
        parts = _parts_text(item.get("content"))
        text_only = "\n".join(t for k, t in parts if k == "text")
        if (
            role in ("user", "assistant")
            and text_only.strip()
            and self._is_duplicate("response", role, text_only)
        ):
            return
        blocks: list[Block | None] = []
        for kind, text in parts:
            if kind == "image":
                blocks.append(make_block("text", text, noise=noise.IMAGE))
                continue
            reason = noise.codex_text_noise(role, text)
            if reason == noise.ENVIRONMENT and not self.state.get("cwd"):
                cwd = noise.codex_environment_cwd(text)
                if cwd:
                    self.state["cwd"] = cwd
            blocks.append(make_block("text", text, noise=reason))
        turn_role = {"developer": "system", "system": "system", "assistant": "assistant"}.get(
            role, "user"
        )
        extra = {"phase": phase} if (phase := as_str(item.get("phase"))) else None
        self.turn(turn_role, blocks, ts=timestamp, extra=extra)

    def _call(self, item_type: str, item: dict[str, Any], timestamp: object) -> None:
        call_id = as_str(item.get("call_id"))
        if item_type == "web_search_call":
            name: str | None = "web_search"
            body: object = item.get("action", {})
        elif item_type == "local_shell_call":
            name = "local_shell"
            body = item.get("action", {})
        elif item_type == "tool_search_call":
            name = "tool_search"
            body = item.get("arguments", {})
        else:
            name = as_str(item.get("name"))
            namespace = as_str(item.get("namespace"))
            if name and namespace:
                name = f"{namespace}.{name}"
            body = item.get("arguments") if item_type == "function_call" else item.get("input")
        self.remember_tool(call_id, name)
        text = render_json(body) if body is not None else ""
        block = make_block("tool_use", text, tool_name=name, tool_call_id=call_id)
        self.turn("assistant", [block], ts=timestamp)

    def _event(self, payload: dict[str, Any], timestamp: object) -> None:
        sub = as_str(payload.get("type"))
        if sub not in _EVENT_TURNS:
            self.skip(f"ignored:event_msg:{type_label(sub)}")
            return
        block_type: BlockType
        if sub == "agent_reasoning":
            role, block_type = "thinking", "thinking"
            text = as_str(payload.get("text")) or ""
        else:
            role = "user" if sub == "user_message" else "assistant"
            block_type = "text"
            text = as_str(payload.get("message")) or ""
        if not text.strip():
            self.skip("empty")
            return
        if self._is_duplicate("event", role, text):
            return
        turn_role = "user" if role == "user" else "assistant"
        self.turn(turn_role, [make_block(block_type, text)], ts=timestamp)

    def _compacted(self, payload: dict[str, Any], timestamp: object) -> None:
        text = as_str(payload.get("message")) or ""
        if not text.strip():
            self.skip("ignored:compacted")
            return
        block = make_block("text", text, noise=noise.COMPACTION)
        self.turn("system", [block], ts=timestamp)

    # -- shared ------------------------------------------------------------------------------

    def _is_duplicate(self, source: str, role: str, text: str) -> bool:
        """True (and counted) if another source already wrote this (role, text)."""
        key = hashlib.sha1(f"{role}\x00{text.strip()}".encode(), usedforsecurity=False)
        digest = key.hexdigest()[:16]
        window = state_map(self.state, "dedupe")
        seen = window.get(digest)
        if isinstance(seen, list) and seen and source not in seen:
            seen.append(source)
            bounded_put(window, digest, seen, _DEDUPE_WINDOW)
            self.skip("duplicate")
            return True
        bounded_put(window, digest, [source], _DEDUPE_WINDOW)
        return False


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if not records:
        return False
    first = records[0]
    if isinstance(first, dict) and first.get("type") is None and "instructions" in first:
        return True  # legacy first line
    for rec in records:
        if not isinstance(rec, dict):
            continue
        if as_str(rec.get("type")) in _ENVELOPES and isinstance(rec.get("payload"), dict):
            return True
        if rec.get("record_type") == "state":
            return True
    return False


def locate(settings: Settings) -> list[Path]:
    """Rollouts under ``<CODEX_HOME or ~/.codex>/sessions`` (any depth, ``rollout-*.jsonl``)."""
    return sorted(p for p in walk_files(settings.codex_home / "sessions")
                  if p.name.startswith("rollout-") and p.suffix == ".jsonl")


SPEC = parser_spec("codex", _sniff, Shape(CodexParser), priority=30, locate=locate)
