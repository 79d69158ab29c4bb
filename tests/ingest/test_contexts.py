"""Secrets named by the syntax around them (funes.ingest.contexts), and what is left alone."""

from __future__ import annotations

import base64
import re

import pytest

from funes.ingest.contexts import credential_value, name_class
from funes.ingest.redact import redact

PW = "Xq7vT2mPz9Lk!"
KEY = "c81098eff171a9081cd172c3044c614d"  # 32 hex: a Datadog/Algolia-style key
RANDOM = "Hfr5XzKZtMC9vwlIBz_wSFCax9xQHh0GPWxw0VNv"
WEAK = "wintermoon7"  # typed by a person: no detector takes it for random


@pytest.mark.parametrize("text, secret", [
    (f"The admin password is {PW} until we move it to the vault.", PW),
    (f"ok I changed my password to {PW}, can you update the config?", PW),
    (f"I set DATADOG_API_KEY to {KEY} in the CI settings.", KEY),
    (f'export SECRET_KEY_BASE="{KEY * 4}" && ./deploy.sh', KEY * 4),
    ("DJANGO_SECRET_KEY=+(kz2*q_lt!43qe12llfmlj2n)#v3c1-ysn-54u_rmoz1ww#&v",
     "+(kz2*q_lt!43qe12llfmlj2n)#v3c1-ysn-54u_rmoz1ww#&v"),
    (f'env:\n  - name: CLIENT_SECRET\n    value: "{RANDOM}"\n', RANDOM),
    (f'[{{"name": "OKTA_API_TOKEN", "value": "{RANDOM}"}}]', RANDOM),
    (f'<appSettings>\n  <add key="SmtpPassword" value="{PW}" />\n</appSettings>', PW),
    (f"<add key='StripeSecretKey' value='{RANDOM}'/>", RANDOM),
    (f"SECRET_KEY = os.environ.get('DJANGO_SECRET_KEY', '{RANDOM}')", RANDOM),
    (f'token = os.getenv("GITHUB_TOKEN", default="{RANDOM}")', RANDOM),
    (f'api_key = ENV.fetch("STRIPE_API_KEY", "{RANDOM}")', RANDOM),
    (f'ado_pat = "{RANDOM}"', RANDOM),
    (f'VAULT_CLIENT_TOKEN="{RANDOM}"', RANDOM),  # AWS's ClientToken alone is an idempotency key
    (f'variable "okta_api_token" {{\n  type    = string\n  default = "{RANDOM}"\n}}', RANDOM),
    ('sender.Credentials = new NetworkCredential("ops@example.com", "vzihlaquknriqlht");',
     "vzihlaquknriqlht"),
    ('r = requests.get(url, auth=("admin", "hunter-two-7"))', "hunter-two-7"),
    ('new DirectoryEntry("LDAP://dc01",\n    "CORP\\\\svc", "Rrhh1234");', "Rrhh1234"),
    ("REACT_APP_AUTH_PASS=whiteduke\n", "whiteduke"),  # an env file's literal, not code
    ("  REACT_APP_AUTH_PASSWORD=whiteduke    # the staging login\n", "whiteduke"),  # indented
    ("# REACT_APP_PASS=whiteduke\n", "whiteduke"),  # commented out, still the value
    ("The router's default password is 'blooberry' until you change it.", "blooberry"),
    (f"mysql -h db.internal -u root -p'{PW}' app < dump.sql", PW),
    (f"mysqldump -uroot -p{PW} app", PW),
    (f"sshpass -p '{PW}' ssh ops@10.0.3.17 uptime", PW),
    (f"kubectl create secret generic db --from-literal=password={PW}", PW),
    (f"Use access key AKIA7JNH6ZNHTJJSMVUY with secret {RANDOM} for the bucket.", RANDOM),
    ('curl -H "Authorization: Bearer AAAAAAAAAAAAAAAAAAAAAAgorxo2Kl9Cwx1ScSQlyI%2FwwQ02J7KA'
     'tGqDfdgJrVt6Z%3DnBJLY3mprfAzRG2ssMF9800fAoSmEhGw2KW3Ifcf" https://api.x.com/2/tweets',
     "%3DnBJLY3mprfAzRG2ssMF9800fAoSmEhGw2KW3Ifcf"),
    ("FIREBASE_SERVER_KEY=AAAAczORoys:APA91b_bVeIDihXVW0-3iACRAa-Ufl73-5BMv95ZKpgaNkb18FDDJWNy5y"
     "xZgaf_kwOxkwwC1dqdcsnnqXNSILdexgnCCqZgW8a_q7Tco8sIfJFmui-3m9XGU5Og3K-CfyOkGYIRqyPK",
     "APA91b_bVeIDihXVW0-3iACRAa"),
    ("The new key is dapie9351d5fc93737a2cd84619f3f81742d, and the old one is revoked.",
     "dapie9351d5fc93737a2cd84619f3f81742d"),
    # a name and its value in two fields: key-value entries, XML elements, a store's CLI
    (f'[{{"Name": "STRIPE_SECRET", "Value": "{KEY}"}}]', KEY),
    (f'{{"key": "db_password", "value": "{WEAK}", "info": "metadata"}}', WEAK),
    (f"secrets:\n  - key: business.password\n    value: {WEAK}\n", WEAK),
    (f"<entry>\n  <key>pro_password</key>\n  <value>{WEAK}</value>\n</entry>", WEAK),
    (f'aws ssm put-parameter --name /prod/db/password --value "{WEAK}" --type SecureString', WEAK),
    # a quoted name, then its quoted value: a subscript assigned, a call's next argument
    (f"define( 'DB_PASSWORD', '{WEAK}' );", WEAK),
    (f"define('AUTH_KEY', '{KEY}');", KEY),
    (f"$config['db_password'] = '{WEAK}';", WEAK),
    (f'os.environ["DB_PASSWORD"] = "{WEAK}"', WEAK),
    (f'System.setProperty("db.password", "{WEAK}");', WEAK),
    # a plain value ending a line of YAML is the value, not a variable
    ("credentials:\n  login: admin\n  password: hardcodEd\n", "hardcodEd"),
    ("apikey: YXNkZmZmZmZm_HARDcoded\nother: 1\n", "YXNkZmZmZmZm_HARDcoded"),
    ("spring:\n  datasource:\n    username: app\n    password: wintermoon\n", "wintermoon"),
    # a value alone on its line after a line naming it and ending in `:` (Jenkins' banner)
    ("Please use the following password to proceed to installation:\n\n"
     "bd9627decc6346d780b3b6ab6ea8fe1f\n\nThis may also be found at: /var/jenkins_home",
     "bd9627decc6346d780b3b6ab6ea8fe1f"),
    (f"Your new access key:\n  {RANDOM}\n", RANDOM),
    # names assigned quoted values together: each value goes with the name at its place
    (f'user, password = "admin", "{WEAK}"', WEAK),
    ('    user, password = "wile", "coyote"', "coyote"),
    (f'\tconst static_password01, api_token string = "{WEAK}", "{RANDOM}"', WEAK),
    (f'\tuser, static_password05 := "bob", "{WEAK}"', WEAK),
    # a numbered credential's name, and `PASS` as a pair's name field
    (f'define("static_password02", "{WEAK}", true);', WEAK),
    (f'{{"key": "PASS", "value": "{WEAK}"}}', WEAK),
    # a plain value ending a line of an INI file, under its section's header
    ("[client]\nuser = root\npassword = wintermoon\n", "wintermoon"),
    ("[SETTINGS]\n# the login\nSSHuser = root\n\nSSHpassword = hardcoded", "hardcoded"),
    # the items of a list under a credential's plural name
    (f'"passwords": [\n  "{WEAK}",\n  "Hardcoded1"\n],', WEAK),
    (f"api_keys:\n  - {KEY}\n  - other\n", KEY),
])
def test_a_named_secret_is_redacted_whole(text: str, secret: str) -> None:
    out, found = redact(text)
    assert found and secret not in out, out
    assert "[REDACTED:" in out and "[REDACTED:[" not in out


