"""Builders for test data: chunks and batches with deterministic content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from funes.model.chunk import Chunk

if TYPE_CHECKING:
    import pyarrow as pa


def make_chunk(
    i: int,
    *,
    session: str = "s1",
    harness: str = "claude",
    text: str | None = None,
    ts: str = "2026-01-01T00:00:00Z",
) -> Chunk:
    return Chunk(
        text=text if text is not None else f"passage number {i} about topic {i % 7}",
        harness=harness,
        session_id=session,
        turn_id=f"{session}-t{i}",
        seq=i,
        ts=ts,
        role="user" if i % 2 == 0 else "assistant",
        block_type="text",
        block_idx=0,
        split_idx=0,
        workdir="/work/project",
        project="github.com/acme/project",
        source=f"/tmp/{session}.jsonl:{i * 100}-{i * 100 + 99}",
    )


def make_batch(start: int, count: int, **kw: object) -> list[Chunk]:
    return [make_chunk(i, **kw) for i in range(start, start + count)]  # type: ignore[arg-type]


def vector_table(
    chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]], *, model: str = "m"
) -> pa.Table:
    """Embedding rows for `chunks` (one vector each), filter columns filled in.

    Built as float32, as an embedder hands them over; `commit_chunks` stores them at the
    width of the memory's embedding table.
    """
    import pyarrow as pa

    from funes.storage.tables import VECTOR_FILTER_COLUMNS, vector_schema

    cols: dict[str, list[Any]] = {
        "id": [c.id for c in chunks],
        "model": [model] * len(chunks),
        "vector": [list(v) for v in vectors],
    }
    for name in VECTOR_FILTER_COLUMNS:
        cols[name] = [None if name in ("time", "noise") else getattr(c, name) for c in chunks]
    return pa.Table.from_pydict(cols, schema=vector_schema(len(vectors[0]), "vectors"))


def trace_strings() -> list[str]:
    """Every string value in the real fixture transcripts (../shared/fixtures/traces)."""
    import json
    from collections.abc import Iterator

    from tests.conftest import FIXTURES

    def walk(value: object) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            for v in value.values():
                yield from walk(v)
        elif isinstance(value, list):
            for v in value:
                yield from walk(v)

    out: list[str] = []
    for path in sorted((FIXTURES / "traces").rglob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            try:
                out.extend(walk(json.loads(line)))
            except ValueError:
                continue
    return out


def tool_log(lines: int = 4000) -> str:
    """A log-like tool output (4,000 lines make about 400 KB), ending in a failure line."""
    import random

    rng = random.Random(42)
    out = []
    for i in range(lines):
        out.append(
            f"2026-05-11T11:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-{rng.randint(1, 8)} "
            f"processed batch {i} in {rng.random() * 100:.2f} ms "
            f"({rng.choice(['ok', 'retry', 'cached'])}) "
            f"path=/srv/data/{rng.randint(0, 999):03d}.parquet"
        )
    return "\n".join(out) + "\nFAILED: 1 error\n"
