"""Distribution verbs: remote, push, fetch, pull, sync, merge, clone."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from funes import api
from funes.cli.app import App, pass_app
from funes.cli.output import render, short
from funes.cli.progress import progress_bar


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{n} B"


# -- remote ------------------------------------------------------------------------------------


@click.group(invoke_without_command=True)
@click.pass_context
def remote(ctx: click.Context) -> None:
    """Manage remotes: where this memory is pushed to and pulled from.

    URL forms: ORG/NAME or hf://datasets/ORG/NAME[/FOLDER] (a Hugging Face dataset repository),
    a directory path or file://PATH. Write ./ORG/NAME for a directory that does not exist yet.
    With no subcommand, lists the remotes (like `git remote -v`).
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(remote_list)


@remote.command("add")
@click.argument("name")
@click.argument("url")
@click.option("--encrypt", is_flag=True, help="Encrypt everything sent to it client-side "
              "(AES-256-GCM) with this memory's key; the remote is then not Lance-readable.")
@pass_app
def remote_add(app: App, name: str, url: str, encrypt: bool) -> None:
    """Add a remote NAME at URL.

    With --encrypt, objects and fragment files are sealed before they leave; the key lives in
    $FUNES_HOME/keys/memories/ (`funes keys export --remote NAME` hands it to teammates).
    """
    info = api.remote_add(app.repo(), name, url, encrypt=encrypt)
    render(app.fmt, info, human=lambda i: f"added remote {i.name} → {i.url}"
           + (" (encrypted)" if encrypt else ""))


@remote.command("remove")
@click.argument("name")
@pass_app
def remote_remove(app: App, name: str) -> None:
    """Remove a remote, its remote-tracking refs and cached state."""
    info = api.remote_remove(app.repo(), name)
    render(app.fmt, info, human=lambda i: f"removed remote {i.name} ({i.url})")


@remote.command("set-url")
@click.argument("name")
@click.argument("url")
@pass_app
def remote_set_url(app: App, name: str, url: str) -> None:
    """Point remote NAME at another URL."""
    info = api.remote_set_url(app.repo(), name, url)
    render(app.fmt, info, human=lambda i: f"remote {i.name} → {i.url}")


@remote.command("list")
@pass_app
def remote_list(app: App) -> None:
    """List remotes, one per line: name and URL."""
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
    lines.append(f"  run `{api.held_fix(r.held, r.remote)}` to redact them and push them")
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
@click.option("--public", is_flag=True, help="Then make the Hub memory public, after the "
              "publish gate scanned everything it holds (asks first).")
@click.option("--retract", is_flag=True, help="Rewrite the remote without the rows tombstones "
              "hide, and delete the files that held them (asks first; on the Hub, squashes "
              "its history).")
@click.option("--yes", "-y", is_flag=True, help="With --public or --retract: do not ask.")
@pass_app
def push(
    app: App, remote: str | None, branch: str | None, force: bool, dry_run: bool,
    public: bool, retract: bool, yes: bool,
) -> None:
    """Send BRANCH (default: the current one) to REMOTE (default: its remote, or origin).

    Refused with exit 4 when the remote has commits you do not have: fetch first
    (`funes pull`), or --force. Only what the remote lacks is uploaded; on the Hub a push is
    one commit, and a push with nothing new makes none.

    Every outgoing chunk passes the publish gate (the redaction detectors again, the
    Betterleaks engine, plus gitleaks or trufflehog when installed): chunks that still look
    secret are held back, listed (session, turn, engine:rule; never the secret), and the push
    exits 1 after sending the rest. If a scanner fails, nothing is sent.

    --public then makes the memory (a Hub dataset) public: the publish gate scans every chunk
    the remote's history holds, not only what this push sends, and funes asks before it
    changes anything (--yes does not ask). Found secrets keep it private (exit 1).

    --retract erases what tombstones hide (`forget`, `exclude`, `scrub`) from the remote: its
    whole history is rewritten without those rows (new fragment files, a new Lance version,
    the old files deleted; on the Hub, one commit, then the history squashed and unreferenced
    LFS files deleted, so no revision serves them). funes says what is lost and asks first.
    Other machines adopt the rewritten history on their next pull.
    """
    if retract:
        if dry_run or force or branch or public:
            raise click.UsageError("--retract goes alone (with REMOTE and --yes)")
        _retract(app, remote, yes)
        return
    if public:
        if dry_run or force or branch:
            raise click.UsageError("--public goes alone (with REMOTE and --yes)")
        _publish(app, remote, yes)
        return
    with progress_bar("pushing") as progress:
        result = api.push(
            app.repo(), remote, branch, force=force, progress=progress, dry_run=dry_run
        )
    render(app.fmt, result, human=_push_text)
    if result.held:
        sys.exit(1)
    last = None if dry_run else api.last_sync(app.repo(), result.remote)
    if last is not None and last.held:  # nothing new to send, but the remote lacks these
        click.echo(f"{last.held} chunk(s) are still withheld from {result.remote} "
                   f"(they look secret): run `{last.fix}`", err=True)
        sys.exit(1)


