from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from funes.cli.main import main


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run the real entry point (error mapping included) in-process."""

    def _run(*args: str) -> Result:
        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return _run
