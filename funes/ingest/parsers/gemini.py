"""Gemini CLI: ``~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`` (and ``.json``).

Gemini CLI's chat recording (packages/core/src/services/chatRecordingService.ts) has two
generations:

* **JSONL** (0.40 and later): the first line is the session's metadata ``{sessionId,
  projectHash, startTime, lastUpdated, kind, directories}``; then message records ``{id,
  timestamp, type: user|gemini|info|error|warning, content, displayContent?, thoughts?,
  toolCalls?, tokens?, model?}``, metadata updates ``{"$set": {…}}`` and rewinds
  ``{"$rewindTo": <message id>}``. A message that changes (tokens arrive, tool calls are
  added and then completed) is appended again, whole, under the same ``id``: the last copy
  wins. Subagent sessions are ``chats/<parent session id>/<session id>.jsonl``.
* **JSON** (before): one object ``{sessionId, projectHash, startTime, lastUpdated, messages}``
  rewritten whole on every update; an older export shape ``{history: [{role, parts}]}`` is
  read too. Such a file is read whole each time it changes (every message, chunk ids make the
  re-read idempotent): current Gemini versions no longer write it, they turn it into JSONL.

Decisions:

* One turn per message id, from its **last copy** before another message begins. The newest
  message may still grow, so a JSONL read stops before that message unless it looks finished
  (a user or notice message; a model message with its token counts and every tool call in a
  final state) or the file is read as complete; the next read resumes there. A message whose
  id was already indexed and is appended again later is counted as ``duplicate``.
* A rewind does not delete anything: what was said stays in memory (append-only).
* A model message becomes one assistant turn: ``thoughts`` (``subject: description``) as
  thinking, ``content`` as text, and for each tool call a ``tool_use`` (``args``) and a
  ``tool_result`` (its ``functionResponse`` output, else ``resultDisplay``).
* ``info``/``warning``/``error`` messages are CLI notices: ``system`` turns tagged
  ``meta``/``api-error`` noise.
* The working directory is not in the file. Gemini names the project directory by a short
  slug whose ``.project_root`` file holds the path (0.30 and later), or by the sha256 of the
  path (before); the slug's marker, then ``~/.gemini/projects.json``, then the session's
  ``directories`` resolve it. Unresolved, ``workdir`` is None.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.ingest import noise
from funes.ingest.parsers.base import (
    ParseError,
    ParseResult,
    as_dict,
    as_list,
    as_str,
    bounded_put,
    dicts,
    iter_complete_lines,
    make_block,
    read_json_file,
    render_json,
    state_int,
    state_map,
    type_label,
    walk_files,
)
from funes.ingest.parsers.skeleton import Parser, Shape, parser_spec
from funes.model.turns import Block

#: Largest legacy ``.json`` session read whole (they are rewritten whole, so cannot be resumed).
MAX_JSON_BYTES = 256 << 20
_FINAL_TOOL_STATUS = frozenset({"success", "error", "cancelled", "canceled", "failed"})
_NOTICE = {"info": noise.META, "warning": noise.META, "error": noise.API_ERROR}
_ROLES = {"user": "user", "gemini": "assistant", "model": "assistant"}
_EMITTED_LIMIT = 1024


def _project_dir(path: Path) -> Path | None:
    """``~/.gemini/tmp/<project>`` for a chat file (main or subagent), if the layout matches."""
    for parent in path.parents:
        if parent.name == "chats":
            return parent.parent
    return None


def resolve_workdir(path: Path, project_hash: str | None) -> str | None:
    """The project root a chat file belongs to (see the module docstring), or None."""
    project = _project_dir(path)
    if project is None:
        return None
    try:
        marker = (project / ".project_root").read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        marker = ""
    if marker:
        return marker
    gemini_home = project.parent.parent  # ~/.gemini/tmp/<project>
    try:
        registry = json.loads((gemini_home / "projects.json").read_text("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        registry = {}
    projects = as_dict((as_dict(registry) or {}).get("projects")) or {}
    for root, slug in projects.items():
        if not isinstance(root, str):
            continue
        if slug == project.name:
            return root
        digest = hashlib.sha256(root.encode("utf-8")).hexdigest()
        if digest in (project.name, project_hash):
            return root
    return None


def _text_parts(content: object) -> list[tuple[str, str]]:
    """``(kind, text)`` for each part of a Gemini ``PartListUnion`` (string, part or list)."""
    out: list[tuple[str, str]] = []
    items = content if isinstance(content, list) else [content]
    for item in items:
        if isinstance(item, str):
            out.append(("text", item))
            continue
        part = as_dict(item)
        if part is None:
            continue
        if isinstance(part.get("text"), str):
            out.append(("thinking" if part.get("thought") is True else "text", part["text"]))
        elif (inline := as_dict(part.get("inlineData"))) is not None:
            out.append(("image", noise.image_placeholder(as_str(inline.get("mimeType")),
                                                         as_str(inline.get("data")))))
        elif (file := as_dict(part.get("fileData"))) is not None:
            out.append(("text", f"[file {as_str(file.get('fileUri')) or ''}]"))
        elif (response := as_dict(part.get("functionResponse"))) is not None:
            out.append(("result", _response_text(response)))
    return out


def _response_text(response: dict[str, Any]) -> str:
    body = response.get("response")
    if isinstance(body, dict):
        for key in ("output", "content", "error"):
            value = body.get(key)
            if isinstance(value, str):
                return value
    return render_json(body) if body is not None else ""


def _finished(message: dict[str, Any]) -> bool:
    """Whether a message's last copy can no longer change (see the module docstring)."""
    if message.get("type") not in ("gemini", "model"):
        return True
    if not isinstance(message.get("tokens"), dict):
        return False
    calls = as_list(message.get("toolCalls")) or []
    return all(
        as_str((as_dict(c) or {}).get("status")) in _FINAL_TOOL_STATUS for c in calls
    )


