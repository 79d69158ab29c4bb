"""Ingest verbs: index."""

from __future__ import annotations

import sys
from typing import Any

import click

from funes import api
from funes.cli.options import memory_option
from funes.cli.output import render
from funes.cli.progress import progress_bar

AGENTS = api.FORMATS


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
    if s.excluded:
        lines.append(f"excluded: {s.excluded} turns an exclusion keeps out (`funes exclude`)")
    for path, result in s.commits.items():
        if result.commit:
            lines.append(f"commit {result.commit[:12]} in {path}: {result.added} chunks added")
    lines += [f"not indexed: {e}" for e in s.errors]
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
        "excluded": s.excluded,
        "errors": s.errors,
        "commits": {p: r.commit for p, r in s.commits.items()},
        "batches": s.batches,
        "first_searchable_s": s.first_searchable_s,
    }


def _check_text(checks: list[api.TurnFileCheck]) -> str:
    lines = []
    for c in checks:
        if c.error is not None:
            lines.append(f"refused {c.error}")
            continue
        dup = f", {c.duplicates} duplicate turns dropped" if c.duplicates else ""
        lines.append(f"ok {c.path}: {c.turns} turns, {c.chunks} chunks, "
                     f"{c.sessions} sessions{dup}")
    return "\n".join(lines)


def _check_json(checks: list[api.TurnFileCheck]) -> list[dict[str, Any]]:
    return [{"path": str(c.path), "ok": c.error is None, "turns": c.turns, "chunks": c.chunks,
             "sessions": c.sessions, "duplicates": c.duplicates, "error": c.error}
            for c in checks]


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
@click.option("--check", "check", is_flag=True,
              help="Validate turn files (.funes.jsonl) in PATHs and count what they would "
              "give, writing nothing; exit 1 if any is refused.")
@memory_option
@click.pass_context
def index(ctx: click.Context, paths: tuple[str, ...], agents: tuple[str, ...],
          since: str | None, workdir: str | None, no_tool_results: bool, check: bool) -> None:
    """Index agent transcripts into memory, incrementally.

    With PATHs (files or directories), index them into the current memory. Without, read each
    agent's default locations and the turn files in $FUNES_HOME/spool/, and route every
    session to the project memory of its working directory, or to the global memory.
    """
    app = ctx.find_root().obj
    if check:
        checks = api.check_turn_files(app.settings, paths)
        if app.fmt == "json":
            render("json", _check_json(checks), human=str)
        else:
            render(app.fmt, checks, human=_check_text)
        if any(c.error is not None for c in checks):
            sys.exit(1)
        return
    with progress_bar("indexing") as progress:
        summary = api.index(app.settings, memory=app.memory, paths=paths, agents=agents,
                            since=since, progress=progress,
                            tool_results=False if no_tool_results else None, workdir=workdir)
    if app.fmt == "json":
        render("json", _summary_json(summary), human=str)
    else:
        render(app.fmt, summary, human=_summary_text)


def _import_text(r: api.ImportResult) -> str:
    lines = [f"imported {r.rows} rows of {r.source} (Rust funes) into {r.path}: {r.added} new "
             f"chunks, {r.duplicates} already there"]
    if r.vectors:
        lines.append(f"vectors: {r.vectors} kept ({r.model})")
    elif r.lexical:
        lines.append(f"vectors: not kept: {r.lexical}")
    if r.skipped:
        lines.append("skipped rows: " + ", ".join(f"{k} {v}" for k, v in sorted(r.skipped.items())))
    if r.redactions:
        lines.append("redacted: " + ", ".join(f"{k} {v}" for k, v in sorted(r.redactions.items())))
    return "\n".join(lines)


@click.command("import")
@click.argument("source", required=False)
@memory_option
@click.pass_context
def import_(ctx: click.Context, source: str | None) -> None:
    """Add the rows of a memory the Rust funes wrote to this memory.

    SOURCE is ORG/NAME (or hf://datasets/ORG/NAME) on the Hub, or a directory holding its
    chunks.lance; default: the Rust funes' local memory, $FUNES_HOME/memory. SOURCE is only
    read. Each row becomes a chunk with funes's own id (so importing again adds nothing), its
    provenance kept and the Rust id in its source; vectors are kept when the memory embeds
    with the same model, otherwise the chunks wait for `funes embed`. docs/import.md has the
    column mapping.
    """
    app = ctx.find_root().obj
    repo = api.writable_memory(app.settings, app.memory, command="import")
    with progress_bar("importing") as progress:
        result = api.import_memory(app.settings, repo, source, progress=progress)
    render(app.fmt, result, human=_import_text)


COMMANDS = [index, import_]
