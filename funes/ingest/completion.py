"""What a redaction implies beyond the span a detector found: repeats, pieces and cut tokens.

A detector finds a secret once, where something names or shapes it; the same text often holds
more of it. A key named in ``.env`` is pasted again unnamed in a ``curl`` line; an OAuth
client's id is the tail of its secret (Shopify, Wiz, 42 Intra); a detector's bounded pattern
stops at a ``.``, a ``-``, an ``=`` or a ``?`` inside a long token; a quoted secret holds its own
quote character. Leaving any of these is a partial leak (16 characters of a secret are enough to
find the rest by search), so every finding of every engine goes through :func:`complete`:

* **repeats**: every other occurrence of a found value (8+ characters, looks generated) is a
  finding of the same kind;
* **pieces**: a token elsewhere that shares a 16-character run with a found value is a
  finding too, whole (the client id that is the secret's tail, a repeated half);
* **cut tokens**: a finding that stops at ``.``/``-`` followed by token characters runs on to
  the token's end; a random value's ``:``- or ``=``-joined random parts go with it (``id:secret``,
  base64 with ``=`` inside), backwards too; a finding right after a quote runs on to the quote
  that closes the value, when the value holds no space.

Linear: repeats are ``str.find`` per value (or one scan with a table of heads); pieces are
``str.find`` of a found value's 8-character blocks, and every hit is grown at most to 4 KB.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from typing import Final, Protocol

from funes.ingest.detectors import (
    _PART_CHARS,
    MARKER,
    _name_like,
    _transitions,
    _word_letters,
)

__all__ = ["FIXED_END_KINDS", "complete"]

Raw = list[tuple[int, int, int, str]]


class _Span(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def kind(self) -> str: ...


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


_ALNUM: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_TOKEN_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
)
_DOT_TAIL: Final = re.compile(r"(?:[.-][A-Za-z0-9][A-Za-z0-9+/=_]{0,4096}){1,64}")
#: A value this short could be a word that happens to be a password; repeats of it are not.
_REPEAT_MIN: Final = 8
#: Above this many distinct values, repeats are found with one scan of the text (a table of
#: the values' first 8 characters) instead of one search per value.
_FIND_EACH_MAX: Final = 16
#: A piece of a secret this long kept anywhere is a leak (what the coverage bench counts).
_PIECE: Final = 16
#: Pieces are found by their aligned blocks: a 16-character run always holds a whole one.
_BLOCK: Final = 8
#: Hits of one block searched at most (a block of filler can occur everywhere).
_BLOCK_HITS: Final = 4096
_PIECE_GROW: Final = 4096
#: Up to this many distinct blocks are searched one by one (`str.find`), more in one pass.
_FIND_BLOCKS_MAX: Final = 256
#: Longer values are searched whole (repeats) but not for pieces.
_PIECE_VALUE_MAX: Final = 1024

#: Kinds whose span is a whole structure already (a PEM block, a URL's password between its
#: `:` and `@`): their neighbours are a user name or a header, not more of the secret.
#: Kinds whose format fixes where the value ends (a hash, then a shadow line's `:19000:`):
#: never joined, never run on to a token's end (here or in funes.ingest.redact).
#: (a URL path's token ends at its `/`: `/api/v1/<token>/telemetry` keeps its route)
FIXED_END_KINDS: Final = frozenset({"password-hash", "url-path-token"})
_NOT_JOINED_KINDS: Final = frozenset(
    {"private-key", "url-password", "kubernetes-secret", *FIXED_END_KINDS}
)
_PART_AFTER: Final = re.compile(r"[:=]{1,4}[A-Za-z0-9+/_-]{4,256}")
_QUOTES: Final = frozenset("\"'`")
_NOT_IN_VALUE: Final = frozenset(" \t\r\n")


def _joined(text: str, start: int, end: int) -> tuple[int, int]:
    """Extend a random value over `:`- or `=`-joined parts that are not names.

    One credential: `id:secret`, Asana's `n/id:key`, base64 with `=` inside.
    """
    for _ in range(4):
        if text[start - 1 : start] not in (":", "="):
            break
        k = start - 1
        while k > 0 and start - 1 - k < 2 and text[k - 1] == "=":
            k -= 1  # base64 padding ends the part before the joiner
        while k > 0 and start - k < 256 and text[k - 1] in _PART_CHARS:
            k -= 1
        part = text[k : start - 1]
        if len(part) < 4 or not any(ch.isdigit() for ch in part) or _name_like(part):
            break
        if part.startswith("//"):
            break  # `https://oauth2:<token>@host`: a URL's user name, which stays
        start = k
    for _ in range(4):
        m = _PART_AFTER.match(text, end) if text[end : end + 1] in (":", "=") else None
        if m is None or not any(ch.isdigit() for ch in m.group(0)):
            break
        end = m.end()
    return start, end


def _quoted(text: str, start: int, end: int) -> tuple[int, int]:
    r"""The end of the quoted value a finding starts, when it stopped short of its quote.

    The value runs to the first same quote that is followed by something a value cannot
    continue with (a quote inside a token, `ab'cd`, is part of it, and so is the shell's
    `'\''`); a space or the line's end first means the quote is not the value's. Also returns
    how far the text was read (findings before that point are not read again: linear).
    """
    quote = text[start - 1 : start]
    if quote not in _QUOTES:
        return end, end
    k = end
    limit = min(len(text), start + _PIECE_GROW)
    while k < limit:
        ch = text[k]
        if ch in _NOT_IN_VALUE:
            return end, k
        if ch == "'" == quote and text.startswith("\\''", k + 1):
            k += 4  # the shell's quote inside single quotes: 'it'\''s'
            continue
        if ch == quote and (k + 1 >= len(text) or not text[k + 1].isalnum()):
            return k, k
        k += 1
    return end, k


def _repeatable(value: str) -> bool:
    """A found value whose other occurrences are the same secret: it looks generated.

    A word-like value (`boolean?` read as a password in a schema, `hunter2hunter2`) is left to
    the detectors where it occurs: spreading one doubtful finding to every repeat of a common
    word would multiply a false positive through a whole file.
    """
    letters = sum(ch.isalpha() for ch in value)
    words = _word_letters(value)
    if words * 2 > letters:
        return False
    entropy = _entropy(value)
    if entropy >= 3.0 and (any(ch.isdigit() for ch in value) or not value.isalpha()
                           or _transitions(value) >= 4):
        return True  # mixed classes, or letters changing case every few characters
    digits = len(value) - letters
    return entropy >= 2.5 and not words and min(letters, digits) >= 3  # `3ff77bb6fe6885`


def _near(starts: list[int], ends: list[int], a: int, b: int) -> int:
    """The end of a (sorted, disjoint) span that `a:b` overlaps or touches, else -1."""
    k = bisect_right(starts, b) - 1
    return ends[k] if k >= 0 and ends[k] >= a else -1


def _pieces(text: str, values: dict[str, str], spans: list[tuple[int, int]],
            priority: dict[str, int]) -> Raw:
    """Tokens outside the found spans sharing a 16-character run with a found value.

    A hit touching a found span is that finding's own text (a periodic value meets itself
    shifted): only hits apart from every span are pieces. A few blocks are searched with
    `str.find`, many with one pass over the text and a table of blocks; hits skip past what
    they matched, and a run grows at most 4 KB: linear either way.
    """
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    table: dict[str, list[tuple[str, int]]] = {}
    for value in values:
        if _PIECE <= len(value) <= _PIECE_VALUE_MAX:
            for off in range(0, len(value) - _BLOCK + 1, _BLOCK):
                table.setdefault(value[off : off + _BLOCK], []).append((value, off))
    more: Raw = []
    n = len(text)

    def grow(k: int, value: str, off: int) -> int:
        """Add the piece a hit at `k` (value offset `off`) belongs to; return where it ends."""
        a, b, va, vb = k, k + _BLOCK, off, off + _BLOCK
        while a > 0 and va > 0 and text[a - 1] == value[va - 1]:
            a, va = a - 1, va - 1
        while b < n and vb < len(value) and text[b] == value[vb]:
            b, vb = b + 1, vb + 1
        if b - a >= _PIECE:
            lo, hi = a, b  # the whole token holding the piece
            while lo > 0 and a - lo < _PIECE_GROW and text[lo - 1] in _PART_CHARS:
                lo -= 1
            while hi < n and hi - b < _PIECE_GROW and text[hi] in _PART_CHARS:
                hi += 1
            kind = values[value]
            more.append((lo, hi, priority.get(kind, 10), kind))
        return b

    if len(table) <= _FIND_BLOCKS_MAX:
        for block, owners in table.items():
            k = text.find(block)
            hits = 0
            while k >= 0 and hits < _BLOCK_HITS:
                hits += 1
                skip = _near(starts, ends, k, k + _BLOCK)
                if skip >= 0:
                    k = text.find(block, skip)
                    continue
                k = max(grow(k, value, off) for value, off in owners[:4])
                k = text.find(block, k)
        return more
    i = 0
    while i <= n - _BLOCK:
        found_owners = table.get(text[i : i + _BLOCK])
        if found_owners is None:
            i += 1
            continue
        skip = _near(starts, ends, i, i + _BLOCK)
        if skip >= 0:
            i = skip
            continue
        i = max(grow(i, value, off) for value, off in found_owners[:4])
    return more


def complete(text: str, found: Sequence[_Span], priority: dict[str, int]) -> Raw:
    """More findings implied by `found` (merged, in order): repeats, pieces and cut tokens."""
    more: Raw = []
    values: dict[str, str] = {}  # repeated whole
    long: dict[str, str] = {}  # searched for pieces: any value a piece of which would leak
    read_to = 0  # how far quoted values were read
    for f in found:
        start, end = f.start, f.end
        if f.kind not in FIXED_END_KINDS and text[end : end + 1] in ".-" and text[
            end + 1 : end + 2] in _ALNUM and (
            end > start and text[end - 1] in _TOKEN_CHARS
        ):
            m = _DOT_TAIL.match(text, end)
            if m is not None:
                end = m.end()
        if f.kind not in _NOT_JOINED_KINDS:
            start, end = _joined(text, start, end)
            if start >= read_to:
                end, read_to = _quoted(text, start, end)
        if (start, end) != (f.start, f.end):
            more.append((start, end, priority.get(f.kind, 10), f.kind))
        value = text[start:end]
        if MARKER in value or "\n" in value:
            continue
        if len(value) >= _REPEAT_MIN and _repeatable(value):
            values.setdefault(value, f.kind)
        if len(value) >= _PIECE:
            long.setdefault(value, f.kind)
    if not values and not long:
        return more
    spans = [(f.start, f.end) for f in found] + [(s, e) for s, e, _p, _k in more]
    known = set(spans)
    if len(values) <= _FIND_EACH_MAX:
        for value, kind in values.items():
            k = text.find(value)
            while k >= 0:
                if (k, k + len(value)) not in known:
                    more.append((k, k + len(value), priority.get(kind, 10), kind))
                k = text.find(value, k + len(value))
    else:
        heads: dict[str, list[str]] = {}
        for value in values:
            heads.setdefault(value[:_REPEAT_MIN], []).append(value)
        for i in range(len(text) - _REPEAT_MIN + 1):
            cands = heads.get(text[i : i + _REPEAT_MIN])
            if cands is None:
                continue
            for value in cands:
                if text.startswith(value, i) and (i, i + len(value)) not in known:
                    more.append((i, i + len(value), priority.get(values[value], 10),
                                 values[value]))
    spans += [(s, e) for s, e, _p, _k in more]
    more += _pieces(text, long, _disjoint(spans), priority)
    return more


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of `spans` as sorted, disjoint spans."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out