class _Turns(Parser):
    """What the JSONL reader and the JSON reader share: message → turn."""

    harness = "gemini"
    chain = "file"

    def _meta(self, record: dict[str, Any]) -> None:
        session = as_str(record.get("sessionId"))
        if session and not self.state.get("session"):
            self.state["session"] = session
        project_hash = as_str(record.get("projectHash"))
        if project_hash:
            self.state["project_hash"] = project_hash
        dirs = as_list(record.get("directories"))
        if dirs and isinstance(dirs[0], str) and not self.state.get("dirs0"):
            self.state["dirs0"] = dirs[0]
        self.ts(record.get("startTime"))

    def workdir(self) -> str | None:
        """The project root the chat file's folder stands for (see the module docstring)."""
        if "cwd" not in self.state:
            found = resolve_workdir(self.path, as_str(self.state.get("project_hash")))
            self.state["cwd"] = found or as_str(self.state.get("dirs0"))
        return as_str(self.state.get("cwd"))

    def message(self, message: dict[str, Any], index: int, start: int, end: int) -> None:
        """Emit the turn of one message (its last copy)."""
        msg_id = as_str(message.get("id"))
        kind = message.get("type") if isinstance(message.get("type"), str) else message.get("role")
        if not isinstance(kind, str):
            self.skip("missing-field")
            return
        emitted = state_map(self.state, "emitted")
        if msg_id and msg_id in emitted:
            self.skip("duplicate")
            return
        extra: dict[str, str] | None = None
        blocks: list[Block | None] = []
        if kind in _NOTICE:
            role = "system"
            blocks = [make_block("text", t, noise=_NOTICE[kind])
                      for _k, t in _text_parts(message.get("content"))]
        elif kind in _ROLES:
            role = _ROLES[kind]
            blocks = self._blocks(message, role)
            if role == "assistant" and (model := as_str(message.get("model"))):
                extra = {"model": model}
        else:
            self.skip(f"unknown-type:message:{type_label(kind)}")
            return
        turn = self.turn(role, blocks, ts=message.get("timestamp") or message.get("ts"),
                         turn_id=msg_id, extra=extra, at=(index, start, end))
        if turn is not None and msg_id:
            bounded_put(emitted, msg_id, 1, _EMITTED_LIMIT)

    def _blocks(self, message: dict[str, Any], role: str) -> list[Block | None]:
        blocks: list[Block | None] = []
        for thought in dicts(message.get("thoughts")):
            subject = as_str(thought.get("subject")) or ""
            description = as_str(thought.get("description")) or ""
            text = f"{subject}: {description}" if subject and description \
                else subject or description
            blocks.append(make_block("thinking", text))
        content = message.get("content", message.get("parts"))
        for kind, text in _text_parts(content):
            if kind == "result":
                blocks.append(make_block("tool_result", text))
            elif kind == "image":
                blocks.append(make_block("text", text, noise=noise.IMAGE))
            else:
                blocks.append(make_block("thinking" if kind == "thinking" else "text", text))
        for call in dicts(message.get("toolCalls")):
            call_id = as_str(call.get("id"))
            name = as_str(call.get("name"))
            blocks.append(make_block("tool_use", render_json(call.get("args", {})),
                                     tool_name=name, tool_call_id=call_id))
            results = [t for k, t in _text_parts(call.get("result")) if k == "result"]
            output = "\n".join(results) or as_str(call.get("resultDisplay")) or ""
            blocks.append(make_block("tool_result", output, tool_name=name, tool_call_id=call_id))
        return blocks


