"""The agent format: the plain text agents read (docs/agents.md), shared by the CLI and MCP.

`funes recall|get|status --format agent` and the MCP tools `recall`, `get` and `status` print
exactly these strings, so an agent sees the same thing whichever way it asks. The format is a
contract pinned by golden tests (tests/retrieval/test_agent_format.py): change it only on
purpose, and update docs/agents.md with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from funes.api.backfill import BackfillStatus
from funes.api.exclusions import ExclusionInfo
from funes.api.repo import StatusResult
from funes.api.search import RecallResult, SearchStatus, TurnView
from funes.api.syncstate import RemoteStatus
from funes.api.trust import UNTRUSTED, UNTRUSTED_PASSAGES, trust_header

__all__ = ["PARTLY_EMBEDDED", "REVISITED", "UNTRUSTED", "UNTRUSTED_PASSAGES", "fresh_lines",
           "get_command",
           "recall_text", "status_text", "turns_text"]

#: Printed when the recall searched vectors but part of the memory has none yet (the backfill
#: after `funes add`): those passages could only be found by their words.
PARTLY_EMBEDDED = (
    "# note: partly embedded memory: {waiting} passages have no vector yet and were matched by "
    "their words only (`funes status` shows the backfill)"
)


def _short(oid: str | None) -> str:
    return oid[:12] if oid else "(none)"


def tag(block_type: str, tool_name: str | None) -> str:
    """`<block_type>[ <tool_name>]`: what a block is, as the bracket above its text says."""
    return block_type + (f" {tool_name}" if tool_name else "")


def body(text: str, block_type: str, tool_name: str | None) -> str:
    """A block's text without the `[<tag>] ` label it starts with, when it does.

    Chunking prefixes tool calls and results with their label (funes.ingest.chunking,
    `render_block`) so that a passage says what it is to BM25 and the embedder; where a line
    already names the block, printing the label again would say it twice.
    """
    label = f"[{tag(block_type, tool_name)}] "
    return text[len(label):] if text.startswith(label) else text


#: The line a hit carries when a later passage revisits its subject (retrieval.supersede).
REVISITED = "revisited later"


def get_command(row: dict[str, Any], label: str) -> str:
    """`funes get <session_id> <turn_id> --memory <label>`: the command that opens a turn."""
    return f"funes get {row['session_id']} {row['turn_id']} --memory {label}"


def where(row: dict[str, Any]) -> str:
    """`<project-or-workdir>/<session8>`, as a hit header names its session."""
    place = row.get("project") or row.get("workdir") or "-"
    return f"{place}/{str(row['session_id'])[:8]}"


def recall_text(result: RecallResult, label: str, trusted: bool, note: str | None = None,
                memories: Mapping[str, bool] | None = None) -> str:
    """Recall hits in the stable agent format of docs/design.md §8 (`no results` when empty).

    `note` is put first, as `# note: …` lines (the copy of an unreachable remote read
    instead, a memory that has not synced for long: funes.api.syncstate.sync_note). A recall
    that searched vectors while part of the memory still waits for them says so next
    (`PARTLY_EMBEDDED`). `trusted` says whether the memory is the user's; each hit and
    neighbour carries its own mark (`row["untrusted"]`, set by funes.api.trust), so the two
    never disagree. `memories` (label → the user's own?) makes it a pooled recall's output
    (funes.api.pool): each hit's `→` line names the memory in its `row["memory"]`, and each
    memory that is not the user's gets its own warning line.
    """
    lines = [note] if note else []
    if not result.hits:
        return "\n".join([*lines, "no results"])
    if result.backlog and "vector" in result.signals:
        lines.append(PARTLY_EMBEDDED.format(waiting=result.backlog))
    labels = [str(hit.row.get("memory") or label) for hit in result.hits]
    if memories is not None:
        mine = {m: memories.get(m, False) for m in labels}
        lines += [UNTRUSTED.format(label=m) for m, own in mine.items() if not own]
        if any(mine[m] and hit.row.get("untrusted")
               for m, hit in zip(labels, result.hits, strict=True)):
            lines.append(UNTRUSTED_PASSAGES)
    else:
        header = trust_header(label, trusted, any(h.row.get("untrusted") for h in result.hits))
        if header:
            lines.append(header)
    for hit, hit_label in zip(result.hits, labels, strict=True):
        r = hit.row
        mark = " untrusted" if r.get("untrusted") else ""
        lines.append(f"[{r.get('ts') or '-'}] {r['harness']} {where(r)} {r['block_type']} "
                     f"score={hit.score:.3f}{mark}")
        lines.append(f"  → {get_command(r, hit_label)}")
        if hit.revisited is not None:
            lines.append(f"  {REVISITED}: {get_command(hit.revisited, hit_label)}")
        lines += fresh_lines(r)
        lines.append(r["text"])
        for n in hit.neighbors:
            kind = tag(n["block_type"], n.get("tool_name"))
            text = body(str(n["text"]), n["block_type"], n.get("tool_name"))
            first = " ".join(text.split())[:160]
            flag = " untrusted" if n.get("untrusted") else ""
            lines.append(f"  ~ [{n['role']} {kind} seq{n['seq']}{flag}] {first}")
        lines.append("---")
    return "\n".join(lines)


#: Most changed files a recall hit lists.
SHOWN_CHANGES = 3


def fresh_lines(row: Mapping[str, Any]) -> list[str]:
    """`  ! changed since <commit>: <path> (N commits)` for a hit whose files moved on.

    funes.api.freshness puts `row["fresh"]` on hits whose files it checked; only changed or
    removed files print (a hit about unchanged code reads as before).
    """
    fresh = row.get("fresh")
    if not isinstance(fresh, Mapping):
        return []
    changes = list(fresh.get("changes") or [])
    lines = []
    for c in changes[:SHOWN_CHANGES]:
        if c["removed"]:
            lines.append(f"  ! removed since {c['since'][:12]}: {c['path']}")
        else:
            n = c["commits"]
            lines.append(f"  ! changed since {c['since'][:12]}: {c['path']} "
                         f"({n} commit{'s' if n != 1 else ''})")
    if len(changes) > SHOWN_CHANGES:
        lines.append(f"  ! … and {len(changes) - SHOWN_CHANGES} more changed files")
    return lines


def turns_text(turns: list[TurnView], head: Callable[[str], str] | None = None, *,
               label: str | None = None, trusted: bool = True, note: str | None = None) -> str:
    """`get` output: each turn with a header line (styled by `head`), its blocks whole.

    A turn funes.api.trust marked ends its header with ` untrusted`; the output starts with
    `note` and the same trust line as recall's (`label` names the memory in it).
    """
    lines = [note] if note else []
    header = trust_header(label or "-", trusted, any(t.untrusted for t in turns))
    if header and turns:
        lines.append(head(header) if head else header)
    for t in turns:
        marker = ">>" if t.target else "  "
        line = (f"{marker} [{t.ts or '-'}] {t.harness} {t.role} seq{t.seq} turn {t.turn_id}"
                + (" untrusted" if t.untrusted else ""))
        lines.append(head(line) if head else line)
        for b in t.blocks:
            noise = f" noise={b.noise}" if b.noise else ""
            lines.append(f"[{tag(b.block_type, b.tool_name)}{noise}]")
            lines.append(body(b.text, b.block_type, b.tool_name))
        lines.append("---")
    return "\n".join(lines)


def status_text(r: StatusResult, search: SearchStatus) -> str:
    """`status` lines: where the memory is, HEAD, counts by agent, model, vectors, search."""
    lines = [
        f"memory   {r.path} ({r.kind})",
        f"HEAD     {r.branch} at {_short(r.head)}"
        + (f" ({r.head_time})" if r.head_time else " (no commits yet)"),
        f"chunks   {r.chunks} in {r.sessions} session(s)",
    ]
    for harness, counts in r.by_harness.items():
        lines.append(f"  {harness:<8} {counts['chunks']} chunks, {counts['sessions']} sessions")
    lines.append(f"model    {r.model or '(not stamped yet: set on first embed)'}")
    if r.redaction_outdated:
        lines.append(f"redact   stored chunks met older rules ({r.redaction_outdated}) than "
                     f"the installed {r.redaction_rules}: run `funes scrub`")
    lines.append(
        f"vectors  {search.embedded} embedded, {search.backlog} waiting"
        + (" (the backfill is embedding them)" if search.backlog and search.backfill
           and search.backfill.running else " (run `funes embed`)" if search.backlog else "")
        + (f", {search.not_embedded} never embedded (long tool output)"
           if search.not_embedded else "")
    )
    if search.backfill is not None:
        lines.append(_backfill_line(search.backfill, search.backlog))
    lines.append(
        "search   "
        + ("BM25 index" if search.fts_index else "BM25 index not built yet (first recall)")
        + (f", {search.unindexed_rows} rows not indexed yet" if search.fts_index and
           search.unindexed_rows else "")
        + (", ANN vector index" if search.ann_index else ", exact vector search")
    )
    lines.append(
        f"reranker {search.reranker}" if search.reranker
        else "reranker none installed: recall ranks without one "
        "(`funes models install ms-marco-minilm-l6-v2` when online)"
    )
    lines += [_remote_line(remote) for remote in r.remotes]
    lines += [exclusion_line(x) for x in r.exclusions]
    if r.trust_rule:
        whose = ("yours" if r.owned else
                 "not yours: its passages are marked untrusted, except your own turns")
        lines.append(f"trust    memory {whose}; {r.trust_rule}")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    """`45 s`, `12 min`, `5 h 20 min`: about how long."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 90:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _backfill_line(b: BackfillStatus, waiting: int) -> str:
    """`backfill running (pid N) since …: 1200 embedded, 15.8 chunks/s, done in about 5 h 20 min`.

    The time left is the backlog counted now at this backfill's own pace so far.
    """
    if b.running:
        eta = f", done in about {_duration(waiting / b.rate)}" if b.rate > 0 else ""
        return (f"backfill running (pid {b.pid}) since {_when(b.started)}: {b.embedded} "
                f"embedded, {b.rate:.1f} chunks/s{eta}")
    if b.state == "done":
        return f"backfill done {_when(b.updated)} ({b.embedded} embedded)"
    if not waiting:
        return f"backfill {b.state} {_when(b.updated)}; nothing waits now"
    why = f" ({b.detail})" if b.detail else ""
    return (f"backfill {b.state} {_when(b.updated)}{why} with {waiting} waiting: "
            "`funes embed --background` resumes it (so does the next agent turn)")


def exclusion_line(x: ExclusionInfo) -> str:
    """`exclude  project client-x: hides 412 chunks in 5 sessions (recorded: travels)`."""
    where = ("recorded: travels" if x.recorded else
             "config only: `funes exclude` records it for other machines")
    return (f"exclude  {x.kind} {x.pattern}: hides {x.hidden} chunk(s) in {x.sessions} "
            f"session(s) ({where})")


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(seconds: float | None, now: float | None = None) -> str:
    """`12 minutes ago`, `3 hours ago`, `2 days ago` (`at an unrecorded time`: None)."""
    if seconds is None:
        return "at an unrecorded time"
    import time

    age = max(0.0, (time.time() if now is None else now) - seconds)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if age >= size:
            n = int(age // size)
            return f"{n} {unit}{'s' if n > 1 else ''} ago"
    return "less than a minute ago"


def _apart(r: RemoteStatus) -> str:
    """How far apart the two sides are, and as of when (checked now, or the last fetch)."""
    if r.moved:
        ahead = f"; {r.ahead} ahead as of the last fetch" if r.ahead else ""
        return f"behind: {r.name} has commits not fetched yet (checked now; `funes pull`){ahead}"
    if r.ahead is None or r.behind is None:
        return "never fetched" + (" (checked now)" if r.checked else "")
    apart = f"{r.ahead} ahead, {r.behind} behind" if r.ahead or r.behind else "up to date"
    if r.checked:
        return f"{apart} (checked now)"
    why = f" (not checked now: {r.check_error})" if r.check_error else ""
    return f"{apart} as of the last fetch, {_ago(r.fetched_at)}{why}"


def _remote_line(r: RemoteStatus) -> str:
    """`remote   origin (url): 2 ahead, 0 behind (checked now); last sync … ok|FAILED: why`."""
    line = f"remote   {r.name} ({r.url}): {_apart(r)}"
    if r.last is None:
        return line + "; never synced (`funes sync`)"
    if r.last.held:  # ahead/behind alone would hide that the remote's copy lacks them
        line += f" (its copy lacks {r.last.held} withheld chunk(s))"
    if r.last.ok:
        return line + f"; last sync {_when(r.last.time)} ok ({r.last.detail})"
    ok = f", last ok {_when(r.last.last_ok)}" if r.last.last_ok else ", never succeeded"
    failed = "INCOMPLETE" if r.last.held else "FAILED"
    return (line + f"; last sync {_when(r.last.time)} {failed}: {r.last.detail}{ok}; "
            f"fix: `{r.last.fix}`")
