"""`sketch`: a query-free digest of one session, its most telling passages in order.

A long session (hundreds of turns, most of them tool traffic) is too much to read and has no
query to rank by. The sketch picks a few whole passages that, together, stand for the rest,
and prints them in the session's order so they read as a compressed story. It is extractive:
every word shown is verbatim, with the turn it comes from.

**Units.** Each block is a unit (its chunks stitched back). Scaffolding (blocks tagged noise)
and thinking are not eligible; prose of the user and the assistant weighs 1, a tool call 0.35,
a tool result 0.2 (selection weights, not value judgements: a tool result can still be picked
when it alone stands for part of the session).

**Geometry.** Each unit is a unit vector: the mean of its chunks' stored embeddings (weighted
by their length) when every eligible unit has one, else a hashed bag of its words weighted by
how rare each word is in the session (`basis` says which). No model is loaded either way.

**Selection** (after the design the Rust funes explores for curation, simplified):

1. Anchors: the first request of the user, the assistant's last prose, and the medoid (the
   unit nearest the session's weighted centre).
2. Contrasts: a few directions of the session's spread (pivoted residuals: the unit farthest
   from what the chosen directions explain opens the next one), and the unit at each end of
   each direction.
3. Greedy coverage among anchors and contrasts: the next passage is the one that adds the most
   weighted similarity to units not yet well covered, per character it costs, until the
   character budget is spent.

Passages longer than `PASSAGE_CHARS` are cut (a tool result keeps its head and tail), marked.

**Deterministic.** The same rows and vectors give the same sketch: units are ordered by (seq,
block, id), every tie goes to the earlier unit, and the arithmetic is float64 in that order.
The result is cached per session version (`fingerprint`: the session's visible chunk ids, its
embedded ids, the budget and `VERSION`).
"""

from __future__ import annotations

import hashlib
import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from funes.errors import UsageError
from funes.ingest.chunking import ChunkingError, stitch_texts
from funes.ingest.represent import vector_label
from funes.retrieval.recall import _lit
from funes.storage.repo import Repository

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_CHARS", "VERSION", "Sketch", "SketchPassage", "fingerprint", "sketch"]

#: Changes whenever the selection changes (cached sketches of another version are redone).
VERSION = "sketch-1"
#: Characters of passages a sketch shows by default (about 1,500 tokens).
DEFAULT_CHARS = 6000
MIN_CHARS = 500
MAX_CHARS = 100_000
#: Longest passage shown whole; longer ones are cut (head, or head and tail for tool output).
PASSAGE_CHARS = 900
#: Selection weight of each kind of unit (see the module docstring).
WEIGHTS = {"text": 1.0, "tool_use": 0.35, "tool_result": 0.2}
#: Most contrast directions explored.
MAX_AXES = 6
#: Dimensions of the hashed bag of words.
WORD_DIMS = 1024
#: Candidates for coverage besides anchors and contrasts: the densest units, and units evenly
#: spaced through the session.
DENSE = 48
SPACED = 16

_WORD = re.compile(r"[^\W\d_][\w'-]{2,}", re.UNICODE)
_STOP = frozenset({
    "the", "and", "for", "that", "this", "with", "you", "are", "was", "have", "not", "but",
    "from", "they", "can", "all", "will", "what", "your", "there", "their", "been", "has",
    "had", "were", "when", "which", "would", "about", "into", "then", "than", "them", "its",
    "our", "out", "use", "using", "used", "just", "also", "like", "some", "more", "only",
    "should", "could", "here", "how", "why", "who", "any", "one", "let", "now", "get", "see",
    "yes", "please", "thanks", "okay",
})


@dataclass(frozen=True)
class SketchPassage:
    """One passage of a sketch: a whole block (or its marked cut), with where it comes from."""

    turn_id: str
    seq: int
    ts: str
    role: str
    block_type: str
    tool_name: str | None
    block_idx: int
    text: str  # verbatim, cut to PASSAGE_CHARS with a marker when longer
    chars: int  # the whole block's length
    cut: bool
    why: tuple[str, ...]  # "opening", "closing", "central", "contrast", "coverage", "all"
    ids: tuple[str, ...]  # the chunk ids of the block (for trust marks)


