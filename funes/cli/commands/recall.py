"""Recall verbs: recall, get, embed. The agent format here is a contract (docs/agents.md)."""

from __future__ import annotations

import sys
from typing import Any

import click

from funes import api
from funes.api import warm
from funes.api.agent_format import where as _where
from funes.cli.options import memory_option
from funes.cli.output import render
from funes.cli.progress import progress_bar

AGENTS = ("claude", "codex", "pi", "hermes", "opencode", "gemini", "cursor", "copilot", "import")
BLOCK_TYPES = ("text", "thinking", "tool_use", "tool_result")
UNTRUSTED = api.UNTRUSTED


def _app(ctx: click.Context) -> Any:
    return ctx.find_root().obj


def _ts(row: dict[str, Any]) -> str:
    return str(row.get("ts") or "-")


def render_agent(result: api.RecallResult, label: str, trusted: bool) -> str:
    """The stable agent format of docs/design.md §8 (pinned by golden tests; shared with MCP)."""
    return api.recall_text(result, label, trusted)


def render_human(result: api.RecallResult, label: str, trusted: bool) -> str:
    """Readable, coloured on a terminal."""
    if not result.hits:
        return "no results"
    out = []
    if not trusted:
        out.append(click.style(UNTRUSTED.format(label=label), fg="red"))
    elif any(hit.row.get("untrusted") for hit in result.hits):
        out.append(click.style(api.UNTRUSTED_PASSAGES, fg="red"))
    for i, hit in enumerate(result.hits, 1):
        r = hit.row
        head = (f"{i}. {_ts(r)}  {r['harness']}  {_where(r)}  {r['block_type']}"
                f"  score {hit.score:.3f}" + ("  UNTRUSTED" if r.get("untrusted") else ""))
        out.append(click.style(head, fg="cyan", bold=True))
        out.append(click.style(f"   funes get {r['session_id']} {r['turn_id']} --memory {label}",
                               fg="yellow"))
        out.append("   " + str(r["text"]).replace("\n", "\n   "))
        for n in hit.neighbors:
            first = " ".join(str(n["text"]).split())[:160]
            out.append(click.style(f"   ~ {n['role']} seq{n['seq']}: {first}", dim=True))
        out.append("")
    return "\n".join(out)


def _json(result: api.RecallResult, label: str, trusted: bool) -> dict[str, Any]:
    return {
        "query": result.query,
        "memory": label,
        "trusted": trusted,
        "signals": result.signals,
        "backlog": result.backlog,
        "hits": [
            {
                **{k: (v.isoformat() if hasattr(v, "isoformat") else v)
                   for k, v in h.row.items()},
                "score": h.score,
                "bm25_rank": h.bm25_rank,
                "vector_rank": h.vector_rank,
                "rerank": h.rerank,
                "get": f"funes get {h.row['session_id']} {h.row['turn_id']} --memory {label}",
                "neighbors": [{k: n[k] for k in ("session_id", "turn_id", "seq", "role",
                                                 "block_type", "text")} for n in h.neighbors],
            }
            for h in result.hits
        ],
    }


@click.command()
@click.argument("query")
@click.option("-k", type=int, default=None, help="Passages to return (default: recall.k, 8).")
@click.option("--candidates", type=int, default=50, show_default=True,
              help="Candidates from each of BM25 and vector search before fusion.")
@click.option("--half-life", type=float, default=None,
              help="Recency half-life in days; 0 turns recency off (default: recall.halfLife).")
@click.option("--neighbors", type=int, default=1, show_default=True,
              help="Neighbouring turns shown around each hit.")
@click.option("--harness", multiple=True, type=click.Choice(AGENTS), help="Only this agent.")
@click.option("--type", "block_type", multiple=True, type=click.Choice(BLOCK_TYPES),
              help="Only this block type (repeatable).")
@click.option("--project", multiple=True, help="Only this project identity or workdir.")
@click.option("--session", multiple=True, help="Only this session id.")
@click.option("--since", help="Only passages since WHEN (2026-11-01, 7d, 12h).")
@click.option("--until", help="Only passages before WHEN.")
@click.option("--no-rerank", is_flag=True, help="Skip the cross-encoder even if installed.")
@click.option("--rerank-pool", type=int, default=None, metavar="N",
              help="Fused passages the cross-encoder re-scores, ~40 ms each "
              "(default: recall.rerankPool, 4).")
@memory_option
@click.pass_context
def recall(ctx: click.Context, query: str, k: int | None, candidates: int,
           half_life: float | None, neighbors: int, harness: tuple[str, ...],
           block_type: tuple[str, ...], project: tuple[str, ...], session: tuple[str, ...],
           since: str | None, until: str | None, no_rerank: bool,
           rerank_pool: int | None) -> None:
    """Find past passages: BM25 + vectors, fused, reranked, recency-weighted.

    Prints each hit with its provenance and the `funes get` command that opens its turn.
    An empty result prints `no results` and exits 0.
    """
    app = _app(ctx)
    repo = app.repo()
    # The warm server answers when it runs (funes.api.warm), else this process does.
    result = warm.recall(app.settings, repo, query, k=k, candidates=candidates,
                         half_life=half_life, neighbors=neighbors, harness=harness,
                         block_type=block_type, project=project, session=session,
                         since=since, until=until, rerank=not no_rerank,
                         rerank_pool=rerank_pool)
    label = api.memory_label(repo)
    trusted = api.owned(repo)
    if app.fmt == "json":
        render("json", _json(result, label, trusted), human=str)
        return
    if result.backlog and app.fmt == "human":
        click.echo(f"note: {result.backlog} chunks not embedded yet (found by words only); "
                   "run `funes embed`", err=True)
    if app.fmt == "agent":
        click.echo(render_agent(result, label, trusted))
    else:
        click.echo(render_human(result, label, trusted))


