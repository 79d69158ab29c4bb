"""One verdict from ingest to push (issue #28): the same engines in the same order everywhere.

What ingest or scrub redacted is clean for the publish gate's engines; anything they would hold
back, scrub redacts; and funes's own marker is never a finding for any engine, whatever the
kind it names and whatever context it sits in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from funes.ingest import engines, gitleaks, markers
from funes.ingest.redact import KINDS, redact, scan
from funes.remotes import gate

pytest.importorskip("betterleaks")

CORPUS = Path(__file__).parents[1] / "ingest" / "data" / "gitleaks_corpus.json"

#: Rules of the second engine seen on transcripts (their ids become marker kinds too).
SECOND_ENGINE_KINDS = (
    "generic-credential-uri", "generic-password", "generic-api-key", "generic-secret",
    "dockerhub-personal-access-token", "jwt", "private-key", "basic-auth", "bearer-token",
    "curl-auth-user", "curl-auth-header", "aws-access-token", "github-pat", "slack-bot-token",
)

#: Every context a rule reads a value in: URLs, `key=`, JSON, YAML, headers, flags, XML, INI,
#: connection strings, netrc, pgpass, Kubernetes Secrets. `{m}` is the marker.
CONTEXTS = (
    "DATABASE_URL=postgres://admin:{m}@db.internal:5432/app",
    "git clone https://oauth2:{m}@gitlab.com/team/repo.git",
    "redis://:{m}@cache:6379/0",
    "password={m}",
    "PASSWORD={m}",
    "export API_KEY={m}",
    "export TOKEN={m}",
    "secret_key = '{m}'",
    'client_secret: "{m}"',
    '{{"password": "{m}", "user": "admin"}}',
    '{{"api_key":"{m}"}}',
    "password: {m}",
    "  api_token: {m}",
    "aws_secret_access_key = {m}",
    "Authorization: Bearer {m}",
    "Authorization: Basic {m}",
    "Authorization: token {m}",
    "X-Api-Key: {m}",
    "curl -u admin:{m} https://api.example.com",
    'curl -H "Authorization: Bearer {m}" https://api.example.com',
    "mysql -u root --password={m} app",
    "tool --token {m} --verbose",
    "<password>{m}</password>",
    "Server=db;Database=app;User Id=sa;Password={m};",
    "machine api.example.com login me password {m}",
    "db.internal:5432:app:admin:{m}",
    "apiVersion: v1\nkind: Secret\ndata:\n  token: {m}\n",
    "ghp_token={m} and {m}",
    "key: {m}",
    # The marker standing for a whole `user:password`, userinfo or header value: its own `:`
    # must not read as a separator (`curl -u [REDACTED:curl-user]` was `user:password`).
    "curl -u {m} https://api.example.com",
    "curl -s --user {m} -X POST https://registry.example.com/v2/token",
    "curl -u '{m}' https://api.example.com/v1/export",
    'curl -H "Authorization: {m}" https://api.example.com',
    "https://{m}@git.example.com/team/app.git",
    "https://user:{m}@{m}/path",
    "{m}:{m}",
    "admin:{m}",
    "GET https://api.example.com/v1/search?q=shoes&api_key={m}&page=2",
    '{{"headers": {{"Authorization": "{m}"}}}}',
    "env:\n  - name: API_TOKEN\n    value: \"{m}\"\n",
    "mysql -h db -u root -p{m} app",
    "sshpass -p '{m}' ssh ops@host",
    "The admin password is {m} until we move it.",
    "I set API_KEY to {m} in the CI settings.",
    "`{m}`",
    # the name-and-value forms: glued names, key/value entries, calls, subscripts, lists,
    # plain YAML and INI values
    "bloggerKEY-{m}",
    "mailboxlayer ACCESS {m}",
    "define( 'DB_PASSWORD', '{m}' );",
    "$config['db_password'] = '{m}';",
    '{{"key": "db_password", "value": "{m}"}}',
    "<entry><key>pro_password</key><value>{m}</value></entry>",
    "secrets:\n  - key: business.password\n    value: {m}\n",
    'aws ssm put-parameter --name /prod/db/password --value "{m}"',
    '"passwords": [\n  "{m}",\n  "{m}"\n],',
    "api_keys:\n  - {m}\n  - {m}\n",
    "spring:\n  datasource:\n    username: app\n    password: {m}\n",
    "[client]\nuser = root\npassword = {m}\n",
    'user, password = "admin", "{m}"',
    '{{"key": "PASS", "value": "{m}"}}',
    "{m}",
)


def _markers() -> list[str]:
    kinds = set(KINDS) | {r.id for r in gitleaks.rules().rules} | set(SECOND_ENGINE_KINDS)
    return [f"[REDACTED:{k}]" for k in sorted(kinds)]


def test_no_engine_finds_a_marker_in_any_context() -> None:
    texts = {f"{i:064x}": ctx.format(m=m)
             for i, (ctx, m) in enumerate((c, m) for c in CONTEXTS for m in _markers())}
    assert len(texts) > 5000
    flagged = gate.scan_texts(texts, [gate.builtin_scanner, gate.betterleaks_scanner()])
    assert not flagged, [(texts[c], k) for c, k in list(flagged.items())[:10]]
    assert all(redact(t) == (t, []) for t in texts.values())  # nothing to redact either


#: Secrets of several shapes, put into every context above in place of the marker.
RAW_SECRETS = (
    "Xq7vT2mPz9LkW4rB", "S3cr3t!Passw0rd#42", "ghp_" + "Zq8vN3kL5pR7tY2wX9cB4mD6fH1jG0sA2eUi",
    "c81098eff171a9081cd172c3044c614d", "AKIA" + "QX7M2PL9WZ4K8RTB",
)


def test_redacting_any_secret_in_any_context_never_nests_markers() -> None:
    """Every pass of every engine over the result of the one before: one marker per secret."""
    texts = [ctx.format(m=secret) for ctx in CONTEXTS for secret in RAW_SECRETS]
    redacted = engines.redact_texts(texts)
    nested = [(t, out) for t, (out, _) in zip(texts, redacted, strict=True)
              if "[REDACTED:[" in out or "]]" in out.replace("}]", "") or "REDACTED:" in
              out.replace("[REDACTED:", "")]
    assert not nested, nested[:5]
    again = engines.redact_texts([out for out, _ in redacted])
    assert [out for out, _ in again] == [out for out, _ in redacted]  # stable: nothing to find
    assert all(found == [] for _, found in again)


def test_a_marker_cut_by_a_rule_is_still_a_marker() -> None:
    text = "postgres://admin:[REDACTED:url-password]@db.internal:5432/app"
    start = text.index("[")
    for a, b in [(start, start + 23), (start + 1, start + 22), (start, start + 10)]:
        assert engines.only_markers(text, a, b)
    assert not engines.only_markers("x [REDACTED:password]abc123 y", 2, 27)  # a residue
    assert engines.value_only_markers("[REDACTED:generic-password]")
    # a residue beside a marker is replaced with the marker whole, never split
    cut = "curl -u [REDACTED:curl-user]abc123def https://x"
    s = cut.index("curl-user")
    assert markers.widen(cut, s, s + 19) == (cut.index("["), s + 19)
    assert not engines.value_only_markers("hunter2hunter2")


def _corpus_texts(every: int = 1) -> list[str]:
    data = json.loads(CORPUS.read_text("utf-8"))
    return [t for r in data["rules"].values() for t in (*r["tp"], *r.get("fp", []))][::every]


@pytest.mark.parametrize("every", [pytest.param(1, marks=pytest.mark.slow), 17])
def test_what_ingest_redacted_is_clean_for_the_gate(every: int) -> None:
    """gitleaks' samples (true and false positives), redacted as ingest and scrub do."""
    texts = _corpus_texts(every)
    assert len(texts) > 5000 // every
    redacted = engines.redact_texts(texts)
    outgoing = {f"{i:064x}": out for i, (out, _) in enumerate(redacted)}
    flagged = gate.scan_texts(outgoing, [gate.builtin_scanner, gate.betterleaks_scanner()])
    assert not flagged, [(outgoing[c], k) for c, k in list(flagged.items())[:5]]


