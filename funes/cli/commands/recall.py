"""Recall verbs: recall, get, embed. The agent format here is a contract (docs/agents.md)."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from funes import api
from funes.api.agent_format import where as _where
from funes.cli.app import App, pass_app
from funes.cli.commands.agents import AGENTS as WIRED_AGENTS
from funes.cli.options import HarnessType, memories_option, memory_option
from funes.cli.output import backfill_text, render
from funes.cli.progress import progress_bar

F = TypeVar("F", bound=Callable[..., Any])


def _ts(row: dict[str, Any]) -> str:
    return str(row.get("ts") or "-")


def render_agent(result: api.RecallResult, label: str, trusted: bool,
                 note: str | None = None) -> str:
    """The stable agent format of docs/design.md §8 (pinned by golden tests; shared with MCP)."""
    return api.recall_text(result, label, trusted, note)


def render_human(result: api.RecallResult, label: str, trusted: bool,
                 note: str | None = None) -> str:
    """Readable, coloured on a terminal."""
    out = [click.style(note, fg="yellow")] if note else []
    if not result.hits:
        return "\n".join([*out, "no results"])
    header = api.trust_header(label, trusted, any(h.row.get("untrusted") for h in result.hits))
    if header:
        out.append(click.style(header, fg="red"))
    for i, hit in enumerate(result.hits, 1):
        r = hit.row
        head = (f"{i}. {_ts(r)}  {r['harness']}  {_where(r)}  {r['block_type']}"
                f"  score {hit.score:.3f}" + ("  UNTRUSTED" if r.get("untrusted") else ""))
        out.append(click.style(head, fg="cyan", bold=True))
        out.append(click.style(f"   {api.get_command(r, label)}", fg="yellow"))
        if hit.revisited is not None:
            out.append(click.style(f"   {api.REVISITED}: {api.get_command(hit.revisited, label)}",
                                   fg="magenta"))
        out.append("   " + str(r["text"]).replace("\n", "\n   "))
        for n in hit.neighbors:
            first = " ".join(str(n["text"]).split())[:160]
            flag = " UNTRUSTED" if n.get("untrusted") else ""
            out.append(click.style(f"   ~ {n['role']} seq{n['seq']}{flag}: {first}", dim=True))
        out.append("")
    return "\n".join(out)


def render_turns(turns: list[api.TurnView], fmt: str, choice: api.MemoryChoice) -> str:
    """`get` output: each turn with a header line, its blocks whole (shared with MCP)."""
    if fmt == "human":
        return api.turns_text(turns, lambda line: click.style(line, bold=True),
                              label=choice.label, trusted=choice.owned,
                              note=api.output_note(choice))
    return api.get_output(fmt, turns, choice)


def print_recall(app: App, result: api.RecallResult, label: str, trusted: bool,
                 note: str | None = None) -> None:
    """Print a recall in the app's format (`recall` and `quickstart`).

    `note` is the one-line warning of a memory that has not synced for long (agent format).
    """
    if app.fmt == "human":
        click.echo(render_human(result, label, trusted, note))
    else:
        click.echo(api.recall_output(app.fmt, result, label, trusted, note))


def recall_options(func: F) -> F:
    """The options of `funes recall`, each a field of `api.RecallRequest`."""
    for option in reversed([
        click.option("-k", type=int, default=None,
                     help="Passages to return (default: recall.k, 8)."),
        click.option("--candidates", type=int, default=50, show_default=True,
                     help="Candidates from each of BM25 and vector search the fusion is "
                     "scaled on; each search returns twice as many."),
        click.option("--half-life", type=float, default=None,
                     help="Recency half-life in days; 0 turns recency off "
                     "(default: recall.halfLife)."),
        click.option("--neighbors", type=int, default=1, show_default=True,
                     help="Neighbouring turns shown around each hit."),
        click.option("--harness", multiple=True, type=HarnessType(api.HARNESSES),
                     help="Only this agent (repeatable); a turn file's producer name works too."),
        click.option("--type", "block_type", multiple=True,
                     type=click.Choice(api.BLOCK_TYPES),
                     help="Only this block type (repeatable)."),
        click.option("--project", multiple=True, help="Only this project identity or workdir."),
        click.option("--session", multiple=True, help="Only this session id."),
        click.option("--since", help="Only passages since WHEN (2026-11-01, 7d, 12h)."),
        click.option("--until", help="Only passages before WHEN (same forms)."),
        click.option("--role", multiple=True, metavar="ROLE",
                     help="Only what this speaker said: user, assistant, system, tool "
                     "(repeatable)."),
        click.option("--fresh", "fresh", flag_value="prefer", default="mark",
                     help="In a git work tree, put hits whose files changed since after the "
                     "others."),
        click.option("--fresh-only", "fresh", flag_value="only",
                     help="In a git work tree, leave out hits whose files changed since."),
        click.option("--as-of", "as_of", metavar="WHEN",
                     help="Read the memory as it stood at WHEN: passages before it, recency "
                     "from it, revisits only by what was said by then."),
        click.option("--no-rerank", "rerank", flag_value=False, default=True,
                     help="Skip the cross-encoder even if installed."),
        click.option("--rerank-pool", type=int, default=None, metavar="N",
                     help="Fused passages the cross-encoder re-scores, ~40 ms each "
                     "(default: recall.rerankPool, 4)."),
        click.option("--budget", "budget_ms", type=float, default=None, metavar="MS",
                     help="Stop reranking when the recall has taken this long; 0: never "
                     "(default: recall.budget, 300)."),
    ]):
        func = option(func)
    return func


@click.command()
@click.argument("query", nargs=-1, required=True)
@recall_options
@memories_option
@pass_app
def recall(app: App, /, query: tuple[str, ...], **options: Any) -> None:
    """Find past passages: BM25 + vectors, fused, reranked, recency-weighted.

    The words of QUERY may be quoted or not. Prints each hit with its provenance and the
    `funes get` command that opens its turn. An empty result prints `no results` and exits 0.
    Several --memory options rank the passages of all of them in one list, each hit naming
    its memory. In a git work tree, a hit about files that changed since it was said is
    marked (`! changed since …`).

    \b
    Example:
      funes recall why did we drop the streaming parser
      funes recall "flaky CI" --since 7d --format json
      funes recall "retry policy" --memory . --memory acme/team-memory
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    request = api.RecallRequest(" ".join(query), code=str(Path.cwd()), **options)
    # Which memories: the single-memory path's choice for each (funes.api.memory), once.
    choices = api.pool_choices(app.settings, app.memories)
    if len(choices) > 1:
        _recall_pooled(app, choices, request)
        return
    choice = app.choice(choices[0])
    repo = choice.repo
    # The warm server answers when it runs (funes.api.warm), else this process does.
    result = api.recall(app.settings, repo, request, via_server=True)
    if app.fmt != "human":
        # The very bytes the warm server prints for the thin client (funes.api.render).
        out, err = api.recall_printed(app.fmt, choice, result, request)
        click.echo(err, err=True, nl=False)
        click.echo(out, nl=False)
        return
    click.echo(api.recall_stderr(repo, result, request), err=True, nl=False)
    if result.backlog and result.hits:
        click.echo(f"note: {result.backlog} chunks not embedded yet (found by words only); "
                   "run `funes embed`", err=True)
    click.echo(render_human(result, choice.label, choice.owned, api.output_note(choice)))


