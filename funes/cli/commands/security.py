"""Security verbs: forget, scrub, gc."""

from __future__ import annotations

from typing import Any

import click

from funes import api
from funes.api import security as sec
from funes.api.agent_format import exclusion_line
from funes.cli.app import App, pass_app
from funes.cli.output import render, short


def _forget_text(r: sec.ForgetResult) -> str:
    if not r.chunks:
        return "nothing matched; nothing forgotten"
    if r.dry_run:
        return f"would forget {len(r.chunks)} chunk(s)"
    return f"forgot {len(r.chunks)} chunk(s) (commit {short(r.commit)})"


@click.command()
@click.option("--session", metavar="ID", help="Chunks of this session.")
@click.option("--chunk", metavar="ID", help="This chunk (an id, or a prefix of 8+ characters).")
@click.option("--before", metavar="DATE", help="Chunks older than DATE (YYYY-MM-DD or ISO "
              "date-time, UTC).")
@click.option("--match", metavar="TEXT", help="Chunks whose text contains TEXT (plain text, "
              "case-sensitive).")
@click.option("--project", metavar="P", help="Chunks of project P (its identity, last "
              "component, or a glob).")
@click.option("--path", metavar="GLOB", help="Chunks whose working directory or transcript "
              "path matches GLOB (or lies under it).")
@click.option("--agent", metavar="A", help="Chunks of agent A (claude, codex, pi, …).")
@click.option("--dry-run", "-n", is_flag=True, help="Count what would be forgotten.")
@pass_app
def forget(
    app: App, session: str | None, chunk: str | None, before: str | None,
    match: str | None, project: str | None, path: str | None, agent: str | None,
    dry_run: bool,
) -> None:
    """Hide chunks from every recall, here and wherever the tombstone travels.

    Chunks matching every criterion given are named by a tombstone in a new commit; push,
    pull and merge carry it, and every machine that has it hides the chunks. A push never
    sends hidden rows. A tombstone hides; it does not erase copies made before it arrived:
    `funes gc` removes the bytes from this machine's disk, `funes push --retract` from a
    remote. To keep a project out of later index runs too, use `funes exclude`.
    """
    result = sec.forget(app.repo(), session=session, chunk=chunk, before=before, match=match,
                        project=project, path=path, agent=agent, dry_run=dry_run)
    render(app.fmt, result, human=_forget_text)


def _scrub_text(r: sec.ScrubResult) -> str:
    if not r.replaced:
        return f"scanned {r.scanned} chunk(s): nothing to redact"
    verb = "would redact" if r.dry_run else "redacted"
    lines = [f"{verb} {len(r.replaced)} of {r.scanned} chunk(s)"
             + ("" if r.dry_run else f" (commit {short(r.commit)})")]
    lines += [f"  {c.harness} session {c.session} turn {c.turn}: {', '.join(c.kinds)}"
              for c in r.replaced]
    if not r.dry_run:
        lines.append("the redacted copies embed with the backlog (`funes embed`); "
                     "`funes gc` removes the originals from disk")
    return "\n".join(lines)


@click.command()
@click.option("--dry-run", "-n", is_flag=True, help="List what would be redacted.")
@pass_app
def scrub(app: App, dry_run: bool) -> None:
    """Re-run secret redaction over stored chunks and replace the dirty ones.

    Each chunk the current detectors find a secret in is hidden by a tombstone and replaced
    by a redacted copy (a new id, embedded by the backlog). Run `funes gc` afterwards to remove
    the originals from disk.
    """
    result = sec.scrub(app.repo(), dry_run=dry_run)
    render(app.fmt, result, human=_scrub_text)


def _gc_text(r: sec.GcResult) -> str:
    return (
        f"removed {r.rows_removed} tombstoned row(s) ({r.fragments_rewritten} fragment(s) "
        f"rewritten), {r.files_deleted} unreferenced file(s), {r.objects_deleted} "
        f"unreachable object(s); freed {r.bytes_freed} bytes; packed "
        f"{r.fragments_packed} small fragment(s)"
    )


@click.command()
@pass_app
def gc(app: App) -> None:
    """Physically remove tombstoned and unreachable data from this machine.

    Rewrites the fragments holding tombstoned rows without them (the one rewrite funes
    allows), deletes old dataset versions and search indexes built over them (rebuilt on the
    next recall), unreachable objects and unreferenced files. Other machines and remotes keep
    their copies. Then packs small fragments into few (the hooks and `funes index` do that
    too, once a table has `pack.threshold` fragments).
    """
    render(app.fmt, sec.gc(app.repo()), human=_gc_text)


def _exclusion_lines(items: list[api.ExclusionInfo]) -> list[str]:
    return [exclusion_line(x).removeprefix("exclude  ") for x in items]


def _exclude_text(r: api.ExcludeResult) -> str:
    names = ", ".join(f"{x.kind} {x.pattern}" for x in r.rules)
    if r.removed:
        verb = "would end" if r.dry_run else "ended"
        back = "" if r.dry_run else f": {r.restored} chunk(s) visible again"
        return f"{verb} the exclusion of {names}{back}" + (
            f" (commit {short(r.commit)})" if r.commit else "")
    if r.dry_run:
        return f"would exclude {names}: {r.hidden} chunk(s) in {r.sessions} session(s) hidden"
    lines = [f"excluded {names}: {r.hidden} chunk(s) in {r.sessions} session(s) hidden"
             + (f" (commit {short(r.commit)})" if r.commit else " (already recorded)"),
             "later index runs and hooks skip them; the rule travels with push and pull",
             "a remote that has them keeps their bytes: `funes push --retract` erases them"]
    return "\n".join(lines)


