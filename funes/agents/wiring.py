"""What every agent's wiring shares: reversible, backed-up edits and the record of them.

`funes add <agent>` edits files that belong to the user (an agent's settings). It must be
idempotent, reversible and never lose anything, so every edit goes through an `Edits` session:

- before a file is first changed, its bytes are copied to
  `$FUNES_HOME/agents/backups/<agent>/<time>/…` (a file that did not exist is recorded as such);
- every write is atomic (temporary sibling + rename) and keeps the file's mode; a symlinked
  file (dotfiles managers) is written through the link, never replaced by a regular file;
- writing the bytes that are already there is not a change: a second `add` touches nothing;
- `$FUNES_HOME/agents/<agent>.json` records, per file, the pre-funes backup and a hash of what
  funes wrote. `remove` restores the backup byte for byte when the file still holds exactly what
  funes wrote; when the user (or the agent) changed it since, `remove` takes out only funes'
  own entries and keeps everything else, backing up the current bytes first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from funes import process
from funes._env import Settings
from funes.errors import FunesError
from funes.storage.atomic import write_atomic

#: The per-turn hook script (package file `funes/hooks/agent-turn-end`).
HOOK_NAME = "agent-turn-end"
#: The MCP server's name in every agent's configuration.
SERVER_NAME = "funes"


class AgentConfigError(FunesError):
    """An agent's configuration file exists but funes cannot read or safely edit it."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(
            f"cannot edit {path}: {detail}",
            hint="fix the file by hand (funes changed nothing), then run the command again",
        )
        self.path = path


class AgentCommandError(FunesError):
    """The agent's own CLI refused to register or remove the MCP server."""

    def __init__(self, argv: list[str], detail: str) -> None:
        super().__init__(
            f"`{shlex.join(argv)}` failed: {detail}",
            hint="run it yourself to see why; funes left the other settings as they were",
        )


def agents_dir(settings: Settings) -> Path:
    """`$FUNES_HOME/agents`: hook script, records, queue, backups."""
    return settings.home / "agents"


def hook_path(settings: Settings) -> Path:
    """Where `funes add` installs the hook script agents run."""
    return agents_dir(settings) / HOOK_NAME


def hook_command(settings: Settings, agent: str, event: str) -> list[str]:
    """The argv an agent runs when a turn (`turn-end`) or a session (`session-end`) ends."""
    return [str(hook_path(settings)), agent, event]


def mcp_command(memory: str | None) -> list[str]:
    """The argv that starts `funes mcp` with this Python (no activated virtualenv needed)."""
    return [sys.executable, "-m", "funes", "mcp", *([memory] if memory else [])]


def package_text(name: str) -> str:
    """A file shipped in the package's `hooks/` directory."""
    return resources.files("funes").joinpath("hooks", name).read_text("utf-8")


