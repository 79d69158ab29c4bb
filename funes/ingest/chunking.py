"""Chunking: a turn's blocks cut into windows the embedding model can read whole.

Chunks are the unit that is stored, searched (BM25 and vectors) and recalled, and their ids hash
their text, so the rules here are part of the on-disk contract: the same turn must give the same
chunks, byte for byte, on any machine and any Python (docs/design.md §2, §5). They are
written out in docs/chunking.md; this docstring only says why they are shaped the way they are.

* **Measured in the model's tokens.** Windows are sized with the model's own WordPiece tokenizer
  (:mod:`funes.ingest.tokenizer`), [CLS] and [SEP] included, so every chunk embeds whole:
  all-MiniLM-L6-v2 reads 256 tokens and llama.cpp aborts rather than truncate.
* **Cut where meaning breaks.** Among the positions that fit, the cut prefers a paragraph break,
  then a line break, then a sentence end, then any space, then any word boundary; only a single
  word longer than a window is split inside (at the longest prefix that fits).
* **Overlap that can be undone.** Consecutive chunks share a short tail (≤ `overlap_tokens`),
  so a passage that straddles a cut is still found. The shared part is a function of the
  earlier chunk's text alone, which is what lets :func:`stitch` take it off again and rebuild
  the block exactly — `funes get` and the tests rely on that.
* **Long tool output is kept, not embedded.** Every character of a tool result is chunked
  (BM25 and `get` see all of it), but the middle chunks of a long one are tagged
  ``noise="tool-output-body"``: its head (what was run) and tail (how it ended) carry the
  meaning, and embedding megabytes of logs at ~12 chunks/s would starve everything else.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from functools import cache
from itertools import accumulate
from typing import Final

from funes.errors import FunesError, UsageError
from funes.ingest.tokenizer import WordPieceTokenizer, WordSpans, get_tokenizer
from funes.model.chunk import Chunk
from funes.model.turns import Block, Turn

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
    "HEAD_CHUNKS",
    "OVERLAP_CHARS_PER_TOKEN",
    "TAIL_CHUNKS",
    "TOOL_OUTPUT_BODY",
    "ChunkingError",
    "chunk_turn",
    "overlap_start",
    "render_block",
    "split_text",
    "stitch",
    "stitch_texts",
]

#: The embedding model's context, special tokens included (all-MiniLM-L6-v2 was trained at 256).
DEFAULT_MAX_TOKENS: Final = 256
#: About one sentence: enough to carry context across a cut, small enough to cost ~12% extra.
DEFAULT_OVERLAP_TOKENS: Final = 32
#: A chunk never exceeds this many characters, even when its tokens would allow more (a word of
#: over 100 characters is a single [UNK] token, so a hex dump could otherwise be one 1 MB chunk).
#: Real text needs 3-5 characters per token, so this only binds on such blobs.
DEFAULT_MAX_CHARS: Final = 4096
#: The overlap is also capped at this many characters per overlap token, so that a next chunk
#: always has room for new text under `max_chars`.
OVERLAP_CHARS_PER_TOKEN: Final = 8
#: [CLS] and [SEP].
SPECIAL_TOKENS: Final = 2
#: Smallest `max_tokens` accepted: one character can become 3 tokens, plus the specials.
MIN_MAX_TOKENS: Final = 8

#: Long tool results: this many leading and trailing chunks are embedded; the rest are tagged.
HEAD_CHUNKS: Final = 2
TAIL_CHUNKS: Final = 1
TOOL_OUTPUT_BODY: Final = "tool-output-body"

# Boundary levels, strongest first (see docs/chunking.md).
PARAGRAPH: Final = 4
LINE: Final = 3
SENTENCE: Final = 2
SPACE: Final = 1
WORD: Final = 0

#: A word that ends a sentence when whitespace follows it...
_TERMINATORS: Final = frozenset(".!?…。！？｡")
#: ...or when it is followed by nothing at all (CJK text does not put spaces after sentences).
_CJK_TERMINATORS: Final = frozenset("。！？｡")
#: Closing quotes and brackets that may sit between a terminator and the space: `said "no."`.
_CLOSERS: Final = frozenset("\"')]}”’»`*_")


class ChunkingError(FunesError):
    """Chunks do not fit together (wrong order, missing pieces, or other chunking settings)."""


def render_block(block: Block) -> str:
    """The text of a block as it is chunked and shown.

    Tool calls and results are prefixed with their kind and tool name so that a passage says
    what it is (``[tool_use Bash] {"command": "ls"}``); prose and reasoning are verbatim.
    """
    if block.type in ("tool_use", "tool_result"):
        name = f" {block.tool_name}" if block.tool_name else ""
        return f"[{block.type}{name}] {block.text}"
    return block.text


def chunk_turn(
    turn: Turn,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[Chunk]:
    """Cut every block of `turn` into chunks carrying the turn's provenance.

    Blocks whose text is empty or whitespace produce nothing; `block_idx` still counts them, so
    it always indexes `turn.blocks`.

    Args:
        turn: The turn (already redacted: chunk text is stored as is).
        max_tokens: Tokens per chunk including [CLS] and [SEP].
        overlap_tokens: Most tokens two consecutive chunks of a block share.
        max_chars: Most characters in one chunk.

    Returns:
        Chunks in block order, then split order.
    """
    tok = get_tokenizer()
    _validate(max_tokens, overlap_tokens, max_chars)
    source = (
        f"{turn.source.path}:{turn.source.start}-{turn.source.end}" if turn.source else None
    )
    out: list[Chunk] = []
    for block_idx, block in enumerate(turn.blocks):
        if not block.text or block.text.isspace():
            continue
        text = render_block(block)
        pieces = _split(text, max_tokens - SPECIAL_TOKENS, overlap_tokens, max_chars, tok)
        n = len(pieces)
        body = block.type == "tool_result" and block.noise is None and n > HEAD_CHUNKS + TAIL_CHUNKS
        for split_idx, (start, end) in enumerate(pieces):
            noise = block.noise
            if body and HEAD_CHUNKS <= split_idx < n - TAIL_CHUNKS:
                noise = TOOL_OUTPUT_BODY
            out.append(
                Chunk(
                    text=text[start:end],
                    harness=turn.harness,
                    session_id=turn.session_id,
                    turn_id=turn.turn_id,
                    seq=turn.seq,
                    ts=turn.ts,
                    role=turn.role,
                    block_type=block.type,
                    block_idx=block_idx,
                    split_idx=split_idx,
                    tool_name=block.tool_name,
                    parent_turn_id=turn.parent_turn_id,
                    parent_session_id=turn.parent_session_id,
                    workdir=turn.workdir,
                    project=turn.project,
                    source=source,
                    noise=noise,
                )
            )
    return out


def split_text(
    text: str,
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[str]:
    """Cut one rendered text into overlapping windows (the core of :func:`chunk_turn`).

    Args:
        text: Any text; "" gives no windows.
        max_tokens: Tokens per window including [CLS] and [SEP].
        overlap_tokens: Most tokens two consecutive windows share.
        max_chars: Most characters in one window.
    """
    _validate(max_tokens, overlap_tokens, max_chars)
    tok = get_tokenizer()
    spans = _split(text, max_tokens - SPECIAL_TOKENS, overlap_tokens, max_chars, tok)
    return [text[a:b] for a, b in spans]


def overlap_start(text: str, overlap_tokens: int = DEFAULT_OVERLAP_TOKENS) -> int:
    """Where, in a chunk's text, the part repeated at the start of the next chunk begins.

    It depends on nothing but the chunk's own text, so it can be recomputed when stitching.
    Returns ``len(text)`` when nothing is repeated.
    """
    tok = get_tokenizer()
    if overlap_tokens <= 0 or not text or tok.is_word_char(text[-1]):
        return len(text)
    at = _tail_start(text, OVERLAP_CHARS_PER_TOKEN * overlap_tokens, tok)
    tail = text[at:]
    spans = tok.word_spans(tail)
    n = len(spans.starts)
    cum = [0, *accumulate(spans.counts)]
    j = _overlap_word(tail, spans, cum, 0, len(tail), 1, n, overlap_tokens)
    return len(text) if j is None else at + _boundary(tail, spans, j)


@cache
def _space_run(tok: WordPieceTokenizer) -> re.Pattern[str]:
    return re.compile(f"[{re.escape(tok.space_chars)}]+")


def _tail_start(text: str, window: int, tok: WordPieceTokenizer) -> int:
    """Where the part of `text` the overlap depends on starts (0: all of it).

    The overlap lies in the last `window` characters, and choosing it looks at most two words
    further back (`_level`), so the words of `text[at:]` are enough when `at` follows
    whitespace (no word runs across whitespace, so splitting there changes no later word)
    with three whole words between it and the window. Splitting a megabyte of tool output
    into words to place an overlap in its last 512 characters made stitching a block cost
    its length; this makes it cost the window.
    """
    end = len(text) - window
    if end <= 0:
        return 0
    run = _space_run(tok)
    for back in (64, 512, 4 * window):  # nearly always the first: prose has words, not blobs
        lo = max(0, end - back)
        runs = [m.end() for m in run.finditer(text, lo, end)]
        if len(runs) >= 4:
            return runs[-4]
        if lo == 0:
            break
    return 0


def stitch_texts(texts: Sequence[str], *, overlap_tokens: int = DEFAULT_OVERLAP_TOKENS) -> str:
    """Rebuild a block's rendered text from its consecutive chunk texts.

    Raises:
        ChunkingError: A chunk does not start with the overlap its predecessor implies (the
            chunks are out of order, one is missing, or they were cut with other settings).
    """
    if not texts:
        return ""
    parts = [texts[0]]
    for index in range(1, len(texts)):
        prev, cur = texts[index - 1], texts[index]
        shared = prev[overlap_start(prev, overlap_tokens) :]
        if not cur.startswith(shared):
            raise ChunkingError(
                f"chunk {index} does not continue chunk {index - 1}",
                hint="pass all chunks of one block, and the overlap_tokens they were cut with",
            )
        parts.append(cur[len(shared) :])
    return "".join(parts)


def stitch(chunks: Sequence[Chunk], *, overlap_tokens: int = DEFAULT_OVERLAP_TOKENS) -> str:
    """Rebuild the rendered text of one block from all of its chunks (in any order).

    Raises:
        ChunkingError: The chunks are not exactly splits 0..n-1 of one block, or do not fit
            together.
    """
    if not chunks:
        return ""
    ordered = sorted(chunks, key=lambda c: c.split_idx)
    first = ordered[0]
    key = (first.harness, first.session_id, first.turn_id, first.block_idx)
    for index, chunk in enumerate(ordered):
        if (chunk.harness, chunk.session_id, chunk.turn_id, chunk.block_idx) != key:
            raise ChunkingError("chunks from more than one block cannot be stitched together")
        if chunk.split_idx != index:
            raise ChunkingError(f"split {index} of the block is missing or duplicated")
    return stitch_texts([c.text for c in ordered], overlap_tokens=overlap_tokens)


# ------------------------------------------------------------------------------------------------
# The algorithm (docs/chunking.md states it in prose; keep the two in step)
# ------------------------------------------------------------------------------------------------


def _validate(max_tokens: int, overlap_tokens: int, max_chars: int) -> None:
    if max_tokens < MIN_MAX_TOKENS:
        raise UsageError(f"max_tokens must be at least {MIN_MAX_TOKENS}, not {max_tokens}")
    budget = max_tokens - SPECIAL_TOKENS
    if not 0 <= overlap_tokens <= budget // 2:
        raise UsageError(
            f"overlap_tokens must be between 0 and {budget // 2} for max_tokens={max_tokens}"
        )
    if max_chars < 2 * OVERLAP_CHARS_PER_TOKEN * max(overlap_tokens, 1) + 1:
        raise UsageError(
            f"max_chars must be more than {2 * OVERLAP_CHARS_PER_TOKEN} x overlap_tokens"
        )


def _level(text: str, spans: WordSpans, j: int, pos: int) -> int:
    """Strength of the boundary just before word `j`, looking back no further than `pos`."""
    words = spans.words
    a = spans.ends[j - 1]
    b = spans.starts[j]
    if a == b:  # no whitespace between the two words
        return SENTENCE if words[j - 1] in _CJK_TERMINATORS else WORD
    newlines = text.count("\n", a, b)
    if newlines >= 2:
        return PARAGRAPH
    if newlines == 1:
        return LINE
    prev = words[j - 1]
    if prev in _TERMINATORS:
        return SENTENCE
    if (
        prev in _CLOSERS
        and j >= 2
        and spans.starts[j - 2] >= pos
        and spans.ends[j - 2] == spans.starts[j - 1]
        and words[j - 2] in _TERMINATORS
    ):
        return SENTENCE
    return SPACE


@cache
def _patterns(tok: WordPieceTokenizer) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Paragraph breaks (two newlines in one gap) and sentence ends, for a tokenizer."""
    space = re.escape(tok.space_chars.replace("\n", ""))
    closers = re.escape("".join(sorted(_CLOSERS)))
    terminators = re.escape("".join(sorted(_TERMINATORS)))
    cjk = re.escape("".join(sorted(_CJK_TERMINATORS)))
    return (
        re.compile(f"\n[{space}]*\n"),
        re.compile(f"[{terminators}][{closers}]?(?=\\s)|[{cjk}]"),
    )


