"""The agent format of the browsing verbs, and the lines recall gains from pooling and freshness.

A stable contract like the rest of the agent format (docs/agents.md, golden tests in
tests/retrieval/test_browse_format.py): `sessions`, `get --from/--to`, `scan` and `sketch` print
these strings in the CLI, the MCP tools and the warm server alike. Every output is bounded and
ends, when there is more, with a `# next:` line holding the command that shows it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from funes.api.agent_format import UNTRUSTED, UNTRUSTED_PASSAGES, body, tag
from funes.api.browse import ScanPage, SessionPage, SketchPage, TurnPage

__all__ = ["scan_text", "sessions_text", "sketch_text", "turn_page_text"]

#: Most linked commits a session entry lists.
SHOWN_COMMITS = 3


def _place(project: str | None, workdir: str | None) -> str:
    return project or workdir or "-"


def _memory_arg(label: str) -> str:
    return shlex.quote(label)


def _trust_header(trusted: bool, label: str, any_doubtful: bool) -> list[str]:
    if not trusted:
        return [UNTRUSTED.format(label=label)]
    return [UNTRUSTED_PASSAGES] if any_doubtful else []


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _one_line(text: str, limit: int = 160) -> str:
    return " ".join(text.split())[:limit]


def _filters(filters: Mapping[str, Any]) -> str:
    parts = []
    for name, value in filters.items():
        for v in value if isinstance(value, list) else [value]:
            parts.append(f"--{name} {shlex.quote(str(v))}")
    return (" " + " ".join(parts)) if parts else ""


def sessions_text(page: SessionPage) -> str:
    """`funes sessions`: one entry per session, newest first, then the count and what's next."""
    if not page.sessions:
        return "no sessions" if not page.total else \
            f"no sessions at offset {page.offset} ({page.total} in all)"
    lines = _trust_header(page.trusted, page.memory,
                          any(s.untrusted for s in page.sessions))
    label = _memory_arg(page.memory)
    for s in page.sessions:
        mark = " untrusted" if s.untrusted else ""
        until = f", until {s.end}" if s.end and s.end != s.start else ""
        lines.append(f"[{s.start or '-'}] {s.harness} {_place(s.project, s.workdir)}/"
                     f"{s.session_id} {_count(s.turns, 'turn')}{until}{mark}")
        if s.opening:
            lines.append(f"  > {_one_line(s.opening)}")
        for c in s.commits[:SHOWN_COMMITS]:
            lines.append(f"  ~ commit {c.sha[:12]} {_one_line(c.summary, 120)}")
        if len(s.commits) > SHOWN_COMMITS:
            lines.append(f"  ~ … {_count(len(s.commits) - SHOWN_COMMITS, 'more commit')}")
        lines.append(f"  → funes sketch {s.session_id} --memory {label}")
        lines.append("---")
    first = page.offset + 1
    last = page.offset + len(page.sessions)
    lines.append(f"{_count(page.total, 'session')}; shown {first}–{last}, newest first")
    if page.next_offset is not None:
        lines.append(f"# next: funes sessions --offset {page.next_offset} --limit {page.limit}"
                     f"{_filters(page.filters)} --memory {label}")
    return "\n".join(lines)


def _turn_lines(page_turns: Sequence[Any], marked: frozenset[str]) -> list[str]:
    """Turns as `get` prints them (docs/agents.md), a turn holding doubtful passages marked."""
    lines = []
    for t in page_turns:
        mark = " untrusted" if t.turn_id in marked else ""
        lines.append(f"   [{t.ts or '-'}] {t.harness} {t.role} seq{t.seq} turn {t.turn_id}{mark}")
        for b in t.blocks:
            noise = f" noise={b.noise}" if b.noise else ""
            lines.append(f"[{tag(b.block_type, b.tool_name)}{noise}]")
            lines.append(body(b.text, b.block_type, b.tool_name))
        lines.append("---")
    return lines


