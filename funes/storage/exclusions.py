"""Exclusions: what a memory keeps out, from now on and for what it already holds.

A rule (funes.model.objects.ExclusionRule) names a project, a path glob, an agent or a
session glob. Rules come from two places, and every index run and agent hook honours both
(funes.ingest.run skips the turns they match before anything is chunked):

- the memory's config, `exclude.projects|paths|agents|sessions` (comma-separated lists):
  local to this copy, what a person edits;
- the memory itself: `funes exclude` (or `funes config set exclude.…`) records each rule in a
  tombstone (`"exclude": {"kind", "pattern"}`) whose targets are the chunks the rule matched
  when it was added. So adding a rule hides what is already indexed in the same commit, the
  tombstone travels like any other, and a machine that pulls it learns the rule: its later
  index runs skip what the rule matches, and the merge that brought it hides the matching
  chunks that machine indexed itself (`reconcile`). Lifting the tombstone (`funes exclude
  --remove`, `funes unforget`) ends the rule wherever the lift travels.

Matching (the same for turns at index time and rows already stored):

- `project P`: the project identity (funes.ingest.project) equals P, its last component
  equals P (`github.com/acme/client-x` → `client-x`; a `.git` suffix is dropped), or either
  matches P as a glob; a turn outside any git repository is matched by its working directory
  the same way;
- `path G`: the working directory or the transcript's path matches G as a glob (`~` is this
  user's home), or lies under it (`G/*`); `*` matches `/` too;
- `agent A`: the harness is A;
- `session G`: the session id, or the parent session of a subagent, matches G as a glob.

Globs are `fnmatch` globs, case-sensitive. Recorded rules are found by walking the history's
tombstones once and cached per HEAD in `index/exclusions.json` (safe to delete).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from funes.errors import FunesError, UsageError
from funes.model.ids import ObjectId
from funes.model.objects import EXCLUSION_KINDS, ExclusionRule, Tombstone
from funes.storage.atomic import write_atomic

if TYPE_CHECKING:
    from funes.model.turns import Turn
    from funes.storage.config import Config
    from funes.storage.repo import CommitResult, Repository

#: The config key of each kind of rule.
CONFIG_KEYS: dict[str, str] = {
    "project": "exclude.projects",
    "path": "exclude.paths",
    "agent": "exclude.agents",
    "session": "exclude.sessions",
}
#: The chunk columns a rule reads.
COLUMNS = ("harness", "session_id", "parent_session_id", "workdir", "project", "source")

_CACHE = "exclusions.json"
_KEEP = 4
_MAX_CACHE_BYTES = 16 << 20
_memo: dict[tuple[str, str], tuple[dict[str, ExclusionRule], frozenset[str]]] = {}


def make_rule(kind: str, pattern: str) -> ExclusionRule:
    """A rule from the command line or config, checked (exit 2 with the fix when it is bad)."""
    from funes.model.turns import HARNESSES

    pattern = pattern.strip()
    if kind not in EXCLUSION_KINDS:
        raise UsageError(f"unknown kind of exclusion {kind!r}",
                         hint=f"use one of: {', '.join(EXCLUSION_KINDS)}")
    if not pattern or len(pattern) > 1024 or any(ord(ch) < 32 for ch in pattern):
        raise UsageError(f"bad {kind} pattern {pattern[:60]!r}",
                         hint="give one non-empty line, like `client-x` or `~/work/acme/*`")
    if kind == "agent" and pattern not in HARNESSES:
        raise UsageError(f"unknown agent {pattern!r}", hint=f"agents: {', '.join(HARNESSES)}")
    return ExclusionRule(kind, pattern)


# -- matching ----------------------------------------------------------------------------------


def _names(value: str) -> list[str]:
    """A project identity (or directory) and its last component."""
    tail = value.rstrip("/")
    for suffix in ("/.git", ".git"):
        tail = tail.removesuffix(suffix)
    return [value, tail.rsplit("/", 1)[-1]] if tail else [value]


def _glob(value: str, pattern: str) -> bool:
    return value == pattern or fnmatchcase(value, pattern)


def _under(path: str, pattern: str) -> bool:
    pattern = os.path.expanduser(pattern)
    return _glob(path, pattern) or fnmatchcase(path, pattern.rstrip("/") + "/*")


def rule_matches(
    rule: ExclusionRule, *, harness: str | None, session: str | None,
    parent_session: str | None = None, workdir: str | None = None, project: str | None = None,
    source: str | None = None,
) -> bool:
    """Whether one chunk or turn, by its provenance, falls under `rule` (module docstring)."""
    if rule.kind == "agent":
        return harness == rule.pattern
    if rule.kind == "session":
        return any(s and _glob(s, rule.pattern) for s in (session, parent_session))
    if rule.kind == "project":
        place = project or workdir
        return bool(place) and any(_glob(n, rule.pattern) for n in _names(str(place)))
    return any(p and _under(p, rule.pattern) for p in (workdir, source_path(source)))


def source_path(source: str | None) -> str | None:
    """The transcript path of a chunk's `source` (`<path>:<start>-<end>`)."""
    if not source:
        return None
    path, sep, span = source.rpartition(":")
    return path if sep and span.replace("-", "").isdigit() else source


