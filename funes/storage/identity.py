"""Who a commit says wrote it, and the user-level config (`funes config --global`).

Commits travel: they are pushed, shared and signed, so `$USER@localhost` is a poor author.
The identity is the first of, per field:

1. the memory's own config (`funes config set user.name Ada`),
2. `FUNES_AUTHOR_NAME` / `FUNES_AUTHOR_EMAIL`,
3. the user config, `$FUNES_HOME/user.config` (`funes config --global set user.name Ada`),
4. git's global config (`user.name` / `user.email`, the files `git config --global` writes),
5. the login name, as `<login>@localhost`.

The user config is a separate file, not the global memory's `config`: it applies to every
memory on this machine, while the global memory's config is that memory's alone (its remotes,
its recall settings).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes.errors import UsageError
from funes.storage.config import Config

#: The user config's file name inside $FUNES_HOME.
USER_CONFIG = "user.config"
#: Keys the user config holds: the ones that describe the person, not a memory.
USER_KEYS = ("user.name", "user.email")
#: git config files larger than this are not read (they are input like any other file).
_MAX_GIT_CONFIG = 1 << 20


@dataclass(frozen=True)
class Identity:
    """An author, and where each half came from (for `funes config --global list`)."""

    name: str
    email: str
    name_source: str
    email_source: str

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


class UserConfig(Config):
    """`$FUNES_HOME/user.config`: the same INI format as a memory's config, user keys only."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.home / USER_CONFIG)

    @staticmethod
    def _check(name: str) -> None:
        if name not in USER_KEYS:
            raise UsageError(
                f"{name!r} is not a user-level key",
                hint=f"--global takes {', '.join(USER_KEYS)}; set {name} per memory, "
                "without --global",
            )

    def get(self, name: str) -> str | None:
        """A value set in the user config (user keys have no default)."""
        self._check(name)
        return super().get(name)

    def set(self, name: str, value: str) -> str:
        """Validate and store a user-level value."""
        self._check(name)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return super().set(name, value)

    def unset(self, name: str) -> bool:
        """Remove a user-level value; False if it was not set."""
        self._check(name)
        return super().unset(name)


def _usable(value: str | None) -> str | None:
    """A value fit for `name <email>`: one line, no angle brackets, not blank."""
    if value is None:
        return None
    value = value.strip()
    if not value or any(c in value for c in "<>\n\r\0"):
        return None
    return value


def git_identity(settings: Settings) -> tuple[str | None, str | None]:
    """`user.name` and `user.email` from git's global config files (later files win)."""
    name = email = None
    for path in settings.git_config_files:
        try:
            if not path.is_file() or path.stat().st_size > _MAX_GIT_CONFIG:
                continue
        except OSError:
            continue
        from dulwich.config import ConfigFile  # only when nothing closer names the author

        try:
            config = ConfigFile.from_path(str(path))
        except Exception:  # a malformed git config is git's problem, not a reason to fail
            continue
        for key in ("name", "email"):
            try:
                raw = config.get((b"user",), key.encode())
            except KeyError:
                continue
            value = _usable(raw.decode("utf-8", "replace"))
            if value is not None and key == "name":
                name = value
            elif value is not None:
                email = value
    return name, email


def author(settings: Settings, repo_config: Config | None = None) -> Identity:
    """The identity a commit records (the order is in the module docstring)."""
    found: dict[str, tuple[str, str]] = {}

    def offer(key: str, value: str | None, source: str) -> None:
        value = _usable(value)
        if key not in found and value is not None:
            found[key] = (value, source)

    if repo_config is not None:
        offer("name", repo_config.get("user.name"), "memory config")
        offer("email", repo_config.get("user.email"), "memory config")
    offer("name", settings.author_name, "FUNES_AUTHOR_NAME")
    offer("email", settings.author_email, "FUNES_AUTHOR_EMAIL")
    if len(found) < 2:
        user = UserConfig(settings)
        offer("name", user.get("user.name"), f"{user.path}")
        offer("email", user.get("user.email"), f"{user.path}")
    if len(found) < 2:
        git_name, git_email = git_identity(settings)
        offer("name", git_name, "git config --global")
        offer("email", git_email, "git config --global")
    offer("name", settings.login, "login name")
    offer("email", f"{settings.login}@localhost", "login name")
    offer("name", "unknown", "login name")
    offer("email", "unknown@localhost", "login name")
    name, name_source = found["name"]
    email, email_source = found["email"]
    return Identity(name, email, name_source, email_source)


def user_config_path(settings: Settings) -> Path:
    """Where `funes config --global` reads and writes."""
    return settings.home / USER_CONFIG
