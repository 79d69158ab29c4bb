"""llama.cpp gets the CPUs other processes leave free, decode by decode (runtime.threads_now)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from funes.inference import runtime

PAIRS = [("why did the build fail", "CI failed with ERR_MODULE_NOT_FOUND in the loader."),
         ("cache embeddings", "Decided to cache the embeddings on disk so restarts are fast."),
         ("weather widget units", "The weather widget shows Celsius by default.")]


@pytest.mark.parametrize(("line", "here", "want"), [
    ("0.10 0.20 0.30 1/210 4242", 1, 4),  # nothing else runs: every CPU, up to the limit
    ("3.90 3.00 2.00 4/210 4242", 1, 1),  # three others on four CPUs: one left
    ("3.90 3.00 2.00 3/210 4242", 3, 4),  # our own spinning workers are not others
    ("9.00 9.00 9.00 9/210 4242", 1, 1),  # overloaded: still one thread
    ("2.00 2.00 2.00 2/210 4242", 1, 3),
])
def test_threads_follow_what_other_processes_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, here: int, want: int
) -> None:
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(line + "\n")
    monkeypatch.setattr(runtime, "_LOADAVG", str(loadavg))
    monkeypatch.setattr(runtime, "_running_here", lambda: here)
    monkeypatch.setattr(runtime, "default_threads", lambda: 4)
    assert runtime.threads_now(4) == want
    assert runtime.threads_now(2) == min(2, want)  # never above the configured threads


def test_an_unreadable_loadavg_keeps_the_configured_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "_LOADAVG", str(tmp_path / "missing"))
    assert runtime.threads_now(3) == 3
    (tmp_path / "garbled").write_text("not a load average")
    monkeypatch.setattr(runtime, "_LOADAVG", str(tmp_path / "garbled"))
    assert runtime.threads_now(3) == 3


def test_this_thread_counts_as_running_here() -> None:
    assert runtime._running_here() >= 1


def test_scores_do_not_depend_on_the_threads_of_each_decode(
    reranker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime, "threads_now", lambda limit: 1)
    steady = reranker.score_pairs(PAIRS)
    counts = itertools.cycle([2, 1])
    used = []

    def alternate(limit: int) -> int:
        used.append(min(limit, next(counts)))
        return used[-1]

    monkeypatch.setattr(runtime, "threads_now", alternate)
    varied = reranker.score_pairs(PAIRS)
    assert reranker._rt.n_threads >= 1 and len(used) == len(PAIRS)
    np.testing.assert_allclose(varied, steady, atol=1e-4)
