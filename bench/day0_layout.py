"""The day-zero history: LongMemEval-S haystack sessions laid down as agent transcripts.

The day-zero benchmark (vshulcz/deja-vu, `scripts/day0bench`, MIT) asks what a memory gives on
the day it is installed on a machine that already has months of coding-agent history. Its
history is every distinct haystack session of LongMemEval-S (about 19k), written once each in
the agents' real on-disk shapes:

- Claude Code: `~/.claude/projects/<project slug>/<session id>.jsonl`, one record per turn
  (`type` user|assistant, `sessionId`, `timestamp`, `cwd`, `uuid`/`parentUuid`, and `message`
  whose assistant content is a list of typed blocks, as Claude writes it);
- Codex: `~/.codex/sessions/YYYY/MM/DD/rollout-<date>-<session id>.jsonl`, a `session_meta`
  line then one `response_item` message per turn (`input_text` for the user, `output_text` for
  the assistant).

Turns are dated from the session's haystack date, a minute apart, as day0bench does. Session
ids are LongMemEval's own, so a recalled passage names its answer session directly.

Questions are drawn from the same file: by default the single-session ones (the answer lives in
one session), abstention questions excluded, spread evenly over the question ids, so the draw is
the same on every machine. This module only writes files; bench/bench_day0.py runs funes on them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from longmemeval import Entry, is_abstention, parse_date

#: The working directory every session claims (one project: the bench asks about the history,
#: not about project routing).
WORKDIR = "/work/day0"
SINGLE_SESSION = ("single-session-user", "single-session-assistant", "single-session-preference")


def load_any(path: Path) -> list[Entry]:
    """A LongMemEval JSON list, gzipped or not."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        data: list[Entry] = json.load(fh)
    return data


def distinct_sessions(entries: Iterable[Entry]) -> Iterator[tuple[str, datetime, list[Any]]]:
    """Every haystack session once (a session shared by several questions is the same text)."""
    seen: set[str] = set()
    for entry in entries:
        for sid, date, turns in zip(entry["haystack_session_ids"], entry["haystack_dates"],
                                    entry["haystack_sessions"], strict=True):
            if sid in seen:
                continue
            seen.add(sid)
            yield sid, parse_date(date), turns


def _uuid(session: str, index: int) -> str:
    """A stable UUID-shaped record id (what Claude writes), from the session and turn index."""
    h = hashlib.sha256(f"{session}/{index}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def claude_lines(session: str, start: datetime, turns: Sequence[dict[str, Any]]) -> list[str]:
    """One session as Claude Code records."""
    out = []
    parent: str | None = None
    for i, turn in enumerate(turns):
        role = turn["role"]
        content: Any = turn["content"]
        if role == "assistant":
            content = [{"type": "text", "text": content}]
        uuid = _uuid(session, i)
        out.append(json.dumps({
            "type": role, "uuid": uuid, "parentUuid": parent, "sessionId": session,
            "timestamp": _stamp(start + timedelta(minutes=i)), "cwd": WORKDIR,
            "version": "2.0.0", "message": {"role": role, "content": content},
        }, ensure_ascii=False))
        parent = uuid
    return out


def codex_lines(session: str, start: datetime, turns: Sequence[dict[str, Any]]) -> list[str]:
    """One session as a Codex rollout."""
    out = [json.dumps({"timestamp": _stamp(start), "type": "session_meta",
                       "payload": {"id": session, "timestamp": _stamp(start), "cwd": WORKDIR,
                                   "originator": "codex_cli_rs", "cli_version": "0.40.0"}})]
    for i, turn in enumerate(turns):
        kind = "input_text" if turn["role"] == "user" else "output_text"
        out.append(json.dumps({
            "timestamp": _stamp(start + timedelta(minutes=i)), "type": "response_item",
            "payload": {"type": "message", "role": turn["role"],
                        "content": [{"type": kind, "text": turn["content"]}]},
        }, ensure_ascii=False))
    return out


def session_path(home: Path, harness: str, session: str, start: datetime) -> Path:
    """Where the agent keeps this session under `home`."""
    if harness == "claude":
        return home / ".claude" / "projects" / WORKDIR.replace("/", "-") / f"{session}.jsonl"
    day = start.strftime("%Y/%m/%d")
    return (home / ".codex" / "sessions" / day
            / f"rollout-{start.strftime('%Y-%m-%dT%H-%M-%S')}-{session}.jsonl")


Session = tuple[str, datetime, list[Any]]


def pile(entries: Sequence[Entry], questions: Sequence[Entry], limit: int = 0) -> list[Session]:
    """The history to lay down: every distinct haystack session, or `limit` of them.

    With a limit, the scored questions' answer sessions are always in, and the rest are
    spread evenly over the others (in the file's order), so the same questions can be asked
    of a smaller or a larger pile (deja-vu's `-corpus` knob: only the pile grows).
    """
    sessions = list(distinct_sessions(entries))
    if limit <= 0 or limit >= len(sessions):
        return sessions
    wanted = {sid for q in questions for sid in q["answer_session_ids"]}
    keep = [s for s in sessions if s[0] in wanted]
    rest = [s for s in sessions if s[0] not in wanted]
    room = max(0, limit - len(keep))
    if room and rest:
        step = len(rest) / room
        keep += [rest[int(i * step)] for i in range(min(room, len(rest)))]
    return keep


def lay_out(sessions: Iterable[Session], home: Path, harness: str) -> int:
    """Write `sessions` under `home` as `harness` transcripts; how many.

    Each file is also dated (mtime) at its session's last turn, as an agent's file would be.
    """
    import os

    n = 0
    writer = claude_lines if harness == "claude" else codex_lines
    for sid, start, turns in sessions:
        path = session_path(home, harness, sid, start)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in writer(sid, start, turns)), "utf-8")
        end = (start + timedelta(minutes=max(0, len(turns) - 1))).timestamp()
        os.utime(path, (end, end))
        n += 1
    return n


def draw(entries: Sequence[Entry], n: int, *, single_session: bool = True) -> list[Entry]:
    """`n` questions, abstentions excluded, spread evenly over the sorted question ids."""
    pool = sorted((e for e in entries if not is_abstention(e)
                   and (not single_session or e["question_type"] in SINGLE_SESSION)),
                  key=lambda e: str(e["question_id"]))
    if n <= 0 or n >= len(pool):
        return pool
    step = len(pool) / n
    return [pool[int(i * step)] for i in range(n)]
