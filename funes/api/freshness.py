"""Marking recalled passages whose code changed since (funes.gitlink.freshness).

Recall runs in a code repository more often than not (an agent at work in it). Each hit whose
turn is linked to one of this repository's commits, or that names its files, gets
`row["fresh"]`: the paths checked, the base commit, and the paths that changed since (with
how many commits) or were removed. The agent format prints one `  ! changed since …` line per
changed path; `--format json` carries the whole record.

`fresh` modes (`RecallRequest.fresh`): `mark` (the default) only marks; `prefer` moves hits
with changed files after the others, keeping each group's order; `only` drops them. The two
last ask retrieval for more hits first (`overfetch`) so that k still come back.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from pathlib import Path
from typing import Any

from funes._env import Settings
from funes.errors import FunesError, UsageError
from funes.retrieval.recall import MAX_K, Hit
from funes.storage.repo import Repository

__all__ = ["FRESH_MODES", "annotate", "check_mode", "order", "overfetch"]

FRESH_MODES = ("mark", "prefer", "only", "off")


def check_mode(mode: str) -> None:
    """Refuse a `--fresh` value that is not one of FRESH_MODES."""
    if mode not in FRESH_MODES:
        raise UsageError(f"--fresh must be one of {', '.join(FRESH_MODES)}, not {mode!r}")


def overfetch(k: int, mode: str) -> int:
    """How many hits to ask retrieval for, so that `k` remain after `order` with `mode`."""
    return min(MAX_K, k * 3) if mode in ("prefer", "only") else k


def _stale(hit: Hit) -> bool:
    fresh = hit.row.get("fresh")
    return isinstance(fresh, dict) and bool(fresh.get("changes"))


def order(hits: list[Hit], mode: str, k: int) -> list[Hit]:
    """`hits` as `mode` wants them, `k` at most (see the module docstring)."""
    if mode == "only":
        hits = [h for h in hits if not _stale(h)]
    elif mode == "prefer":
        hits = sorted(hits, key=_stale)  # stable: each group keeps its order
    return hits[:k]


def annotate(settings: Settings, repo: Repository, hits: list[Hit], code_dir: str | None) -> None:
    """Set `row["fresh"]` on the hits tied to files of the git work tree at `code_dir`.

    Quietly does nothing outside a git work tree, or when the repository cannot be read:
    freshness is a hint on top of recall, never a reason for it to fail.
    """
    if not hits or code_dir is None:
        return
    with contextlib.suppress(FunesError, OSError, KeyError, ValueError):
        _annotate(settings, repo, hits, Path(code_dir))


def _annotate(settings: Settings, repo: Repository, hits: list[Hit], where: Path) -> None:
    from funes.gitlink.coderepo import find_code_repo
    from funes.gitlink.freshness import history, link_paths, mentioned_paths, to_epoch
    from funes.gitlink.linkindex import link_index

    code = find_code_repo(where)
    line = history(code, settings.home / "cache" / "code")
    if line is None:
        return
    identity = code.identity
    links = link_index(repo)
    root = str(code.worktree).rstrip("/") + "/"
    times = [t for t in (to_epoch(h.row.get("time")) for h in hits) if t is not None]
    if times:
        line.read_back_to(min(times))
    for hit in hits:
        row = hit.row
        own = [link for link in links.for_turn(row["session_id"], row["turn_id"])
               if link.repository == identity]
        record: dict[str, Any] | None = None
        if own:
            checked: set[str] = set()
            changes: dict[str, Any] = {}
            for sha, when, paths in link_paths(own):
                found = line.changes(paths, sha, linked=True, at_time=when)
                if found is None:
                    continue
                checked.update(paths)
                for change in found:  # a later link of the turn is the nearer base
                    changes[change.path] = change
                for path in paths:
                    if path not in {c.path for c in found}:
                        changes.pop(path, None)
            if checked:
                record = {"base": own[-1].commit, "linked": True, "checked": sorted(checked),
                          "changes": [asdict(c) for _, c in sorted(changes.items())]}
        elif row.get("project") == identity or (row.get("workdir") or "").startswith(root) \
                or row.get("workdir") == root.rstrip("/"):
            when_turn = to_epoch(row.get("time"))
            base = line.base_at(when_turn) if when_turn is not None else None
            if base is not None:
                named = mentioned_paths(str(row.get("text") or ""), code.worktree,
                                        row.get("workdir"))
                existing = line.existed(base, named) if named else set()
                found = line.changes(existing, base, linked=False) if existing else None
                if found is not None:
                    record = {"base": base, "linked": False, "checked": sorted(existing),
                              "changes": [asdict(c) for c in found]}
        if record is not None:
            row["fresh"] = record
