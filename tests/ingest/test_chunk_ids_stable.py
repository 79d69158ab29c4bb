"""Chunk ids are an on-disk contract: the same transcript gives the same ids, release after release.

`data/chunk_ids.json` holds, for every fixture transcript and the parser that reads it, how
many chunks it gives and the sha256 of their ids in order (parse, then chunk; redaction is left
out, its rules evolve on their own). It was written from the parsers as they stood before the
shared skeleton (funes.ingest.parsers.skeleton) replaced their copied code, so this test is the
before/after comparison of that refactor, kept: a change to a parser, the chunker or the id
recipe that moves any id fails here, and a deliberate one must say so by rewriting the file.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from funes.ingest.chunking import chunk_turn
from funes.ingest.parsers import parse_file
from tests.conftest import FIXTURES, OWN_FIXTURES, SHARED_MISSING

GOLDEN = json.loads((Path(__file__).parent / "data" / "chunk_ids.json").read_text("utf-8"))
ROOTS = {"own": OWN_FIXTURES, "shared": FIXTURES}


def _path(key: str) -> Path:
    root, rel = key.split("/", 1)
    return ROOTS[root] / rel


@pytest.mark.parametrize("key", sorted(GOLDEN))
def test_fixture_chunk_ids_never_move(key: str) -> None:
    name, harness = key.split("::")
    path = _path(name)
    if not path.exists():
        pytest.skip(SHARED_MISSING)
    ids = [c.id for t in parse_file(path, harness).turns for c in chunk_turn(t)]
    want = GOLDEN[key]
    assert (len(ids), hashlib.sha256("\n".join(ids).encode()).hexdigest()) == (
        want["chunks"], want["sha256"]), f"chunk ids of {name} ({harness}) moved"


def test_golden_covers_every_own_fixture() -> None:
    """A transcript added to tests/fixtures joins the contract (regenerate the file with it)."""
    from funes.ingest.sources import explicit_sources

    listed = {k.split("::")[0] for k in GOLDEN}
    for source in explicit_sources([OWN_FIXTURES]):
        assert f"own/{source.path.relative_to(OWN_FIXTURES)}" in listed, source.path
