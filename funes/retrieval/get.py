"""`get`: a turn and its neighbours, with split chunks stitched back into whole blocks.

Recall returns chunks; an agent that wants the whole turn (the full tool output, the complete
answer) asks for it by session and turn id, exactly as each recall hit prints it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from funes.errors import FunesError
from funes.ingest.chunking import ChunkingError, stitch_texts
from funes.retrieval.recall import _lit
from funes.storage.repo import Repository

COLUMNS = ["id", "text", "harness", "session_id", "turn_id", "seq", "ts", "role", "block_type",
           "block_idx", "split_idx", "tool_name", "workdir", "project", "noise"]


class TurnNotFoundError(FunesError):
    """No turn with that session and turn id in this memory."""

    def __init__(self, session_id: str, turn_id: str) -> None:
        super().__init__(
            f"no turn {turn_id} in session {session_id} in this memory",
            hint="copy the ids from a `funes recall` hit, or check --memory",
        )


@dataclass(frozen=True)
class BlockView:
    """One whole block of a turn."""

    block_idx: int
    block_type: str
    tool_name: str | None
    text: str
    noise: str | None


@dataclass(frozen=True)
class TurnView:
    """One whole turn."""

    harness: str
    session_id: str
    turn_id: str
    seq: int
    ts: str
    role: str
    workdir: str | None
    project: str | None
    blocks: tuple[BlockView, ...]
    target: bool  # the turn asked for (the others are its neighbours)
    #: The chunk ids the turn is made of (what its trust mark is decided on).
    ids: tuple[str, ...] = ()
    #: Some chunk of the turn is untrusted (funes.api.trust marks it; False here).
    untrusted: bool = False


def get_turns(repo: Repository, session_id: str, turn_id: str, window: int = 0) -> list[TurnView]:
    """The turn `turn_id` of `session_id` and `window` turns on each side, in order."""
    if window < 0 or window > 50:
        from funes.errors import UsageError

        raise UsageError(f"--window must be between 0 and 50, not {window}")
    if not repo.chunks.exists():
        raise TurnNotFoundError(session_id, turn_id)
    ds = repo.chunks.dataset()
    found = ds.to_table(
        columns=["seq"],
        filter=f"session_id = {_lit(session_id)} AND turn_id = {_lit(turn_id)}",
        limit=1,
    )
    if found.num_rows == 0:
        raise TurnNotFoundError(session_id, turn_id)
    seq = int(found.column("seq")[0].as_py())
    table = ds.to_table(
        columns=COLUMNS,
        filter=f"session_id = {_lit(session_id)} AND seq >= {seq - window} "
        f"AND seq <= {seq + window}",
    )
    return assemble(table.to_pylist(), repo.tombstoned_ids(), target_turn=turn_id)


def assemble(
    rows: Iterable[dict[str, Any]], hidden: set[str], *, target_turn: str | None = None
) -> list[TurnView]:
    """Whole turns from chunk rows: dedup by id, drop hidden rows, stitch each block back.

    Rows may come in any order; turns come out by (seq, turn id). Every reader that shows
    whole turns (`get`, `why`, `blame`) goes through here, so they agree on what a turn is.
    """
    unique: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row["id"] not in hidden:
            unique.setdefault(row["id"], row)  # a merged memory may hold a chunk twice
    turns: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for row in unique.values():
        turns.setdefault((row["session_id"], row["seq"], row["turn_id"]), []).append(row)
    out = []
    for (session_id, tseq, tid), trows in sorted(turns.items(), key=lambda kv: kv[0][1:]):
        first = trows[0]
        blocks: dict[int, list[dict[str, Any]]] = {}
        for row in trows:
            blocks.setdefault(row["block_idx"], []).append(row)
        views = []
        for bidx, brows in sorted(blocks.items()):
            brows.sort(key=lambda r: r["split_idx"])
            texts = [r["text"] for r in brows]
            try:
                text = stitch_texts(texts)
            except ChunkingError:
                # Not all splits present (e.g. some forgotten): show what exists, marked.
                text = "\n[…]\n".join(texts)
            b = brows[0]
            views.append(BlockView(bidx, b["block_type"], b["tool_name"], text, b["noise"]))
        out.append(
            TurnView(first["harness"], session_id, tid, tseq, first["ts"], first["role"],
                     first.get("workdir"), first.get("project"), tuple(views),
                     tid == target_turn, tuple(sorted(str(r["id"]) for r in trows)))
        )
    return out