@pytest.mark.slow
def test_what_the_second_engine_finds_is_redacted_whole() -> None:
    """Span-exact: each value Betterleaks finds in a raw sample is gone after redaction."""
    texts = _corpus_texts()
    found = engines.betterleaks_findings(texts)
    redacted = engines.redact_texts(texts)
    checked = 0
    for text, spans, (out, _) in zip(texts, found, redacted, strict=True):
        for f in spans:
            value = text[f.start : f.end]
            if len(value) >= 8 and text.count(value) == 1:
                assert value not in out, (f.kind, value)
                checked += 1
    assert checked > 1000


def test_the_database_url_session_needs_no_second_pass() -> None:
    text = "DATABASE_URL=postgres://admin:Xq7vT2mPz9LkW4rB@db.internal:5432/app"
    [(out, found)] = engines.redact_texts([text])
    assert out == "DATABASE_URL=postgres://admin:[REDACTED:url-password]@db.internal:5432/app"
    assert [f.kind for f in found] == ["url-password"]
    assert scan(out) == [] and engines.betterleaks_findings([out]) == [[]]
    assert engines.redact_texts([out]) == [(out, [])]


@pytest.mark.parametrize("text", [
    '{"NextToken": "Hfr5XzKZtMC9vwlIBz_wSFCax9xQHh0GPWxw0VNv"}',
    "ClientToken=Hfr5XzKZtMC9vwlIBz_wSFCax9xQHh0GPWxw0VNv",
    'cache_key = "Hfr5XzKZtMC9vwlIBz_wSFCax9xQHh0GPWxw0VNv"',
    "PageToken: Hfr5XzKZtMC9vwlIBz_wSFCax9xQHh0GPWxw0VNv",
    'idempotency_key = "Hfr5XzKZtMC9vwlIBz_wSFCax9xQHh0GPWxw0VNv"',
])
def test_both_engines_leave_what_the_vetoes_say_is_not_a_secret(text: str) -> None:
    """Betterleaks flags these (a generic key rule); the first engine's vetoes say they are
    paging, idempotency and cache keys. One verdict: ingest keeps them and the gate agrees."""
    assert engines.redact_texts([text]) == [(text, [])]
    flagged = gate.scan_texts({"0" * 64: text}, [gate.builtin_scanner,
                                                 gate.betterleaks_scanner()])
    assert not flagged, flagged


