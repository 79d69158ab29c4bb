"""Ingest verbs: index."""

from __future__ import annotations

from typing import Any

import click

from funes import api
from funes.cli.options import memory_option
from funes.cli.output import render
from funes.cli.progress import progress_bar

AGENTS = api.HARNESSES


def _summary_text(s: api.IndexSummary) -> str:
    lines = [
        f"indexed {s.sessions} sessions, {s.turns} turns, {s.chunks} chunks "
        f"({s.added} new) from {s.files} files ({s.files_unchanged} unchanged)"
    ]
    if s.skipped:
        # One count per kind of reason (`ignored:progress` → `ignored`); --format json has
        # every reason.
        kinds: dict[str, int] = {}
        for reason, count in s.skipped.items():
            kind = reason.split(":", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + count
        lines.append(
            "skipped records: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
        )
    if s.redactions:
        lines.append(
            "redacted: " + ", ".join(f"{k} {v}" for k, v in sorted(s.redactions.items()))
        )
    if s.outside:
        lines.append(f"left out: {s.outside} turns outside --workdir")
    if s.unroutable:
        lines.append(
            f"not indexed: {s.unroutable} turns outside any project memory "
            "(run `funes init --global` to keep them)"
        )
    for path, result in s.commits.items():
        if result.commit:
            lines.append(f"commit {result.commit[:12]} in {path}: {result.added} chunks added")
    lines += [f"unreadable: {e}" for e in s.errors]
    return "\n".join(lines)


def _summary_json(s: api.IndexSummary) -> dict[str, Any]:
    return {
        "files": s.files,
        "files_unchanged": s.files_unchanged,
        "files_reread": s.files_reread,
        "sessions": s.sessions,
        "by_harness": dict(s.by_harness),
        "turns": s.turns,
        "chunks": s.chunks,
        "added": s.added,
        "skipped": dict(s.skipped),
        "redactions": dict(s.redactions),
        "unroutable": s.unroutable,
        "outside": s.outside,
        "errors": s.errors,
        "commits": {p: r.commit for p, r in s.commits.items()},
    }


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--agent", "agents", multiple=True, type=click.Choice(AGENTS),
    help="Only this agent's transcripts (repeatable). With PATHs: the format of the files.",
)
@click.option("--since", metavar="WHEN", help="Only turns since WHEN (2026-11-01, 12h, 7d).")
@click.option("--workdir", metavar="DIR", type=click.Path(file_okay=False),
              help="Only sessions whose working directory is DIR or inside it (one project).")
@click.option("--no-tool-results", "no_tool_results", is_flag=True,
              help="Leave tool output out (the calls stay): a leaner memory. "
              "Config: index.toolResults.")
@memory_option
@click.pass_context
def index(ctx: click.Context, paths: tuple[str, ...], agents: tuple[str, ...],
          since: str | None, workdir: str | None, no_tool_results: bool) -> None:
    """Index agent transcripts into memory, incrementally.

    With PATHs (files or directories), index them into the current memory. Without, read each
    agent's default locations and route every session to the project memory of its working
    directory, or to the global memory.
    """
    app = ctx.find_root().obj
    with progress_bar("indexing") as progress:
        summary = api.index(app.settings, memory=app.memory, paths=paths, agents=agents,
                            since=since, progress=progress,
                            tool_results=False if no_tool_results else None, workdir=workdir)
    if app.fmt == "json":
        render("json", _summary_json(summary), human=str)
    else:
        render(app.fmt, summary, human=_summary_text)


COMMANDS = [index]
