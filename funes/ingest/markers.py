"""funes's redaction marker, ``[REDACTED:<kind>]``, and the rule that it is never a finding.

Redaction replaces a secret by a marker, then runs every detector again on its own output (and
the publish gate, scrub and a later ingest run them on stored text). A rule that reads a
value after a name or a separator reads the marker as that value: ``password: [REDACTED:…]``,
``postgres://u:[REDACTED:url-password]@…``, and, because the marker holds a ``:``,
``curl -u [REDACTED:curl-user]`` reads as ``user:password`` with ``curl-user]`` the password.
Replacing such a finding nests markers (``[REDACTED:[REDACTED:curl-user]``) and, in the gate,
holds back a chunk that is clean.

So, for every engine and every pass: a finding that holds nothing but markers and punctuation
is dropped (:func:`only_markers`), and one that holds a real residue next to a marker is widened
to the whole marker it cuts (:func:`widen`), so the marker is replaced whole, never split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Final, Protocol, TypeVar

__all__ = ["MARKER", "MARKER_PREFIX", "only_markers", "settle", "widen"]

MARKER_PREFIX: Final = "[REDACTED:"

#: The marker, and any shape a rule's value may cut it to (`[REDACTED:url-password`,
#: `REDACTED:password]`).
MARKER: Final = re.compile(r"\[?REDACTED:[a-z0-9][a-z0-9:._-]{0,80}\]?")

#: How far around a span a marker it touches can start or end (a marker is at most 92 long).
_REACH: Final = 96


class _Span(Protocol):
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


S = TypeVar("S", bound=_Span)


def _touching(text: str, start: int, end: int) -> list[tuple[int, int]]:
    lo = max(0, start - _REACH)
    out = []
    for m in MARKER.finditer(text, lo, min(len(text), end + _REACH)):
        if m.end() > start and m.start() < end:
            out.append((m.start(), m.end()))
    return out


def only_markers(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` holds nothing but funes's markers and punctuation.

    The span is read with the markers it touches, so a value cut inside one counts too.
    """
    rest = list(text[start:end])
    for a, b in _touching(text, start, end):
        for k in range(max(a, start), min(b, end)):
            rest[k - start] = " "
    return not any(ch.isalnum() for ch in rest)


def widen(text: str, start: int, end: int) -> tuple[int, int]:
    """The span grown to hold each marker it cuts whole."""
    for a, b in _touching(text, start, end):
        start, end = min(start, a), max(end, b)
    return start, end


def settle(text: str, found: Sequence[S]) -> list[S]:
    """`found` (in order, not overlapping) without marker-only findings, cut markers whole.

    A widened finding that reaches the next one absorbs it (the earlier one's kind stays).
    """
    if "REDACTED:" not in text:
        return list(found)
    out: list[S] = []
    for f in found:
        if only_markers(text, f.start, f.end):
            continue
        start, end = widen(text, f.start, f.end)
        if out and start < out[-1].end:
            last = out[-1]
            out[-1] = replace(last, start=min(last.start, start),  # type: ignore[type-var]
                              end=max(last.end, end))
            continue
        out.append(f if (start, end) == (f.start, f.end)
                   else replace(f, start=start, end=end))  # type: ignore[type-var]
    return out
