"""Where an agent's sessions go: one rule for the hooks, `funes index` and `funes add`.

docs/design.md §7: a session whose working directory lies inside a project that has its own
`.funes/` goes to that project memory; every other session goes to the global memory. `funes
add AGENT MEMORY` binds an agent to one memory instead; but a **project memory** (a
`<project>/.funes` that is not the global memory) only ever receives the sessions inside its
project, whichever way it was bound (`--project`, a path, or a binding written by an older
funes), and binding one never changes where the agent's other sessions go. So a team memory
of one project never receives, and never pushes, another project's turns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from funes._env import Settings
from funes.agents.wiring import bound_memory, bound_projects
from funes.api.ingest import _ProjectRouter, inside
from funes.api.memory import open_memory
from funes.ingest.state import SourceStates, memory_states, routed_states
from funes.model.turns import Turn
from funes.storage.repo import PROJECT_DIR, Repository

__all__ = ["AgentRouting", "inside", "project_root", "routing_for"]


def project_root(settings: Settings, memory: Path) -> Path | None:
    """The project a memory belongs to (`<project>/.funes` → `<project>`), or None.

    None for the global memory and for a memory that is not named `.funes` (a directory the
    user made for it): such a memory is bound user-wide, as asked.
    """
    path = memory.expanduser().resolve()
    if path == settings.home.expanduser().resolve() or path.name != PROJECT_DIR:
        return None
    return path.parent


@dataclass(frozen=True)
class AgentRouting:
    """An agent's binding: a user-wide memory (or the per-session rule) plus project memories."""

    settings: Settings
    #: The memory every session outside the projects goes to; None: the per-session rule.
    memory: str | None
    #: (project directory, its memory) for each project memory bound to the agent.
    projects: tuple[tuple[Path, Path], ...]

    def project_of(self, workdir: str | None) -> Path | None:
        """The bound project memory a working directory belongs to (the innermost), or None."""
        found = [(root, path) for root, path in self.projects if inside(workdir, root)]
        return max(found, key=lambda rp: len(rp[0].parts))[1] if found else None

    def router(self) -> tuple[Callable[[Turn], Repository | None], SourceStates,
                              dict[Path, Repository]]:
        """(router for `index_sources`, the read positions to use, the memories it opened)."""
        opened: dict[Path, Repository] = {}

        def open_once(path: Path) -> Repository:
            key = path.resolve()
            if key not in opened:
                opened[key] = open_memory(self.settings, key)
            return opened[key]

        base: Callable[[Turn], Repository | None]
        if self.memory:
            bound = open_once(Path(self.memory))
            base = lambda _turn: bound  # noqa: E731
            states = memory_states(bound.path)
        else:
            rule = _ProjectRouter(self.settings)
            rule._repos = opened  # the memories it opens are reported with the others
            base = rule
            states = routed_states(self.settings.home)

        def route(turn: Turn) -> Repository | None:
            project = self.project_of(turn.workdir)
            return open_once(project) if project is not None else base(turn)

        return route, states, opened

    def session_memory(self, cwd: str | None) -> Repository | None:
        """The memory a session in `cwd` syncs at its boundaries (None: none to sync)."""
        project = self.project_of(cwd)
        if project is not None:
            return open_memory(self.settings, project)
        if self.memory:
            return open_memory(self.settings, self.memory)
        if not cwd:
            return None
        return Repository.discover(self.settings, Path(cwd))


def routing_for(settings: Settings, agent: str) -> AgentRouting:
    """The binding `funes add` recorded for `agent`.

    A bound memory that is a project memory counts as one of the projects (bindings an older
    funes wrote user-wide), so the rule holds for every agent bound to it.
    """
    memory = bound_memory(settings, agent)
    projects: list[tuple[Path, Path]] = []
    for path in [*bound_projects(settings, agent), *([memory] if memory else [])]:
        root = project_root(settings, Path(path))
        if root is not None:
            projects.append((root, Path(path).expanduser().resolve()))
            if path == memory:
                memory = None
    return AgentRouting(settings, memory, tuple(dict.fromkeys(projects)))
