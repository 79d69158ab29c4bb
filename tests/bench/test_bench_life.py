"""`bench_life.py hooks` at a tiny size, so that the bench of a hook's whole call cannot rot."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import life_hooks  # noqa: E402

pytestmark = pytest.mark.slow


def test_hooks_mode_runs_and_reports_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(calls=24, session_turns=2, step=12, profile_calls=2, paired=2,
                              queries=3, scratch=str(tmp_path / "life"), keep=False)
    life_hooks.hooks(args)
    out = capsys.readouterr().out
    for needle in ("whole `index` call, 24 calls: median", "first 12: mean",
                   "the `months` figure",
                   "CPU time per call (load-independent): median", "bytes read and written",
                   "verdict on CPU time", "paired (2 calls each", "after gc",
                   "profile of 2 calls at call 12", "api/ingest.py", "verdict: "):
        assert needle in out, needle
    assert "| 24 | " in out  # the per-step table reached the last call
    assert not (tmp_path / "life").exists()  # its scratch is removed
