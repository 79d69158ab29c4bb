"""Exclusion verbs: `funes exclude`, `config set exclude.…`, status, and pulled rules.

What status lists, and the step after a merge that makes a pulled rule hold here too.

An exclusion is decided once and holds everywhere the memory goes (funes.storage.exclusions):
adding one records it in the memory with a tombstone that hides what it matches already, in
one commit; every later index run and agent hook skips the turns it matches; a machine that
pulls the tombstone learns the rule, hides what it indexed itself that the rule matches, and
lists the rule in its config. Removing one lifts the tombstones that recorded it: the chunks
come back, wherever the lift travels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from funes.errors import UsageError
from funes.model.ids import ObjectId
from funes.model.objects import ExclusionRule, Tombstone
from funes.storage import exclusions as rules_
from funes.storage.repo import Repository, now_iso

__all__ = ["ExcludeResult", "ExclusionInfo", "exclude", "exclusion_list", "reconcile",
           "set_exclusion_key"]


@dataclass(frozen=True)
class ExclusionInfo:
    """One rule a memory honours, where it comes from, and what it hides."""

    kind: str  # project | path | agent | session
    pattern: str
    config: bool  # listed in this memory's config (`exclude.*`)
    recorded: bool  # recorded in the memory's history: it travels with push and pull
    hidden: int  # chunks its tombstones hide now
    sessions: int  # the sessions those chunks belong to


@dataclass(frozen=True)
class ExcludeResult:
    """What `funes exclude` did (or, with `dry_run`, would do)."""

    rules: tuple[ExclusionInfo, ...]
    removed: bool  # the rules were ended (`--remove`)
    hidden: int  # chunks hidden by this command (0 for --remove)
    sessions: int
    restored: int  # chunks visible again (--remove)
    commit: ObjectId | None
    dry_run: bool = False


def _config_add(repo: Repository, made: Sequence[ExclusionRule], *, remove: bool) -> None:
    """List (or unlist) rules in the memory's config, keeping what else is there."""
    with repo.writing():
        for kind, key in rules_.CONFIG_KEYS.items():
            current = rules_.split(repo.config.get(key))
            mine = [r.pattern for r in made if r.kind == kind]
            if not mine:
                continue
            wanted = [p for p in current if p not in mine] if remove else [*current, *mine]
            if wanted:
                repo.config.set(key, ", ".join(dict.fromkeys(wanted)))
            else:
                repo.config.unset(key)


def exclude(
    repo: Repository, rules: Sequence[tuple[str, str]], *, remove: bool = False,
    dry_run: bool = False,
) -> ExcludeResult:
    """Keep what `rules` ((kind, pattern) pairs) match out of this memory, now and before.

    One commit records the rules and hides what they match already; it travels like any
    tombstone. With `remove`, the rules end and what they hid returns.

    A rule already recorded is not recorded again unless it matches chunks indexed since.
    """
    made = list(dict.fromkeys(rules_.make_rule(kind, pattern) for kind, pattern in rules))
    if not made:
        raise UsageError("nothing to exclude",
                         hint="give --project P, --path GLOB, --agent A or --session ID")
    if remove:
        return _remove(repo, made, dry_run)
    matched = rules_.matching(repo, made)
    known = set(rules_.recorded(repo).values())
    fresh = [r for r in made if r not in known or matched[r]]
    ids = set().union(*matched.values())
    sessions = rules_.sessions_of(repo, ids)
    infos = tuple(ExclusionInfo(r.kind, r.pattern, True, True, len(matched[r]),
                                rules_.sessions_of(repo, matched[r])) for r in made)
    if dry_run:
        return ExcludeResult(infos, False, len(ids), sessions, 0, None, True)
    _config_add(repo, made, remove=False)
    commit = rules_.record(repo, fresh, matched).commit if fresh else None
    return ExcludeResult(infos, False, len(ids), sessions, 0, commit)


def _remove(repo: Repository, made: list[ExclusionRule], dry_run: bool) -> ExcludeResult:
    listed = set(rules_.config_rules(repo.config))
    known = set(rules_.recorded(repo).values())
    missing = [r for r in made if r not in listed and r not in known]
    if missing:
        raise UsageError(f"no exclusion {missing[0]}", hint="`funes exclude` lists them")
    infos = tuple(ExclusionInfo(r.kind, r.pattern, r in listed, r in known, 0, 0) for r in made)
    if dry_run:
        return ExcludeResult(infos, True, 0, 0, 0, None, True)
    _config_add(repo, made, remove=True)
    committed, back = rules_.lift(repo, [r for r in made if r in known])
    return ExcludeResult(infos, True, 0, 0, back, committed.commit if committed else None)


def exclusion_list(repo: Repository) -> list[ExclusionInfo]:
    """Every rule the memory honours, with what its tombstones hide (for `exclude`, `status`)."""
    listed = rules_.config_rules(repo.config)
    recorded = rules_.recorded(repo)
    if not listed and not recorded:
        return []
    hidden = repo.tombstoned_ids()
    hides: dict[ExclusionRule, set[str]] = {}
    for tid, rule in recorded.items():
        hides.setdefault(rule, set()).update(
            t for t in repo.objects.tombstone(tid).targets if t in hidden)
    out = []
    for rule in dict.fromkeys([*listed, *recorded.values()]):
        ids = hides.get(rule, set())
        out.append(ExclusionInfo(rule.kind, rule.pattern, rule in listed, rule in hides,
                                 len(ids), rules_.sessions_of(repo, ids)))
    return out


def set_exclusion_key(repo: Repository, key: str, value: str | None) -> str | None:
    """`config set|unset exclude.…`: the same as `funes exclude [--remove]` for the difference.

    Returns the value stored (None when unset).
    """
    kind = next(k for k, name in rules_.CONFIG_KEYS.items() if name == key)
    from funes.storage.config import KEYS

    before = rules_.split(repo.config.get(key))
    after = rules_.split(KEYS[key].parse(value)) if value is not None else []
    gone = [p for p in before if p not in after]
    new = [p for p in after if p not in before]
    if gone:
        exclude(repo, [(kind, p) for p in gone], remove=True)
    if new:
        exclude(repo, [(kind, p) for p in new])
    return repo.config.get(key)


def reconcile(repo: Repository, before: ObjectId | None) -> int:
    """After a merge moved HEAD from `before`: make the rules it brought (or ended) hold here.

    New rules are listed in the config and hide the visible chunks they match (this machine's
    own sessions the other side never saw), in one tombstone commit; rules the merge lifted
    leave the config. Returns the chunks hidden. A merge that changed no rule costs two
    cached lookups.
    """
    after = repo.head()
    if after is None or after == before:
        return 0
    old = set(rules_.recorded(repo, before).values()) if before else set()
    new = set(rules_.recorded(repo, after).values())
    added, gone = sorted(new - old, key=str), sorted(old - new, key=str)
    if not added and not gone:
        return 0
    if gone:
        _config_add(repo, gone, remove=True)
    if not added:
        return 0
    _config_add(repo, added, remove=False)
    matched = rules_.matching(repo, added)
    ids = set().union(*matched.values())
    if ids:
        names = ", ".join(str(r) for r in added)
        stone = Tombstone(tuple(sorted(ids)), f"exclude {names} (arrived with a merge)",
                          repo._who(), now_iso())
        repo.commit_chunks([], f"exclude {names}: {len(ids)} chunk(s) indexed here",
                           tombstones=[stone])
    return len(ids)
