"""End to end: how many of a held-out mixed set of secrets leave a memory on a push.

Run: python bench/bench_leak.py [--seed 28] [--json] [--out bench/results/leak.md]

The set (scripts/leak_set.py: ~300 secrets generated from their issuers' documented formats,
in prose, configuration, shell commands and tool output, with and without a name beside them)
is written into a Claude Code transcript, indexed through the real CLI (`funes init`, `funes
index --agent claude`), and pushed with `funes push` to a directory remote and to the loopback
Hub (tests/support/hubserver.py, driven by the real huggingface_hub client). Then every file
that left (each file under the remote directory; each file in the Hub server's storage) is read
as raw bytes (a Lance data file also decoded, row by row: its pages are compressed), and a
secret *leaks* when it, or any 16-character piece of it, is in them.

The raw scan is only meaningful if text is stored readable: a sentence written beside each
secret (its canary) must be found in the files that left, or the bench fails.

Figures: leak rate overall, by kind, by context; the named-provider secrets that leaked (the
must-hold is none, and at most 2% overall); the chunks the gate held back. CPU seconds and the
machine's load are printed beside the wall time.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

from scripts.leak_set import Secret, build, write  # noqa: E402
from tests.remotes.conftest import REPO_ID, CardHub  # noqa: E402
from tests.support.hubserver import client_env  # noqa: E402

#: A piece of a secret this long found outside is a leak (half a key is still a key).
WINDOW = 16


@dataclass
class Outcome:
    secrets: list[Secret]
    left: dict[str, set[int]]  # remote → ids of the secrets found in its files
    stored: set[int]  # ids found in the memory's own stored text
    pushes: dict[str, tuple[int, str]]  # remote → (exit code, output)
    files: dict[str, int]  # remote → files scanned
    nbytes: dict[str, int]
    canaries_missing: dict[str, int] = field(default_factory=dict)
    cpu: float = 0.0
    wall: float = 0.0


def _pieces(value: str) -> set[bytes]:
    """The secret and every 16-character piece of it, as bytes (and JSON-escaped)."""
    forms = {value, json.dumps(value)[1:-1]}
    out: set[bytes] = set()
    for form in forms:
        raw = form.encode()
        if len(raw) <= WINDOW:
            out.add(raw)
        else:
            out.update(raw[i : i + WINDOW] for i in range(len(raw) - WINDOW + 1))
    return out


def found_in(blobs: Iterable[bytes], secrets: list[Secret]) -> set[int]:
    """Ids of the secrets that are in `blobs`, whole or by a 16-character piece."""
    short: dict[bytes, set[int]] = collections.defaultdict(set)
    grams: dict[bytes, set[int]] = collections.defaultdict(set)
    for s in secrets:
        for piece in _pieces(s.value):
            (grams if len(piece) == WINDOW else short)[piece].add(s.id)
    hit: set[int] = set()
    for blob in blobs:
        for piece, ids in short.items():
            if not ids <= hit and piece in blob:
                hit |= ids
        mv = blob
        for i in range(len(mv) - WINDOW + 1):
            ids = grams.get(mv[i : i + WINDOW])
            if ids:
                hit |= ids
    return hit


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def readable(path: Path) -> bytes:
    """A file's bytes, and, for a Lance data file, every value it holds, decoded.

    Lance compresses its pages (file format 2.2), so raw bytes alone would not show a secret
    that is stored compressed; each row of the file (deleted or not: the bytes left) is
    written out as JSON after them.
    """
    raw = path.read_bytes()
    if not raw.endswith(b"LANC"):
        return raw
    import lance.file

    try:
        table = lance.file.LanceFileReader(str(path)).read_all().to_table()
    except OSError:  # a dataset manifest (also ends in LANC): no rows of text
        return raw
    rows = table.to_pylist()
    return raw + b"\n" + "\n".join(
        json.dumps(r, ensure_ascii=False, default=str) for r in rows).encode()


def _cli(*args: str) -> tuple[int, str]:
    from funes.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code, out.getvalue() + err.getvalue()


def run(seed: int, base: Path) -> Outcome:
    secrets = build(seed)
    t0, c0 = time.perf_counter(), time.process_time()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(base / "home"))
        mp.setenv("FUNES_HOME", str(base / "home" / ".funes"))
        mp.setenv("FUNES_AUTHOR_NAME", "Bench")
        mp.setenv("FUNES_AUTHOR_EMAIL", "bench@example.org")
        mp.setenv("FUNES_SERVE", "off")
        project = base / "project"
        project.mkdir()
        mp.chdir(project)
        session = base / "leak-session.jsonl"
        write(secrets, session)
        with CardHub(base / "hub") as hub:
            client_env(mp, base / "hf-home", hub)
            mp.setenv("HF_TOKEN", hub.write_token)
            for argv in (("init",), ("index", "--agent", "claude", str(session)),
                         ("remote", "add", "dir", str(base / "remote")),
                         ("remote", "add", "hub", f"hf://datasets/{REPO_ID}")):
                code, out = _cli(*argv)
                if code != 0:
                    raise SystemExit(f"funes {' '.join(argv)} failed ({code}): {out}")
            pushes = {name: _cli("push", name) for name in ("dir", "hub")}
            roots = {"dir": base / "remote", "hub": Path(hub.storage_dir)}
            left: dict[str, set[int]] = {}
            files: dict[str, int] = {}
            nbytes: dict[str, int] = {}
            missing: dict[str, int] = {}
            for name, root in roots.items():
                paths = _files(root)
                blobs = [readable(p) for p in paths]
                left[name] = found_in(blobs, secrets)
                files[name], nbytes[name] = len(paths), sum(p.stat().st_size for p in paths)
                joined = b"\n".join(blobs)
                missing[name] = sum(
                    f"Canary sentence number {s.id} about".encode() not in joined for s in secrets)
            from funes._env import settings
            from funes.storage.repo import Repository

            repo = Repository.open(project / ".funes", settings())
            rows = repo.chunks.dataset().to_table(columns=["text"]).to_pylist()
            stored = found_in(["\n".join(r["text"] for r in rows).encode()], secrets)
    return Outcome(secrets, left, stored, pushes, files, nbytes, missing,
                   time.process_time() - c0, time.perf_counter() - t0)


def _rate(ids: set[int], group: list[Secret]) -> str:
    n = sum(s.id in ids for s in group)
    return f"{n}/{len(group)} ({100 * n / max(1, len(group)):.1f}%)"


def report(o: Outcome, seed: int) -> tuple[str, dict[str, Any]]:
    leaked = o.left["dir"] | o.left["hub"]
    named = [s for s in o.secrets if s.named]
    named_leaks = [s for s in named if s.id in leaked]
    lines = [
        "# End-to-end leak bench (bench/bench_leak.py)",
        "",
        f"Set: scripts/leak_set.py seed {seed}: {len(o.secrets)} secrets, {len(named)} "
        "named-provider. Indexed with `funes index --agent claude`, pushed with `funes push` to "
        "a directory remote and to the loopback Hub; every file that left read as raw bytes.",
        "",
        f"- **left (either remote): {_rate(leaked, o.secrets)}**; directory "
        f"{_rate(o.left['dir'], o.secrets)}, Hub {_rate(o.left['hub'], o.secrets)}",
        f"- **named-provider secrets that left: {len(named_leaks)}** of {len(named)}",
        f"- still in the memory's own stored text: {_rate(o.stored, o.secrets)}",
        f"- files scanned: directory {o.files['dir']} ({o.nbytes['dir']:,} bytes), Hub "
        f"{o.files['hub']} ({o.nbytes['hub']:,} bytes); canaries missing: {o.canaries_missing}",
    ]
    for name, (code, out) in o.pushes.items():
        held = next((ln.strip() for ln in out.splitlines() if "held back" in ln), "none held back")
        lines.append(f"- `funes push {name}`: exit {code}; {held}")
    lines += ["", "| kind | left |", "|---|---|"]
    by_kind: dict[str, list[Secret]] = collections.defaultdict(list)
    by_ctx: dict[str, list[Secret]] = collections.defaultdict(list)
    for s in o.secrets:
        by_kind[s.kind].append(s)
        by_ctx[s.context].append(s)
    for kind, group in sorted(by_kind.items()):
        if any(s.id in leaked for s in group) or len(group) > 4:
            lines.append(f"| {kind} | {_rate(leaked, group)} |")
    lines.append(f"| (other {sum(1 for g in by_kind.values() if len(g) <= 4)} kinds) | "
                 f"{_rate(leaked, [s for g in by_kind.values() if len(g) <= 4 for s in g])} |")
    lines += ["", "| context | left |", "|---|---|"]
    for ctx, group in sorted(by_ctx.items()):
        lines.append(f"| {ctx} | {_rate(leaked, group)} |")
    if leaked:
        lines += ["", "Leaks (kind, context, named):", ""]
        lines += [f"- {s.kind} in {s.context}{' (named-provider)' if s.named else ''}"
                  for s in o.secrets if s.id in leaked]
    load = os.getloadavg()
    lines += ["", f"Time: {o.wall:.1f} s wall, {o.cpu:.1f} s CPU; load {load[0]:.2f} "
              f"{load[1]:.2f} {load[2]:.2f}; {platform.python_version()} on "
              f"{platform.machine()}."]
    summary = {
        "secrets": len(o.secrets), "named": len(named), "left": len(leaked),
        "left_dir": len(o.left["dir"]), "left_hub": len(o.left["hub"]),
        "named_left": len(named_leaks), "stored": len(o.stored),
        "canaries_missing": o.canaries_missing,
        "leaks": [{"id": s.id, "kind": s.kind, "context": s.context, "named": s.named}
                  for s in o.secrets if s.id in leaked],
    }
    return "\n".join(lines) + "\n", summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--out", type=Path, help="also write the report here (markdown)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        outcome = run(args.seed, Path(tmp))
    text, summary = report(outcome, args.seed)
    if any(outcome.canaries_missing.values()):
        raise SystemExit(f"the raw scan cannot see stored text: {outcome.canaries_missing}")
    print(json.dumps(summary, indent=1) if args.json else text)
    if args.out:
        args.out.write_text(text, "utf-8")


if __name__ == "__main__":
    main()