@dataclass(frozen=True)
class Exclusions:
    """The rules one memory honours (config and recorded), deduplicated."""

    rules: tuple[ExclusionRule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules)

    def turn_rule(self, turn: Turn) -> ExclusionRule | None:
        """The first rule that keeps `turn` out, or None."""
        for rule in self.rules:
            if rule_matches(rule, harness=turn.harness, session=turn.session_id,
                            parent_session=turn.parent_session_id, workdir=turn.workdir,
                            project=turn.project,
                            source=turn.source.path if turn.source else None):
                return rule
        return None


def config_rules(config: Config) -> list[ExclusionRule]:
    """The rules a memory's config lists (`exclude.*`)."""
    out: list[ExclusionRule] = []
    for kind, key in CONFIG_KEYS.items():
        for pattern in split(config.get(key)):
            out.append(ExclusionRule(kind, pattern))
    return out


def split(value: str | None) -> list[str]:
    """The patterns of a config value (`a, b`)."""
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def active(repo: Repository) -> Exclusions:
    """Every rule `repo` honours: its config's and those recorded in its history."""
    rules = dict.fromkeys([*config_rules(repo.config), *recorded(repo).values()])
    return Exclusions(tuple(rules))


# -- rules recorded in the memory ----------------------------------------------------------------


def recorded(repo: Repository, head: ObjectId | None = None) -> dict[str, ExclusionRule]:
    """Tombstone id → rule, for the rule tombstones reachable from `head` (HEAD), less lifted."""
    head = head if head is not None else repo.head()
    if head is None:
        return {}
    stones, lifted = _collect(repo, head)
    return {tid: rule for tid, rule in stones.items() if tid not in lifted}


def _collect(repo: Repository, head: ObjectId) -> tuple[dict[str, ExclusionRule], frozenset[str]]:
    """Rule tombstones and lifted ones reachable from `head`, walking back to a cached commit.

    A lift always descends from the tombstone it lifts, so the union of two sides' sets is the
    set of their merge: the cache may be combined across parents.
    """
    key = (str(repo.path), head)
    if key in _memo:
        return _memo[key]
    entries = _load(repo)
    known = {h: (s, x) for h, s, x in entries}
    stones: dict[str, ExclusionRule] = {}
    lifted: set[str] = set()
    stack: list[str] = [head]
    seen: set[str] = set()
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if oid in known:
            stones.update(known[oid][0])
            lifted |= known[oid][1]
            continue
        commit = repo.objects.commit(oid)
        for tid in commit.tombstones:
            stone = repo.objects.tombstone(tid)
            if stone.exclude is not None:
                stones[tid] = stone.exclude
            lifted.update(stone.lifts)
        stack.extend(commit.parents)
    result = (stones, frozenset(lifted & set(stones)))
    if len(_memo) > 64:
        _memo.clear()
    _memo[key] = result
    if head not in known:
        _save(repo, [(head, *result), *entries][:_KEEP])
    return result


def _load(repo: Repository) -> list[tuple[str, dict[str, ExclusionRule], frozenset[str]]]:
    path = repo.path / "index" / _CACHE
    try:
        if path.stat().st_size > _MAX_CACHE_BYTES:
            return []
        data = json.loads(path.read_text("utf-8"))
        return [(str(e["head"]),
                 {str(t): ExclusionRule.from_dict(r) for t, r in dict(e["stones"]).items()},
                 frozenset(str(x) for x in e["lifted"])) for e in data["entries"]][:_KEEP]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, FunesError):
        return []  # a cache: anything odd (a hand-edited rule too) means "walk again"


