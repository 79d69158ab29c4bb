"""The user's side of funes: the user-level config (`funes config --global`) and who commits.

Also the explanation of an empty recall, which is about what the user has (not) done yet:
nothing indexed, nothing embedded, or filters that leave nothing to search.
"""

from __future__ import annotations

from dataclasses import dataclass

from funes._env import Settings
from funes.retrieval.recall import RecallResult
from funes.storage.identity import Identity, UserConfig, author
from funes.storage.repo import Repository

__all__ = ["EmptyRecall", "Identity", "empty_recall", "identity", "user_config_get",
           "user_config_list", "user_config_set", "user_config_unset"]


def identity(settings: Settings, repo: Repository | None = None) -> Identity:
    """The author the next commit records (in `repo`, when given), and where it came from."""
    return author(settings, repo.config if repo is not None else None)


def user_config_get(settings: Settings, key: str) -> str | None:
    """A user-level value, or None when it is not set."""
    return UserConfig(settings).get(key)


def user_config_set(settings: Settings, key: str, value: str) -> str:
    """Set a user-level value (user.name, user.email); returns it normalised."""
    return UserConfig(settings).set(key, value)


def user_config_unset(settings: Settings, key: str) -> bool:
    """Remove a user-level value; False when it was not set."""
    return UserConfig(settings).unset(key)


def user_config_list(settings: Settings) -> list[tuple[str, str]]:
    """Every user-level value that is set."""
    return UserConfig(settings).items()


@dataclass(frozen=True)
class EmptyRecall:
    """Why a recall found nothing, and what to run about it."""

    reason: str
    hint: str


def empty_recall(repo: Repository, result: RecallResult, filters: list[str]) -> EmptyRecall:
    """Explain an empty recall: an empty memory, no vectors yet, narrow filters, or no match.

    `filters` names the filters the user gave (e.g. `--harness claude`), for the message.
    """
    chunks = repo.stats().chunks
    if chunks == 0:
        return EmptyRecall(
            "the memory holds no passages yet",
            "index your agents' sessions with `funes index` (or run `funes quickstart`)",
        )
    if filters:
        return EmptyRecall(
            f"nothing matches within {' '.join(filters)} ({chunks} passages in the memory)",
            "try again without those filters",
        )
    if "vector" not in result.signals and result.backlog:
        return EmptyRecall(
            f"no passage contains these words, and {result.backlog} passages are not embedded "
            "yet, so none could match by meaning",
            "run `funes embed`, then recall again",
        )
    return EmptyRecall(
        f"no passage of the {chunks} in the memory matches",
        "try other words; `funes status` shows what the memory holds",
    )
