"""The first run on a fresh machine, `quickstart`: the main job in one call.

Set up the global memory, index the agent sessions already on this machine, embed what fits
in a time budget, and answer one recall. A machine with no agent history gets the small sample
memory shipped with funes instead (sessions the funes developers wrote, in the generic import
format), so a newcomer sees real output within a minute either way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from funes._env import Settings
from funes.api.ingest import IndexSummary, index
from funes.api.repo import init
from funes.api.search import DrainResult, RecallResult, embed, recall
from funes.storage.repo import Repository

#: The sample's demo question. It shares almost no words with its answer (a decision and its
#: reason, "Keep every stored value in metres … convert only at the edges"), so the top hit
#: shows recall by meaning rather than an echo of the question.
SAMPLE_QUERY = "how are heights stored"
DEFAULT_QUERY = "what did we decide and why"


@dataclass(frozen=True)
class QuickstartResult:
    """What quickstart did, for the CLI to narrate."""

    memory: Repository
    sample: bool
    indexed: IndexSummary
    embedded: DrainResult | None
    query: str
    result: RecallResult


def sample_dir() -> Path:
    """Where the bundled sample sessions are."""
    return Path(str(resources.files("funes") / "data" / "sample"))


def quickstart(
    settings: Settings,
    query: str | None = None,
    *,
    budget: float = 60.0,
    progress: Callable[[int, int, str], None] | None = None,
) -> QuickstartResult:
    """Run the main job: init, index, embed (bounded), recall."""
    own = init(settings, is_global=True).repo
    summary = index(settings, progress=progress)
    memory, sample = own, False
    if own.stats().chunks == 0:
        target = settings.home / "sample"
        memory = init(settings, target).repo
        files = sorted(str(p) for p in sample_dir().glob("*.jsonl"))
        summary = index(settings, memory=str(memory.path), paths=files, agents=["import"])
        sample = True
    drained = embed(settings, memory, budget=budget, progress=progress) if budget > 0 else None
    question = query or (SAMPLE_QUERY if sample else DEFAULT_QUERY)
    found = recall(settings, memory, question, k=3)
    return QuickstartResult(memory, sample, summary, drained, question, found)


