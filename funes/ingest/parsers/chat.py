"""Chat messages, OpenAI-style and ShareGPT: the message shapes Hermes and the generic import share.

Both read conversations written as role/content messages (OpenAI's chat format: ``content``
as a string or a list of parts, ``tool_calls``, ``tool`` results) or as ShareGPT exports
(``{from, value}`` with ``<think>``, ``<tool_call>`` and ``<tool_response>`` inside the text).
These functions turn one message into blocks; :func:`emit_conversation` emits a whole
ShareGPT conversation (one record) as a chain of turns.
"""

from __future__ import annotations

import collections
import json
import re
from typing import Any

from funes.ingest import noise
from funes.ingest.parsers.base import as_dict, as_list, as_str, dicts, make_block, render_json
from funes.ingest.parsers.skeleton import Parser
from funes.model.turns import Block

_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL)
_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_TOOL_RESPONSE_RE = re.compile(r"<tool_response>(.*?)</tool_response>", re.DOTALL)
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "tool": "tool", "function": "tool", "observation": "tool"}


def message_blocks(
    parser: Parser, msg: dict[str, Any], role: str, reason: str | None
) -> list[Block | None]:
    """The blocks of one OpenAI-style message: reasoning, content (or result), tool calls.

    Content is tagged ``reason``; a ``tool`` message is one tool result. Tool calls are
    remembered on ``parser`` so that later results are labelled with their tool's name; the
    legacy single ``function_call`` counts as a call.
    """
    blocks: list[Block | None] = []
    for key in ("reasoning", "reasoning_content", "thinking"):
        if isinstance(msg.get(key), str):
            blocks.append(make_block("thinking", msg[key]))
            break
    content = msg.get("content")
    if role == "tool":
        call_id = as_str(msg.get("tool_call_id"))
        name = as_str(msg.get("name")) or as_str(msg.get("tool_name"))
        text = (json.dumps(content) if isinstance(content, dict | int | float)
                else content_text(content))
        blocks.append(make_block("tool_result", text, tool_call_id=call_id,
                                 tool_name=name or parser.tool_name_for(call_id)))
    else:
        blocks.extend(content_blocks(content, reason))
    calls = tool_call_blocks(msg.get("tool_calls"))
    legacy = as_dict(msg.get("function_call"))
    if legacy is not None:
        calls += tool_call_blocks([{"function": legacy}])
    for block, call_id, name in calls:
        parser.remember_tool(call_id, name)
        blocks.append(block)
    return blocks


def tool_call_blocks(tool_calls: object) -> list[tuple[Block, str | None, str | None]]:
    """Blocks for OpenAI ``tool_calls`` (a list, or its JSON text), with (id, name) of each."""
    if isinstance(tool_calls, str):
        try:
            tool_calls = json.loads(tool_calls)
        except (ValueError, RecursionError):
            return []
    out: list[tuple[Block, str | None, str | None]] = []
    for c in dicts(tool_calls):
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


def emit_conversation(
    parser: Parser,
    session: str,
    conversation: list[Any],
    *,
    ts: str,
    workdir: str | None,
    start: int,
    end: int,
    extra: dict[str, str] | None = None,
) -> None:
    """Emit a ShareGPT conversation (one record) as turns ``<session>#<message index>``.

    Each turn's parent is the conversation's previous turn; messages that carry nothing
    (a system prompt, a malformed entry) are skipped with their reason.
    """
    previous: str | None = None
    for i, (role, blocks, reason) in enumerate(sharegpt_messages(conversation)):
        if reason is not None:
            parser.skip(reason)
            continue
        turn_id = f"{session}#{i}"
        turn = parser.emit(session_id=session, turn_id=turn_id, ts=ts, role=role, blocks=blocks,
                           start=start, end=end, parent=previous, workdir=workdir, extra=extra)
        if turn is not None:
            previous = turn_id
