"""Git verbs: hooks install|uninstall|status, link, why, blame."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from funes import api
from funes.cli.app import App, pass_app
from funes.cli.options import memory_option
from funes.cli.output import render, short

# -- hooks ----------------------------------------------------------------------------------


def _hooks_text(r: api.HooksReport) -> str:
    lines = [f"repository  {r.worktree}", f"hooks       {r.hooks_dir}"]
    for h in r.hooks:
        state = h.state
        if h.state == "funes":
            if h.python and not os.access(h.python, os.X_OK):
                state += f" (its Python {h.python} is gone: run `funes hooks install`)"
        elif h.state == "other":
            state = "someone else's hook (funes is not installed here)"
        if h.chained is not None:
            state += f", chaining {h.chained.name}"
        lines.append(f"{h.name:<11} {state}")
    lines.append(
        f"memory      {r.memory}" if r.memory
        else "memory      none: commits here would not be linked (run `funes init`)"
    )
    if r.last_run:
        lines.append(f"last run    {r.last_run}")
    return "\n".join(lines)


@click.group(invoke_without_command=True)
@click.pass_context
def hooks(ctx: click.Context) -> None:
    """Git hooks that link each commit to the agent turns behind it.

    With no subcommand, shows the hooks of this git repository (like `funes hooks status`).
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(hooks_status)


@hooks.command("install")
@click.option("--push", is_flag=True,
              help="Also install a pre-push hook that pushes the memory with the code.")
@pass_app
def hooks_install(app: App, push: bool) -> None:
    """Install the post-commit hook here, chaining any hook already in place."""
    render(app.fmt, api.hooks_install(app.settings, push=push), human=_hooks_text)


@hooks.command("uninstall")
@pass_app
def hooks_uninstall(app: App) -> None:
    """Remove funes's hooks and restore the hooks they chained, byte for byte."""
    render(app.fmt, api.hooks_uninstall(app.settings), human=_hooks_text)


@hooks.command("status")
@pass_app
def hooks_status(app: App) -> None:
    """Show which hooks are installed, what they chain and where commits are linked."""
    render(app.fmt, api.hooks_status(app.settings), human=_hooks_text)


# -- link -----------------------------------------------------------------------------------


@click.command()
@click.argument("rev", default="HEAD")
@click.option("--no-index", is_flag=True, help="Link what is indexed already; index nothing.")
@click.option("--hook", is_flag=True, hidden=True,
              help="Run as the post-commit hook's detached process (bounded, logged).")
@memory_option
@pass_app
def link(app: App, rev: str, no_index: bool, hook: bool) -> None:
    """Link a code commit (default HEAD) to the agent turns since the previous linked one.

    What the post-commit hook runs for each commit: index new turns, pick the repository's
    turns since its previous linked commit, record the link in the memory, and write a
    `refs/notes/funes` note on the commit. Run it by hand for a commit the hook missed.
    """
    if not hook:
        result = api.link_commit(app.settings, rev, memory=app.memory, index=not no_index)
        for warning in result.warnings:
            click.echo(f"funes: warning: {warning}", err=True)
        render(app.fmt, result, human=api.LinkResult.summary)
        return
    # The hook's detached process: the library writes its log lines (stdout is the hook log).
    code = api.link_commit_for_hook(app.settings, rev, memory=app.memory, index=not no_index,
                                    say=click.echo)
    if code:
        sys.exit(code)


# -- why and blame --------------------------------------------------------------------------

#: Characters of each turn shown unless --full (`funes get` opens the whole turn).
TURN_CHARS = 600


def _turn_lines(turn: Any, *, chars: int | None, get_suffix: str, fmt: str) -> list[str]:
    head = (f"[{turn.ts or '-'}] {turn.harness} {turn.role} seq{turn.seq} "
            f"session {turn.session_id} turn {turn.turn_id}")
    # Block texts are rendered as stored: tool blocks already say what they are
    # (`[tool_use Bash] …`); scaffolding (noise) is left out, `funes get` shows it.
    text = "\n".join(b.text for b in turn.blocks if not b.noise).strip()
    if not text:
        text = "(only scaffolding: system reminders, injected context)"
    if chars is not None and len(text) > chars:
        text = text[:chars].rstrip() + f" … [{len(text) - chars} more characters]"
    get = f"→ funes get {turn.session_id} {turn.turn_id}{get_suffix}"
    if fmt == "human":
        return [click.style(head, bold=True), text, click.style(get, fg="yellow"), "---"]
    return [head, text, get, "---"]


def _turns_block(turns: list[Any], linked: int, *, limit: int, full: bool, get_suffix: str,
                 fmt: str) -> list[str]:
    lines = []
    if not full:
        # Turns that are only scaffolding (system reminders, injected context) say nothing
        # about why the code changed; they would crowd out the ones that do.
        words = [t for t in turns if any(not b.noise and b.text.strip() for b in t.blocks)]
        if len(words) < len(turns):
            lines.append(f"({len(turns) - len(words)} turns of scaffolding only not shown: "
                         "--full shows them)")
        turns = words
    shown = turns[-limit:] if limit else turns
    if len(shown) < len(turns):
        lines.append(f"({len(turns) - len(shown)} earlier turns not shown: --limit 0 shows all)")
    if linked > len(turns):
        lines.append(f"({linked - len(turns)} linked turns are not in this memory: forgotten, "
                     "or not pulled yet)")
    for turn in shown:
        lines += _turn_lines(turn, chars=None if full else TURN_CHARS, get_suffix=get_suffix,
                             fmt=fmt)
    return lines


def _get_suffix(app: Any) -> str:
    return f" --memory {app.memory}" if app.memory else ""