def _save(repo: Repository,
          entries: list[tuple[str, dict[str, ExclusionRule], frozenset[str]]]) -> None:
    data = {"entries": [{"head": h, "stones": {t: r.to_dict() for t, r in s.items()},
                         "lifted": sorted(x)} for h, s, x in entries]}
    path = repo.path / "index" / _CACHE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data).encode(), durable=False)
    except OSError:
        pass  # a read-only copy of a remote walks again next time


# -- what the rules match in the memory ----------------------------------------------------------


def matching(repo: Repository, rules: Sequence[ExclusionRule]) -> dict[ExclusionRule, set[str]]:
    """For each rule, the ids of the visible chunks it matches (one scan of the chunk table)."""
    found: dict[ExclusionRule, set[str]] = {rule: set() for rule in rules}
    if not rules or not repo.chunks.exists():
        return found
    table = repo.chunks.dataset().to_table(columns=["id", *COLUMNS])
    hidden = repo.tombstoned_ids()
    columns = [table.column(name).to_pylist() for name in ("id", *COLUMNS)]
    for cid, harness, session, parent, workdir, project, source in zip(*columns, strict=True):
        if cid in hidden:
            continue
        for rule in rules:
            if rule_matches(rule, harness=harness, session=session, parent_session=parent,
                            workdir=workdir, project=project, source=source):
                found[rule].add(cid)
    return found


def sessions_of(repo: Repository, ids: Iterable[str]) -> int:
    """How many sessions the chunks `ids` belong to."""
    wanted = set(ids)
    if not wanted or not repo.chunks.exists():
        return 0
    table = repo.chunks.dataset().to_table(columns=["id", "harness", "session_id"])
    return len({(h, s) for cid, h, s in zip(table.column("id").to_pylist(),
                                             table.column("harness").to_pylist(),
                                             table.column("session_id").to_pylist(),
                                             strict=True) if cid in wanted})


def record(repo: Repository, rules: Sequence[ExclusionRule],
           matched: dict[ExclusionRule, set[str]]) -> CommitResult:
    """One commit: a tombstone per rule, recording it and hiding what it matched."""
    from funes.storage.repo import now_iso

    who, when = repo._who(), now_iso()
    stones = [Tombstone(tuple(sorted(matched.get(rule, ()))), f"exclude {rule}", who, when,
                        exclude=rule) for rule in rules]
    hidden = len(set().union(*(matched.get(rule, set()) for rule in rules)))
    names = ", ".join(str(rule) for rule in rules)
    return repo.commit_chunks([], f"exclude {names}: {hidden} chunk(s)", tombstones=stones)


def lift(repo: Repository, rules: Sequence[ExclusionRule]) -> tuple[CommitResult | None, int]:
    """End recorded rules: one tombstone lifting every rule tombstone of theirs.

    Returns the commit (None when no rule was recorded) and how many chunks are visible again.
    """
    from funes.storage.repo import now_iso

    wanted = set(rules)
    stones = tuple(sorted(ObjectId(t) for t, rule in recorded(repo).items() if rule in wanted))
    if not stones:
        return None, 0
    back = restored_by(repo, stones)
    names = ", ".join(str(rule) for rule in rules)
    stone = Tombstone((), f"exclude --remove {names}", repo._who(), now_iso(), lifts=stones)
    result = repo.commit_chunks([], f"exclude --remove {names}: {len(back)} chunk(s) back",
                                tombstones=[stone], restored=len(back))
    return result, len(back)


def restored_by(repo: Repository, lifting: tuple[ObjectId, ...]) -> set[str]:
    """The chunks that lifting tombstones `lifting` (reachable from HEAD) makes visible again.

    Shared by `lift` here and `funes unforget` (funes.storage.forget).
    """
    head = repo.head()
    targets, lifted = repo.tombstones(head)
    before = repo.tombstoned_ids(head)
    after: set[str] = set()
    for tid, ids in targets.items():
        if tid not in lifted and tid not in lifting:
            after.update(ids)
    return (before - after) & repo.chunk_ids()
