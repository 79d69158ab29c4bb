"""Repository verbs: init, log, show, status, fsck, config, reset, reflog, unforget."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from funes import api
from funes.cli.app import App, pass_app
from funes.cli.options import memory_option
from funes.cli.output import render, short, to_dict


@click.command()
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--global", "is_global", is_flag=True, help="Create the user's memory at $FUNES_HOME."
)
@pass_app
def init(app: App, path: Path | None, is_global: bool) -> None:
    """Create a memory: PATH/.funes (default: here), or the global one with --global."""
    result = api.init(app.settings, path, is_global=is_global)
    kind = "global" if is_global else "project"
    verb = "Initialised empty" if result.created else "Found existing"
    render(
        app.fmt,
        {"path": result.repo.path, "kind": kind, "created": result.created},
        human=lambda r: f"{verb} {kind} funes memory in {r['path']}",
    )


def _log_line(entry: api.LogEntry) -> str:
    refs = f" ({', '.join(entry.refs)})" if entry.refs else ""
    return f"{short(entry.id)} {entry.commit.time} {entry.commit.summary}{refs}" + "".join(
        f"\n    code {_code_line(link)}" for link in entry.links
    )


def _code_line(link: Any) -> str:
    branch = f" ({link.branch})" if link.branch else ""
    return f"{short(link.commit)}{branch} {link.time} {link.summary} [{len(link.turns)} turns]"


@click.command()
@click.argument("rev", required=False)
@click.option("-n", "--limit", type=int, default=None, help="Show at most N commits.")
@click.option("--links", is_flag=True,
              help="Show the code commits each memory commit links (git hooks).")
@memory_option
@pass_app
def log(app: App, rev: str | None, limit: int | None, links: bool) -> None:
    """List commits, newest first: one line each (id, time, message)."""
    entries = api.log(app.repo(), rev, limit, links=links)
    if app.fmt == "json":
        render(
            "json",
            [
                {"id": e.id, "refs": list(e.refs), **e.commit.to_dict()}
                | ({"linked": [link.to_dict() for link in e.links]} if links else {})
                for e in entries
            ],
            human=str,
        )
        return

    def human(items: list[api.LogEntry]) -> str:
        lines = []
        for e in items:
            refs = click.style(f" ({', '.join(e.refs)})", fg="green") if e.refs else ""
            lines.append(
                f"{click.style(short(e.id), fg='yellow')} {e.commit.time} {e.commit.summary}{refs}"
            )
            lines += [f"    code {click.style(_code_line(link), fg='cyan')}" for link in e.links]
        return "\n".join(lines)

    render(app.fmt, entries, human=human, agent=lambda items: "\n".join(map(_log_line, items)))


@click.command()
@click.argument("rev", default="HEAD")
@memory_option
@pass_app
def show(app: App, rev: str) -> None:
    """Show one commit: parents, author, model, what it added and hid."""
    result = api.show(app.repo(), rev)
    if app.fmt == "json":
        render(
            "json",
            {
                "id": result.id,
                **result.commit.to_dict(),
                "added": {m.table: len(m.ids) for m in result.manifests.values()},
                "tombstoned": result.tombstoned,
            },
            human=str,
        )
        return

    def text(r: api.ShowResult) -> str:
        c = r.commit
        lines = [f"commit {r.id}"]
        lines += [f"parent {p}" for p in c.parents]
        lines.append(f"author {c.author} on {c.host}")
        lines.append(f"date   {c.time}")
        lines.append(f"model  {c.model or '(none yet)'}")
        for mid, m in r.manifests.items():
            files = sum(len(f.files) for f in m.fragments)
            lines.append(f"adds   {len(m.ids)} {m.table} rows in {files} file(s) ({short(mid)})")
        if r.tombstoned:
            lines.append(f"hides  {r.tombstoned} chunk(s)")
        lines.append(f"chunks {c.chunk_count} visible")
        lines.append("")
        lines += [f"    {line}" for line in c.message.splitlines()]
        return "\n".join(lines)

    render(app.fmt, result, human=text)


@click.command()
@click.option("--offline", is_flag=True,
              help="Do not ask the remotes where they are: ahead/behind as of the last fetch.")
@memory_option
@pass_app
def status(app: App, offline: bool) -> None:
    """Describe the memory: where it is, HEAD, chunks and sessions by agent, model stamp.

    Each remote is asked where its branch is (one small request), so "up to date" is true
    now; `--offline` shows what the last fetch knew.

    \b
    Example:
      funes status
      funes status --format json
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    choice = app.choice()
    repo = choice.repo
    result = api.status(repo, refresh=not offline)
    search = api.search_status(app.settings, repo)
    if app.fmt == "json":
        render("json", {**to_dict(result), "search": to_dict(search), "note": choice.warning},
               human=str)
        return

    note = f"# note: {choice.warning}\n" if choice.warning else ""
    render(app.fmt, result, human=lambda r: note + api.status_text(r, search))


@click.command()
@click.option("--no-rows", is_flag=True, help="Skip re-hashing every chunk row (faster).")
@click.option("--verify", is_flag=True, help="Also check commit signatures: bad ones are "
              "errors, unsigned commits and unknown signers warnings.")