def _why_text(r: api.WhyResult, *, limit: int, full: bool, get_suffix: str, fmt: str) -> str:
    link = r.links[-1].link
    author = r.commit.author if r.commit else link.author
    when = r.commit.time if r.commit else link.time
    message = r.commit.message if r.commit else link.message
    branch = f" ({link.branch})" if link.branch else ""
    head = f"commit {r.sha}{branch}"
    lines = [click.style(head, fg="yellow") if fmt == "human" else head,
             f"author {author}", f"date   {when}", ""]
    lines += [f"    {line}" for line in message.splitlines()] + [""]
    if not r.linked:
        lines.append("no agent session took part in this commit (its link is empty)")
        return "\n".join(lines)
    sessions = {(h, s) for found in r.links for h, s, _ in found.link.turns}
    lines.append(f"linked: {r.linked} turns from {len(sessions)} session(s), newest last")
    lines.append("---")
    lines += _turns_block(r.turns, r.linked, limit=limit, full=full, get_suffix=get_suffix,
                          fmt=fmt)
    return "\n".join(lines)


def _turn_json(turn: Any, get_suffix: str) -> dict[str, Any]:
    return {
        "harness": turn.harness, "session_id": turn.session_id, "turn_id": turn.turn_id,
        "seq": turn.seq, "ts": turn.ts, "role": turn.role, "workdir": turn.workdir,
        "blocks": [{"type": b.block_type, "tool_name": b.tool_name, "text": b.text,
                    "noise": b.noise} for b in turn.blocks],
        "get": f"funes get {turn.session_id} {turn.turn_id}{get_suffix}",
    }


def _links_json(found: list[Any]) -> list[dict[str, Any]]:
    return [{"id": f.id, "memory_commit": f.memory_commit, **f.link.to_dict()} for f in found]


@click.command()
@click.argument("rev", default="HEAD")
@click.option("-n", "--limit", type=int, default=20, show_default=True,
              help="Show the newest N linked turns (0: all).")
@click.option("--full", is_flag=True,
              help="Whole turns, scaffolding-only turns included (default: the first 600 "
              "characters of each turn that has words of its own).")
@memory_option
@pass_app
def why(app: App, rev: str, limit: int, full: bool) -> None:
    """Show the agent turns behind a code commit (default HEAD), newest last.

    Each turn ends with the `funes get` command that opens it whole. Outside the code
    repository (a memory cloned elsewhere), name the commit by its id or a prefix of it.
    """
    if limit < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--limit")
    result = api.why(app.repo(), rev)
    suffix = _get_suffix(app)
    if app.fmt == "json":
        render("json", {
            "rev": result.rev, "sha": result.sha, "commit": result.commit,
            "links": _links_json(result.links), "linked": result.linked,
            "turns": [_turn_json(t, suffix) for t in result.turns],
        }, human=str)
        return
    click.echo(_why_text(result, limit=limit, full=full, get_suffix=suffix, fmt=app.fmt),
               color=None if app.fmt == "human" else False)


def _ranges(numbers: list[int]) -> str:
    parts: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(parts)


def _blame_text(r: api.BlameResult, *, limit: int, full: bool, get_suffix: str,
                fmt: str) -> str:
    width = len(str(r.lines[-1].number)) if r.lines else 1
    lines = [f"{short(line.sha)} {line.number:>{width}}: {line.text}" for line in r.lines]
    for c in r.commits:
        lines.append("")
        head = (f"== {short(c.sha)} {c.commit.time} {c.commit.author}: {c.commit.summary} "
                f"(lines {_ranges(c.lines)})")
        lines.append(click.style(head, fg="yellow") if fmt == "human" else head)
        if not c.links:
            lines.append(f"not linked (`funes link {short(c.sha)}` links it)")
        elif not c.linked:
            lines.append("no agent session took part in this commit")
        else:
            lines.append(f"linked: {c.linked} turns, newest last")
            lines += _turns_block(c.turns, c.linked, limit=limit, full=full,
                                  get_suffix=get_suffix, fmt=fmt)
    return "\n".join(lines)


@click.command()
@click.argument("spec", metavar="FILE[:LINE[-LINE]]")
@click.option("--rev", default="HEAD", show_default=True,
              help="Annotate the file as of this commit.")
@click.option("-n", "--limit", type=int, default=5, show_default=True,
              help="Show the newest N linked turns of each commit (0: all).")
@click.option("--full", is_flag=True,
              help="Whole turns, scaffolding-only turns included (as for `why`).")
@memory_option
@pass_app
def blame(app: App, spec: str, rev: str, limit: int, full: bool) -> None:
    """Show who last changed each line of a file, and the agent turns behind those commits.

    Reads the committed file (like `git blame REV -- FILE`); FILE:12 or FILE:12-20 narrows
    it to those lines.
    """
    if limit < 0:
        raise click.BadParameter("must be 0 or more", param_hint="--limit")
    result = api.blame(app.repo(), spec, rev)
    suffix = _get_suffix(app)
    if app.fmt == "json":
        render("json", {
            "path": result.path, "rev": result.rev,
            "lines": [{"number": li.number, "sha": li.sha, "text": li.text}
                      for li in result.lines],
            "commits": [{"sha": c.sha, "commit": c.commit, "lines": c.lines,
                         "links": _links_json(c.links), "linked": c.linked,
                         "turns": [_turn_json(t, suffix) for t in c.turns]}
                        for c in result.commits],
        }, human=str)
        return
    click.echo(_blame_text(result, limit=limit, full=full, get_suffix=suffix, fmt=app.fmt),
               color=None if app.fmt == "human" else False)


COMMANDS = [hooks, link, why, blame]