@dataclass(frozen=True)
class Sketch:
    """A session's digest: its passages in session order, and what they were chosen from."""

    session_id: str
    passages: list[SketchPassage]
    basis: str  # "vectors", "words", or "all" (everything fitted: nothing to choose)
    units: int  # eligible blocks
    blocks: int  # every block of the session
    turns: int
    first_seq: int
    last_seq: int
    chars: int  # characters of the passages shown
    max_chars: int
    version: str  # the fingerprint it was computed for


@dataclass
class _Unit:
    turn_id: str
    seq: int
    ts: str
    role: str
    block_type: str
    tool_name: str | None
    block_idx: int
    text: str
    ids: tuple[str, ...]
    eligible: bool
    weight: float
    vector: Any = None


_ROW_COLUMNS = ["id", "text", "turn_id", "seq", "ts", "role", "block_type", "block_idx",
                "split_idx", "tool_name", "noise"]


def fingerprint(repo: Repository, session_id: str, max_chars: int) -> tuple[str, set[str]]:
    """The session's version key, and its visible chunk ids (empty: no such session).

    The key changes when a chunk of the session is added or forgotten, when one gains a
    vector, and with the budget or the selection's VERSION.
    """
    if not repo.chunks.exists():
        return "", set()
    where = f"session_id = {_lit(session_id)}"
    ids = set(repo.chunks.dataset().to_table(columns=["id"], filter=where)
              .column("id").to_pylist()) - repo.tombstoned_ids()
    embedded = sorted(_embedded_ids(repo, session_id) & ids)
    digest = hashlib.sha256()
    for part in (VERSION, str(max_chars), str(vector_label(repo)), *sorted(ids), "|", *embedded):
        digest.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest(), ids


def _embedded_ids(repo: Repository, session_id: str) -> set[str]:
    wanted = vector_label(repo)
    if wanted is None or not repo.vectors.exists():
        return set()
    table = repo.vectors.dataset().to_table(
        columns=["id"], filter=f"session_id = {_lit(session_id)} AND model = {_lit(wanted)}")
    return set(table.column("id").to_pylist())


def sketch(repo: Repository, session_id: str, max_chars: int = DEFAULT_CHARS, *,
           version: str = "") -> Sketch:
    """Select the passages of `session_id` (see the module docstring).

    `version` is the session's fingerprint when the caller computed it already.

    Raises:
        UsageError: a budget outside [MIN_CHARS, MAX_CHARS].
    """
    import numpy as np

    if not MIN_CHARS <= max_chars <= MAX_CHARS:
        raise UsageError(f"--max-chars must be between {MIN_CHARS} and {MAX_CHARS}, "
                         f"not {max_chars}")
    units = _units(repo, session_id)
    seqs = [u.seq for u in units]
    base = dict(session_id=session_id, blocks=len(units),
                turns=len({u.turn_id for u in units}), first_seq=min(seqs, default=0),
                last_seq=max(seqs, default=0), max_chars=max_chars, version=version)
    eligible = [i for i, u in enumerate(units) if u.eligible]
    shown = {i: _excerpt(units[i]) for i in eligible}
    if sum(len(shown[i][0]) for i in eligible) <= max_chars:
        chosen: dict[int, tuple[str, ...]] = {i: ("all",) for i in eligible}
        return _result(units, chosen, shown, "all", len(eligible), base)
    basis = "vectors" if all(units[i].vector is not None for i in eligible) else "words"
    matrix = (_vector_matrix([units[i] for i in eligible]) if basis == "vectors"
              else _word_matrix([units[i].text for i in eligible]))
    weights = np.asarray([units[i].weight for i in eligible], dtype=np.float64)
    costs = [len(shown[i][0]) for i in eligible]
    local = _select(units, eligible, matrix, weights, costs, max_chars)
    chosen = {eligible[j]: reasons for j, reasons in local.items()}
    return _result(units, chosen, shown, basis, len(eligible), base)


def _result(units: list[_Unit], chosen: dict[int, tuple[str, ...]],
            shown: dict[int, tuple[str, bool]], basis: str, eligible: int,
            base: dict[str, Any]) -> Sketch:
    passages = []
    for i in sorted(chosen):
        u = units[i]
        text, cut = shown[i]
        passages.append(SketchPassage(u.turn_id, u.seq, u.ts, u.role, u.block_type, u.tool_name,
                                      u.block_idx, text, len(u.text), cut, chosen[i], u.ids))
    return Sketch(passages=passages, basis=basis, units=eligible,
                  chars=sum(len(p.text) for p in passages), **base)


