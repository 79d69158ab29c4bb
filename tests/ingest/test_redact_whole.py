"""Nothing redacted halfway: a long secret is replaced whole, through a real index run.

Detectors bound how far their patterns read (so redaction stays linear in the text); a secret
longer than that bound must still be replaced to its end. The check is strict: no 16-character
window of the secret may survive anywhere funes writes: the stored chunk rows (whose `text` is
also what the embedder reads, so the vectors' text), every file of the repository, captured
output and log records, and the files under FUNES_HOME.
"""

from __future__ import annotations

import json
import logging
import random
import string
from pathlib import Path

import pytest

from funes import api
from funes.ingest.redact import redact
from funes.storage.repo import Repository

WINDOW = 16
ALPHABET = string.ascii_letters + string.digits + "-_"

#: Where long credentials show up, each with the secret at {s}.
CONTEXTS = {
    "json refresh token": '{{"access_token": "short", "refresh_token": "{s}", "expires": 3600}}',
    "env export": "export API_TOKEN={s}\necho done",
    "bearer header": "curl -H 'Authorization: Bearer {s}' https://api.example.com/v1/me",
    "yaml client secret": "auth:\n  client_secret: {s}\n  tenant: acme",
    "flag": "vault login --token {s} -address=https://vault.example.com",
    "connection string": "Server=db;User Id=sa;Password={s};Encrypt=true",
}


def _secret(size: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(ALPHABET) for _ in range(size))


def _windows(text: str) -> set[str]:
    return {text[i : i + WINDOW] for i in range(len(text) - WINDOW + 1)}


@pytest.mark.parametrize("size", [1024, 4096, 16384])
@pytest.mark.parametrize("context", sorted(CONTEXTS))
def test_a_long_secret_is_replaced_whole(size: int, context: str) -> None:
    secret = _secret(size, size)
    text = CONTEXTS[context].format(s=secret)
    redacted, findings = redact(text)
    assert findings and not _windows(secret) & _windows(redacted), redacted[:200]
    # JSON-escaped, as inside a tool result's JSON string
    escaped = json.dumps(text)[1:-1]
    redacted, _ = redact(escaped)
    assert not _windows(secret) & _windows(redacted), redacted[:200]


@pytest.mark.parametrize("size", [1024, 4096, 16384])
def test_no_window_of_a_long_secret_survives_an_index_run(
    size: int, tmp_path: Path, settings, caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    secrets = {name: _secret(size, size * 31 + n) for n, name in enumerate(sorted(CONTEXTS))}
    body = "\n\n".join(CONTEXTS[name].format(s=secrets[name]) for name in sorted(CONTEXTS))
    records = [
        {"role": "user", "content": "Here is what the tool printed:\n" + body,
         "timestamp": "2026-01-01T00:00:00Z"},
        {"role": "assistant", "content": json.dumps({"output": body}),
         "timestamp": "2026-01-01T00:00:01Z"},
    ]
    session = tmp_path / "long-secrets.jsonl"
    session.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    repo = Repository.init(tmp_path / "p" / ".funes", settings)
    summary = api.index(settings, memory=str(repo.path), paths=[str(session)], agents=["import"])
    assert summary.added >= 2 and sum(summary.redactions.values()) >= 2 * len(CONTEXTS)

    rows = repo.chunks.dataset().to_table().to_pylist()
    stored = [json.dumps(rows, default=str), repr(summary), caplog.text,
              "".join(capsys.readouterr())]
    for root in (repo.path, Path(settings.home)):
        for path in root.rglob("*"):
            if path.is_file():
                stored.append(path.read_bytes().decode("utf-8", "replace"))
    seen: set[str] = set()
    for text in stored:
        seen |= _windows(text)
    for name, secret in secrets.items():
        assert not _windows(secret) & seen, f"{name}: part of a {size}-character secret survived"
    assert any("[REDACTED:" in row["text"] for row in rows)
