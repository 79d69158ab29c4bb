"""Distribution verbs: remote, push, fetch, pull, merge, clone."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from funes import api
from funes.cli.output import render, short
from funes.cli.progress import progress_bar


def _app(ctx: click.Context) -> Any:
    return ctx.find_root().obj


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"


# -- remote ------------------------------------------------------------------------------------


@click.group()
def remote() -> None:
    """Manage remotes: where this memory is pushed to and pulled from.

    URL forms: ORG/NAME or hf://datasets/ORG/NAME[/FOLDER] (a Hugging Face dataset repository),
    a directory path or file://PATH. Write ./ORG/NAME for a directory that does not exist yet.
    """


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--encrypt", is_flag=True, help="Encrypt everything sent to it client-side "
              "(AES-256-GCM) with this memory's key; the remote is then not Lance-readable.")
@click.pass_context
def remote_add(ctx: click.Context, name: str, url: str, encrypt: bool) -> None:
    """Add a remote NAME at URL.

    With --encrypt, objects and fragment files are sealed before they leave; the key lives in
    $FUNES_HOME/keys/memories/ (`funes keys export --remote NAME` hands it to teammates).
    """
    app = _app(ctx)
    info = api.remote_add(app.repo(), name, url, encrypt=encrypt)
    render(app.fmt, info, human=lambda i: f"added remote {i.name} → {i.url}"
           + (" (encrypted)" if encrypt else ""))


@remote.command("remove")
@click.argument("name")
@click.pass_context
def remote_remove(ctx: click.Context, name: str) -> None:
    """Remove a remote, its remote-tracking refs and cached state."""
    app = _app(ctx)
    info = api.remote_remove(app.repo(), name)
    render(app.fmt, info, human=lambda i: f"removed remote {i.name} ({i.url})")


@remote.command("set-url")
@click.argument("name")
@click.argument("url")
@click.pass_context
def remote_set_url(ctx: click.Context, name: str, url: str) -> None:
    """Point remote NAME at another URL."""
    app = _app(ctx)
    info = api.remote_set_url(app.repo(), name, url)
    render(app.fmt, info, human=lambda i: f"remote {i.name} → {i.url}")


@remote.command("list")
@click.pass_context
def remote_list(ctx: click.Context) -> None:
    """List remotes, one per line: name and URL."""
    app = _app(ctx)
    items = api.remote_list(app.repo())
    render(app.fmt, items, human=lambda xs: "\n".join(f"{i.name}\t{i.url}" for i in xs))


# -- push, fetch, pull, merge ------------------------------------------------------------------


def _held_lines(r: api.PushResult) -> list[str]:
    if not r.held:
        return []
    verb = "would hold" if r.dry_run else "held back"
    lines = [f"{verb} {len(r.held)} chunk(s) that still look secret (not sent):"]
    lines += [
        f"  {h.harness} session {h.session} turn {h.turn}: {', '.join(h.detectors)} "
        f"(chunk {h.chunk[:12]})"
        for h in r.held
    ]
    lines.append("  run `funes scrub` to redact them, then push again")
    return lines


def _push_text(r: api.PushResult) -> str:
    where = f"{r.remote} ({r.url})"
    if r.dry_run and not r.up_to_date:
        return "\n".join([
            f"dry run: would push {r.branch} {short(r.old)}..{short(r.new)} → {where}: "
            f"{r.commits} commit(s), {r.scanned} chunk(s) scanned",
            *_held_lines(r),
        ])
    if r.up_to_date:
        return f"everything up to date ({where}, {r.branch} at {short(r.new)})"
    verb = "forced update" if r.forced else ("new branch" if r.old is None else "pushed")
    lines = [
        f"{verb}: {r.branch} {short(r.old)}..{short(r.new)} → {where}",
        f"sent {r.commits} commit(s): {r.objects} objects, {r.files} fragment file(s), "
        f"{_size(r.bytes)}",
    ]
    if r.created:
        lines.append("created the remote" + (" (a private dataset repository on the Hub)"
                                              if r.hub else f" at {r.url}"))
    lines += _held_lines(r)
    return "\n".join(lines)


@click.command()
@click.argument("remote", required=False)
@click.argument("branch", required=False)
@click.option("--force", "-f", is_flag=True, help="Overwrite the remote branch even if it "
              "has commits this one lacks.")
@click.option("--dry-run", "-n", is_flag=True, help="Show what would be sent (and held "
              "back); change nothing.")
@click.pass_context
def push(
    ctx: click.Context, remote: str | None, branch: str | None, force: bool, dry_run: bool
) -> None:
    """Send BRANCH (default: the current one) to REMOTE (default: its remote, or origin).

    Refused with exit 4 when the remote has commits you do not have: fetch first
    (`funes pull`), or --force. Only what the remote lacks is uploaded; on the Hub a push is
    one commit, and a push with nothing new makes none.

    Every outgoing chunk passes the publish gate (the redaction detectors again, the
    Betterleaks engine, plus gitleaks or trufflehog when installed): chunks that still look
    secret are held back, listed (session, turn, engine:rule; never the secret), and the push
    exits 1 after sending the rest. If a scanner fails, nothing is sent.
    """
    app = _app(ctx)
    with progress_bar("pushing") as progress:
        result = api.push(
            app.repo(), remote, branch, force=force, progress=progress, dry_run=dry_run
        )
    render(app.fmt, result, human=_push_text)
    if result.held:
        sys.exit(1)


def _fetch_text(r: api.FetchResult) -> str:
    lines = [f"{u.ref}: {short(u.old)}..{short(u.new)}" for u in r.updated]
    if r.objects or r.files:
        lines.append(
            f"fetched {r.objects} objects, {r.files} fragment file(s), {_size(r.bytes)} "
            f"from {r.remote}"
        )
    elif not r.updated:
        lines.append(f"{r.remote}: nothing new")
    return "\n".join(lines)


@click.command()
@click.argument("remote", required=False)
@click.pass_context
def fetch(ctx: click.Context, remote: str | None) -> None:
    """Download what REMOTE has and this memory lacks; update refs/remotes/REMOTE/*.

    Nothing is merged: `funes merge REMOTE/BRANCH` (or `funes pull`) does that.
    """
    app = _app(ctx)
    with progress_bar("fetching") as progress:
        result = api.fetch(app.repo(), remote, progress=progress)
    render(app.fmt, result, human=_fetch_text)


def _merge_text(m: api.MergeResult) -> str:
    if m.kind == "up-to-date":
        return f"already up to date ({m.branch} at {short(m.new)})"
    if m.kind == "fast-forward":
        head = f"fast-forward {m.branch} {short(m.old)}..{short(m.new)}"
    else:
        head = f"merge commit {short(m.merge_commit)} on {m.branch} (was {short(m.old)})"
    return f"{head}\n{m.fragments} fragment(s), {m.rows} rows added; {m.chunk_count} chunks"


def _signature_text(checks: Any) -> str:
    counts: dict[str, int] = {}
    for c in checks:
        if c.status != "good":
            counts[c.status] = counts.get(c.status, 0) + 1
    if not counts:
        return ""
    parts = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return f"signatures: {parts} commit(s) not signed by a trusted key (`funes fsck --verify`)"


_REQUIRE_SIGNED = click.option(
    "--require-signed", is_flag=True,
    help="Refuse unless every incoming commit is signed by a trusted key (`funes keys`).",
)


@click.command()
@click.argument("remote", required=False)
@click.argument("branch", required=False)
@_REQUIRE_SIGNED
@click.pass_context
def pull(ctx: click.Context, remote: str | None, branch: str | None,
         require_signed: bool) -> None:
    """Fetch REMOTE, then merge its BRANCH (default: the current one) into HEAD.

    Fast-forwards when possible, otherwise writes a merge commit: the union of both sides,
    with tombstones from either side applied. Memories stamped with different embedding
    models refuse to merge. Unsigned commits and unknown or bad signatures among the incoming
    commits are reported; --require-signed refuses the merge (exit 1).
    """
    app = _app(ctx)
    with progress_bar("pulling") as progress:
        result = api.pull(app.repo(), remote, branch, progress=progress,
                          require_signed=require_signed)
    if app.fmt == "json":
        render("json", result, human=str)
        return
    text = _fetch_text(result.fetch)
    render(app.fmt, result, human=lambda r: "\n".join(
        part for part in (text, _merge_text(r.merge), _signature_text(r.signatures)) if part
    ))


@click.command()
@click.argument("rev")
@click.pass_context
def merge(ctx: click.Context, rev: str) -> None:
    """Merge REV (a branch, origin/main, a commit id) into the current branch."""
    app = _app(ctx)
    result = api.merge(app.repo(), rev)
    render(app.fmt, result, human=_merge_text)


@click.command()
@click.argument("source")
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--global", "is_global", is_flag=True,
              help="Clone into the user's memory at $FUNES_HOME.")
@_REQUIRE_SIGNED
@click.pass_context
def clone(ctx: click.Context, source: str, directory: Path | None, is_global: bool,
          require_signed: bool) -> None:
    """Copy the memory at SOURCE into DIRECTORY/.funes (default: ./NAME), or --global.

    SOURCE is any remote URL (ORG/NAME, hf://datasets/…, a path). The copy is complete and
    usable at once (nothing is re-embedded), with `origin` pointing at SOURCE. Public Hub
    memories clone without a token. Unsigned commits and unknown or bad signatures are
    reported; --require-signed refuses them (exit 1, nothing left behind).
    """
    app = _app(ctx)
    with progress_bar("cloning") as progress:
        result = api.clone(app.settings, source, str(directory) if directory else None,
                           is_global=is_global, progress=progress,
                           require_signed=require_signed)

    def text(r: api.CloneResult) -> str:
        if r.branch is None:
            return f"cloned an empty memory into {r.path} (origin {r.url})"
        line = (
            f"cloned {r.url} into {r.path}: {r.branch} at {short(r.head)}, {r.chunks} chunks "
            f"({r.fetch.objects} objects, {r.fetch.files} fragment file(s), "
            f"{_size(r.fetch.bytes)})"
        )
        sig = _signature_text(r.signatures)
        return f"{line}\n{sig}" if sig else line

    render(app.fmt, result, human=text)


COMMANDS = [remote, push, fetch, pull, merge, clone]
