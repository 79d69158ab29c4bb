"""End to end, a held-out mixed set of secrets does not leave a memory (issue #28).

The set (scripts/leak_set.py) is generated from providers' documented formats with a seed the
bench (bench/bench_leak.py, seed 28) and the development of the detectors did not use. The slow
test runs the bench's own path: a Claude Code session indexed through the CLI, pushed to a
directory remote and to the loopback Hub, every file that left scanned for each secret and any
16-character piece of it. The must-hold: at most 2% leave, and no named-provider secret.
"""

from __future__ import annotations

import binascii
import json
import sys
from pathlib import Path

import pytest

from funes.ingest import engines
from scripts.leak_set import B62, build, transcript_lines

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_leak  # noqa: E402

pytest.importorskip("betterleaks")

#: Not the bench's seed (28) nor one the detectors were developed on (1-5).
HELD_OUT = (2028, 4151)


def _b62(n: int) -> str:
    out = ""
    while n:
        n, d = divmod(n, 62)
        out = B62[d] + out
    return out.rjust(6, "0")


def test_the_set_is_deterministic_mixed_and_in_documented_formats() -> None:
    a, b = build(2028), build(2028)
    assert a == b and a != build(2029)
    assert 200 <= len(a) <= 400
    named = [s for s in a if s.named]
    assert 0.3 < len(named) / len(a) < 0.7
    assert len({s.context for s in a}) >= 25 and len({s.kind for s in a}) >= 60
    for s in a:
        if s.kind in ("github-pat", "github-oauth", "github-app", "npm"):
            body, check = s.value.split("_", 1)[1][:30], s.value[-6:]
            assert len(s.value.split("_", 1)[1]) == 36
            assert _b62(binascii.crc32(body.encode())) == check  # GitHub's documented CRC32
        assert s.value in s.text or json.dumps(s.value)[1:-1] in s.text
    lines = [json.loads(line) for line in transcript_lines(a)]
    assert all(r["type"] in ("user", "assistant") for r in lines)


def test_the_scan_finds_each_secret_and_its_pieces() -> None:
    secrets = build(4151)
    session = "\n".join(transcript_lines(secrets)).encode()
    assert bench_leak.found_in([session], secrets) == {s.id for s in secrets}
    s = max(secrets, key=lambda x: len(x.value))
    piece = s.value[5:21].encode()
    assert bench_leak.found_in([b"xx" + piece + b"yy"], secrets) >= {s.id}
    assert bench_leak.found_in([s.value[5:20].encode()], [s]) == set()  # 15 is not a piece


@pytest.mark.parametrize("seed", [HELD_OUT[0], pytest.param(HELD_OUT[1], marks=pytest.mark.slow)])
def test_redaction_keeps_the_held_out_set_in(seed: int) -> None:
    """What ingest stores of each secret's context (every engine, in order): nothing of it."""
    secrets = build(seed)
    texts = [json.dumps({"command": s.text}) if s.place == "tool_use" else s.text
             for s in secrets]
    out = [text for text, _ in engines.redact_texts(texts)]
    leaked = [s for s, text in zip(secrets, out, strict=True)
              if bench_leak.found_in([text.encode()], [s])]
    assert not [s for s in leaked if s.named], [(s.kind, s.context) for s in leaked if s.named]
    assert len(leaked) <= 0.02 * len(secrets), [(s.kind, s.context) for s in leaked]


@pytest.mark.slow
def test_end_to_end_at_most_two_percent_leave_and_no_named_provider_secret(
        tmp_path: Path) -> None:
    outcome = bench_leak.run(HELD_OUT[0], tmp_path)
    assert outcome.canaries_missing == {"dir": 0, "hub": 0}  # the scan reads what was stored
    assert all(n > 0 for n in outcome.files.values())
    for code, out in outcome.pushes.values():
        assert code == 0, out  # nothing held back: ingest already redacted what the gate sees
    leaked = outcome.left["dir"] | outcome.left["hub"]
    named = [s for s in outcome.secrets if s.named and s.id in leaked]
    assert not named, [(s.kind, s.context) for s in named]
    assert len(leaked) <= 0.02 * len(outcome.secrets)
