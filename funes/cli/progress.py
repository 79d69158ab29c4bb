"""Progress bars on a terminal, silence everywhere else.

Commands hand the library a callback; on a terminal (stderr is a TTY) it drives a rich
progress bar, otherwise it does nothing, so pipes, agents and hooks see only the result.
rich is imported only when a bar is actually shown.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ProgressFn = Callable[[int, int, str], None]


def _noop(done: int, total: int, label: str) -> None:
    return None


@contextmanager
def progress_bar(description: str, *, enabled: bool | None = None) -> Iterator[ProgressFn]:
    """Yield a `(done, total, label)` callback that draws a bar on a terminal."""
    show = sys.stderr.isatty() if enabled is None else enabled
    if not show:
        yield _noop
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns: list[Any] = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[label]}", style="dim"),
    ]
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=None, label="")

        def update(done: int, total: int, label: str) -> None:
            short = label if len(label) <= 50 else "…" + label[-49:]
            bar.update(task, completed=done, total=total or None, label=short)

        yield update
