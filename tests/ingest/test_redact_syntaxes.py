"""Names that say secret, whatever the syntax; placeholders and references stay.

Values are random 16-24 character strings, drawn fresh for every template: the failure this
guards against is a value that happens to look like an identifier (`KxQmTrLpWvNz`) being
taken for code in YAML, INI or a properties file.
"""

from __future__ import annotations

import base64
import random
import string
import zlib

import pytest

from funes.ingest.redact import redact

TEMPLATES = {
    "yaml": "password: {v}",
    "yaml api key": "  api_key: {v}",
    "ini": "[db]\npassword = {v}\n",
    "properties": "spring.datasource.password={v}",
    "compose env": "    environment:\n      - POSTGRES_PASSWORD={v}",
    "compose map": "    environment:\n      POSTGRES_PASSWORD: {v}",
    "dotenv": "DB_PASSWORD={v}",
    "authorization token": "Authorization: Token {v}",
    "authorization basic": "Authorization: Basic {b64}",
    "curl -u": "curl -u deploy:{v} https://api.example.com",
    "curl --user": "curl --user 'deploy:{v}' https://api.example.com",
    "docker config.json": '{{"auths": {{"registry.example.com": {{"auth": "{b64}"}}}}}}',
    "json pass": '{{"user": "bob", "pass": "{v}"}}',
    "json pwd": '{{"pwd": "{v}"}}',
    "xml password": "<password>{v}</password>",
    "xml secret": "<secret>{v}</secret>",
    "powershell": "Connect-AzAccount -ClientSecret '{v}' -Tenant acme",
    "ado.net": "Server=db;Database=app;User Id=sa;Password={v};",
    "odbc": "Driver={{ODBC Driver 18}};Server=db;Uid=sa;Pwd={v};",
    "jdbc": "jdbc:sqlserver://db:1433;databaseName=app;user=sa;password={v}",
    "creds": 'creds = "{v}"',
    "k8s data": "apiVersion: v1\nkind: Secret\ntype: Opaque\ndata:\n  token: {b64}\n",
    "k8s stringData": "kind: Secret\nstringData:\n  config.yaml: {v}\n",
    "netrc": "machine api.example.com\n  login deploy\n  password {v}\n",
    "pgpass": "db.internal:5432:app:deploy:{v}",
}


def _values(seed: int, n: int = 20) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(16, 24))) for _ in range(n)]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_random_values_are_redacted_in_every_syntax(name: str) -> None:
    for value in _values(zlib.crc32(name.encode())):
        b64 = base64.b64encode(f"deploy:{value}".encode()).decode()
        text = TEMPLATES[name].format(v=value, b64=b64)
        redacted, _ = redact(text)
        assert value not in redacted and b64 not in redacted, redacted


#: Placeholders and references that must stay as written (SECURITY.md lists them).
KEPT = [
    "password: ${DB_PASSWORD}",
    "password: $DB_PASSWORD",
    "password: <password>",
    "password: '****'",
    "password: changeme",
    "password: !vault |",
    "password: env:DB_PASSWORD",
    "<password>${DB_PASS}</password>",
    "<password>changeme</password>",
    "curl -u $USER:$PASS https://api.example.com",
    "Authorization: Bearer $TOKEN",
    "Authorization: Token {{ token }}",
    "machine api.example.com login deploy password ${NETRC_PASSWORD}",
    "kind: Secret\ndata:\n  token: ${TOKEN_B64}\n",
    "password: PasswordType",
    "token: Optional[str]",
    "key: PrivateKeyTypes",
    "auth = make_auth()",
    "auth: true",
    "if pass: pass",
    "cd $(pwd)",
    "PWD=/home/me/project",
    "author: Xk9mP2qL7vR4",
]


@pytest.mark.parametrize("text", KEPT)
def test_placeholders_and_references_stay(text: str) -> None:
    assert redact(text) == (text, [])


def test_security_md_names_every_kind_and_every_unported_rule() -> None:
    from funes.ingest import gitleaks
    from funes.ingest.redact import KINDS
    from tests.conftest import REPO_ROOT

    doc = (REPO_ROOT / "SECURITY.md").read_text("utf-8")
    assert not [k for k in KINDS if f"`{k}`" not in doc]
    assert not [u["id"] for u in gitleaks.rules().unported if f"`{u['id']}`" not in doc]
    assert not [r.id for r in gitleaks.rules().rules if r.path and f"`{r.id}`" not in doc]
