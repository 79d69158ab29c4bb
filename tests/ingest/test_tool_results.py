"""`funes index --no-tool-results` and `index.toolResults`: a lean memory keeps the calls, drops
the output, and agrees with a full memory on every chunk both hold."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from funes import api
from tests.conftest import FIXTURES

TRACE = FIXTURES / "traces" / "claude" / "marot__spotter__tool_heavy.jsonl"


def _rows(settings: Any, mem: Path) -> dict[str, str]:
    repo = api.open_memory(settings, str(mem))
    table = repo.chunks.dataset().to_table(columns=["id", "block_type"])
    return dict(zip(table.column("id").to_pylist(), table.column("block_type").to_pylist(),
                    strict=True))


@pytest.fixture
def memories(tmp_path: Path, settings: Any) -> tuple[Path, Path]:
    if not TRACE.is_file():
        pytest.skip("../shared/fixtures is not present")
    full, lean = tmp_path / "full", tmp_path / "lean"
    for root in (full, lean):
        root.mkdir()
        api.init(settings, root)
    return full / ".funes", lean / ".funes"


def test_lean_memory_drops_tool_output_only(settings: Any, memories: tuple[Path, Path],
                                            run: Callable[..., Any]) -> None:
    full, lean = memories
    api.index(settings, memory=str(full), paths=[str(TRACE)], agents=["claude"])
    result = run("--memory", str(lean), "index", "--agent", "claude", "--no-tool-results",
                 str(TRACE))
    assert result.exit_code == 0, result.stderr
    a, b = _rows(settings, full), _rows(settings, lean)
    assert "tool_result" in a.values() and "tool_result" not in b.values()
    assert "tool_use" in b.values()
    assert set(b) == {cid for cid, kind in a.items() if kind != "tool_result"}


def test_config_key_makes_every_run_lean(settings: Any, memories: tuple[Path, Path],
                                         run: Callable[..., Any]) -> None:
    _, lean = memories
    assert run("--memory", str(lean), "config", "set", "index.toolResults", "false").exit_code == 0
    api.index(settings, memory=str(lean), paths=[str(TRACE)], agents=["claude"])
    assert "tool_result" not in _rows(settings, lean).values()
    bad = run("--memory", str(lean), "config", "set", "index.toolResults", "maybe")
    assert bad.exit_code == 2