def _units(repo: Repository, session_id: str) -> list[_Unit]:
    """The session's blocks, stitched, in (seq, block, first id) order, with their vectors."""
    if not repo.chunks.exists():
        return []
    hidden = repo.tombstoned_ids()
    rows = [r for r in repo.chunks.dataset().to_table(
        columns=_ROW_COLUMNS, filter=f"session_id = {_lit(session_id)}").to_pylist()
        if r["id"] not in hidden]
    vectors = _vectors(repo, session_id)
    blocks: dict[tuple[int, str, int], dict[str, dict[str, Any]]] = {}
    for row in rows:
        key = (int(row["seq"]), row["turn_id"], int(row["block_idx"]))
        blocks.setdefault(key, {}).setdefault(row["id"], row)
    units = []
    for (seq, turn_id, block_idx), by_id in sorted(blocks.items()):
        parts = sorted(by_id.values(), key=lambda r: (r["split_idx"], r["id"]))
        texts = [p["text"] for p in parts]
        try:
            text = stitch_texts(texts) if len(texts) > 1 else texts[0]
        except ChunkingError:
            text = "\n[…]\n".join(texts)
        first = parts[0]
        kind = first["block_type"]
        noise = any(p["noise"] and p["noise"] != "tool-output-body" for p in parts)
        eligible = kind in WEIGHTS and not noise and bool(text.strip())
        unit = _Unit(turn_id, seq, first["ts"] or "", first["role"], kind, first["tool_name"],
                     block_idx, text, tuple(p["id"] for p in parts), eligible,
                     WEIGHTS.get(kind, 0.0))
        found = [(vectors[p["id"]], len(p["text"])) for p in parts if p["id"] in vectors]
        if found and eligible:
            unit.vector = found
        units.append(unit)
    return units


def _vectors(repo: Repository, session_id: str) -> dict[str, Any]:
    """The session's stored vectors of the memory's model, by chunk id (float64 rows)."""
    import numpy as np

    wanted = vector_label(repo)
    if wanted is None or not repo.vectors.exists():
        return {}
    table = repo.vectors.dataset().to_table(
        columns=["id", "vector"],
        filter=f"session_id = {_lit(session_id)} AND model = {_lit(wanted)}")
    if table.num_rows == 0:
        return {}
    column = table.column("vector").combine_chunks()
    matrix = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float64)
    matrix = matrix.reshape(table.num_rows, -1)
    return dict(zip(table.column("id").to_pylist(), matrix, strict=True))


def _vector_matrix(units: Sequence[_Unit]) -> np.ndarray:
    """One row per unit: the length-weighted mean of its chunks' vectors, unit length."""
    import numpy as np

    rows = np.empty((len(units), len(units[0].vector[0][0])), dtype=np.float64)
    for i, u in enumerate(units):
        if len(u.vector) == 1:
            rows[i] = u.vector[0][0]
            continue
        weights = np.asarray([w for _, w in u.vector], dtype=np.float64)
        stacked = np.vstack([v for v, _ in u.vector])
        rows[i] = weights @ stacked / (weights.sum() or 1.0)
    return _normalised(rows)


def _word_matrix(texts: Sequence[str]) -> np.ndarray:
    """One row per text: its words hashed into WORD_DIMS, weighted by tf × idf, unit length."""
    import numpy as np

    bags = []
    df: dict[str, int] = {}
    for text in texts:
        bag: dict[str, int] = {}
        for word in _WORD.findall(text.lower()):
            if word not in _STOP:
                bag[word] = bag.get(word, 0) + 1
        bags.append(bag)
        for word in bag:
            df[word] = df.get(word, 0) + 1
    n = len(texts)
    matrix = np.zeros((n, WORD_DIMS), dtype=np.float64)
    for row, bag in enumerate(bags):
        for word in sorted(bag):
            idf = math.log((1 + n) / (1 + df[word])) + 1.0
            matrix[row, zlib.crc32(word.encode("utf-8")) % WORD_DIMS] += \
                (1 + math.log(bag[word])) * idf
    return _normalised(matrix)