@pytest.mark.parametrize("text", [
    "        self.username = username\n        self.password = password\n",
    "def connect(host: str, password: Optional[str] = None) -> None: ...",
    "print(f\"password={password}\")",
    '"initial": {"key_sha256": "bb1636883c2707b51c5b7fc26c6927af4430f2e0785a8c7bc86a2cd7bb0e4b76"}',
    "e.g. postgres://user:pass@localhost:5432/app",
])
def test_the_second_engines_generic_rules_leave_code_and_placeholders(text: str) -> None:
    """Betterleaks' generic rules read these as passwords and keys; funes judges a generic
    rule's value the same way in both engines, so code and doc placeholders stay."""
    assert engines.redact_texts([text]) == [(text, [])]


@pytest.mark.parametrize("text, secret", [
    ("[DEBUG] Using Key=eccb41cc2d4dab96b748ed040e9b308161279820447ef4553ba6e6d20ecb9962",
     "eccb41cc2d4dab96b748ed040e9b308161279820447ef4553ba6e6d20ecb9962"),
    ("blocknative_key=9f5c17d2-957e-4dda-ae24-811274ed88e5",
     "9f5c17d2-957e-4dda-ae24-811274ed88e5"),
])
def test_a_hex_or_uuid_key_after_a_keys_name_is_still_redacted(text: str, secret: str) -> None:
    [(out, found)] = engines.redact_texts([text])
    assert found and secret not in out, out


def test_the_second_engines_value_is_placed_after_its_key() -> None:
    """A name holding its value's text (`api_key_X = "X"`): the value is the one after `=`."""
    text = 'api_key_Xq7vT2mPz9LkW4rB = "Xq7vT2mPz9LkW4rB"'
    [found] = engines.betterleaks_findings([text])
    assert [text[f.start : f.end] for f in found] == ["Xq7vT2mPz9LkW4rB"]
    assert all(f.start > text.index("=") for f in found)
