"""Claude Code transcripts: ``~/.claude/projects/<cwd slug>/<session>.jsonl`` and subagents.

One JSON record per line. Records of type ``user``/``assistant`` carry conversation in
``message.content`` (a string, or parts ``text``/``thinking``/``tool_use``/``tool_result``/
``image``); everything else (``summary``, ``progress``, ``system``, ``file-history-snapshot``,
``queue-operation``, ``attachment``) is bookkeeping. Decisions:

* **One turn per record.** Claude writes one assistant API message as several records (one per
  content part), each with its own ``uuid``. Merging them would make an emitted turn change
  when the next record arrives, which breaks the resumable contract; one record per turn keeps
  every turn final the moment its line is complete.
* **Ids.** ``turn_id`` is the record's ``uuid``; ``parent_turn_id`` is ``parentUuid`` resolved
  through skipped records (a user prompt's parent is often a ``progress`` or ``system``
  record), so parents point at turns. A uuid seen twice in one file (trimmed or replayed
  transcripts) gets ``#<record index>`` appended so turn ids stay unique.
* **Subagents.** ``<session>/subagents/agent-<id>.jsonl`` files (and the older
  ``agent-<id>.jsonl`` next to the session) carry ``sessionId`` = the parent session,
  ``agentId`` and ``isSidechain: true``. Their turns get ``session_id =
  "<parent session>:agent-<id>"`` and ``parent_session_id = <parent session>``; the turn that
  spawned the subagent (the ``Task``/``Agent`` tool call whose prompt is the subagent's first
  message, or whose result names the agent id) is looked up once in the parent transcript when
  it is on disk, stored in the state, put in ``extra["spawned_by_turn"]`` on every subagent
  turn and used as ``parent_turn_id`` of the subagent's root turn.
* **Tool names.** ``tool_result`` blocks get ``tool_name`` from the ``tool_use`` with the same
  id (kept in a bounded map in the state), so results can be labelled ``[tool_result Bash]``.
* **Roles.** A user record that holds only tool results (and scaffolding) has role ``tool``.

Noise decisions are documented in :mod:`funes.ingest.noise`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.ingest import noise
from funes.ingest.parsers.base import (
    LINK_MAP_LIMIT,
    as_dict,
    as_list,
    as_str,
    bounded_put,
    make_block,
    render_json,
    state_map,
    type_label,
    walk_files,
)
from funes.ingest.parsers.skeleton import Parser, Shape, parser_spec
from funes.model.turns import Block

#: Record types that are known and deliberately not conversation.
IGNORED_TYPES = frozenset(
    {"summary", "progress", "system", "file-history-snapshot", "queue-operation", "attachment"}
)
CONVERSATION_TYPES = frozenset({"user", "assistant"})

_AGENT_FILE_RE = re.compile(r"(?:^|[_/])agent-([A-Za-z0-9_.-]+)\.jsonl$")
_SPAWN_TOOLS = frozenset({"Task", "Agent"})


def _agent_id_from_path(path: Path) -> str | None:
    if path.parent.name == "subagents" or path.name.startswith("agent-"):
        m = _AGENT_FILE_RE.search(path.name)
        if m:
            return m.group(1)
    return None


def _tool_result_text(content: object) -> tuple[str, bool]:
    """Text of a tool_result's content (string or parts); True if it held only images."""
    if isinstance(content, str):
        return content, False
    parts = as_list(content)
    if parts is None:
        return "", False
    texts: list[str] = []
    images = 0
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        p = as_dict(part)
        if p is None:
            continue
        kind = p.get("type")
        if kind == "text" and isinstance(p.get("text"), str):
            texts.append(p["text"])
        elif kind in ("image", "document"):
            images += 1
            texts.append(_image_text(p))
    return "\n".join(texts), images > 0 and images == len(texts)


def _image_text(part: dict[str, Any]) -> str:
    src = as_dict(part.get("source")) or {}
    data = as_str(src.get("data"))
    media = as_str(src.get("media_type")) or as_str(part.get("mimeType"))
    if data is None and as_str(src.get("url")):
        return f"[{media or 'image'} {src['url']}]"
    return noise.image_placeholder(media or "image", data)