@pytest.mark.parametrize("text", [
    '<add key="CacheKey" value="users-by-email" />',
    'x = os.getenv("API_TOKEN", "")',
    'the password is "required" for every account',
    "the password is 'changeme' in the sample config",
    'Your password is "too short"',
    'variable "region" {\n  default = "us-east-1"\n}',
    'variable "db_password" {\n  default = var.fallback\n}',
    "requests.get(url, auth=(user, password))",
    'aiohttp.BasicAuth("user", "pass2")',
    "const o = {password: tString}",
    'db = os.environ.get("DB_PASSWORD", "changeme")',
    'base = os.environ.get("TOKEN_URL", "https://auth.example.com/oauth/token")',
    'pat = re.compile(r"[A-Za-z0-9_]{20,40}Zq9")',
    'pat = "^(?P<name>[A-Za-z_][A-Za-z0-9_]{0,80})$"',
    '<add key="SmtpPassword" value="{vault:smtp}" />',
    "the password is required",
    "Your password is too short: use 8 characters or more.",
    "password reset link sent to the user",
    "token_type: bearer",
    "TOKEN_URL=https://oauth2.googleapis.com/token",
    f'"private_key_id": "{KEY}a1b2c3d4",',
    f"cache_key = '{KEY}'",
    f"password_hash = '{KEY}'",
    f"sha256 checksum of the key is {KEY * 2}",
    "SECRET_KEY = os.environ['SECRET_KEY']",
    "password=getpass.getpass()",
    "api_key=${API_KEY}",
    "export GITHUB_TOKEN=$(gh auth token)",
    "token: str = field(default='')",
    "password = self.password",
    'env:\n  - name: LOG_LEVEL\n    value: "debug-verbose-2026"\n',
    'env:\n  - name: API_TOKEN\n    valueFrom:\n      secretKeyRef: {name: api}\n',
    "The public key is in ~/.ssh/id_ed25519.pub",
    "mysql -u root -p app  # prompts for the password",
    "the token is valid for 3600 seconds",
    "NextToken: eyJ2IjoiMSIsImMiOiJ4In0K",
    "Authorization: Bearer ${TOKEN}",
    # lists of names and values, not a name and its value
    "fields = ('username', 'password1', 'password2')",
    "('old_password', 'new_password1', 'new_password2')",
    "('http', 'user/name', 'password', 'localhost:22')",
    "run(['openssl', '-out', 'keycert.passwd.pem', '-aes256'])",
    "if config['password'] == 'Zq8vN2xTk1':",
    '{"key": "cache_key", "value": "users-by-email-v2"}',
    # code and schemas write `name: value` too
    "const cfg = {\n  user: name,\n  password: userPassword\n}",
    "interface Creds {\n  user: string\n  token: AccessToken\n  password: Password\n}",
    "type User {\n  name: String\n  password: String!\n}",
    "db:\n  password: !Ref DbPassword\n  user: app\n",
    "db:\n  user: app\n  password: changeme\n",
    "tokens:\n  - refresh\n  - access\n",
    "if password:\n    login()\n",
    'name, password_hint = "bob", "your pets name"',
    'user, password = "admin", "${PW}"',
    'x, password = foo("a", "b")',
    'label, token = "Token", "short"',
    "if token:\n    continue\n",
    "password:\n  existing_secret\n",
    "Enter password:\n********\n",
    "[x]\ndef f():\n    password = pw\n",
    "class A:\n    password = default_password\n",
    "[pypi]\nusername = u\npassword = ${PYPI_PASSWORD}\n",
    '"passwords": ["required", "min-length"]',
    "secretTemplates:\n  - name: ENC[AES256_GCM,data:W3PiZ6lD6bpfAdI=,iv:2qF98Zk,type:str]\n",
    "db_passwords:\n  - ENC[AES256_GCM,data:W3PiZ6lD6bpfAdI=,iv:2qF98Zk,type:str]\n",
    "secrets:\n  - name: db\n  - name: api\n",
])
def test_what_only_sounds_like_a_secret_is_left(text: str) -> None:
    assert redact(text) == (text, []), redact(text)[0]


