"""Turning stored text into safe HTML: escaping, query terms marked, redactions shown as such.

Everything a transcript says is untrusted input to a web page: it is escaped piece by piece
here (never marked up first and escaped after, which would let a term match inside an
entity), and only this module's own `<mark>` and `<span>` wrap the pieces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from html import escape

from markupsafe import Markup

#: The marker funes.ingest.redact writes in place of a secret: `[REDACTED:<kind>]`.
REDACTION = re.compile(r"\[REDACTED:([A-Za-z0-9_.\-]{1,64})\]")
#: Query words worth marking (short ones would mark half a page).
_WORD = re.compile(r"\w{3,}", re.UNICODE)
#: Words too common to be worth marking (English; a question's other words still are).
_COMMON = frozenset({
    "the", "and", "for", "are", "was", "were", "has", "have", "had", "not", "but", "you", "your",
    "our", "can", "does", "did", "how", "what", "when", "where", "which", "who", "why", "with",
    "this", "that", "these", "those", "from", "into", "about", "there", "their", "then", "than",
    "will", "would", "should", "could", "been", "being", "its", "any", "all",
})


def terms_of(query: str | None) -> list[str]:
    """The words of a query that a page marks where they occur."""
    if not query:
        return []
    words = (w.lower() for w in _WORD.findall(query))
    return list(dict.fromkeys(w for w in words if w not in _COMMON))[:12]


def _pattern(terms: Iterable[str]) -> re.Pattern[str]:
    words = sorted({re.escape(t) for t in terms}, key=len, reverse=True)
    parts = [REDACTION.pattern]
    if words:
        parts.append(r"(?i:" + "|".join(words) + r")")
    return re.compile("|".join(parts))


def rich(text: str, terms: Iterable[str] = ()) -> Markup:
    """`text` as HTML: escaped, query terms in `<mark>`, redactions as labelled placeholders."""
    pattern = _pattern(terms)
    out: list[str] = []
    at = 0
    for m in pattern.finditer(text):
        out.append(escape(text[at : m.start()], quote=False))
        found = m.group(0)
        if m.group(1) is not None:
            kind = escape(m.group(1))
            out.append(f'<span class="redacted" title="a secret ({kind}) was removed '
                       f'before storing">[redacted {kind}]</span>')
        else:
            out.append(f"<mark>{escape(found, quote=False)}</mark>")
        at = m.end()
    out.append(escape(text[at:], quote=False))
    return Markup("".join(out))  # every piece above is escaped


def day_of(ts: str) -> str:
    """The calendar day (UTC, YYYY-MM-DD) of a transcript time; "unknown" without one."""
    return ts[:10] if len(ts) >= 10 and ts[4:5] == "-" else "unknown"


def when(ts: str | None) -> str:
    """A stored time as people read it: `2026-04-02 08:03 UTC`."""
    if not ts:
        return "time unknown"
    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return ts
    return moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if moment.utcoffset() is not None
                                                 and not moment.utcoffset() else "")


def short(sha: str | None, n: int = 10) -> str:
    """An object or commit id, shortened for display."""
    return (sha or "")[:n]


def clip(text: str | None, n: int) -> str:
    """At most `n` characters of `text`, one line, with an ellipsis when cut."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= n else flat[: n - 1].rstrip() + "…"
