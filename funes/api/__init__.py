"""The porcelain: one function per verb, returning dataclasses and never printing.

The CLI (funes.cli) parses arguments, makes one call here, and renders the result; agents and
tests can make the same calls in-process. Lower layers are reached only through this package.
Each verb family has its own module (repo, ingest, …); this module re-exports them so callers
write `from funes import api; api.index(...)`.
"""

from funes._env import Settings
from funes._env import settings as load_settings
from funes.api.agent_format import UNTRUSTED, recall_text, status_text, turns_text
from funes.api.agents import (
    AskResult,
    WiringResult,
    agents_add,
    agents_remove,
    ask,
    hook_run,
    mcp_serve,
)
from funes.api.gitlink import (
    BlameCommit,
    BlameResult,
    HooksReport,
    LinkResult,
    WhyResult,
    blame,
    hooks_install,
    hooks_status,
    hooks_uninstall,
    link_commit,
    linked_turns,
    why,
)
from funes.api.ingest import IndexSummary, index, parse_since
from funes.api.models import (
    ModelEntry,
    ModelInfo,
    VerifyResult,
    models_import,
    models_install,
    models_list,
    models_verify,
)
from funes.api.quickstart import QuickstartResult, quickstart
from funes.api.recall import (
    DrainResult,
    RecallResult,
    SearchStatus,
    TurnView,
    embed,
    get,
    memory_label,
    owned,
    recall,
    search_status,
)
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
    "UNTRUSTED",
    "AskResult",
    "BlameCommit",
    "BlameResult",
    "Commit",
    "CommitResult",
    "DrainResult",
    "FsckReport",
    "HooksReport",
    "IndexSummary",
    "InitResult",
    "LinkResult",
    "LogEntry",
    "ModelEntry",
    "ModelInfo",
    "Problem",
    "QuickstartResult",
    "RecallResult",
    "Repository",
    "SearchStatus",
    "Settings",
    "ShowResult",
    "StatusResult",
    "TurnView",
    "VerifyResult",
    "WhyResult",
    "WiringResult",
    "agents_add",
    "agents_remove",
    "ask",
    "blame",
    "config_get",
    "config_list",
    "config_set",
    "config_unset",
    "embed",
    "fsck",
    "get",
    "hook_run",
    "hooks_install",
    "hooks_status",
    "hooks_uninstall",
    "index",
    "init",
    "link_commit",
    "linked_turns",
    "load_settings",
    "log",
    "mcp_serve",
    "memory_label",
    "models_import",
    "models_install",
    "models_list",
    "models_verify",
    "open_memory",
    "owned",
    "parse_since",
    "quickstart",
    "recall",
    "recall_text",
    "search_status",
    "show",
    "status",
    "status_text",
    "turns_text",
    "why",
]