def render_turns(turns: list[api.TurnView], fmt: str) -> str:
    """`get` output: each turn with a header line, its blocks whole (shared with MCP)."""
    bold = (lambda line: click.style(line, bold=True)) if fmt == "human" else None
    return api.turns_text(turns, bold)


@click.command()
@click.argument("session_id")
@click.argument("turn_id")
@click.option("--window", type=int, default=0, show_default=True,
              help="Also show N turns before and after.")
@memory_option
@click.pass_context
def get(ctx: click.Context, session_id: str, turn_id: str, window: int) -> None:
    """Open a turn (and its neighbours) whole, split chunks stitched back together."""
    app = _app(ctx)
    turns = warm.get(app.settings, app.repo(), session_id, turn_id, window)
    if app.fmt == "json":
        render("json", turns, human=str)
    else:
        click.echo(render_turns(turns, app.fmt))


@click.command()
@click.option("--budget", type=float, default=None, metavar="SECONDS",
              help="Stop after about this many seconds (the batch in flight is kept).")
@click.option("--limit", type=int, default=None, help="Embed at most N chunks.")
@click.option("--model", default=None, help="Model to stamp a new memory with.")
@memory_option
@click.pass_context
def embed(ctx: click.Context, budget: float | None, limit: int | None,
          model: str | None) -> None:
    """Embed chunks waiting for vectors, newest first, in resumable steps."""
    app = _app(ctx)
    with progress_bar("embedding") as progress:
        result = api.embed(app.settings, app.repo(), budget=budget, limit=limit, model=model,
                           progress=progress)
    rate = result.embedded / result.seconds if result.seconds else 0.0
    render(app.fmt, result,
           human=lambda r: f"embedded {r.embedded} chunks with {r.model} in {r.seconds:.1f}s "
           f"({rate:.1f}/s) in {r.commits} commit(s); {r.remaining} waiting")
    if result.remaining and budget is None and limit is None:
        sys.exit(1)


@click.command()
@click.option("--model", required=True, help="The embedding model to re-stamp the memory with.")
@click.option("--budget", type=float, default=None, metavar="SECONDS",
              help="Stop after about this many seconds; `funes embed` continues.")
@memory_option
@click.pass_context
def reindex(ctx: click.Context, model: str, budget: float | None) -> None:
    """Re-embed the whole memory with another embedding model, on purpose.

    The memory is re-stamped with MODEL at once; vectors of the old model stay on disk but no
    longer count. The new model must have the same dimension.
    """
    app = _app(ctx)
    with progress_bar("re-embedding") as progress:
        result = api.reindex(app.settings, app.repo(), model, budget=budget, progress=progress)
    render(app.fmt, result,
           human=lambda r: f"re-stamped with {r.model}; embedded {r.embedded} chunks in "
           f"{r.seconds:.1f}s; {r.remaining} waiting")


@click.command()
@click.argument("query", required=False)
@click.option("--budget", type=float, default=60.0, show_default=True, metavar="SECONDS",
              help="Time to spend embedding before the recall (0: words only).")
@click.pass_context
def quickstart(ctx: click.Context, query: str | None, budget: float) -> None:
    """Set up and run the main job: index this machine's agent sessions, answer a recall.

    Creates the global memory if needed, indexes every agent's sessions, embeds what fits in
    the budget, and recalls QUERY. With no agent history on this machine, it uses the small
    sample memory shipped with funes instead.
    """
    app = _app(ctx)
    with progress_bar("quickstart") as progress:
        done = api.quickstart(app.settings, query, budget=budget, progress=progress)
    label = api.memory_label(done.memory)
    s = done.indexed
    where = "the bundled sample memory (no agent history found here)" if done.sample else label
    say = [f"# memory: {where}",
           f"# indexed {s.sessions} sessions, {s.turns} turns, {s.added} new chunks"]
    if done.embedded is not None:
        say.append(f"# embedded {done.embedded.embedded} chunks "
                   f"({done.embedded.remaining} waiting: `funes embed` continues)")
    say.append(f'# funes recall "{done.query}"')
    click.echo("\n".join(say), err=app.fmt == "json")
    if app.fmt == "json":
        render("json", _json(done.result, label, True), human=str)
    elif app.fmt == "agent":
        click.echo(render_agent(done.result, label, True))
    else:
        click.echo(render_human(done.result, label, True))


COMMANDS = [recall, get, embed, reindex, quickstart]