def _best_cut(
    text: str,
    spans: WordSpans,
    pos: int,
    lo: int,
    hi: int,
    patterns: tuple[re.Pattern[str], re.Pattern[str]],
) -> int:
    """The word before which to cut: the last of the strongest boundaries before `lo`..`hi`.

    Equivalent to taking the maximum of `_level` over the range (a property test checks it),
    but found with a few string searches instead of a Python loop over every word.
    """
    starts, ends = spans.starts, spans.ends
    a, b = ends[lo - 1], starts[hi]
    paragraph, sentence = patterns
    last = None
    for last in paragraph.finditer(text, a, b):  # noqa: B007 - only the last one matters
        pass
    if last is not None:
        return bisect_right(starts, last.start())
    newline = text.rfind("\n", a, b)
    if newline >= 0:
        return bisect_right(starts, newline)
    for m in reversed(list(sentence.finditer(text, max(pos, a - 2), b))):
        j = bisect_left(starts, m.end())
        if lo <= j <= hi and _level(text, spans, j, pos) == SENTENCE:
            return j
    for j in range(hi, lo - 1, -1):
        if starts[j] > ends[j - 1]:
            return j
    return hi


def _boundary(text: str, spans: WordSpans, j: int) -> int:
    """Where a cut before word `j` goes: after the last newline in front of it, if any.

    Whitespace ending a line stays with the text before the cut and indentation travels with
    the line it indents, so a chunk of code starts at a line start, indentation included.
    """
    start = spans.starts[j]
    newline = text.rfind("\n", spans.ends[j - 1], start)
    return start if newline < 0 else newline + 1