def _recall_pooled(app: App, choices: list[Any], request: api.RecallRequest) -> None:
    """A recall over several memories, printed like one (each hit names its memory)."""
    for choice in choices:
        app.warn(choice)
    result = api.recall_pooled(app.settings, choices, request)
    memories = {c.label: c.owned for c in choices}
    fmt = "agent" if app.fmt == "human" else app.fmt
    out, err = api.recall_printed(fmt, choices[0], result, request, memories=memories)
    click.echo(err, err=True, nl=False)
    click.echo(out, nl=False)


@click.command()
@click.argument("session_id")
@click.argument("turn_id", required=False)
@click.option("--window", type=int, default=0, show_default=True,
              help="With TURN: also show N turns before and after.")
@click.option("--from", "first", type=int, default=None, metavar="SEQ",
              help="Without TURN: the first turn (seq) to show; negative counts from the end.")
@click.option("--to", "last", type=int, default=None, metavar="SEQ",
              help="Without TURN: the last turn (seq) to show (default: the session's last).")
@click.option("--max-chars", type=int, default=None, metavar="N",
              help="Without TURN: characters of turn text per page (default 16000).")
@memory_option
@pass_app
def get(app: App, session_id: str, turn_id: str | None, window: int, first: int | None,
        last: int | None, max_chars: int | None) -> None:
    """Open a turn (and its neighbours) whole, or a session's turns by position.

    With TURN, that turn (and --window N on each side), split chunks stitched back together.
    Without it, the turns whose seq lies in --from..--to, whole, up to --max-chars; the last
    line then says where the next page starts (`# next: funes get SESSION --from N`).

    \b
    Example:
      funes get 5f0c2a1e-… 41 --window 1
      funes get 5f0c2a1e-… --from 0 --to 20
      funes get 5f0c2a1e-… --from -5
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    if turn_id is not None:
        if first is not None or last is not None or max_chars is not None:
            raise click.UsageError("give TURN, or --from/--to (a range), not both")
        choice = app.choice()
        turns = api.get(choice.repo, session_id, turn_id, window, via_server=True)
        click.echo(render_turns(turns, app.fmt, choice))
        return
    if window:
        raise click.UsageError("--window goes with TURN; a range takes --from/--to")
    fields: dict[str, Any] = {"session_id": session_id, "first": first, "last": last}
    if max_chars is not None:
        fields["max_chars"] = max_chars
    page = api.run_browse(app.repo(), "get-range", fields)
    click.echo(api.browse_output("agent" if app.fmt == "human" else app.fmt, page))


@click.command()
@click.option("--budget", type=float, default=None, metavar="SECONDS",
              help="Stop after about this many seconds (the batch in flight is kept).")
@click.option("--limit", type=int, default=None, help="Embed at most N chunks.")
@click.option("--model", default=None, help="Model to stamp a new memory with.")
@click.option("--background", is_flag=True,
              help="Start the detached backfill and return: it embeds everything waiting, "
              "at low priority, and `funes status` shows how far it is.")
@click.option("--worker", is_flag=True, hidden=True,
              help="Be the detached backfill (what --background starts).")
@memory_option
@pass_app
def embed(app: App, budget: float | None, limit: int | None, model: str | None,
          background: bool, worker: bool) -> None:
    """Embed chunks waiting for vectors, newest first, in resumable steps.

    Every batch is committed as it is done, so stopping (Ctrl-C, a kill) loses at most the
    batch in flight and the next run resumes. With --background the work goes to one
    detached process per memory (the backfill `funes add` starts), which yields the CPU to
    recalls and agents and records its progress for `funes status`.
    """
    if (background or worker) and (budget is not None or limit is not None or model):
        raise click.UsageError("--background runs until nothing waits, with the memory's model: "
                               "drop --budget, --limit and --model")
    if worker:
        api.backfill_run(app.settings, app.repo(), click.echo)
        return
    if background:
        started = api.start_backfill(app.settings, app.repo())
        render(app.fmt, started, human=backfill_text)
        if started.action in ("no-model", "failed"):
            sys.exit(1)
        return
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
@click.option("--model", default=None, help="The embedding model to re-stamp the memory with.")
@click.option("--tokenizer", type=click.Choice(api.TOKENIZERS), default=None,
              help="The full-text tokenizer to re-stamp the memory with: icu segments Chinese, "
              "Japanese and other scripts written without spaces; simple is the default.")
@click.option("--budget", type=float, default=None, metavar="SECONDS",
              help="Stop after about this many seconds; `funes embed` continues.")
@memory_option
@pass_app
def reindex(app: App, model: str | None, tokenizer: str | None, budget: float | None) -> None:
    """Re-embed the memory with another embedding model, or re-tokenize it, on purpose.

    With --model the memory is re-stamped with MODEL at once; vectors of the old model stay on
    disk but no longer count. The new model must have the same dimension. With --tokenizer the
    full-text index is rebuilt with that tokenizer here, and on every machine the memory
    travels to. At least one of the two is needed.
    """
    with progress_bar("re-embedding") as progress:
        result = api.reindex(app.settings, app.repo(), model, tokenizer=tokenizer, budget=budget,
                             progress=progress)
    if result is None:
        render(app.fmt, {"tokenizer": tokenizer},
               human=lambda r: f"re-stamped the full-text tokenizer: {r['tokenizer']}")
        return
    render(app.fmt, result,
           human=lambda r: f"re-stamped with {r.model}; embedded {r.embedded} chunks in "
           f"{r.seconds:.1f}s; {r.remaining} waiting")


@click.command()
@click.argument("query", required=False)
@click.option("--budget", type=float, default=60.0, show_default=True, metavar="SECONDS",
              help="Time to spend embedding before the recall (0: words only).")
@pass_app
def quickstart(app: App, query: str | None, budget: float) -> None:
    """Set up and run the main job: index this machine's agent sessions, answer a recall.

    Creates the global memory if needed, indexes every agent's sessions, embeds what fits in
    the budget, and recalls QUERY. With no agent history on this machine, it uses the small
    sample memory shipped with funes instead.

    \b
    Example:
      funes quickstart
      funes quickstart "why did the build break" --budget 120
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    with progress_bar("quickstart") as progress:
        done = api.quickstart(app.settings, query, budget=budget, progress=progress)
    label = api.memory_label(done.memory)
    s = done.indexed
    where = (f"the bundled sample memory, {label} (no agent history found here)"
             if done.sample else label)
    say = [f"# memory: {where}",
           f"# indexed {s.sessions} sessions, {s.turns} turns, {s.added} new chunks"]
    if done.embedded is not None:
        say.append(f"# embedded {done.embedded.embedded} chunks "
                   f"({done.embedded.remaining} waiting: `funes embed` continues)")
    # The command as the user can type it again: the sample is not the memory `funes recall`
    # finds by itself, so its line names it.
    again = ["funes", "recall", done.query] + (["--memory", label] if done.sample else [])
    say.append(f"# {shlex.join(again)}")
    click.echo("\n".join(say), err=app.fmt == "json")
    print_recall(app, done.result, label, True)
    click.echo("\n".join(_next_steps(done.sample)), err=app.fmt == "json")


def _next_steps(sample: bool) -> list[str]:
    """What to run after the quickstart (printed last, so it is what the user sees)."""
    first = ("# next: wire funes into the agent you use; its sessions then go to your memory"
             if sample else "# next: wire funes into your agents, so each turn is indexed")
    return [
        "",
        first,
        f"#   funes add {'|'.join(WIRED_AGENTS)}",
        "#       index its sessions and each finished turn, and give it recall tools",
        '#   funes recall "your question"       search your memory',
        "#   funes status                       what the memory holds",
    ]


COMMANDS = [recall, get, embed, reindex, quickstart]
