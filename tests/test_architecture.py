"""Architecture rules, checked on the source: layering, light start-up, one env reader."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "funes"

#: Lowest first. A module may import its own layer and any layer below it, never above.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("funes.model",),
    ("funes.storage",),
    ("funes.inference",),
    ("funes.ingest",),
    ("funes.retrieval",),
    ("funes.remotes",),
    ("funes.agents", "funes.gitlink"),  # siblings: neither imports the other
    ("funes.api",),
    ("funes.ui",),  # `funes ui`'s web pages: read the library, rendered for the CLI to serve
    ("funes.cli",),
)
#: Importable from every layer (standard library only, below every layer).
SHARED = ("funes.errors", "funes._env", "funes.protocol", "funes.process", "funes")

HEAVY = ("lance", "lancedb", "llama_cpp", "huggingface_hub", "mcp", "pyarrow", "numpy", "rich")


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO_ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text("utf-8"))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def _layer_of(module: str) -> tuple[int, str] | None:
    for index, group in enumerate(LAYERS):
        for prefix in group:
            if module == prefix or module.startswith(prefix + "."):
                return index, prefix
    return None


def test_layers_import_downward_only() -> None:
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _module_name(path)
        own = _layer_of(source)
        for lineno, target in _imports(path):
            if not target.startswith("funes") or target in SHARED:
                continue
            theirs = _layer_of(target)
            if own is None or theirs is None:
                if own is not None and theirs is None and not target.startswith(SHARED[:2]):
                    violations.append(f"{source}:{lineno} imports unlayered {target}")
                continue
            if theirs[0] > own[0] or (theirs[0] == own[0] and theirs[1] != own[1]):
                violations.append(f"{source}:{lineno} imports {target} (layer above or sibling)")
    assert not violations, "\n".join(violations)


def test_cli_reaches_the_library_only_through_the_api() -> None:
    allowed = ("funes.api", "funes.ui.server", "funes.errors", "funes._env", "funes.protocol",
               "funes.cli", "funes")
    bad = []
    for path in sorted((PACKAGE / "cli").rglob("*.py")):
        for lineno, target in _imports(path):
            if (
                target.startswith("funes")
                and not any(target == a or target.startswith(a + ".") for a in allowed[:-1])
                and target != "funes"
            ):
                bad.append(f"{_module_name(path)}:{lineno} imports {target}")
    assert not bad, "\n".join(bad)


def test_only_env_module_reads_the_environment() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_env.py":
            continue
        text = path.read_text("utf-8")
        for needle in ("os.environ.get(", "os.getenv(", "os.environ["):
            if needle in text:
                offenders.append(f"{_module_name(path)} uses {needle}")
    assert not offenders, "\n".join(offenders)


def test_help_and_version_load_no_heavy_modules() -> None:
    probe = (
        "import sys\n"
        "from funes.cli.main import main\n"
        "def run(*argvs):\n"
        "    for argv in argvs:\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit:\n"
        "            pass\n"
        "run(['--help'], ['--version'])\n"
        "lazy = [m for m in sys.modules if m.startswith(('funes.api', 'funes.cli.commands.'))]\n"
        "print('LAZY', lazy, file=sys.stderr)\n"
        "run(['log', '--help'], ['status', '--help'], ['recall', '--help'])\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "HEAVY []" in out.stderr, out.stderr
    # The lazy command group: `--help` and `--version` import no command, nor the library.
    assert "LAZY []" in out.stderr, out.stderr


#: Everything of funes a `funes recall` answered by the warm server may import.
THIN_PATH = ["funes", "funes._env", "funes.cli", "funes.cli.main", "funes.cli.thin",
             "funes.protocol"]


def test_thin_path_imports_only_the_protocol(tmp_path: Path) -> None:
    """A cold interpreter answering through a server loads no click, no library, no model."""
    import os

    from tests.conftest import one_answer_server

    home = tmp_path / "home"
    home.mkdir()
    with one_answer_server(home, {"stdout": "the answer\n", "stderr": "", "exit": 0}) as asked:
        probe = (
            "import sys\n"
            "from funes.cli.main import main\n"
            "try:\n"
            "    main(['recall', 'why', 'did', 'we', 'drop', 'it', '--format', 'json'])\n"
            "except SystemExit as exc:\n"
            "    print('EXIT', exc.code, file=sys.stderr)\n"
            "mods = sorted(m for m in sys.modules if m == 'funes' or m.startswith('funes.'))\n"
            "print('FUNES', mods, file=sys.stderr)\n"
            f"print('OTHER', [m for m in {(*HEAVY, 'click')!r} if m in sys.modules],"
            " file=sys.stderr)\n"
        )
        env = {**os.environ, "FUNES_HOME": str(home), "FUNES_SERVE": "use",
               "PYTHONPATH": str(REPO_ROOT)}
        env.pop("FUNES_DEBUG", None)
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             check=True, env=env, timeout=60)
    assert out.stdout == "the answer\n", out.stderr
    assert "EXIT 0" in out.stderr
    assert f"FUNES {THIN_PATH!r}" in out.stderr, out.stderr
    assert "OTHER []" in out.stderr, out.stderr
    assert asked and asked[0]["op"] == "run"
    args = asked[0]["args"]
    assert isinstance(args, dict) and args["request"] == {"query": "why did we drop it"}


def test_hooks_directory_and_layout_exist() -> None:
    for name in (
        "pyproject.toml",
        "funes",
        "hooks",
        "tests",
        "man",
        "SECURITY.md",
        "README.md",
        "docs",
        "bench",
        ".ci",
    ):
        assert (REPO_ROOT / name).exists(), name


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The funes modules `path` imports at run time (``TYPE_CHECKING`` blocks left out).

    ``from funes.x import y`` counts as importing ``funes.x.y`` when that is a module, so a
    package's ``__init__`` is not blamed for its submodules' imports.
    """
    tree = ast.parse(path.read_text("utf-8"))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            subs = [f"{name}.{a.name}" for a in node.names if f"{name}.{a.name}" in modules]
            names = subs or [name]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name not in ("funes", module):
                found.add(name)
    return found