@pytest.mark.parametrize("text, secret", [
    ("export DB_PASSWORD=pass456 && ./migrate", "pass456"),
    ("docker run --rm -e API_TOKEN=nonprod12 app:latest", "nonprod12"),
    ("docker run --env=DB_PASSWORD=pass4567 --rm app", "pass4567"),
    ("helm upgrade app ./chart --set AUTH_TOKEN=truffle-dev", "truffle-dev"),
    ("STRIPE_SECRET_KEY=sk_test_aaaaaaaaaaaaaaaaaaaaaaaa\nDEBUG=1\n",
     "sk_test_aaaaaaaaaaaaaaaaaaaaaaaa"),
    ("spring.datasource.password=d7N8bs\n", "d7N8bs"),
    ("ENV AUTH_TOKEN=truffle-dev\nRUN make", "truffle-dev"),
    ("$ export TOKEN=jdbc:mysql://host:3306/db", "jdbc:mysql://host:3306/db"),
    # In single quotes a shell expands nothing: `$` and backticks are part of the password.
    ("export DB_PASSWORD='pa$$word1' && ./migrate", "pa$$word1"),
    ("export API_TOKEN='$ecret-t0ken'", "$ecret-t0ken"),
    ("export API_TOKEN=thisismytoken42", "thisismytoken42"),  # holds a secret word: a literal
])
def test_a_shell_assignment_to_a_credential_name_is_redacted_whatever_it_looks_like(
    text: str, secret: str,
) -> None:
    out, found = redact(text)
    assert found and secret not in out, out