def _overlap_word(
    text: str,
    spans: WordSpans,
    cum: list[int],
    pos: int,
    end: int,
    lo: int,
    cut_j: int,
    overlap: int,
) -> int | None:
    """The first word of the overlap for the chunk `text[pos:end]` (words `lo - 1`..`cut_j - 1`).

    The overlap is a tail of whole words, never the chunk's first word, with at most `overlap`
    tokens and `OVERLAP_CHARS_PER_TOKEN * overlap` characters; within that window it starts
    at the strongest boundary (a sentence, line or paragraph start all count as the
    strongest), the earliest such, so it is as long as allowed.
    """
    if overlap <= 0 or cut_j <= lo:
        return None
    j0 = bisect_left(cum, cum[cut_j] - overlap, lo, cut_j)
    j0 = max(j0, bisect_left(spans.starts, end - OVERLAP_CHARS_PER_TOKEN * overlap, lo, cut_j))
    if j0 >= cut_j:
        return None
    floor = end - OVERLAP_CHARS_PER_TOKEN * overlap
    best_j = None
    best = -1
    for j in range(j0, cut_j):
        level = _level(text, spans, j, pos)
        if level >= LINE and _boundary(text, spans, j) < floor:
            continue  # its indentation would take the overlap past the character cap
        level = min(level, SENTENCE)
        if level > best:
            best, best_j = level, j
            if level == SENTENCE:
                break
    return best_j