class GeminiJsonlParser(_Turns):
    """The JSONL chat log: a message is emitted once its last copy is known."""

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Consume lines from ``start``; stop before a newest message that may still change."""
        if self.path.parent.parent.name == "chats" and not self.state.get("parent_session"):
            self.state["parent_session"] = self.path.parent.name
        end = start
        #: The newest message seen: (last copy, record index, first byte, last byte).
        pending: tuple[dict[str, Any], int, int, int] | None = None
        #: Where to resume, and the state to resume with, when that message is unfinished.
        resume: tuple[int, dict[str, Any], collections.Counter[str]] = (
            start, copy.deepcopy(self.state), collections.Counter())
        for line_start, line_end, line in iter_complete_lines(self.path, start, final):
            index = state_int(self.state, "n")
            self.state["n"] = index + 1
            end = line_end
            record = self.decode(line)
            if record is None:
                continue
            msg_id = as_str(record.get("id"))
            if msg_id is None:  # metadata: it does not end the newest message's copies
                self._other(record)
                continue
            if pending is not None and pending[0].get("id") == msg_id:
                pending = (record, pending[1], pending[2], line_end)
                continue
            if pending is not None:
                self._flush(pending)
                pending = None
            before = copy.deepcopy(self.state)
            before["n"] = index
            resume = (line_start, before, collections.Counter(self.skipped))
            pending = (record, index, line_start, line_end)
        if pending is not None:
            if final or _finished(pending[0]):
                self._flush(pending)
            else:  # forget what was read after it: the next call reads it again
                end, self.state, self.skipped = resume
        self.finish()
        return self.result(end)

    def _flush(self, pending: tuple[dict[str, Any], int, int, int]) -> None:
        self.guard(self.message, *pending)

    def _other(self, record: dict[str, Any]) -> None:
        self.guard(self._metadata, record)

    def _metadata(self, record: dict[str, Any]) -> None:
        if "$set" in record:
            update = as_dict(record.get("$set")) or {}
            self._meta(update)
            self.skip("ignored:$set")
        elif "$rewindTo" in record:
            self.skip("ignored:$rewindTo")
        elif "sessionId" in record:
            self._meta(record)
            self.skip("ignored:metadata")
        else:
            self.skip("missing-field")


class GeminiJsonParser(_Turns):
    """A whole legacy ``.json`` session (rows cursor: the number of messages read)."""

    rereads_whole = True

    def run(self, start: int, final: bool = False) -> ParseResult:
        """Read every message of the session again (the file is rewritten whole)."""
        doc, reason = read_json_file(self.path, MAX_JSON_BYTES)
        if reason == "too-large":
            raise ParseError(f"{self.path} is {os.path.getsize(self.path)} bytes, more than a "
                             "Gemini session can be",
                             hint="move it aside; funes reads sessions up to 256 MiB")
        if reason == "unreadable":
            raise ParseError(f"cannot read {self.path}")
        if reason is not None or not isinstance(doc, dict):
            self.skip(reason or "not-an-object")
            return self.result(0)
        self._meta(doc)
        if not self.state.get("session") and isinstance(doc.get("start_time"), str):
            self.ts(doc.get("start_time"))
        messages = as_list(doc.get("messages"))
        if messages is None:
            messages = as_list(doc.get("history")) or []
        self.feed((i, i, i + 1, m) for i, m in enumerate(messages))
        return self.result(len(messages))

    def handle(self, record: dict[str, Any], index: int, start: int, end: int) -> None:
        """One message of the session."""
        self.message(record, index, start, end)


def _is_json_session(path: Path) -> bool:
    if path.suffix != ".json":
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    text = head.decode("utf-8", "replace")
    return text.lstrip().startswith("{") and (
        ('"sessionId"' in text and ('"projectHash"' in text or '"messages"' in text))
        or '"history"' in text
    )


def _sniff(path: Path, records: list[Any] | None) -> bool:
    if path.suffix == ".json":
        return _is_json_session(path)
    if not records:
        return False
    first = records[0]
    if isinstance(first, dict) and "projectHash" in first and "sessionId" in first:
        return True
    return any(
        isinstance(r, dict) and r.get("type") == "gemini" and "id" in r for r in records
    )


def locate(settings: Settings) -> list[Path]:
    """Chat logs under ``tmp/<project>/chats`` (``.jsonl``, and ``.json`` not yet migrated)."""
    out: list[Path] = []
    tmp = settings.gemini_dir / "tmp"
    for path in walk_files(tmp):
        rel = path.relative_to(tmp).parts
        if len(rel) < 3 or rel[1] != "chats" or path.suffix not in (".jsonl", ".json"):
            continue
        if path.suffix == ".json" and path.with_suffix(".jsonl").exists():
            continue  # Gemini migrated it to JSONL on resume: read that one only
        out.append(path)
    return sorted(out)


__all__ = ["GeminiJsonParser", "GeminiJsonlParser", "resolve_workdir"]

SPEC = parser_spec(
    "gemini", _sniff,
    Shape(GeminiJsonParser, lambda path: path.suffix == ".json", "rows"),
    Shape(GeminiJsonlParser),
    priority=35, locate=locate,
)
