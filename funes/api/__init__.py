"""The porcelain: one function per verb, returning dataclasses and never printing.

The CLI (funes.cli) parses arguments, makes one call here, and renders the result; agents and
tests can make the same calls in-process. Lower layers are reached only through this package.
Each verb family has its own module (repo, ingest, …); this module re-exports them so callers
write `from funes import api; api.index(...)`.
"""

from funes._env import Settings
from funes._env import settings as load_settings
from funes.api.ingest import IndexSummary, index, parse_since
from funes.api.repo import (
    InitResult,
    LogEntry,
    ShowResult,
    StatusResult,
    config_get,
    config_list,
    config_set,
    config_unset,
    fsck,
    init,
    log,
    open_memory,
    show,
    status,
)
from funes.model.objects import Commit
from funes.storage.fsck import FsckReport, Problem
from funes.storage.repo import CommitResult, Repository

__all__ = [
    "Commit",
    "CommitResult",
    "FsckReport",
    "IndexSummary",
    "InitResult",
    "LogEntry",
    "Problem",
    "Repository",
    "Settings",
    "ShowResult",
    "StatusResult",
    "config_get",
    "config_list",
    "config_set",
    "config_unset",
    "fsck",
    "index",
    "init",
    "load_settings",
    "log",
    "open_memory",
    "parse_since",
    "show",
    "status",
]