def _split(
    text: str, budget: int, overlap: int, max_chars: int, tok: WordPieceTokenizer
) -> list[tuple[int, int]]:
    """Chunk spans ``(start, end)`` of `text`, each fitting `budget` content tokens."""
    n_text = len(text)
    if n_text == 0:
        return []
    # Counting is half the price of word spans; worth trying first only when the text could
    # plausibly fit (real text averages 3-5 characters a token).
    if n_text <= min(max_chars, 6 * budget) and tok.count(text, add_special_tokens=False) <= budget:
        return [(0, n_text)]
    spans = tok.word_spans(text)
    starts, ends = spans.starts, spans.ends
    nw = len(starts)
    cum = [0, *accumulate(spans.counts)]

    def fits(a: int, b: int) -> bool:
        return b - a <= max_chars and tok.count(text[a:b], add_special_tokens=False) <= budget

    out: list[tuple[int, int]] = []
    pos = 0  # start of the current chunk
    prev_end = 0  # end of the previous chunk: the current one must reach past it
    while True:
        # Word i is the first word that ends after pos; the chunk holds it (perhaps only its
        # tail, after a split inside it) and may end before any later word.
        i = bisect_right(ends, pos)
        first = i + 1
        if i < nw and starts[i] < pos:
            # Counted on its own; unless it runs past max_chars, when no later cut can fit
            # anyway (and counting a megabyte-long blob again for every window would be
            # quadratic).
            tail = text[pos : ends[i]] if ends[i] - pos <= max_chars else ""
            base = cum[i + 1] - tok.count(tail, add_special_tokens=False)
        else:
            base = cum[min(i, nw)]
        # Candidates: cut before word j (or at the end, j == nw), for j >= first.
        j_tok = bisect_right(cum, base + budget, first) - 1
        if n_text - pos <= max_chars:
            j_chr = nw
        elif first <= nw:
            j_chr = bisect_right(starts, pos + max_chars, first, nw) - 1
        else:
            j_chr = -1
        j_max = min(j_tok, j_chr, nw)
        if j_max == nw:
            out.append((pos, n_text))
            return out
        j_min = max(first, bisect_right(starts, prev_end, first, nw))
        if j_min < nw and _boundary(text, spans, j_min) <= prev_end:
            j_min += 1
        if j_max >= j_min:
            # Prefer the strongest boundary among cuts that fill at least half the budget;
            # the last of equals, so chunks are as full as the text allows.
            j_fill = bisect_left(cum, base + budget // 2, j_min, j_max + 1)
            lo = j_fill if j_fill <= j_max else j_min
            cut_j = _best_cut(text, spans, pos, lo, j_max, _patterns(tok))
            cut = _boundary(text, spans, cut_j)
            out.append((pos, cut))
            if tok.is_word_char(text[cut - 1]):
                nxt = None
            else:
                nxt = _overlap_word(text, spans, cum, pos, cut, first, cut_j, overlap)
            prev_end, pos = cut, (cut if nxt is None else _boundary(text, spans, nxt))
            continue
        # Hard split: even the shortest admissible chunk does not fit. Take the longest prefix
        # that does (bisection over characters; every probe is verified).
        p1 = _boundary(text, spans, j_min) if j_min < nw else n_text
        lo_q = max(pos, prev_end) + 1
        hi_q = min(p1, pos + max_chars)
        if not fits(pos, lo_q):
            raise ChunkingError(f"internal error: no progress possible at offset {pos}")
        while lo_q < hi_q:
            mid = (lo_q + hi_q + 1) // 2
            if fits(pos, mid):
                lo_q = mid
            else:
                hi_q = mid - 1
        cut = lo_q
        out.append((pos, cut))
        if cut >= n_text:
            return out
        prev_end, pos = cut, pos + overlap_start(text[pos:cut], overlap)