def _public_summary(check: api.PublishCheck) -> str:
    return (f"{check.url} would become public: {check.commits} commit(s), "
            f"{check.scanned} chunk(s), all scanned by the publish gate, none flagged. "
            "Anyone could read every passage.")


def _publish(app: Any, remote: str | None, yes: bool) -> None:
    def confirm(check: api.PublishCheck) -> bool:
        return _ask(_public_summary(check), "Make it public?", yes)

    with progress_bar("publishing") as progress:
        result = api.publish(app.repo(), remote, confirm=confirm, progress=progress)

    def text(r: api.PublishResult) -> str:
        first = _push_text(r.push)
        if not r.public:
            return f"{first}\nnot made public (declined); {r.check.url} stays private"
        return (f"{first}\n{r.check.url} is public now ({r.check.scanned} chunk(s) scanned); "
                "undo on the Hub in its settings")

    render(app.fmt, result, human=text)


def _ask(summary: str, question: str, yes: bool) -> bool:
    """Confirm on the terminal (stderr); --yes skips; no terminal is a usage error."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise click.UsageError(f"{summary} Confirm with --yes (no terminal to ask on)")
    return click.confirm(f"{summary} {question}", default=False, err=True)


def _retract_summary(c: api.RetractCheck) -> str:
    lines = [f"{c.url}: {c.rows} chunk row(s) of {c.sessions} session(s) will be erased; "
             f"{c.commits} commit(s) rewritten (new ids), {c.files} file(s) deleted."]
    if c.hub:
        lines.append(f"Its Hub history is squashed: the {c.history} revision(s) of `main`"
                     + (f" back to {c.since}" if c.since else "")
                     + " stop being served (readers pinned to one, `hf_revision`, lose it).")
        if c.other_refs:
            lines.append(f"These keep their own history: {', '.join(c.other_refs)}.")
    else:
        lines.append(f"{c.history} older Lance version(s) of its datasets are deleted.")
    lines.append("Copies other machines pulled stay until they pull again and run `funes gc`.")
    return "\n".join(lines)


def _retract(app: Any, remote: str | None, yes: bool) -> None:
    def confirm(check: api.RetractCheck) -> bool:
        return _ask(_retract_summary(check), "Retract?", yes)

    with progress_bar("retracting") as progress:
        result = api.retract(app.repo(), remote, confirm=confirm, progress=progress)

    def text(r: api.RetractResult) -> str:
        if r.declined:
            return f"not retracted (declined); {r.check.url} is unchanged"
        if not r.done:
            return f"nothing to retract: {r.check.url} holds no hidden row"
        lines = [f"retracted {r.check.rows} chunk row(s) from {r.check.url}: "
                 f"{r.check.commits} commit(s) rewritten, {r.check.files} file(s) deleted"]
        if r.adopted is not None:
            lines.append(f"this memory moved onto the rewritten history "
                         f"({short(r.adopted.old)} → {short(r.adopted.new)}); "
                         "`funes gc` erases the old rows from this disk")
        return "\n".join(lines)

    render(app.fmt, result, human=text)


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
@pass_app
def fetch(app: App, remote: str | None) -> None:
    """Download what REMOTE has and this memory lacks; update refs/remotes/REMOTE/*.

    Nothing is merged: `funes merge REMOTE/BRANCH` (or `funes pull`) does that.
    """
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


def _signature_text(settings: Any, checks: Any) -> str:
    return api.signature_note(settings, tuple(checks)) or ""


_REQUIRE_SIGNED = click.option(
    "--require-signed", is_flag=True,
    help="Refuse unless every incoming commit is signed by a trusted key (`funes keys`).",
)


@click.command()
@click.argument("remote", required=False)
@click.argument("branch", required=False)
@_REQUIRE_SIGNED
@pass_app
def pull(app: App, remote: str | None, branch: str | None,
         require_signed: bool) -> None:
    """Fetch REMOTE, then merge its BRANCH (default: the current one) into HEAD.

    Fast-forwards when possible, otherwise writes a merge commit: the union of both sides,
    with tombstones from either side applied. Memories stamped with different embedding
    models refuse to merge. Unsigned commits and unknown or bad signatures among the incoming
    commits are reported; --require-signed refuses the merge (exit 1).
    """
    with progress_bar("pulling") as progress:
        result = api.pull(app.repo(), remote, branch, progress=progress,
                          require_signed=require_signed)
    if app.fmt == "json":
        render("json", result, human=str)
        return
    text = _fetch_text(result.fetch)
    signatures = _signature_text(app.settings, result.signatures)
    adopted = "" if result.adopted is None else (
        f"the remote was retracted: this memory moved onto its rewritten history "
        f"({result.adopted.replaced} commit(s) replaced, {result.adopted.rebased} of yours "
        "rewritten onto it); `funes gc` erases the retracted rows from this disk")
    render(app.fmt, result, human=lambda r: "\n".join(
        part for part in (text, adopted, _merge_text(r.merge), signatures) if part
    ))


def _sync_text(r: api.SyncResult) -> str:
    lines = []
    if r.merged is not None and r.merged.kind != "up-to-date":
        lines.append(_merge_text(r.merged))
    if r.pushed is not None:
        lines.append(_push_text(r.pushed))
    elif r.merged is None:
        lines.append(f"{r.remote}: nothing to sync yet")
    elif not lines:
        lines.append(f"up to date with {r.remote} ({r.url})")
    if r.attempts > 1:
        lines.append(f"(another machine pushed meanwhile: synced on try {r.attempts})")
    return "\n".join(lines)


@click.command()
@click.argument("remote", required=False)
@click.option("--no-push", is_flag=True, help="Only fetch and merge (bring this memory up to "
              "date); send nothing.")
@pass_app
def sync(app: App, remote: str | None, no_push: bool) -> None:
    """Fetch REMOTE (default: the branch's remote, or origin), merge, push; retry a race.

    What the agent hooks run at session boundaries, and the one command that gets a stuck
    sync going again: the remote's new commits are merged into this memory (the union of
    both), then this memory is pushed through the publish gate. When another machine pushes
    in between, the round runs again (a few times) instead of failing. The outcome is
    recorded: `funes status` shows it. Exit 4 when the race was lost every time, 5 when the
    remote cannot be reached; nothing local is lost either way.
    """
    with progress_bar("syncing") as progress:
        result = api.sync(app.repo(), remote, push=not no_push, progress=progress)
    render(app.fmt, result, human=_sync_text)
    if result.pushed is not None and result.pushed.held:
        sys.exit(1)


@click.command()
@click.argument("name", required=False)
@click.argument("rev", required=False)
@click.option("--delete", "-d", is_flag=True, help="Remove the local tag NAME.")
@pass_app
def tag(app: App, name: str | None, rev: str | None, delete: bool) -> None:
    """Name a commit: `funes tag NAME [REV]` (default HEAD); without NAME, list the tags.

    Tags never move (remove one with -d to name another commit). `funes push` sends the tags
    of the history it publishes, `funes fetch`/`pull`/`clone` bring the remote's, and
    `--memory ORG/NAME@TAG` or `funes clone ORG/NAME@TAG` read the memory as it was there.
    """
    if name is None:
        if delete or rev:
            raise click.UsageError("name the tag")
        items = api.tag_list(app.repo())
        render(app.fmt, items, human=lambda xs: "\n".join(
            f"{t.name}\t{short(t.commit)}\t{t.time or '-'}" for t in xs))
        return
    if delete:
        if rev:
            raise click.UsageError("`funes tag -d NAME` takes no REV")
        info = api.tag_delete(app.repo(), name)
        render(app.fmt, info, human=lambda t: f"deleted tag {t.name} (was {short(t.commit)})")
        return
    info = api.tag_create(app.repo(), name, rev)
    render(app.fmt, info, human=lambda t: f"tagged {short(t.commit)} as {t.name}")


def _selection_text(r: api.SelectionResult) -> str:
    where = f"{r.remote} ({r.url})"
    head = (f"{len(r.sessions)} session(s) chosen: {r.added} new chunk(s)"
            + (f", {r.vectors} vector(s)" if r.vectors else "")
            + (f", {r.forgotten} forgotten since" if r.forgotten else ""))
    if r.dry_run:
        return f"dry run: would publish to {where}: {head}"
    if r.commit is None:
        return f"{where} holds everything chosen already ({r.chunks} chunks)"
    lines = [f"published to {where}: {head}; it holds {r.chunks} chunk(s)"
             + (f", tagged {r.tag}" if r.tag else "")]
    if r.push is not None:
        lines += _held_lines(r.push)
    if r.public is True:
        lines.append(f"{r.url} is public")
    elif r.public is False:
        lines.append(f"{r.url} stays private (run again with --yes to make it public)")
    if r.tag:
        lines.append(f"read it: funes recall \"…\" --memory {r.url.removeprefix('hf://datasets/')}"
                     f"@{r.tag}")
    return "\n".join(lines)


@click.command()
@click.argument("remote")
@click.option("--sessions", "sessions", multiple=True, metavar="ID",
              help="A session (id, or a prefix of 8+ characters); repeat for more.")
@click.option("--project", metavar="P", help="The sessions of project P.")
@click.option("--since", metavar="WHEN", help="Sessions with a turn at or after WHEN.")
@click.option("--until", metavar="WHEN", help="Sessions with a turn before WHEN.")
@click.option("--linked-to", "linked_to", metavar="REV-RANGE",
              help="The sessions whose turns are linked to the code commits of REV-RANGE "
              "(`v1.0..v1.1`, or one commit), in the code repository here.")
@click.option("--tag", metavar="NAME", help="Tag the published commit NAME on the remote.")
@click.option("--branch", default="main", show_default=True, help="The remote branch.")
@click.option("--dry-run", "-n", is_flag=True, help="Show what would be published.")
@click.option("--yes", "-y", is_flag=True, help="Make a private Hub memory public without "
              "asking (after the gate scanned all it holds).")
@pass_app
def publish(app: App, remote: str, sessions: tuple[str, ...], project: str | None,
            since: str | None, until: str | None, linked_to: str | None, tag: str | None,
            branch: str, dry_run: bool, yes: bool) -> None:
    """Publish only the chosen sessions to REMOTE, as a memory of their own.

    REMOTE is a configured remote or a URL (ORG/NAME, hf://…, a directory). The sessions that
    meet every criterion given are written as one new commit on the remote's branch: their
    visible chunks and vectors, and with --linked-to the links of those code commits (narrowed
    to the chosen sessions). Nothing else of this memory leaves: not its other sessions, its
    tombstones or its history; its branches do not move. Every chunk passes the publish gate.
    A later publish (the next release) appends. On the Hub funes then asks before making a
    private repository public. `funes push` and `sync` refuse a remote that holds a
    selection.

    \b
    Example:
      funes publish acme/widget-sessions --linked-to v1.0..v1.1 --tag v1.1
      funes recall "why the parser" --memory acme/widget-sessions@v1.1
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    def confirm(check: api.PublishCheck) -> bool:
        return _ask(_public_summary(check), "Make it public?", yes)

    with progress_bar("publishing") as progress:
        result = api.publish_selection(
            app.repo(), remote, sessions=sessions, project=project, since=since, until=until,
            linked_to=linked_to, tag=tag, branch=branch, dry_run=dry_run, progress=progress,
            confirm=confirm if (yes or sys.stdin.isatty()) else None)
    render(app.fmt, result, human=_selection_text)
    if result.push is not None and result.push.held:
        sys.exit(1)


@click.command()
@click.argument("rev")
@pass_app
def merge(app: App, rev: str) -> None:
    """Merge REV (a branch, origin/main, a commit id) into the current branch."""
    result = api.merge(app.repo(), rev)
    render(app.fmt, result, human=_merge_text)


@click.command()
@click.argument("source")
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--global", "is_global", is_flag=True,
              help="Clone into the user's memory at $FUNES_HOME.")
@_REQUIRE_SIGNED
@pass_app
def clone(app: App, source: str, directory: Path | None, is_global: bool,
          require_signed: bool) -> None:
    """Copy the memory at SOURCE into DIRECTORY/.funes (default: ./NAME), or --global.

    SOURCE is any remote URL (ORG/NAME, hf://datasets/…, a path). The copy is complete and
    usable at once (nothing is re-embedded), with `origin` pointing at SOURCE. Public Hub
    memories clone without a token. Unsigned commits and unknown or bad signatures are
    reported; --require-signed refuses them (exit 1, nothing left behind).
    """
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
        sig = _signature_text(app.settings, r.signatures)
        return f"{line}\n{sig}" if sig else line

    render(app.fmt, result, human=text)


COMMANDS = [remote, push, fetch, pull, sync, merge, clone, tag, publish]
