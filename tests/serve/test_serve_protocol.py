"""The request object and the wire: what the CLI asks travels whole, and only that."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from funes import protocol
from funes.api.search import RecallRequest


def test_a_recall_request_survives_the_wire() -> None:
    request = RecallRequest(
        "why did we drop it", k=3, harness=["claude", "codex"], block_type=("text",),
        project=["/src/app"], since="7d", turns=frozenset({("s1", "t1"), ("s2", "t9")}),
        now=datetime(2026, 11, 1, 12, 0, tzinfo=UTC), rerank=False, budget_ms=150.0)
    assert request.harness == ("claude", "codex")  # lists from callers become tuples
    back = RecallRequest.decode(protocol.loads(protocol.dumps(request.encode())))
    assert back == request


def test_an_unknown_field_is_refused_not_dropped() -> None:
    with pytest.raises(TypeError):
        RecallRequest.decode({"query": "x", "rerank_depth": 9})


def test_endpoints_are_per_home_and_private(tmp_path) -> None:  # type: ignore[no-untyped-def]
    a, b = protocol.endpoint(tmp_path / "a"), protocol.endpoint(tmp_path / "b")
    assert a.socket != b.socket and a.socket.parent == b.socket.parent
    assert protocol.endpoint(tmp_path / "a" / ".." / "a") == a  # resolved: one server per home
    assert (a.socket.parent.stat().st_mode & 0o777) == 0o700


def test_the_endpoint_hash_needs_no_openssl(tmp_path: Path) -> None:
    """Every relay and thin client computes it: without loading libcrypto (3.8 MB each)."""
    import hashlib
    import subprocess
    import sys

    home = tmp_path / "home"
    digest = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:20]
    assert protocol.endpoint(home).socket.name == f"{digest}.sock"
    probe = ("import sys, pathlib\nfrom funes import protocol\n"
             f"protocol.endpoint(pathlib.Path({str(home)!r}))\n"
             "print('_hashlib' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
