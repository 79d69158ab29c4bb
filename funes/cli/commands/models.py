"""`funes models`: list, install, import, verify."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from funes import api
from funes.cli.app import App, pass_app
from funes.cli.output import render


@click.group(invoke_without_command=True)
@click.pass_context
def models(ctx: click.Context) -> None:
    """Manage the GGUF models funes runs (embedding and reranking).

    With no subcommand, lists them (like `funes models list`).
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(models_list)


@models.command("list")
@pass_app
def models_list(app: App) -> None:
    """Known and installed models."""
    entries = api.models_list(app.settings)

    def text(items: list[api.ModelEntry]) -> str:
        lines = []
        for e in items:
            state = "installed" if e.installed else "not installed"
            default = " (default)" if e.default else ""
            sha = f" sha256 {e.info.sha256[:12]}" if e.info else ""
            lines.append(f"{e.name:<24} {e.kind:<7} {state}{default}{sha}  {e.description}")
        return "\n".join(lines)

    render(app.fmt, entries, human=text)


@models.command("install")
@click.argument("name", required=False)
@pass_app
def models_install(app: App, name: str | None) -> None:
    """Install a known model (cache, pinned download, or local conversion).

    Without NAME, install the defaults: the embedding model and the reranker.
    """
    def say(line: str) -> None:
        if sys.stderr.isatty():
            click.echo(line, err=True)

    def line(i: api.ModelInfo) -> str:
        return f"{i.name} {i.kind} sha256 {i.sha256} ({i.source})"

    if name is None:
        infos = api.models_install_defaults(app.settings, say)
        render(app.fmt, infos, human=lambda items: "\n".join(line(i) for i in items))
        return
    render(app.fmt, api.models_install(app.settings, name, say), human=line)


@models.command("import")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--name", default=None, help="Cache name (default: the file or directory name).")
@click.option("--kind", type=click.Choice(["embed", "rerank"]), default=None)
@pass_app
def models_import(app: App, path: Path, name: str | None, kind: str | None) -> None:
    """Import a GGUF file, or convert a BERT safetensors directory."""
    info = api.models_import(app.settings, path, name=name, kind=kind)
    render(app.fmt, info, human=lambda i: f"{i.name} {i.kind} sha256 {i.sha256}")


@models.command("verify")
@pass_app
def models_verify(app: App) -> None:
    """Re-hash every cached model; exit 1 if any is damaged."""
    results = api.models_verify(app.settings)
    render(app.fmt, results,
           human=lambda rs: "\n".join(f"{'ok ' if r.ok else 'BAD'} {r.name} {r.detail}"
                                      for r in rs) or "no models installed")
    if not all(r.ok for r in results):
        sys.exit(1)


COMMANDS = [models]