def sha256(data: bytes) -> str:
    """Hex digest (records compare what funes wrote with what is there now)."""
    return hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes | None:
    """A file's bytes, or None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AgentConfigError(path, exc.strerror or str(exc)) from None


def _target(path: Path) -> Path:
    """Write through symlinks: a dotfiles link stays a link."""
    return path.resolve() if path.is_symlink() else path


def replace_file(path: Path, data: bytes, mode: int | None = None) -> None:
    """Atomically replace `path` (temporary sibling + rename), keeping its mode."""
    target = _target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = target.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o644
    write_atomic(target, data, mode=mode)


@dataclass
class FileRecord:
    """What funes knows about one file it edited."""

    #: Copy of the bytes before funes first changed the file (None: the file did not exist).
    backup: str | None
    #: sha256 of the bytes funes last wrote.
    written: str


@dataclass
class Record:
    """`$FUNES_HOME/agents/<agent>.json`: what `add` changed, so `remove` can undo it."""

    agent: str
    memory: str | None = None
    files: dict[str, FileRecord] = field(default_factory=dict)
    #: Directories `add` created (removed again when empty).
    dirs: list[str] = field(default_factory=list)
    #: MCP registered through the agent's own CLI (so `remove` uses it too).
    via_cli: bool = False
    #: Project memories (`<project>/.funes`) bound with `funes add AGENT REMOTE --project`:
    #: each receives the sessions inside its project, whatever `memory` is.
    projects: list[str] = field(default_factory=list)

    @staticmethod
    def path(settings: Settings, agent: str) -> Path:
        """Where the record of `agent` lives."""
        return agents_dir(settings) / f"{agent}.json"

    @classmethod
    def load(cls, settings: Settings, agent: str) -> Record | None:
        """The record, or None when funes never wired this agent (or it was removed)."""
        raw = read_bytes(cls.path(settings, agent))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            files = {p: FileRecord(**f) for p, f in data.get("files", {}).items()}
            return cls(agent, data.get("memory"), files, list(data.get("dirs", [])),
                       bool(data.get("via_cli")), [str(p) for p in data.get("projects", [])])
        except (ValueError, TypeError) as exc:
            where = cls.path(settings, agent)
            raise AgentConfigError(where, f"unreadable record ({exc})") from None

    def to_bytes(self) -> bytes:
        """The record as stable, readable JSON."""
        data = {
            "agent": self.agent,
            "memory": self.memory,
            "files": {p: {"backup": f.backup, "written": f.written}
                      for p, f in sorted(self.files.items())},
            "dirs": self.dirs,
            "via_cli": self.via_cli,
            **({"projects": self.projects} if self.projects else {}),
        }
        return (json.dumps(data, indent=2) + "\n").encode("utf-8")


def bound_memory(settings: Settings, agent: str) -> str | None:
    """The memory `funes add <agent> MEMORY` bound, or None (route per session)."""
    record = Record.load(settings, agent)
    return record.memory if record else None


def bound_projects(settings: Settings, agent: str) -> list[str]:
    """The project memories `funes add <agent> REMOTE --project` bound (funes.api.routing)."""
    record = Record.load(settings, agent)
    return list(record.projects) if record else []


class Edits:
    """One `add` or `remove` of one agent: reversible edits plus a log of what changed."""

    def __init__(self, settings: Settings, agent: str) -> None:
        self.settings = settings
        self.agent = agent
        self.record = Record.load(settings, agent) or Record(agent)
        self._before = self.record.to_bytes()
        self._dirs_before = list(self.record.dirs)
        self.changed: list[str] = []
        self._stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        self._backed_up: dict[Path, str | None] = {}

    # -- backups ---------------------------------------------------------------------------

    def _backup(self, path: Path) -> str | None:
        """Copy the file's current bytes aside (once per session); None if it has none."""
        if path in self._backed_up:
            return self._backed_up[path]
        data = read_bytes(path)
        where: str | None = None
        if data is not None:
            rel = str(path).lstrip(os.sep).replace(os.sep, "__")
            dest = agents_dir(self.settings) / "backups" / self.agent / self._stamp / rel
            replace_file(dest, data, 0o600)
            where = str(dest)
        self._backed_up[path] = where
        return where

    def touch(self, path: Path) -> None:
        """About to change `path` (maybe through the agent's CLI): back it up first."""
        backup = self._backup(path)
        if str(path) not in self.record.files:
            self.record.files[str(path)] = FileRecord(backup, "")

    def wrote(self, path: Path, note: str) -> None:
        """`path` was changed by someone else on our behalf (the agent's CLI)."""
        data = read_bytes(path)
        rec = self.record.files[str(path)]
        rec.written = sha256(data) if data is not None else ""
        self.changed.append(note)

    # -- writing ---------------------------------------------------------------------------

    def write(self, path: Path, data: bytes | None, note: str, *, mode: int | None = None) -> bool:
        """Make `path` hold `data` (None: not exist); False when it already does."""
        current = read_bytes(path)
        if current == data:
            return False
        for parent in reversed(path.parents):
            if not parent.exists() and data is not None:
                self.record.dirs.append(str(parent))
        self.touch(path)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                _target(path).unlink()
        else:
            replace_file(path, data, mode)
        self.record.files[str(path)].written = sha256(data) if data is not None else ""
        backup = self.record.files[str(path)].backup
        self.changed.append(note + (f" (backup: {backup})" if backup else ""))
        return True

    def edit(self, path: Path, change: Callable[[bytes | None], bytes | None], note: str) -> bool:
        """Apply `change` to the file's bytes (None = missing); write only if they differ."""
        return self.write(path, change(read_bytes(path)), note)

    def undo(self, path: Path, strip: Callable[[bytes], bytes | None], note: str) -> None:
        """Take funes out of `path`: restore the backup if untouched since, else `strip`."""
        rec = self.record.files.get(str(path))
        current = read_bytes(path)
        if current is None:
            self.record.files.pop(str(path), None)
            return
        if rec is not None and rec.written == sha256(current):
            original = read_bytes(Path(rec.backup)) if rec.backup else None
            if rec.backup is None or original is not None:
                how = " (restored as it was)" if rec.backup else " (deleted: funes created it)"
                self._replace_for_undo(path, current, original, note + how)
                self.record.files.pop(str(path), None)
                return
        stripped = strip(current)
        if stripped != current:
            self._backup(path)
            self._replace_for_undo(path, current, stripped, note)
        self.record.files.pop(str(path), None)

    def _replace_for_undo(self, path: Path, current: bytes, data: bytes | None, note: str) -> None:
        if data == current:
            return
        if data is None:
            _target(path).unlink()
        else:
            replace_file(path, data)
        self.changed.append(note)

    # -- the record ------------------------------------------------------------------------

    def save(self) -> None:
        """Store the record (only if it changed, so a repeated `add` writes nothing)."""
        data = self.record.to_bytes()
        if data != self._before:
            replace_file(Record.path(self.settings, self.agent), data, 0o644)

    def rollback(self) -> None:
        """Undo every change of this `add` (it failed): files back as they were, no record.

        Files changed through the agent's own CLI were backed up before it ran (`touch`), so
        restoring their bytes undoes those changes too.
        """
        for path, backup in self._backed_up.items():
            original = read_bytes(Path(backup)) if backup else None
            if backup is not None and original is None:
                continue  # the backup itself is gone: leave the file as it is
            if read_bytes(path) == original:
                continue
            if original is None:
                with contextlib.suppress(FileNotFoundError):
                    _target(path).unlink()
            else:
                replace_file(path, original)
        created = [d for d in self.record.dirs if d not in self._dirs_before]
        for directory in sorted(set(created), key=len, reverse=True):
            with contextlib.suppress(OSError):
                Path(directory).rmdir()
        for backup in self._backed_up.values():
            if backup:
                with contextlib.suppress(OSError):
                    Path(backup).unlink()
        with contextlib.suppress(OSError):
            (agents_dir(self.settings) / "backups" / self.agent / self._stamp).rmdir()
        self.changed.clear()

    def forget(self) -> None:
        """After `remove`: drop the record and the directories `add` created, if empty."""
        for directory in sorted(set(self.record.dirs), key=len, reverse=True):
            with contextlib.suppress(OSError):
                Path(directory).rmdir()
        with contextlib.suppress(FileNotFoundError):
            Record.path(self.settings, self.agent).unlink()


