"""The one place that reads the process environment.

Every other module receives a `Settings` (or a value from it), which keeps tests
order-independent: they set variables, call `settings()` again, and nothing is cached
behind their back.
"""

from __future__ import annotations

import os
from pathlib import Path

TYPE_CHECKING = False  # typing's own constant, without importing typing (the relay's 0.4 MB)
if TYPE_CHECKING:
    from funes._settings import Settings as Settings


def __getattr__(name: str) -> object:
    # `from funes._env import Settings` works as if it were defined here (funes._settings).
    if name == "Settings":
        from funes._settings import Settings

        return Settings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class ClientEnv:
    """What a client of the warm server needs of the environment, and only that.

    The thin client (funes.cli.thin) and the `funes mcp` relay read these instead of building a
    `Settings` (funes._settings says why); `settings()` takes the same four from here.
    """

    __slots__ = ("debug", "home", "serve", "serve_timeout")

    def __init__(self, home: Path, debug: bool, serve: str, serve_timeout: float) -> None:
        #: The funes home ($FUNES_HOME): which server is this user's (funes.protocol).
        self.home = home
        self.debug = debug
        #: FUNES_SERVE (`auto`, `use` or `off`) and FUNES_SERVE_TIMEOUT (see `Settings`).
        self.serve = serve
        self.serve_timeout = serve_timeout


def client_env() -> ClientEnv:
    """The environment a warm server's client needs (read now, like `settings()`)."""
    env = os.environ
    user_home = Path(env.get("HOME") or Path.home())
    return ClientEnv(
        home=Path(env["FUNES_HOME"]) if env.get("FUNES_HOME") else user_home / ".funes",
        debug=_truthy(env.get("FUNES_DEBUG")),
        serve=_choice(env.get("FUNES_SERVE"), ("auto", "use", "off"), "auto"),
        serve_timeout=_seconds(env.get("FUNES_SERVE_TIMEOUT"), 30.0),
    )


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
    from funes._settings import Settings

    env = os.environ
    user_home = Path(env.get("HOME") or Path.home())
    client = client_env()
    login = env.get("USER") or env.get("LOGNAME") or "unknown"
    try:
        lock_timeout = float(env.get("FUNES_LOCK_TIMEOUT", "5"))
    except ValueError:
        lock_timeout = 5.0
    return Settings(
        home=client.home,
        debug=client.debug,
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
        serve=client.serve,
        serve_timeout=client.serve_timeout,
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
