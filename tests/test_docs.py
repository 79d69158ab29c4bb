"""Docs that must not drift from the code: man pages, exit codes, command help."""

from __future__ import annotations

import re

import click

from funes.cli.errors import EXIT_CODES
from funes.cli.main import cli
from funes.cli.manpages import render_all
from tests.conftest import REPO_ROOT


def test_man_pages_are_up_to_date() -> None:
    expected = render_all()
    man = REPO_ROOT / "man"
    present = {p.name for p in man.glob("funes*.1")}
    assert present == set(expected), "run `python -m funes.cli.manpages man`"
    for name, text in expected.items():
        assert (man / name).read_text("utf-8") == text, (
            f"man/{name} is stale: run `python -m funes.cli.manpages man`"
        )


def test_exit_codes_documented() -> None:
    doc = (REPO_ROOT / "docs" / "cli.md").read_text("utf-8")
    table = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", doc, re.M))
    assert {int(k): v for k, v in table.items()} == dict(EXIT_CODES)


def _walk(group: click.Group, ctx: click.Context, prefix: str):  # type: ignore[no-untyped-def]
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _walk(
                command, click.Context(command, info_name=name, parent=ctx), f"{prefix} {name}"
            )


def test_every_command_has_help_and_is_in_the_cli_doc() -> None:
    doc = (REPO_ROOT / "docs" / "cli.md").read_text("utf-8")
    for path, command in _walk(cli, click.Context(cli, info_name="funes"), "funes"):
        assert command.help and command.help.strip(), f"{path} has no help"
        top = " ".join(path.split()[:2])
        assert f"`{top}" in doc, f"{top} is not documented in docs/cli.md"


def test_no_doc_section_appears_twice() -> None:
    for path in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        headings = re.findall(r"^#+ .+$", path.read_text("utf-8"), re.M)
        twice = {h for h in headings if headings.count(h) > 1}
        assert not twice, f"{path.name} repeats {sorted(twice)}"


def _parse(
    command: click.Command, name: str, args: list[str], parent: click.Context | None
) -> None:
    """Parse (never run) `args` down the real command tree: unknown commands/options raise."""
    import warnings

    ctx = command.make_context(name, args, parent=parent)
    if isinstance(command, click.Group):
        with warnings.catch_warnings():  # click 8.2 keeps the subcommand in protected_args
            warnings.simplefilter("ignore", DeprecationWarning)
            rest = [*ctx.protected_args, *ctx.args]
        if rest:
            sub = command.get_command(ctx, rest[0])
            assert sub is not None, f"no command {rest[0]!r}"
            _parse(sub, rest[0], rest[1:], ctx)


def test_man_page_names_do_not_repeat_the_program_and_examples_parse() -> None:
    import shlex

    from funes.cli.manpages import EXAMPLES

    pages = render_all()
    name_line = pages["funes.1"].split(".SH NAME\n", 1)[1].splitlines()[0]
    assert name_line.startswith("funes \\- ") and "funes:" not in name_line
    for page in ("funes", "quickstart", "recall", "add", "status", "config", "remote"):
        assert EXAMPLES.get(page), f"{page} has no EXAMPLES"
        file = "funes.1" if page == "funes" else f"funes-{page}.1"
        assert ".SH EXAMPLES" in pages[file]
    for examples in EXAMPLES.values():
        for line, meaning in examples:
            argv = shlex.split(line)
            assert argv[0] == "funes" and meaning
            # A renamed option or command fails here; capitals (SESSION) are placeholders.
            _parse(cli, "funes", argv[1:], None)


def test_cited_test_and_bench_files_exist() -> None:
    """A document that names a test as the evidence for a claim must name one that runs."""
    cited = re.compile(r"\b((?:tests|bench)/[\w/.-]+\.py)\b")
    docs = [REPO_ROOT / "README.md", REPO_ROOT / "SECURITY.md",
            *sorted((REPO_ROOT / "docs").glob("*.md"))]
    missing = [f"{doc.name}: {path}" for doc in docs if doc.exists()
               for path in cited.findall(doc.read_text("utf-8"))
               if not (REPO_ROOT / path).is_file()]
    assert not missing, missing
