"""The one place that reads the process environment.

Every other module receives a `Settings` (or a value from it), which keeps tests
order-independent: they set variables, call `settings()` again, and nothing is cached
behind their back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """The environment as funes sees it."""

    #: The user's funes directory: the global memory, model cache, logs and keys.
    home: Path
    #: Show tracebacks instead of one-line errors.
    debug: bool
    #: Author identity from FUNES_AUTHOR_NAME / FUNES_AUTHOR_EMAIL (None when unset); the
    #: identity a commit records is resolved by funes.storage.identity (repository config,
    #: these, the user config, git's global config, then the login name).
    author_name: str | None
    author_email: str | None
    #: Working directory the process started in (discovery starts here).
    cwd: Path
    #: Agent configuration directories, honouring each agent's own variables.
    claude_config_dir: Path
    codex_home: Path
    hermes_home: Path
    pi_home: Path
    #: Seconds a second writer waits for the repository lock before giving up.
    lock_timeout: float
    #: The user's home directory ($HOME): where agents keep files such as ~/.claude.json.
    user_home: Path
    #: The Hugging Face Hub endpoint (`HF_ENDPOINT`); None means huggingface_hub's default.
    #: Passed explicitly because huggingface_hub reads the variable only once, at import.
    hf_endpoint: str | None = None
    #: The warm recall server (`FUNES_SERVE`): `auto` uses a running `funes serve` and starts
    #: one in the background when none runs, `use` never starts one, `off` never talks to one.
    serve: str = "auto"
    #: Seconds the CLI waits for the server's answer before doing the work itself.
    serve_timeout: float = 30.0
    #: The login name ($USER, $LOGNAME): the author of last resort, as `<login>@localhost`.
    login: str = "unknown"
    #: git's global configuration files, lowest priority first (git reads them in this order:
    #: $XDG_CONFIG_HOME/git/config, then ~/.gitconfig; $GIT_CONFIG_GLOBAL replaces both).
    git_config_files: tuple[Path, ...] = ()
    #: More agents' directories (None: under `user_home`, see the properties below).
    #: OpenCode's data (`$XDG_DATA_HOME/opencode`) and config (`$XDG_CONFIG_HOME/opencode`).
    opencode_data: Path | None = None
    opencode_config: Path | None = None
    #: Gemini CLI (`~/.gemini`), Cursor (`~/.cursor`), Copilot CLI (`$COPILOT_HOME`).
    gemini_home: Path | None = None
    cursor_home: Path | None = None
    copilot_home: Path | None = None

    @property
    def opencode_data_dir(self) -> Path:
        """Where OpenCode keeps `opencode.db` and its older `storage/` tree."""
        return self.opencode_data or self.user_home / ".local" / "share" / "opencode"

    @property
    def opencode_config_dir(self) -> Path:
        """Where OpenCode reads `opencode.json` and global plugins."""
        return self.opencode_config or self.user_home / ".config" / "opencode"

    @property
    def gemini_dir(self) -> Path:
        """Gemini CLI's user directory (`settings.json`, `tmp/<project>/chats`)."""
        return self.gemini_home or self.user_home / ".gemini"

    @property
    def cursor_dir(self) -> Path:
        """Cursor's user directory (`mcp.json`, `hooks.json`, `projects/`, `chats/`)."""
        return self.cursor_home or self.user_home / ".cursor"

    @property
    def copilot_dir(self) -> Path:
        """Copilot CLI's user directory (`mcp-config.json`, `hooks/`, `session-state/`)."""
        return self.copilot_home or self.user_home / ".copilot"


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _choice(value: str | None, choices: tuple[str, ...], default: str) -> str:
    low = (value or "").strip().lower()
    if low in {"0", "false", "no"}:
        return "off"  # FUNES_SERVE=0 reads as "off", the way people write it
    return low if low in choices else default


def _seconds(value: str | None, default: float) -> float:
    try:
        number = float(value) if value else default
    except ValueError:
        return default
    return number if number > 0 else default


def color_default() -> bool | None:
    """False when NO_COLOR is set to anything non-empty (no-color.org), else None (auto)."""
    return False if os.environ.get("NO_COLOR") else None


def _git_config_files(env: os._Environ[str], user_home: Path) -> tuple[Path, ...]:
    if env.get("GIT_CONFIG_GLOBAL"):
        return (Path(env["GIT_CONFIG_GLOBAL"]),)
    xdg = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else user_home / ".config"
    return (xdg / "git" / "config", user_home / ".gitconfig")


def display_available() -> bool:
    """Whether a browser can be shown: macOS, or an X11 or Wayland display (`funes ui`)."""
    import sys

    if sys.platform == "darwin":
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def debug_enabled() -> bool:
    """FUNES_DEBUG, readable even when the rest of the environment is broken (error path)."""
    return _truthy(os.environ.get("FUNES_DEBUG"))


def settings() -> Settings:
    """Read the environment now; cheap enough to call per command."""
    env = os.environ
    user_home = Path(env.get("HOME") or Path.home())
    funes_home = Path(env["FUNES_HOME"]) if env.get("FUNES_HOME") else user_home / ".funes"
    login = env.get("USER") or env.get("LOGNAME") or "unknown"
    try:
        lock_timeout = float(env.get("FUNES_LOCK_TIMEOUT", "5"))
    except ValueError:
        lock_timeout = 5.0
    return Settings(
        home=funes_home,
        debug=_truthy(env.get("FUNES_DEBUG")),
        author_name=env.get("FUNES_AUTHOR_NAME") or None,
        author_email=env.get("FUNES_AUTHOR_EMAIL") or None,
        cwd=Path.cwd(),
        claude_config_dir=Path(env.get("CLAUDE_CONFIG_DIR") or user_home / ".claude"),
        codex_home=Path(env.get("CODEX_HOME") or user_home / ".codex"),
        hermes_home=Path(env.get("HERMES_HOME") or user_home / ".hermes"),
        pi_home=Path(env.get("PI_CODING_AGENT_DIR") or user_home / ".pi" / "agent"),
        lock_timeout=lock_timeout,
        user_home=user_home,
        hf_endpoint=env.get("HF_ENDPOINT") or None,
        serve=_choice(env.get("FUNES_SERVE"), ("auto", "use", "off"), "auto"),
        serve_timeout=_seconds(env.get("FUNES_SERVE_TIMEOUT"), 30.0),
        login=login,
        git_config_files=_git_config_files(env, user_home),
        opencode_data=Path(env["XDG_DATA_HOME"]) / "opencode" if env.get("XDG_DATA_HOME")
        else None,
        opencode_config=Path(env["XDG_CONFIG_HOME"]) / "opencode" if env.get("XDG_CONFIG_HOME")
        else None,
        gemini_home=Path(env["GEMINI_CLI_HOME"]) / ".gemini" if env.get("GEMINI_CLI_HOME")
        else None,
        cursor_home=None,
        copilot_home=Path(env["COPILOT_HOME"]) if env.get("COPILOT_HOME") else None,
    )