def turn_page_text(page: TurnPage) -> str:
    """`funes get SESSION --from A --to B`: a header, whole turns, where to continue."""
    s = page.session
    shown = page.turns
    lines = _trust_header(page.trusted, page.memory, bool(page.untrusted_turns))
    lines.append(f"# session {s.session_id} ({s.harness}, {_place(s.project, s.workdir)}): "
                 f"turns seq {shown[0].seq}–{shown[-1].seq} of {s.first_seq}–{s.last_seq} "
                 f"({len(shown)} shown of {s.turns})")
    lines += _turn_lines(shown, page.untrusted_turns)
    if page.next_seq is not None:
        to = f" --to {page.last}" if page.last != s.last_seq else ""
        lines.append(f"# next: funes get {s.session_id} --from {page.next_seq}{to} "
                     f"--memory {_memory_arg(page.memory)}")
    return "\n".join(lines)


def _excerpt(before: str, found: str, after: str) -> str:
    head = "… " if before else ""
    tail = " …" if after else ""
    return head + " ".join(f"{before}{found}{after}".split()) + tail


def scan_text(page: ScanPage) -> str:
    """`funes scan NEEDLE`: the count, then each block holding it, oldest session first."""
    needle = json.dumps(page.needle, ensure_ascii=False)
    if not page.total:
        return f"no matches for {needle}"
    label = _memory_arg(page.memory)
    lines = _trust_header(page.trusted, page.memory, any(h.untrusted for h in page.hits))
    first, last = page.offset + 1, page.offset + len(page.hits)
    found = f"scan {needle}: {_count(page.total, 'block')} in {_count(page.sessions, 'session')}"
    lines.append(f"{found}; shown {first}–{last}" if page.hits
                 else f"{found}; none at offset {page.offset}")
    for h in page.hits:
        r = h.row
        mark = " untrusted" if h.untrusted else ""
        lines.append(f"[{r.get('ts') or '-'}] {r['harness']} "
                     f"{_place(r.get('project'), r.get('workdir'))}/{str(r['session_id'])[:8]} "
                     f"{r['role']} {tag(r['block_type'], r.get('tool_name'))} "
                     f"seq{r['seq']}{mark}")
        lines.append(f"  → funes get {r['session_id']} {r['turn_id']} --memory {label}")
        lines.append(f"  {_excerpt(h.before, h.found, h.after)}")
        lines.append("---")
    if page.next_offset is not None:
        scope = "".join(f" {shlex.quote(s)}" for s in page.scope)
        lines.append(f"# next: funes scan {shlex.quote(page.needle)}{scope} --offset "
                     f"{page.next_offset} --limit {page.limit} --memory {label}")
    return "\n".join(lines)


def sketch_text(page: SketchPage) -> str:
    """`funes sketch SESSION`: a header, then the chosen passages in session order."""
    k = page.sketch
    label = _memory_arg(page.memory)
    lines = _trust_header(page.trusted, page.memory, bool(page.untrusted_turns))
    if not k.passages:
        lines.append(f"# sketch of {k.session_id}: nothing to show ({k.blocks} blocks, all "
                     "scaffolding or thinking)")
        return "\n".join(lines)
    chose = "all of them" if k.basis == "all" else f"chosen by {k.basis}"
    lines.append(f"# sketch of {k.session_id}: {len(k.passages)} passages of {k.units} "
                 f"({chose}), {k.chars} of {k.max_chars} characters; turns seq "
                 f"{k.first_seq}–{k.last_seq} ({k.turns} turns)")
    for p in k.passages:
        mark = " untrusted" if p.turn_id in page.untrusted_turns else ""
        why = "" if p.why == ("all",) else f" ({', '.join(p.why)})"
        lines.append(f"[{p.ts or '-'}] {p.role} {tag(p.block_type, p.tool_name)} seq{p.seq}"
                     f"{why}{mark}")
        lines.append(f"  → funes get {k.session_id} {p.turn_id} --memory {label}")
        lines.append(body(p.text, p.block_type, p.tool_name))
        lines.append("---")
    if k.basis != "all":
        lines.append(f"# next: funes get {k.session_id} --from {k.first_seq} --memory {label}"
                     " (the whole session, in order)")
    return "\n".join(lines)