# -- small format helpers shared by the agents -------------------------------------------------

#: Text formats (TOML, YAML) get funes' lines between these comments, so `remove` can take
#: exactly those lines out again and leave every other byte as it was.
END = "# funes:end"


def begin(agent: str) -> str:
    """The comment that opens a block funes added."""
    return f"# funes:begin (added by `funes add {agent}`; `funes remove {agent}` takes it out)"


def strip_marked(text: str) -> str:
    """The text without funes' marked blocks (blocks may nest: one added inside another)."""
    out: list[str] = []
    depth = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("# funes:begin"):
            depth += 1
        elif depth and stripped == END:
            depth -= 1
        elif not depth:
            out.append(line)
    return "".join(out)



def json_load(path: Path, data: bytes | None) -> dict[str, Any]:
    """A JSON object from a config file (missing or blank: empty), or a clear error."""
    if data is None or not data.strip():
        return {}
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise AgentConfigError(path, f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise AgentConfigError(path, "expected a JSON object at the top")
    return value


def json_dump(value: dict[str, Any], like: bytes | None) -> bytes:
    """Serialise in the style of the original file (indent, trailing newline)."""
    indent: int | str = 2
    if like:
        for line in like.decode("utf-8", "replace").splitlines()[1:]:
            stripped = line.lstrip(" \t")
            if stripped and len(stripped) < len(line):
                ws = line[: len(line) - len(stripped)]
                indent = "\t" if ws.startswith("\t") else len(ws)
                break
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    newline = like is None or like.endswith(b"\n")
    return (text + ("\n" if newline else "")).encode("utf-8")


def is_our_hook(hook: Any, settings: Settings, key: str = "command") -> bool:
    """Whether a hook entry runs funes' hook script (whatever its arguments)."""
    return isinstance(hook, dict) and str(hook_path(settings)) in str(hook.get(key, ""))


def with_grouped_hooks(
    path: Path, data: dict[str, Any], settings: Settings, agent: str, events: dict[str, str],
    *, timeout: int, extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A settings object with funes' hook in each event's matcher groups.

    The layout Claude Code and Gemini CLI share: ``hooks.<Event>`` is a list of groups
    ``{matcher?, hooks: [{type: command, command, timeout}]}``. An older funes entry is
    replaced in place; otherwise a group of its own is appended.
    """
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise AgentConfigError(path, "`hooks` is not an object")
    for event, kind in events.items():
        wanted = {"type": "command", "command": shlex.join(hook_command(settings, agent, kind)),
                  "timeout": timeout, **(extra or {})}
        groups = hooks.setdefault(event, [])
        found = False
        for group in groups:
            inner = group.get("hooks", []) if isinstance(group, dict) else []
            for i, hook in enumerate(inner):
                if is_our_hook(hook, settings):
                    inner[i] = wanted
                    found = True
        if not found:
            groups.append({"hooks": [wanted]})
    return data


def without_grouped_hooks(
    data: dict[str, Any], settings: Settings, events: dict[str, str]
) -> dict[str, Any]:
    """The settings without funes' hooks (groups and events left empty go too)."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data
    for event in events:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list) and any(is_our_hook(h, settings) for h in inner):
                inner = [h for h in inner if not is_our_hook(h, settings)]
                if not inner:
                    continue
                group = {**group, "hooks": inner}
            kept.append(group)
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del data["hooks"]
    return data


def json_entry_add(edits: Edits, path: Path, keys: tuple[str, ...], entry: Any, note: str) -> None:
    """Set ``doc[keys[0]]…[keys[-1]] = entry`` in a JSON config, creating objects on the way."""

    def put(data: bytes | None) -> bytes:
        doc = json_load(path, data)
        node = doc
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise AgentConfigError(path, f"`{key}` is not an object")
            node = child
        node[keys[-1]] = entry
        return json_dump(doc, data)

    edits.edit(path, put, note)


def json_entry_remove(edits: Edits, path: Path, keys: tuple[str, ...], note: str) -> None:
    """Take ``doc[keys…]`` out of a JSON config (objects funes emptied go too)."""

    def strip(data: bytes) -> bytes | None:
        doc = json_load(path, data)
        trail: list[dict[str, Any]] = [doc]
        for key in keys[:-1]:
            child = trail[-1].get(key)
            if not isinstance(child, dict):
                return data
            trail.append(child)
        if keys[-1] not in trail[-1]:
            return data
        del trail[-1][keys[-1]]
        for depth in range(len(keys) - 1, 0, -1):
            if not trail[depth]:
                del trail[depth - 1][keys[depth - 1]]
        return json_dump(doc, data)

    edits.undo(path, strip, note)


def which(name: str) -> str | None:
    """An agent's CLI on PATH, if installed."""
    import shutil

    return shutil.which(name)


def run_cli(argv: list[str], timeout: float = 60.0) -> str:
    """Run an agent's own CLI (MCP registration); its stdout, or AgentCommandError."""
    try:
        done = process.run_bounded(argv, timeout=timeout)
    except OSError as exc:
        raise AgentCommandError(argv, str(exc)) from None
    if done.timed_out or done.overflowed:
        raise AgentCommandError(argv, done.summary())
    stdout = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        detail = (done.stderr.decode("utf-8", "replace") or stdout).strip().splitlines()
        raise AgentCommandError(argv, detail[-1] if detail else f"exit {done.returncode}")
    return stdout