def _normalised(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def _select(units: list[_Unit], eligible: list[int], x: np.ndarray, weights: np.ndarray,
            costs: list[int], budget: int) -> dict[int, tuple[str, ...]]:
    """Local indices (into `eligible`) chosen, each with why (see the module docstring)."""
    import numpy as np

    n = len(eligible)
    lengths = np.asarray([len(units[i].text) for i in eligible], dtype=np.float64)
    quality = weights * np.clip(np.sqrt(lengths / 200.0), 0.25, 1.0)
    mass = weights
    why: dict[int, list[str]] = {}

    def pick(j: int | None, reason: str) -> None:
        if j is not None:
            why.setdefault(j, []).append(reason)

    prose = [j for j in range(n) if units[eligible[j]].block_type == "text"]
    pick(next((j for j in prose if units[eligible[j]].role == "user"), None), "opening")
    pick(next((j for j in reversed(prose) if units[eligible[j]].role == "assistant"), None),
         "closing")
    centre = (mass[:, None] * x).sum(axis=0) / max(float(mass.sum()), 1e-12)
    norm = float(np.linalg.norm(centre))
    if norm > 0:
        pick(int(np.argmax(x @ (centre / norm))), "central")
    # Contrasts: pivoted residuals of the centred units.
    y = x - centre
    residual = y.copy()
    axes = min(MAX_AXES, max(1, (max(4, budget // 700) - len(why)) // 2))
    for _ in range(axes):
        scores = quality * np.linalg.norm(residual, axis=1)
        p = int(np.argmax(scores))
        if scores[p] <= 1e-9:
            break
        q = residual[p] / np.linalg.norm(residual[p])
        residual = residual - np.outer(residual @ q, q)
        side = y @ q
        pick(int(np.argmax(quality * np.maximum(side, 0.0))), "contrast")
        pick(int(np.argmax(quality * np.maximum(-side, 0.0))), "contrast")
    # Greedy coverage under the budget, anchors first, then the contrasts and a few units
    # that stand for much of the session (dense) or for its stretches (evenly spaced).
    density = quality * (x @ (x.T @ mass))
    dense = [int(j) for j in np.argsort(-density, kind="stable")[:DENSE]]
    spaced = [round(k * (n - 1) / (SPACED - 1)) for k in range(SPACED)] if n > 1 else [0]
    anchors = sorted((j for j in why if set(why[j]) & {"opening", "closing", "central"}),
                     key=lambda j: (0 if {"opening", "closing"} & set(why[j]) else 1, j))
    pool = list(dict.fromkeys([*sorted(j for j in why if j not in anchors), *dense, *spaced]))
    pool = [j for j in pool if j not in anchors]
    covered = np.zeros(n, dtype=np.float64)
    chosen: dict[int, tuple[str, ...]] = {}
    spent = 0
    for j in anchors:
        if spent + costs[j] <= budget or not chosen:
            chosen[j] = tuple(why[j])
            spent += costs[j]
            covered = np.maximum(covered, np.clip(x @ x[j], 0.0, 1.0))
    # Each candidate's similarity to every unit, computed once (candidates × units).
    sims = np.clip(x[pool] @ x.T, 0.0, 1.0) if pool else np.zeros((0, n))
    left = list(range(len(pool)))
    while left:
        fits = [i for i in left if spent + costs[pool[i]] <= budget]
        if not fits:
            break
        gains = np.maximum(sims[fits] - covered, 0.0) @ mass
        scores = gains / np.sqrt(1.0 + np.asarray([costs[pool[i]] for i in fits]) / 4000.0)
        k = int(np.argmax(scores))
        if scores[k] <= 1e-12:
            break
        best = pool[fits[k]]
        chosen[best] = tuple(why.get(best, ["coverage"]))
        spent += costs[best]
        covered = np.maximum(covered, sims[fits[k]])
        left.remove(fits[k])
    return chosen


def _excerpt(unit: _Unit) -> tuple[str, bool]:
    """What a sketch shows of a unit, and whether it was cut."""
    text = unit.text
    if len(text) <= PASSAGE_CHARS:
        return text, False
    if unit.block_type == "tool_result":
        head, tail = text[: PASSAGE_CHARS * 2 // 3], text[-PASSAGE_CHARS // 4 :]
        return f"{head}\n[… {len(text) - len(head) - len(tail)} characters …]\n{tail}", True
    cut = text[:PASSAGE_CHARS]
    space = cut.rfind(" ")
    if space > PASSAGE_CHARS * 3 // 4:
        cut = cut[:space]
    return f"{cut} […]", True