def find_spawning_turn(parent_file: Path, agent_id: str | None, prompt: str | None) -> str | None:
    """Find, in the parent transcript, the turn whose tool call started a subagent.

    Two clues, best first: a tool result whose ``toolUseResult.agentId`` is the agent id (then
    the turn is ``sourceToolAssistantUUID`` or the turn holding the matching ``tool_use``), and
    a ``Task``/``Agent`` tool call whose ``input.prompt`` equals the subagent's first message
    (available before the subagent finishes).
    """
    try:
        f = open(parent_file, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return None
    by_prompt: str | None = None
    tool_turns: dict[str, str] = {}
    agent_bytes = agent_id.encode() if agent_id else None
    try:
        for line in f:
            has_agent = agent_bytes is not None and agent_bytes in line
            if not has_agent and b'"tool_use"' not in line:
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(rec, dict):
                continue
            uuid = as_str(rec.get("uuid"))
            msg = as_dict(rec.get("message")) or {}
            for part in as_list(msg.get("content")) or []:
                p = as_dict(part)
                if p is None or p.get("type") != "tool_use" or uuid is None:
                    continue
                call_id = as_str(p.get("id"))
                if call_id:
                    tool_turns[call_id] = uuid
                inp = as_dict(p.get("input")) or {}
                if (
                    by_prompt is None
                    and prompt is not None
                    and as_str(p.get("name")) in _SPAWN_TOOLS
                    and as_str(inp.get("prompt")) == prompt
                ):
                    by_prompt = uuid
            result = as_dict(rec.get("toolUseResult"))
            if has_agent and result is not None and result.get("agentId") == agent_id:
                source_turn = as_str(rec.get("sourceToolAssistantUUID"))
                if source_turn:
                    return source_turn
                for part in as_list(msg.get("content")) or []:
                    p = as_dict(part)
                    call_id = as_str(p.get("tool_use_id")) if p else None
                    if call_id and call_id in tool_turns:
                        return tool_turns[call_id]
    finally:
        f.close()
    return by_prompt


class ClaudeParser(Parser):
    """Claude Code session and subagent transcripts."""

    harness = "claude"

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """Turn one Claude record into a turn, or remember it as a link and skip it."""
        kind = self.kind(record)
        if kind is None:
            return
        cwd = as_str(record.get("cwd"))
        if cwd:
            self.state["cwd"] = cwd
        if kind not in CONVERSATION_TYPES:
            self.link_record(record)
            label = type_label(kind)
            self.skip(f"ignored:{label}" if kind in IGNORED_TYPES else f"unknown-type:{label}")
            return
        message = as_dict(record.get("message"))
        if message is None or "content" not in message:
            self.link_record(record)
            self.skip("missing-field")
            return
        self._turn(record, message, kind, index, start, end)

    # -- links ---------------------------------------------------------------------------------

    def _links(self) -> dict[str, Any]:
        """Map a skipped record's uuid to the turn id its parent chain resolves to (or None)."""
        return state_map(self.state, "links")

    def _turn_ids(self) -> dict[str, Any]:
        """Map the uuid of an emitted record -> its turn id (differs only for a repeated uuid)."""
        return state_map(self.state, "turns")

    def resolve_parent(self, parent_id: object) -> str | None:
        """The turn id a ``parentUuid`` stands for: a repeated uuid's turn, else the links."""
        uuid = as_str(parent_id)
        turn = self._turn_ids().get(uuid) if uuid else None
        return turn if isinstance(turn, str) else super().resolve_parent(parent_id)

    def link_record(self, record: dict[str, Any]) -> None:
        """Remember a record that became no turn (by `uuid`) as a link to its parent."""
        uuid = as_str(record.get("uuid"))
        if not uuid:
            return
        parent = record.get("parentUuid")
        if parent is None and record.get("subtype") == "compact_boundary":
            parent = record.get("logicalParentUuid")
        links = self._links()
        if uuid in links or uuid in self._turn_ids():
            return  # an earlier record already owns this uuid
        bounded_put(links, uuid, self.resolve_parent(parent), LINK_MAP_LIMIT)

    # -- sessions and subagents ----------------------------------------------------------------

    def _session(self, record: dict[str, Any]) -> tuple[str, str | None, str | None]:
        """(session id, parent session id, agent id) for a record."""
        session = as_str(record.get("sessionId")) or self.session()
        self.state["session"] = session
        path_agent = _agent_id_from_path(self.path)
        rec_agent = as_str(record.get("agentId")) if record.get("isSidechain") is True else None
        agent = rec_agent or path_agent
        if agent is None:
            return session, None, None
        parent = session
        if path_agent and self.path.parent.name == "subagents" and not record.get("sessionId"):
            parent = self.path.parent.parent.name
        return f"{parent}:agent-{agent}", parent, agent

    def _spawned_by(self, parent: str, agent: str, prompt: str | None) -> str | None:
        """The parent-session turn that spawned this subagent (looked up once per file)."""
        spawn = state_map(self.state, "spawn")
        key = f"{parent}:{agent}"
        if key in spawn:
            found = spawn[key]
            return found if isinstance(found, str) else None
        candidates = []
        if self.path.parent.name == "subagents":
            candidates.append(self.path.parent.parent.parent / f"{parent}.jsonl")
        candidates.append(self.path.parent / f"{parent}.jsonl")
        found_turn: str | None = None
        for candidate in candidates:
            if candidate != self.path and candidate.is_file():
                found_turn = find_spawning_turn(candidate, agent, prompt)
                if found_turn:
                    break
        bounded_put(spawn, key, found_turn, 16)
        return found_turn

    # -- turns ----------------------------------------------------------------------------------

    def _turn(
        self,
        record: dict[str, Any],
        message: dict[str, Any],
        kind: str,
        index: int,
        start: int,
        end: int,
    ) -> None:
        role = as_str(message.get("role")) or kind
        if role not in ("user", "assistant"):
            role = kind
        session, parent_session, agent = self._session(record)
        content = message.get("content")
        blocks = self._blocks(record, role, content)
        meta_reason = self._record_noise(record, role, content, agent)
        if meta_reason is not None:
            # isMeta also marks harness-written tool results; those stay plain tool results.
            soft = meta_reason in (noise.META, noise.SKILL)
            blocks = [
                b if soft and b.type == "tool_result" else _retag(b, meta_reason) for b in blocks
            ]

        uuid = as_str(record.get("uuid"))
        turn_ids = self._turn_ids()
        if uuid and uuid not in turn_ids:
            turn_id = uuid
        elif uuid:
            turn_id = f"{uuid}#{index}"
        else:
            turn_id = f"{session}#{index}"
        parent_turn = self.resolve_parent(record.get("parentUuid"))
        extra: dict[str, str] = {}
        if record.get("isSidechain") is True:
            extra["sidechain"] = "true"
        if agent is not None and parent_session is not None:
            extra["agent_id"] = agent
            prompt = content if isinstance(content, str) else None
            spawner = self._spawned_by(parent_session, agent, prompt)
            if spawner:
                extra["spawned_by_turn"] = spawner
                if parent_turn is None:
                    parent_turn = spawner
        if uuid:
            bounded_put(turn_ids, uuid, turn_id, LINK_MAP_LIMIT)

        if role == "user" and blocks and all(
            b.type == "tool_result" or b.noise is not None for b in blocks
        ) and any(b.type == "tool_result" for b in blocks):
            role = "tool"
        self.emit(
            session_id=session,
            turn_id=turn_id,
            ts=self.ts(record.get("timestamp")),
            role=role,
            blocks=blocks,
            start=start,
            end=end,
            parent=parent_turn,
            workdir=as_str(self.state.get("cwd")),
            parent_session_id=parent_session,
            extra=extra,
        )

    def _record_noise(
        self, record: dict[str, Any], role: str, content: object, agent: str | None
    ) -> str | None:
        """A reason that applies to every block of the record, if any."""
        if agent is not None and agent.startswith("acompact"):
            return noise.COMPACTION
        if record.get("isCompactSummary") is True:
            return noise.COMPACTION
        if role == "assistant" and record.get("isApiErrorMessage") is True:
            return noise.API_ERROR
        if role == "user" and record.get("isMeta") is True:
            text = content if isinstance(content, str) else ""
            if not text:
                for part in as_list(content) or []:
                    p = as_dict(part)
                    if p and isinstance(p.get("text"), str):
                        text = p["text"]
                        break
            return noise.claude_meta_reason(text)
        return None

    def _blocks(self, record: dict[str, Any], role: str, content: object) -> list[Block]:
        blocks: list[Block | None] = []
        if isinstance(content, str):
            self._text(blocks, role, content)
        for part in as_list(content) or []:
            if isinstance(part, str):
                self._text(blocks, role, part)
                continue
            p = as_dict(part)
            if p is None:
                continue
            kind = p.get("type")
            if kind == "text":
                text = as_str(p.get("text"))
                if text is not None:
                    self._text(blocks, role, text)
            elif kind == "thinking":
                blocks.append(make_block("thinking", as_str(p.get("thinking")) or ""))
            elif kind in ("tool_use", "server_tool_use"):
                name = as_str(p.get("name"))
                call_id = as_str(p.get("id"))
                self.remember_tool(call_id, name)
                blocks.append(make_block("tool_use", render_json(p.get("input", {})),
                                         tool_name=name, tool_call_id=call_id))
            elif kind == "tool_result" or (
                isinstance(kind, str) and kind.endswith("_tool_result")
            ):
                self._tool_result(blocks, record, p)
            elif kind in ("image", "document"):
                blocks.append(make_block("text", _image_text(p), noise=noise.IMAGE))
            # redacted_thinking and unknown part types carry nothing readable: skipped.
        return [b for b in blocks if b is not None]

    def _text(self, blocks: list[Block | None], role: str, text: str) -> None:
        if role != "user":
            blocks.append(make_block("text", text))
            return
        for segment, reason in noise.claude_user_text(text):
            blocks.append(make_block("text", segment, noise=reason))

    def _tool_result(
        self, blocks: list[Block | None], record: dict[str, Any], part: dict[str, Any]
    ) -> None:
        call_id = as_str(part.get("tool_use_id")) or as_str(record.get("sourceToolUseID"))
        name = self.tool_name_for(call_id)
        content = part.get("content")
        if content is None and isinstance(part.get("text"), str):
            content = part["text"]
        if name is None:
            for inner in as_list(content) or []:
                d = as_dict(inner)
                if d and isinstance(d.get("tool_name"), str):
                    name = d["tool_name"]
                    break
        text, only_images = _tool_result_text(content)
        for segment, reason in noise.claude_tool_result_text(text):
            if reason is None:
                blocks.append(make_block("tool_result", segment, tool_name=name,
                                         tool_call_id=call_id,
                                         noise=noise.IMAGE if only_images else None))
            else:
                blocks.append(make_block("text", segment, noise=reason))


def _retag(block: Block, reason: str) -> Block:
    if block.noise == reason:
        return block
    return Block(block.type, block.text, block.tool_name, block.tool_call_id, reason)


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if not records:
        return False
    for rec in records:
        if not isinstance(rec, dict):
            continue
        kind = as_str(rec.get("type"))
        if kind in CONVERSATION_TYPES and isinstance(rec.get("message"), dict) and (
            "sessionId" in rec or "uuid" in rec or "parentUuid" in rec
        ):
            return True
        if kind == "summary" and "leafUuid" in rec:
            return True
        if kind in ("file-history-snapshot", "queue-operation", "progress") and (
            "messageId" in rec or "sessionId" in rec
        ):
            return True
    return False


def locate(settings: Settings) -> list[Path]:
    """Sessions and subagent transcripts under ``<CLAUDE_CONFIG_DIR or ~/.claude>/projects``."""
    projects = settings.claude_config_dir / "projects"
    found: list[Path] = []
    # the parts below `projects` by string: Path.relative_to was most of listing a long
    # history (19,000 sessions), which every `funes add` on an indexed memory does
    skip = len(os.fspath(projects)) + 1
    for path in walk_files(projects):
        if path.suffix != ".jsonl":
            continue
        rel = os.fspath(path)[skip:].split(os.sep)
        if len(rel) == 2:
            found.append(path)  # <project>/<session>.jsonl (or an old agent-<id>.jsonl)
        elif len(rel) == 4 and rel[2] == "subagents" and rel[3].startswith("agent-"):
            found.append(path)  # <project>/<session>/subagents/agent-<id>.jsonl
    return sorted(found)


SPEC = parser_spec("claude", _sniff, Shape(ClaudeParser), priority=20, locate=locate)
