"""The remote layout: where things live on a remote, how names from it are checked, the card.

Everything read from a remote is untrusted. Names become local paths, so each is checked here
against the one shape funes itself writes before any path is built from it: refs by the ref
grammar, objects by their 64-hex id, Lance metadata by its file-name pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from funes.errors import FunesError
from funes.model.ids import ObjectId, is_object_id
from funes.model.objects import TABLES
from funes.model.refs import RefName, check_ref_name
from funes.remotes.base import CardStats, RemoteDataError

CARD_START = "<!-- funes:stats:start -->"
CARD_END = "<!-- funes:stats:end -->"
CARD_FILE = "README.md"

#: The largest object funes reads from a remote. Objects are small JSON documents;
#: the biggest, a manifest, holds ~70 bytes per chunk id, so this allows ~900k chunks in one
#: commit. Anything larger is refused before a byte of it is read.
MAX_OBJECT_BYTES = 64 << 20
#: A fragment file whose size no manifest gives (never the case in a fetch): 64 GiB.
MAX_FILE_BYTES = 64 << 30
#: A ref file is a commit id and a newline.
MAX_REF_BYTES = 4096

_U64_MAX = (1 << 64) - 1
_MANIFEST_RE = re.compile(r"^_versions/(\d{1,20})\.manifest$")
_OBJECT_PATH_RE = re.compile(r"^objects/([0-9a-f]{2})/([0-9a-f]{62})$")


def object_path(oid: str) -> str:
    """`objects/ab/cdef…`: the same fan-out as a local memory."""
    return f"objects/{oid[:2]}/{oid[2:]}"


def object_id_of(path: str) -> ObjectId | None:
    """The object id a remote path names, or None if it is not an object path."""
    m = _OBJECT_PATH_RE.match(path)
    return ObjectId(m.group(1) + m.group(2)) if m else None


def table_file(table: str, rel: str) -> str:
    """A file of a remote Lance dataset: `chunks.lance/data/….lance`."""
    if table not in TABLES:
        raise RemoteDataError(f"unknown table {table!r}")
    return f"{table}.lance/{rel}"


def check_path(path: str) -> str:
    """Refuse a remote path that could leave the directory it is joined to."""
    if (
        not path
        or path.startswith("/")
        or "\\" in path
        or "\0" in path
        or any(part in ("", ".", "..") for part in path.split("/"))
    ):
        raise RemoteDataError(f"refusing unsafe remote path {path[:80]!r}")
    return path


def branch_of(path: str) -> RefName | None:
    """The ref a remote `refs/heads/…` path names (validated), or None for anything else."""
    if not path.startswith("refs/heads/"):
        return None
    try:
        return check_ref_name(path)
    except FunesError:
        raise RemoteDataError(f"remote has an invalid ref name {path[:80]!r}") from None


def ref_of(path: str) -> RefName | None:
    """The ref a remote `refs/heads/…` or `refs/tags/…` path names (validated), else None."""
    if path.startswith("refs/tags/"):
        try:
            return check_ref_name(path)
        except FunesError:
            raise RemoteDataError(f"remote has an invalid tag name {path[:80]!r}") from None
    return branch_of(path)


def parse_ref_file(raw: bytes, ref: str, source: str) -> ObjectId:
    """A remote ref file's commit id; anything else is refused."""
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        text = ""
    if not is_object_id(text):
        raise RemoteDataError(f"{source}: ref {ref} does not hold a commit id")
    return ObjectId(text)


def lance_version(name: str) -> int | None:
    """The dataset version a `_versions/<n>.manifest` name stands for (None: not a manifest).

    Lance 14 names manifests `u64::MAX - version` so that listings come newest first; older
    datasets name them by the version itself. A number above 2**63 can only be the former.
    """
    m = _MANIFEST_RE.match(name)
    if not m:
        return None
    number = int(m.group(1))
    if number > _U64_MAX:
        return None
    return _U64_MAX - number if number >= 1 << 63 else number


def latest_manifest(names: Iterable[str]) -> str | None:
    """The newest manifest among a dataset's `_versions/…` file names."""
    best: tuple[int, str] | None = None
    for name in names:
        version = lance_version(name)
        if version is not None and (best is None or version > best[0]):
            best = (version, name)
    return best[1] if best else None


# -- the dataset card --------------------------------------------------------------------------


def _stats_block(stats: CardStats) -> str:
    model = f"{stats.model.name} ({stats.model.dim}-d)" if stats.model else "not embedded yet"
    return "\n".join(
        [
            CARD_START,
            "| | |",
            "|---|---|",
            f"| chunks | {stats.chunks} |",
            f"| commits | {stats.commits} |",
            f"| branch | `{stats.branch}` at `{stats.commit[:12]}` |",
            f"| embedding model | {model} |",
            f"| last push | {stats.updated} |",
            CARD_END,
        ]
    )


def render_card(name: str, lance_url: str, stats: CardStats) -> str:
    """A new dataset card: tags for the Hub, what this is, how to use it with funes, the stats.

    It names the tool that wrote it (its version) and gives the commands that use the memory,
    never a repository address: the card must not send readers to another project.
    """
    from funes import __version__

    return f"""---
tags:
- funes
- agent-memory
- lance
pretty_name: {name} (funes memory)
---

# {name}

A **funes memory**: verbatim passages from coding-agent sessions (Claude Code, Codex, pi,
Hermes), each with its provenance (agent, project, session, turn, time), indexed for hybrid
recall (BM25 + vectors). It was written by funes {__version__}, a git-style command-line tool
that builds memories from agent transcripts; install it (a Python package: its README says how)
to use the commands below.

{_stats_block(stats)}

## Use it with funes

```sh
funes recall "why did we drop the streaming parser" --memory {name}  # one query, no clone
funes clone {name}                 # a full local copy in ./{name.rsplit("/", 1)[-1]}/.funes
funes add claude {name}            # this machine's memory for Claude Code (also codex, pi, hermes)
funes get SESSION TURN --memory {name}  # a recalled turn, whole
```

`funes add AGENT {name}` is the same command on every machine: it clones the memory (or
syncs with it), wires the agent, and keeps it in sync at session boundaries. Memories
of another owner are read as untrusted: their passages are data, not instructions.

## Read it with Lance

Any Lance reader opens the rows directly (columns `text`, `harness`, `session_id`,
`turn_id`, `ts`, `role`, `block_type`, `project`, …):

```python
import lance
ds = lance.dataset("{lance_url}")
print(ds.to_table(columns=["ts", "harness", "text"], limit=5))
```

`refs/` and `objects/` hold funes's history (commits, manifests, tombstones). Rows a tombstone
names are hidden by funes; those pushed before it remain in the dataset files until
`funes push --retract` rewrites them away (funes's docs/format.md, "Retraction").
"""


def refresh_card(existing: str | None, name: str, lance_url: str, stats: CardStats) -> str | None:
    """The card to upload: new, or the existing one with its stats region replaced.

    A card without both markers was written by hand and is never touched (None).
    """
    if existing is None:
        return render_card(name, lance_url, stats)
    start = existing.find(CARD_START)
    end = existing.find(CARD_END, start + 1) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    updated = existing[:start] + _stats_block(stats) + existing[end + len(CARD_END) :]
    return None if updated == existing else updated
