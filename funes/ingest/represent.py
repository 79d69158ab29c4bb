"""What is embedded for a chunk: its representation, and the label its vectors carry.

A chunk is stored and shown as its own text. What the embedding model reads can say more:
representation 2 prefixes a short header with where the chunk sits (the session's date, its
first request, who speaks and, for an answer, the question it answers), so a passage that
only makes sense in its conversation ("yes, the second one") is still found by what the
conversation was about. The header is never stored with the chunk, never shown and never
part of its id; it is rebuilt from the chunk table whenever a chunk is embedded.

Vectors of different representations do not mix. Each vector row's `model` column carries a
label, the model name for representation 1 (so every memory written before representations
existed is representation 1 as it stands) and `<model>+ctx<N>` for the others. Recall and the
backlog use only the vectors labelled for the memory's representation (`index.representation`
in its config); changing it makes every chunk wait in the embedding backlog again, answering
through BM25 meanwhile, and `funes embed` (or the hook worker) re-embeds newest first, in
bounded, committed batches, exactly like a first embed (docs/format.md, "Upgrading").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from funes.storage.repo import Repository

__all__ = [
    "DEFAULT_REPRESENTATION",
    "REPRESENTATIONS",
    "embed_texts",
    "header",
    "label",
    "representation",
    "vector_label",
]

#: 1: the chunk's text alone. 2: a context header, then the text.
REPRESENTATIONS: Final = (1, 2)
DEFAULT_REPRESENTATION: Final = 1
#: Most words of a session's first request or of the question an answer answers in a header.
HEADER_WORDS: Final = 24
_QUOTED_COLUMNS = ["id", "text", "session_id", "seq", "role", "block_type", "ts"]


def representation(repo: Repository) -> int:
    """The memory's representation (`index.representation`, default DEFAULT_REPRESENTATION)."""
    value = repo.config.get("index.representation")
    return int(value) if value else DEFAULT_REPRESENTATION


def label(model: str, rep: int) -> str:
    """The `model` column value of vectors of `model` in representation `rep`."""
    return model if rep == 1 else f"{model}+ctx{rep}"


def vector_label(repo: Repository) -> str | None:
    """The label of the vectors recall may use in `repo`; None before any model is stamped."""
    stamp = repo.model_stamp()
    return None if stamp is None else label(stamp.name, representation(repo))


def _clip(text: str, words: int = HEADER_WORDS) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def header(row: dict[str, Any], first_request: str | None, question: str | None) -> str:
    """The context line of one chunk (see the module docstring); "" when it adds nothing."""
    bits = []
    ts = str(row.get("ts") or "")
    if len(ts) >= 10:
        bits.append(ts[:10])
    role = str(row.get("role") or "")
    if first_request:
        bits.append(f"session: {_clip(first_request)}")
    if role == "assistant" and question:
        bits.append(f"assistant, answering: {_clip(question)}")
    elif role:
        bits.append(role)
    return " | ".join(bits)


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def embed_texts(repo: Repository, ids: Sequence[str], rep: int) -> dict[str, str]:
    """What to embed for each chunk id in representation `rep`.

    Ids missing from the chunk table are left out of the result.
    """
    if not ids:
        return {}
    quoted = ", ".join(_q(i) for i in ids)
    ds = repo.chunks.dataset()
    rows = ds.to_table(columns=_QUOTED_COLUMNS, filter=f"id IN ({quoted})").to_pylist()
    if rep == 1:
        return {r["id"]: r["text"] for r in rows}
    sessions = sorted({r["session_id"] for r in rows})
    asks = ds.to_table(
        columns=["session_id", "seq", "block_idx", "split_idx", "text"],
        filter=f"role = 'user' AND block_type = 'text' AND split_idx = 0 AND session_id IN "
        f"({', '.join(_q(s) for s in sessions)})",
    ).to_pylist()
    by_session: dict[str, list[tuple[int, int, str]]] = {}
    for a in asks:
        by_session.setdefault(a["session_id"], []).append((a["seq"], a["block_idx"], a["text"]))
    for turns in by_session.values():
        turns.sort()
    out: dict[str, str] = {}
    for r in rows:
        turns = by_session.get(r["session_id"], [])
        first = turns[0] if turns else None
        seq = int(r["seq"])
        first_text = first[2] if first is not None and first[0] != seq else None
        question = None
        if r["role"] == "assistant":
            before = [t for t in turns if t[0] < seq]
            question = before[-1][2] if before else None
            if question is not None and question == first_text:
                first_text = None  # the question already says what the session is about
        head = header(r, first_text, question)
        out[r["id"]] = f"{head}\n{r['text']}" if head else r["text"]
    return out