@click.command()
@click.option("--project", "projects", multiple=True, metavar="P",
              help="A project: its identity, last component (`client-x`) or a glob.")
@click.option("--path", "paths", multiple=True, metavar="GLOB",
              help="Working directories or transcript paths matching GLOB, or under it.")
@click.option("--agent", "agents", multiple=True, metavar="A", help="An agent (harness).")
@click.option("--session", "sessions", multiple=True, metavar="GLOB",
              help="Session ids matching GLOB (and their subagents).")
@click.option("--remove", is_flag=True, help="End these exclusions: what they hid returns.")
@click.option("--dry-run", "-n", is_flag=True, help="Count what would be hidden; change nothing.")
@pass_app
def exclude(app: App, projects: tuple[str, ...], paths: tuple[str, ...],
            agents: tuple[str, ...], sessions: tuple[str, ...], remove: bool,
            dry_run: bool) -> None:
    """Keep a project, path, agent or session out of this memory: now, before, everywhere.

    One commit records each rule and hides every chunk it matches already (a tombstone that
    travels with push and pull); every later `funes index` and agent hook skips the turns it
    matches; a machine that pulls the rule skips them too and hides its own matching chunks.
    The rules are listed in the config (`exclude.projects`, `exclude.paths`,
    `exclude.agents`, `exclude.sessions`; `funes config set exclude.projects client-x` does
    the same). With no option, lists the exclusions and what they hide. --remove ends them:
    the chunks they hid are visible again, wherever the lift travels.

    \b
    Example:
      funes exclude --project client-x
      funes exclude --path '~/work/acme/*' --agent hermes
      funes exclude --remove --project client-x
    """  # noqa: D301 (click\'s \b keeps the example lines as written)
    rules = [*(("project", p) for p in projects), *(("path", p) for p in paths),
             *(("agent", a) for a in agents), *(("session", s) for s in sessions)]
    repo = app.repo()
    if not rules:
        if remove or dry_run:
            raise click.UsageError("name the exclusions (--project, --path, --agent, --session)")
        items = api.exclusion_list(repo)
        render(app.fmt, items, human=lambda xs: "\n".join(_exclusion_lines(xs))
               or "no exclusions")
        return
    render(app.fmt, api.exclude(repo, rules, remove=remove, dry_run=dry_run),
           human=_exclude_text)


COMMANDS: list[click.Command] = [forget, scrub, gc, exclude]


# -- keys ----------------------------------------------------------------------------------------


@click.group(invoke_without_command=True)
@click.pass_context
def keys(ctx: click.Context) -> None:
    """Ed25519 keys that sign commits, and the teammates' keys you trust.

    Keys live in $FUNES_HOME/keys/ (the private key is mode 0600). Once a key exists every
    commit this machine writes is signed; pull, clone and `fsck --verify` report unsigned
    commits and unknown or bad signatures, and --require-signed refuses them.
    With no subcommand, lists the keys (like `funes keys list`).
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(keys_list)


def _key_dict(k: sec.PublicKey) -> dict[str, Any]:
    return {"id": k.id, "own": k.own, "comment": k.comment, "public": k.export()}


def _key_line(k: dict[str, Any]) -> str:
    mark = "own    " if k["own"] else "trusted"
    return f"{mark} {k['id']}  {k['comment']}".rstrip()


@keys.command("generate")
@click.option("--comment", help="Who the key belongs to (default: user name and email).")
@click.option("--force", is_flag=True, help="Replace an existing key.")
@pass_app
def keys_generate(app: App, comment: str | None, force: bool) -> None:
    """Create your signing key; later commits are signed with it."""
    key = _key_dict(sec.keys_generate(app.settings, comment, force=force))
    render(app.fmt, key, human=lambda k: f"generated signing key {k['id']}\n"
           f"share it with `funes keys export`; teammates run `funes keys trust '<line>'`")


@keys.command("list")
@pass_app
def keys_list(app: App) -> None:
    """Your key and the keys you trust."""
    render(app.fmt, [_key_dict(k) for k in sec.keys_list(app.settings)],
           human=lambda ks: "\n".join(_key_line(k) for k in ks) or "no keys")


@keys.command("export")
@click.option("--remote", "remote", metavar="NAME", help="Print the memory key of encrypted "
              "remote NAME instead (secret: share it only with teammates, over a safe channel).")
@pass_app
def keys_export(app: App, remote: str | None) -> None:
    """Print your public key as one line (for `funes keys trust`), or a memory key."""
    if remote:
        line = sec.memory_key_export(app.repo(), remote)
        render(app.fmt, {"remote": remote, "key": line}, human=lambda d: d["key"])
        return
    render(app.fmt, _key_dict(sec.keys_export(app.settings)), human=lambda k: k["public"])


@keys.command("import")
@click.argument("line")
@click.option("--url", help="The remote URL the key is for (default: the one in the line).")
@pass_app
def keys_import(app: App, line: str, url: str | None) -> None:
    """Store the memory key of an encrypted remote.

    LINE is a `funes keys export --remote` line, or a file holding one; clone, fetch and push
    then decrypt and encrypt with it.
    """
    target = sec.memory_key_import(app.settings, line, url)
    render(app.fmt, {"url": target}, human=lambda d: f"imported the memory key for {d['url']}")


@keys.command("trust")
@click.argument("pubkey")
@pass_app
def keys_trust(app: App, pubkey: str) -> None:
    """Trust PUBKEY (an exported line, or a file holding one)."""
    render(app.fmt, _key_dict(sec.keys_trust(app.settings, pubkey)),
           human=lambda k: f"trusted {k['id']} {k['comment']}".rstrip())


COMMANDS.append(keys)