@pytest.mark.parametrize("text", [
    'export API_KEY="${API_KEY}"',
    "export SORT_KEY=created_at",
    "export GITHUB_TOKEN=ghp_abc... (the rest is in 1Password)",
    "export SSH_KEY=~/.ssh/id_ed25519",
    "AUTH_SERVER=https://auth.example.com",
    "export TOKEN=changeme",
    "export GITHUB_TOKEN=GH_PAT_FROM_CI",
    "password=config.db_password",
    'export DB_PASSWORD="$DB_PASS_FROM_VAULT"',
    "export SMTP_PASSWORD=smtp_password",  # a name in a name's shape
    "export GITHUB_TOKEN=GH_TOKEN",
    "export API_TOKEN=$(vault read -field=token secret/ci)",
])
def test_a_shell_assignment_of_a_reference_is_left(text: str) -> None:
    assert redact(text) == (text, []), redact(text)[0]


def test_names_are_read_by_their_parts() -> None:
    assert name_class("DB_PASSWORD") == "password"
    assert name_class("apiKey") == "key" and name_class("AUTH0_CLIENT_SECRET") == "secret"
    assert name_class("ID_TOKEN") == "secret"  # an OpenID Connect token is one
    for name in ("key", "public_key", "key_id", "TOKEN_URL", "password_file", "ClientToken",
                 "next_token", "author", "keyboard"):
        assert name_class(name) is None, name
    assert credential_value("password", PW) and not credential_value("password", "required")
    assert credential_value("secret", KEY) and not credential_value("secret", "short1")


def test_a_discord_bot_token_is_known_by_its_structure() -> None:
    token = "MzQ3NDM4ODcyMjgwNjMwNTk2.Sctr2e.oLajJDiRggHE34VDFwrRjkv3xkb9Wsqf3VBTbT"
    text = f'env:\n  - name: DISCORD_BOT_TOKEN\n    value: "{token}"\n'
    assert token[:20] not in redact(text)[0]


def test_a_device_token_in_its_api_path_keeps_the_route() -> None:
    token = "354u1g321kcqc1oad3w7"
    out = redact(f"curl -d @t.json https://thingsboard.cloud/api/v1/{token}/telemetry")[0]
    assert token not in out and out.endswith("/api/v1/[REDACTED:url-path-token]/telemetry"), out
    assert redact("GET /api/v1/users/telemetry") == ("GET /api/v1/users/telemetry", [])


@pytest.mark.parametrize("version", ["v3", "v3.1"])
def test_a_softlayer_key_in_its_soap_endpoint_keeps_the_host(version: str) -> None:
    key = "3c1f0a9e2b7d4c6f8a1e0d9c7b5a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a"
    out = redact(f"client = Client('https://api.softlayer.com/soap/{version}/{key}')")[0]
    assert key[:16] not in out and f"softlayer.com/soap/{version}/[REDACTED:url-path-token]'" in out
    for kept in ("https://api.softlayer.com/soap/v3/SoftLayer_Account",
                 "https://api.softlayer.com/soap/v3/" + "abcd1234" * 8):  # a docs' filler
        assert redact(kept) == (kept, []), kept


@pytest.mark.parametrize("line", [
    "//registry.npmjs.org/:_authToken=npm_{k}",
    "//npm.example.com/repository/npm-private/:_auth={b}",
    "//acme.npm/releases:_password=CorrectHorseBatteryStaple",
    "_auth = {b}",
    '  _authToken="{k}"',
])
def test_npmrc_auth_settings_are_literals(line: str) -> None:
    """An .npmrc stores base64 and words as written: what follows `_auth=` is the secret."""
    filled = line.format(k="Xk9fP2qLm8Rt5vBn",  # `_auth` is base64 of `user:password`
                         b=base64.b64encode(b"deploy:wintermoon7").decode())
    text = "registry=https://registry.npmjs.org/\nalways-auth=true\n" + filled + "\n"
    value = re.split(r"=\s*\"?", filled, maxsplit=1)[1].rstrip('"')
    out = redact(text)[0]
    assert value not in out, out
    assert "registry=https://registry.npmjs.org/" in out and "always-auth=true" in out


@pytest.mark.parametrize("text", [
    "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
    "_auth = auth_header",
    "    _password = password",
    "self._auth = auth",
])
def test_npmrc_references_and_code_are_left(text: str) -> None:
    assert redact(text) == (text, []), text


def test_in_a_tuple_the_user_is_not_taken_for_the_password() -> None:
    """`user, password = "admin", "…"`: the value right after `password =` is the user's."""
    out = redact('user, password = "admin", "wintermoon7"')[0]
    assert '"admin"' in out and "wintermoon7" not in out, out
    # keyword arguments and objects are not tuples: the value after the name is its own
    for text in ('f(user="bob", password="wintermoon7", x=1)',
                 '{"user": "bob", "password": "wintermoon7", "x": 1}'):
        assert "wintermoon7" not in redact(text)[0], text