@memory_option
@pass_app
def fsck(app: App, no_rows: bool, verify: bool) -> None:
    """Verify every object, ref, fragment file and chunk row; exit 1 on damage."""
    report = api.fsck(app.repo(), rows=not no_rows, verify=verify)

    def text(r: api.FsckReport) -> str:
        lines = [f"error: {p}" for p in r.problems] + [f"warning: {p}" for p in r.warnings]
        verdict = "ok" if r.ok else f"{len(r.problems)} problem(s)"
        lines.append(
            f"checked {r.objects} objects, {r.refs} refs, {r.commits} commits, "
            f"{r.files} files, {r.rows} rows: {verdict}"
        )
        return "\n".join(lines)

    render(app.fmt, report, human=text)
    if not report.ok:
        sys.exit(1)


def _set_global(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta["funes.config.global"] = True


def global_option(func: Any) -> Any:
    """`--global`, accepted on `config` and on each of its subcommands (same meaning)."""
    return click.option(
        "--global", "is_global", is_flag=True, expose_value=False, is_eager=True,
        callback=_set_global,
        help="The user config ($FUNES_HOME/user.config: user.name, user.email), which every "
        "memory on this machine falls back to.",
    )(func)


def _is_global() -> bool:
    """Whether `--global` was given (before or after the subcommand)."""
    return bool(click.get_current_context().meta.get("funes.config.global"))


@click.group(invoke_without_command=True)
@global_option
@click.pass_context
def config(ctx: click.Context) -> None:
    """Read and write settings: the memory's, or with --global the user's.

    With no subcommand, lists what is set (like `funes config list`). `funes config --global
    set user.name "Ada Lovelace"` names you in the commits of every memory on this machine.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(config_list)


@config.command("get")
@click.argument("key")
@global_option
@memory_option
@pass_app
def config_get(app: App, key: str) -> None:
    """Print a value (exit 1 when it is not set and has no default)."""
    if _is_global():
        value = api.user_config_get(app.settings, key)
    else:
        value = api.config_get(app.repo(), key)
    if value is None:
        sys.exit(1)
    click.echo(value)


@config.command("set")
@click.argument("key")
@click.argument("value")
@global_option
@memory_option
@pass_app
def config_set(app: App, key: str, value: str) -> None:
    """Set a value (validated against the known keys)."""
    if _is_global():
        api.user_config_set(app.settings, key, value)
    else:
        api.config_set(app.repo(), key, value)


@config.command("unset")
@click.argument("key")
@global_option
@memory_option
@pass_app
def config_unset(app: App, key: str) -> None:
    """Remove a value."""
    if _is_global():
        done = api.user_config_unset(app.settings, key)
    else:
        done = api.config_unset(app.repo(), key)
    if not done:
        sys.exit(1)


@config.command("list")
@global_option
@memory_option
@pass_app
def config_list(app: App) -> None:
    """Print every value that is set, as key=value."""
    items = api.user_config_list(app.settings) if _is_global() else api.config_list(app.repo())
    render(app.fmt, dict(items), human=lambda d: "\n".join(f"{k}={v}" for k, v in d.items()))


@click.command()
@click.argument("rev")
@click.option("--hard", is_flag=True, required=True,
              help="Move the branch and the rows readers see (the only mode).")
@memory_option
@pass_app
def reset(app: App, rev: str, hard: bool) -> None:
    """Point the current branch at REV, as git's `reset --hard` (e.g. ORIG_HEAD, HEAD@{1}).

    Undoes a merge or pull: the rows it brought leave what recall and status read (their
    files stay until `funes gc`, so another reset can bring them back). `funes reflog`
    lists where the branch was. With HEAD missing, `funes reset --hard main` repairs it.
    """
    result = api.reset(app.repo(), rev)
    render(
        app.fmt,
        result,
        human=lambda r: f"HEAD is now at {short(r.new)} on {r.branch} (was {short(r.old)}; "
        f"{r.dropped} fragment(s) left the tables, {r.appended} joined; "
        f"{r.chunk_count} chunks)",
    )


@click.command()
@click.argument("ref", required=False, default="HEAD")
@memory_option
@pass_app
def reflog(app: App, ref: str) -> None:
    """Where REF (default HEAD, or a branch) pointed, newest first: names for `reset`."""
    lines = api.reflog(app.repo(), ref)
    render(
        app.fmt,
        lines,
        human=lambda ls: "\n".join(
            f"{short(x.new)} {x.selector}: {x.message} ({x.time})" for x in ls),
    )


@click.command()
@click.argument("rev")
@memory_option
@pass_app
def unforget(app: App, rev: str) -> None:
    """Lift the tombstones commit REV carries: the chunks they hid come back.

    The way back from a tombstone a pull brought in (say an unsigned teammate's `forget`
    that also hid your own chunks of the same transcript). The lift is itself a tombstone
    in a new commit, so it travels like one; `funes log` shows the commits that forgot.
    """
    result = api.unforget(app.repo(), rev)
    render(
        app.fmt,
        result,
        human=lambda r: f"lifted {len(r.tombstones)} tombstone(s): {r.restored} chunk(s) "
        f"visible again (commit {short(r.commit)})",
    )


COMMANDS = [init, log, show, status, fsck, config, reset, reflog, unforget]
