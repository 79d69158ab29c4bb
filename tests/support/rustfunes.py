"""Memories in the Rust funes' layout, built from its documented schema with pylance.

huggingface/funes `src/memory/dataset.rs` fixes the table: the columns below in this order
(`harness` and `repo` last, appended by migrations), `vector` a FixedSizeList<Float32, 384>,
schema metadata `embedding_model`, an inverted index on `text` (and IVF_PQ on `vector` once a
memory has 256 rows; funes never reads the indexes, so the fixtures leave that one out). Row ids
are the first 16 hex of SHA-1 of `session:turn_uuid:block_idx:split_idx`.

`build(dest, rows)` writes a real Lance dataset at `dest/chunks.lance`; `publish(hub, repo_id,
dest)` commits it, with a card, to the loopback Hub the way the Rust funes publishes one.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

BGE = "BAAI/bge-small-en-v1.5"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
DIM = 384

_WORDS = ("lance", "fragment", "parser", "stream", "reader", "tokenizer", "commit", "index",
          "vector", "recall", "session", "turn", "hook", "remote", "push", "pull", "merge",
          "schema", "column", "manifest", "chunk", "embed", "query", "rank", "score", "window",
          "overlap", "split", "block", "tool", "result", "harness", "agent", "memory")


@dataclass(frozen=True)
class Row:
    """One row of a Rust-funes table (the documented columns)."""

    text: str
    session_id: str
    turn_uuid: str
    seq: int
    ts: str
    role: str = "assistant"
    block_type: str = "text"
    block_idx: int = 0
    split_idx: int = 0
    workdir: str = "-home-me-dev-app"
    parent_uuid: str | None = None
    tool_name: str | None = None
    source_path: str = "/home/me/.claude/projects/-home-me-dev-app/s.jsonl"
    harness: str = "claude_code"
    repo: str = "acme/app"

    @property
    def id(self) -> str:
        raw = f"{self.session_id}:{self.turn_uuid}:{self.block_idx}:{self.split_idx}"
        return hashlib.sha1(raw.encode()).hexdigest()[:16]


def rows(n: int, *, sessions: int = 0, seed: int = 7) -> list[Row]:
    """`n` rows in sessions of 20 turns; row `i` says `marker{i}` among generated words."""
    rng = random.Random(seed)
    per = 20
    out = []
    for i in range(n):
        s, t = divmod(i, per)
        words = " ".join(rng.choice(_WORDS) for _ in range(24))
        session = f"sess-{s % sessions if sessions else s:05d}"
        out.append(Row(
            text=f"{words} marker{i} {rng.choice(_WORDS)}",
            session_id=session,
            turn_uuid=f"turn-{i:06d}",
            parent_uuid=f"turn-{i - 1:06d}" if t else None,
            seq=t,
            ts=f"2026-0{1 + s % 9}-{1 + t:02d}T10:{t:02d}:00Z",
            role="user" if t % 2 == 0 else "assistant",
        ))
    return out


def random_vectors(count: int, seed: int = 11) -> Any:
    """Unit vectors that mean nothing (a memory whose model is not installed here)."""
    import numpy as np

    v = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def build(dest: Path, table_rows: Sequence[Row], *, model: str | None = BGE,
          vectors: Sequence[Sequence[float] | None] | None = None, project: str | None = None,
          columns: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
          extra_rows: Sequence[dict[str, Any]] = ()) -> Path:
    """Write `dest/chunks.lance` (created, or appended to) with a real inverted index.

    `columns` may rewrite the column dict before writing (an older schema, a hostile one);
    `extra_rows` are raw rows appended as they are (for rows no `Row` can say).
    """
    import lance
    import pyarrow as pa

    utf8, i64 = pa.string(), pa.int64()
    fields = [
        pa.field("id", utf8), pa.field("text", utf8), pa.field("session_id", utf8),
        pa.field("workdir", utf8), pa.field("turn_uuid", utf8), pa.field("parent_uuid", utf8),
        pa.field("seq", i64), pa.field("ts", utf8), pa.field("role", utf8),
        pa.field("block_type", utf8), pa.field("tool_name", utf8), pa.field("source_path", utf8),
        pa.field("block_idx", i64), pa.field("split_idx", i64),
        pa.field("vector", pa.list_(pa.field("item", pa.float32(), True), DIM)),
        pa.field("harness", utf8), pa.field("repo", utf8),
    ]
    meta = {"embedding_model": model} if model else {}
    if project:
        meta["project"] = project
    schema = pa.schema(fields, metadata=meta)
    vecs = vectors if vectors is not None else random_vectors(len(table_rows))
    data: dict[str, list[Any]] = {f.name: [] for f in fields}
    for row, vec in zip(table_rows, vecs, strict=True):
        data["id"].append(row.id)
        for name in ("text", "session_id", "workdir", "turn_uuid", "parent_uuid", "seq", "ts",
                     "role", "block_type", "tool_name", "source_path", "block_idx", "split_idx",
                     "harness", "repo"):
            data[name].append(getattr(row, name))
        data["vector"].append(vec)
    for raw in extra_rows:
        for f in fields:
            data[f.name].append(raw.get(f.name))
    data["vector"] = _vector_column(data["vector"], fields[14].type)  # type: ignore[assignment]
    if columns is not None:
        data = columns(data)
        schema = pa.schema([f for f in fields if f.name in data], metadata=meta)
    table = pa.Table.from_pydict(data, schema=schema)
    path = dest / "chunks.lance"
    mode = "append" if (path / "_versions").is_dir() else "create"
    ds = lance.write_dataset(table, str(path), mode=mode)
    ds.create_scalar_index("text", "INVERTED", replace=True)
    return path


def _vector_column(vectors: list[Any], kind: Any) -> Any:
    """A FixedSizeList column from vectors (None for a missing one), without Python floats."""
    import numpy as np
    import pyarrow as pa

    flat = np.zeros((len(vectors), DIM), dtype=np.float32)
    mask = []
    for i, vec in enumerate(vectors):
        mask.append(vec is None)
        if vec is not None:
            flat[i] = np.asarray(vec, dtype=np.float32)
    values = pa.array(flat.reshape(-1), pa.float32())
    return pa.FixedSizeListArray.from_arrays(values, type=kind,
                                             mask=pa.array(mask, pa.bool_()))


def with_text(row: Row, text: str) -> Row:
    """`row` saying something else."""
    return replace(row, text=text)


def publish(hub: Any, repo_id: str, dest: Path, *, private: bool = False) -> str:
    """Commit `dest/chunks.lance` and a card to `repo_id` on the loopback Hub; the commit id."""
    if not hub.repo_exists(repo_id):
        hub.create_repo(repo_id, private=private)
    table = dest / "chunks.lance"
    files: dict[str, bytes | None] = {
        f"chunks.lance/{p.relative_to(table).as_posix()}": p.read_bytes()
        for p in sorted(table.rglob("*")) if p.is_file()
    }
    files["README.md"] = (b"---\npretty_name: funes memory\ntags:\n  - funes\n  - agent-memory\n"
                          b"  - lance\n---\n# funes memory\n<!-- funes:stats -->\n"
                          b"<!-- /funes:stats -->\n")
    return str(hub.commit_files(repo_id, files, message="funes push"))


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root` with its size and mtime: to show nothing was written to it."""
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}
