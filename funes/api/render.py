"""What `funes recall` and `funes get` print in the agent and json formats.

One home for these bytes because two processes print them: the CLI when it does the work
itself, and the warm server when the thin client (funes.cli.thin) hands it a whole command
and prints the answer as it comes. Both call `recall_output` and `get_output`, so the output
is the same whichever process made it (tests/serve/test_serve_output.py holds them to it).
The human format stays in the CLI: it is for a terminal, where the full CLI runs; what
`recall` says on stderr (why a recall is empty) is shared by every format.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from funes.api.agent_format import get_command, recall_text, turns_text
from funes.api.memory import MemoryChoice
from funes.api.search import RecallRequest, RecallResult, TurnView
from funes.api.syncstate import sync_note
from funes.api.user import empty_recall
from funes.storage.repo import Repository

__all__ = ["get_output", "output_note", "recall_json", "recall_output", "recall_printed",
           "recall_stderr", "to_dict", "to_json"]


def to_dict(value: Any) -> Any:
    """A result as plain JSON-able data (dataclasses, paths and collections converted)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_dict(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_dict(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_dict(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def to_json(value: Any) -> str:
    """Serialise a result (dataclasses included) as indented JSON."""
    return json.dumps(to_dict(value), indent=2, ensure_ascii=False, sort_keys=False)


def output_note(choice: MemoryChoice) -> str | None:
    """The `# note: …` lines that head a reader's output, or None.

    First the copy of an unreachable remote read instead (`MemoryChoice.warning`), then a
    memory that has not synced with its remote for long (funes.api.syncstate.sync_note).
    """
    lines = [f"# note: {choice.warning}"] if choice.warning else []
    stale = sync_note(choice.repo)
    if stale:
        lines.append(stale)
    return "\n".join(lines) or None


def recall_json(result: RecallResult, label: str, trusted: bool, note: str | None = None,
                memories: dict[str, bool] | None = None) -> dict[str, Any]:
    """`funes recall --format json`: the hits with every score and the `get` command.

    A pooled recall (`memories`: label → the user's own?) lists its memories, and each hit
    carries its own `memory` and `trusted`.
    """
    extra: dict[str, Any] = {}
    if memories is not None:
        extra["memories"] = [{"memory": m, "trusted": t} for m, t in memories.items()]
    return {
        "query": result.query,
        "memory": label,
        "trusted": trusted,
        "note": note,
        **extra,
        "signals": result.signals,
        "backlog": result.backlog,
        "hits": [
            {
                **{k: (v.isoformat() if hasattr(v, "isoformat") else v)
                   for k, v in h.row.items()},
                "score": h.score,
                "bm25_rank": h.bm25_rank,
                "vector_rank": h.vector_rank,
                "rerank": h.rerank,
                **({"trusted": memories.get(str(h.row.get("memory")), False)}
                   if memories is not None else {}),
                "get": get_command(h.row, h.row.get("memory") or label),
                "revisited_later": None if h.revisited is None else {
                    "session_id": h.revisited["session_id"], "turn_id": h.revisited["turn_id"],
                    "ts": h.revisited.get("ts"),
                    "get": get_command(h.revisited, h.row.get("memory") or label)},
                "neighbors": [{**{k: n[k] for k in ("session_id", "turn_id", "seq", "role",
                                                    "block_type", "text")},
                               "untrusted": bool(n.get("untrusted"))} for n in h.neighbors],
                "copies": h.copies,
            }
            for h in result.hits
        ],
    }


def recall_output(fmt: str, result: RecallResult, label: str, trusted: bool,
                  note: str | None = None, memories: dict[str, bool] | None = None) -> str:
    """The text `funes recall` prints on stdout in the `agent` or `json` format.

    `note` (a memory that has not synced for long) is a first line of the agent format;
    `memories` makes it a pooled recall's (funes.api.pool).
    """
    if fmt == "json":
        return to_json(recall_json(result, label, trusted, note, memories))
    return recall_text(result, label, trusted, note, memories)


def recall_stderr(repo: Repository, result: RecallResult, request: RecallRequest) -> str:
    """What `funes recall` says on stderr: for an empty result, why and what to run; else ""."""
    if result.hits:
        return ""
    given = [f"--{name} {' '.join(values)}" for name, values in (
        ("harness", request.harness), ("type", request.block_type),
        ("project", request.project), ("session", request.session),
        ("since", (request.since,) if request.since else ()),
        ("until", (request.until,) if request.until else ()),
        ("as-of", (request.as_of,) if request.as_of else ())) if values]
    why = empty_recall(repo, result, given)
    return f"funes: no results: {why.reason} ({why.hint})\n"


def recall_printed(fmt: str, choice: MemoryChoice, result: RecallResult,
                   request: RecallRequest,
                   memories: dict[str, bool] | None = None) -> tuple[str, str]:
    """(stdout, stderr) of `funes recall` in the `agent` or `json` format, newlines included.

    The memory's notes (`output_note`) head the agent format.
    """
    out = recall_output(fmt, result, choice.label, choice.owned, output_note(choice),
                        memories) + "\n"
    return out, recall_stderr(choice.repo, result, request)


def get_output(fmt: str, turns: list[TurnView], choice: MemoryChoice) -> str:
    """The text `funes get` prints on stdout in the `agent` or `json` format.

    JSON is the list of turns, each with its `untrusted` mark (funes.api.trust).
    """
    if fmt == "json":
        return to_json(turns)
    return turns_text(turns, label=choice.label, trusted=choice.owned, note=output_note(choice))