def test_no_import_cycles() -> None:
    """Within a layer too: a cycle means two modules are one idea split in two (or the reverse)."""
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph = {m: _runtime_imports(p, set(paths)) for m, p in paths.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            visit(start, [start])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


#: Lines above which a module must say in its docstring why it stays one file.
MODULE_LINES = 600


def test_large_modules_say_why_they_are_one_file() -> None:
    big = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text("utf-8").count("\n")
        if lines <= MODULE_LINES:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text("utf-8"))) or ""
        if "One file because" not in doc:
            big.append(f"{_module_name(path)}: {lines} lines and no 'One file because' reason")
    assert not big, "\n".join(big)
def test_no_package_exports_a_name_that_is_also_its_submodule() -> None:
    """`from funes import api; api.sync` must be one thing whatever was imported before.

    Importing a submodule sets it as an attribute of its package, so an exported function of
    the same name is the function or the module depending on import order.
    """
    clashes = []
    for init in sorted(PACKAGE.rglob("__init__.py")):
        subs = {p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py"}
        subs |= {p.parent.name for p in init.parent.glob("*/__init__.py")}
        tree = ast.parse(init.read_text("utf-8"))
        exported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                exported |= {e.value for e in ast.walk(node.value)
                             if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        for name in sorted(exported & subs):
            clashes.append(f"{_module_name(init)}.{name} is both a submodule and an export")
    assert not clashes, "\n".join(clashes)


def test_hooks_first_step_is_light() -> None:
    """What an agent's or git's hook runs in the foreground imports no CLI, library or model."""
    probe = (
        "import sys\n"
        "import funes.agents.turnhook, funes.gitlink.hookrun\n"
        "import funes.agents.hook, funes.gitlink.hook\n"  # the old names, forwarding
        "print(sorted(m for m in sys.modules if m.startswith('funes')))\n"
        f"print([m for m in {(*HEAVY, 'click', 'dulwich')!r} if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    funes_modules, others = out.stdout.splitlines()
    assert others == "[]", out.stdout
    assert "funes.api" not in funes_modules and "funes.cli" not in funes_modules, funes_modules
