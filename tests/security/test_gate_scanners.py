"""The publish gate with an external scanner installed: a full `funes push` that uses its report.

The stand-ins below are executables named `gitleaks` and `trufflehog` put first on PATH, so
the gate finds them as it would find the real tools (funes.remotes.gate.default_scanners).
They parse their command line the way the real tools do and reject any flag the real tool
does not define (the flag tables were read from gitleaks b58d3f1, cmd/root.go and
cmd/detect.go, and trufflehog 3ab759f, main.go), so a test fails if the gate ever passes a flag
the real scanner would refuse. They flag any file holding a marker the built-in detectors do
not know, and report it in the real tool's format: gitleaks writes a JSON report file
(`File`, `RuleID`), trufflehog prints JSON lines (`SourceMetadata.Data.Filesystem.file`,
`DetectorName`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from funes import api
from funes.ingest.redact import scan
from funes.storage.repo import Repository
from tests.builders import make_batch, make_chunk

MARKER = "corp-internal-token-QZX81-7d2f"

#: Flags of the real tools: name → takes a value. Short forms included.
GITLEAKS_ROOT = {
    "--config": True, "-c": True, "--exit-code": True, "--report-path": True, "-r": True,
    "--report-format": True, "-f": True, "--report-template": True, "--baseline-path": True,
    "-b": True, "--log-level": True, "-l": True, "--verbose": False, "-v": False,
    "--no-color": False, "--max-target-megabytes": True, "--ignore-gitleaks-allow": False,
    "--redact": False, "--no-banner": False, "--enable-rule": True,
    "--gitleaks-ignore-path": True, "-i": True, "--max-decode-depth": True,
    "--max-archive-depth": True, "--timeout": True, "--diagnostics": True,
    "--diagnostics-dir": True,
}
GITLEAKS_COMMANDS = {
    "detect": {"--no-git": False, "--pipe": False, "--follow-symlinks": False,
               "--source": True, "-s": True, "--log-opts": True, "--platform": True},
    "dir": {"--follow-symlinks": False},
}
TRUFFLEHOG_ROOT = {
    "--json": False, "-j": False, "--json-legacy": False, "--github-actions": False,
    "--no-verification": False, "--no-color": False, "--allow-verification-overlap": False,
    "--filter-unverified": False, "--config": True, "--rules": True,
    "--print-avg-detector-time": False, "--no-update": False, "--fail": False,
    "--fail-on-scan-errors": False, "--results": True, "--concurrency": True,
    "--include-detectors": True, "--exclude-detectors": True, "--archive-max-depth": True,
    "--archive-timeout": True, "--no-verification-cache": False,
    "--force-skip-binaries": False, "--force-skip-archives": False, "--log-level": True,
}
TRUFFLEHOG_COMMANDS = {
    "filesystem": {"--directory": True, "--include-paths": True, "-i": True,
                   "--exclude-paths": True, "-x": True, "--max-symlink-depth": True, "-s": True},
}

STAND_IN = '''#!{python}
import json, os, sys
from pathlib import Path

TOOL, ROOT, COMMANDS, MARKER = {tool!r}, {root!r}, {commands!r}, {marker!r}
args = sys.argv[1:]
with open(os.environ["SCANNER_LOG"], "a") as log:
    log.write(json.dumps([TOOL, *args]) + "\\n")
command, flags, positional = None, {{}}, []
i = 0
while i < len(args):
    arg = args[i]
    if arg.startswith("-"):
        name, _, inline = arg.partition("=")
        table = {{**ROOT, **(COMMANDS.get(command) or {{}})}}
        if name not in table:
            print(f"Error: unknown flag: {{name}}", file=sys.stderr)
            sys.exit(1 if TOOL == "gitleaks" else 2)
        if table[name] and not inline:
            i += 1
            inline = args[i]
        flags[name] = inline or True
    elif command is None:
        if arg not in COMMANDS:
            print(f"Error: unknown command {{arg!r}}", file=sys.stderr)
            sys.exit(1 if TOOL == "gitleaks" else 2)
        command = arg
    else:
        positional.append(arg)
    i += 1
if TOOL == "gitleaks":
    sources = [flags.get("--source") or flags.get("-s") or (positional or ["."])[0]]
else:
    sources = positional + ([flags["--directory"]] if "--directory" in flags else [])
files = sorted(p for s in sources for p in Path(s).rglob("*") if p.is_file())
hits = [str(p) for p in files if MARKER in p.read_text("utf-8", "replace")]
if TOOL == "gitleaks":
    report = flags.get("--report-path") or flags.get("-r")
    if report:
        found = [{{"RuleID": "corp-token", "File": f, "StartLine": 1}} for f in hits]
        Path(report).write_text(json.dumps(found))
    sys.exit(int(flags.get("--exit-code", 1)) if hits else 0)
for f in hits:
    meta = {{"Data": {{"Filesystem": {{"file": f, "line": 1}}}}}}
    print(json.dumps({{"SourceMetadata": meta, "DetectorName": "CorpToken", "Verified": False}}))
sys.exit(183 if hits and "--fail" in flags else 0)
'''


def install_stand_in(bindir: Path, tool: str) -> Path:
    root, commands = ((GITLEAKS_ROOT, GITLEAKS_COMMANDS) if tool == "gitleaks"
                      else (TRUFFLEHOG_ROOT, TRUFFLEHOG_COMMANDS))
    exe = bindir / tool
    exe.write_text(STAND_IN.format(python=sys.executable, tool=tool, root=root,
                                   commands=commands, marker=MARKER))
    exe.chmod(0o755)
    return exe


@pytest.fixture(params=["gitleaks", "trufflehog"])
def scanner(request: pytest.FixtureRequest, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    install_stand_in(bindir, request.param)
    log = tmp_path / "scanner.log"
    monkeypatch.setenv("SCANNER_LOG", str(log))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    return request.param, log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_stand_ins_refuse_flags_the_real_tools_do_not_have(scanner: tuple[str, Path],
                                                           tmp_path: Path) -> None:
    """The check that gives the flag test below its teeth."""
    import subprocess

    tool, _ = scanner
    command = "detect" if tool == "gitleaks" else "filesystem"
    done = subprocess.run([tool, command, "--no-such-flag", str(tmp_path)], capture_output=True,
                          text=True, check=False)
    assert done.returncode != 0 and "unknown flag: --no-such-flag" in done.stderr


def test_a_push_holds_what_the_external_scanner_reports(
    scanner: tuple[str, Path], tmp_path: Path, settings: Any, run: Any
) -> None:
    tool, log = scanner
    assert not scan(f"deploy with {MARKER}"), "the built-in detectors must not see the marker"
    remote = tmp_path / "remote"
    repo = Repository.init(tmp_path / "a" / ".funes", settings)
    api.remote_add(repo, "origin", str(remote))
    leaky = make_chunk(50, session="leaky", text=f"deploy with {MARKER} as the password")
    repo.commit_chunks([*make_batch(0, 5), leaky], "index")

    out = run("--memory", str(repo.path), "push")
    assert out.exit_code == 1, out.stderr
    detector = "gitleaks:corp-token" if tool == "gitleaks" else "trufflehog:CorpToken"
    assert "held back 1 chunk(s)" in out.stdout and detector in out.stdout, out.stdout
    assert f"(chunk {leaky.id[:12]})" in out.stdout
    assert MARKER not in out.stdout + out.stderr

    # The scanner ran once, on one file per chunk, with the command line the real tool takes.
    calls = _calls(log)
    assert len(calls) == 1 and calls[0][0] == tool
    if tool == "trufflehog":  # never "verify" a candidate secret by sending it to its provider
        assert "--no-verification" in calls[0]
    sent = b"".join(p.read_bytes() for p in remote.rglob("*") if p.is_file())
    assert sent and MARKER.encode() not in sent
    clone = api.clone(settings, str(remote), str(tmp_path / "b"))
    copy = Repository.open(clone.path, settings)
    ids = set(copy.chunks.dataset().to_table(columns=["id"]).column("id").to_pylist())
    assert leaky.id not in ids and len(ids) == 5

    # A clean commit goes out whole, scanned by the same tool.
    repo.commit_chunks(make_batch(5, 2), "index: clean")
    out = run("--memory", str(repo.path), "push")
    assert out.exit_code == 0, out.stdout + out.stderr
    assert len(_calls(log)) == 2
