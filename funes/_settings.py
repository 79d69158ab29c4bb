"""`Settings`: the environment as funes sees it, read by `funes._env.settings()`.

Apart from funes._env because a dataclass costs an import of `dataclasses` (and `inspect`):
1.4 MB of resident memory and ~10 ms in every process, and the two that only talk to the warm
server (the thin client and every agent's `funes mcp` relay) read the few values they need
with `funes._env.client_env()` instead.
"""

from __future__ import annotations

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
