r"""A held-out mixed set of secrets in a real Claude Code transcript, for bench/bench_leak.py.

Every secret is generated here, from a seeded random number generator, in the format its issuer
documents (prefix, length, alphabet, and the checksum where one is published: GitHub's and
npm's tokens end in the base62 CRC32 of their random part). None is taken from a scanner's test
suite, so the set measures redaction on secrets funes was not tuned on; a new seed gives a new
set of the same shape.

Each secret is written into the session in a realistic context: a sentence (with a name beside
it, or none), a ``.env`` line, YAML and JSON configuration, a shell command the agent ran
(``export``, ``curl -H``, ``curl -u``), a tool's output (``cat .env``, a stack trace, a log
line), code the agent wrote. Each one is marked *named-provider* when its issuer's format
identifies it (``ghp_…``, ``AKIA…``, ``sk-ant-…``), or not (passwords, database URLs, private
keys, JWTs, basic-auth headers, high-entropy values after a secret's name).

Run: ``python scripts/leak_set.py --seed 28 --out session.jsonl --manifest secrets.json``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Secret", "build", "transcript_lines", "write"]

B62 = string.digits + string.ascii_uppercase + string.ascii_lowercase
ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64URL = ALNUM + "-_"
B64 = ALNUM + "+/"
UPPER_NUM = string.ascii_uppercase + string.digits
BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l".upper()


@dataclass(frozen=True)
class Secret:
    """One planted secret: what must not leave, and where it was put."""

    id: int
    kind: str
    named: bool
    value: str
    context: str
    text: str
    place: str  # user | assistant | tool_use | tool_result


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def s(self, alphabet: str, n: int) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def between(self, alphabet: str, lo: int, hi: int) -> str:
        return self.s(alphabet, self.rng.randint(lo, hi))

    def digits(self, n: int) -> str:
        return str(self.rng.randint(1, 9)) + self.s(string.digits, n - 1)

    def b64(self, nbytes: int, url: bool = False) -> str:
        raw = bytes(self.rng.getrandbits(8) for _ in range(nbytes))
        enc = base64.urlsafe_b64encode(raw) if url else base64.b64encode(raw)
        return enc.decode()

    def uuid(self) -> str:
        h = self.s(HEX, 32)
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def password(self) -> str:
        """A generated password: letters, digits and a few symbols, 12-24 characters."""
        pool = ALNUM + "!#%^*-_+."
        while True:
            p = self.between(pool, 12, 24)
            if any(c.isdigit() for c in p) and any(c.isupper() for c in p) and p[0].isalnum():
                return p

    def human_password(self) -> str:
        words = ["Summer", "Falcon", "River", "Copper", "Maple", "Orbit", "Tango", "Velvet",
                 "Harbor", "Nimbus", "Quartz", "Saffron", "Willow", "Zephyr"]
        r = self.rng
        return (r.choice(words) + r.choice(words).lower() + str(r.randint(10, 9999))
                + r.choice("!@#$%&*?"))


def _b62(n: int, width: int) -> str:
    out = ""
    while n:
        n, d = divmod(n, 62)
        out = B62[d] + out
    return out.rjust(width, "0")


def _crc_token(g: _Gen, prefix: str) -> str:
    """GitHub's (and npm's) documented shape: prefix, 30 base62, 6 base62 of the CRC32."""
    body = g.s(ALNUM, 30)
    return prefix + body + _b62(binascii.crc32(body.encode()), 6)


def _jwt(g: _Gen) -> str:
    def enc(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()
                                        ).decode().rstrip("=")
    alg = g.rng.choice(["HS256", "RS256"])
    head = enc({"alg": alg, "typ": "JWT"})
    body = enc({"sub": g.uuid(), "name": g.rng.choice(["ana", "bo", "svc-deploy"]),
                "iat": 1764000000 + g.rng.randint(0, 10**6), "exp": 1765000000,
                "scope": "read write"})
    sig = g.b64(32 if alg == "HS256" else 256, url=True).rstrip("=")
    return f"{head}.{body}.{sig}"


def _pem(g: _Gen, label: str, nbytes: int) -> str:
    body = g.b64(nbytes)
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


def _openssh(g: _Gen) -> str:
    raw = b"openssh-key-v1\x00" + bytes(g.rng.getrandbits(8) for _ in range(380))
    body = base64.b64encode(raw).decode()
    lines = [body[i : i + 70] for i in range(0, len(body), 70)]
    return ("-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines)
            + "\n-----END OPENSSH PRIVATE KEY-----")


def _mapbox(g: _Gen) -> str:
    user = base64.urlsafe_b64encode(json.dumps({"u": "acme-maps", "a": g.s(
        string.ascii_lowercase + string.digits, 25)}).encode()).decode().rstrip("=")
    return f"sk.{user}.{g.s(B64URL, 22)}"


def _discord_bot(g: _Gen) -> str:
    uid = base64.b64encode(g.digits(18).encode()).decode().rstrip("=")
    return f"{uid}.{g.s(B64URL, 6)}.{g.s(B64URL, 38)}"


#: Named-provider formats: kind → (generator, the environment name a project would use).
PROVIDERS: dict[str, tuple[Callable[[_Gen], str], str]] = {
    "github-pat": (lambda g: _crc_token(g, "ghp_"), "GITHUB_TOKEN"),
    "github-oauth": (lambda g: _crc_token(g, "gho_"), "GH_OAUTH_TOKEN"),
    "github-app": (lambda g: _crc_token(g, g.rng.choice(["ghs_", "ghu_"])), "GH_APP_TOKEN"),
    "github-fine-grained": (lambda g: "github_pat_" + g.s(ALNUM, 22) + "_" + g.s(ALNUM, 59),
                            "GITHUB_PAT"),
    "npm": (lambda g: _crc_token(g, "npm_"), "NPM_TOKEN"),
    "gitlab-pat": (lambda g: "glpat-" + g.s(B64URL.replace("-", ""), 20), "GITLAB_TOKEN"),
    "gitlab-runner": (lambda g: "glrt-" + g.s(B64URL.replace("-", ""), 20), "RUNNER_TOKEN"),
    "slack-bot": (lambda g: f"xoxb-{g.digits(12)}-{g.digits(13)}-{g.s(ALNUM, 24)}",
                  "SLACK_BOT_TOKEN"),
    "slack-user": (lambda g: f"xoxp-{g.digits(12)}-{g.digits(12)}-{g.digits(13)}-"
                   f"{g.s(HEX, 32)}", "SLACK_USER_TOKEN"),
    "slack-webhook": (lambda g: "https://hooks.slack.com/services/T" + g.s(UPPER_NUM, 10)
                      + "/B" + g.s(UPPER_NUM, 10) + "/" + g.s(ALNUM, 24), "SLACK_WEBHOOK_URL"),
    "stripe-secret": (lambda g: "sk_live_" + g.s(ALNUM, g.rng.choice([24, 99])),
                      "STRIPE_SECRET_KEY"),
    "stripe-restricted": (lambda g: "rk_live_" + g.s(ALNUM, 24), "STRIPE_RESTRICTED_KEY"),
    "stripe-webhook": (lambda g: "whsec_" + g.s(ALNUM, 32), "STRIPE_WEBHOOK_SECRET"),
    "aws-access-key-id": (lambda g: g.rng.choice(["AKIA", "ASIA"]) + g.s(
        string.ascii_uppercase + "234567", 16), "AWS_ACCESS_KEY_ID"),
    "gcp-api-key": (lambda g: "AIza" + g.s(B64URL, 35), "GOOGLE_API_KEY"),
    "google-oauth-secret": (lambda g: "GOCSPX-" + g.s(B64URL, 28), "GOOGLE_CLIENT_SECRET"),
    "google-access-token": (lambda g: "ya29." + g.s(B64URL, 150), "GOOGLE_ACCESS_TOKEN"),
    "azure-ad-client-secret": (lambda g: g.s(ALNUM, 3) + g.s(string.digits, 1) + "Q~"
                               + g.s(ALNUM + "_~.-", 34), "AZURE_CLIENT_SECRET"),
    "openai": (lambda g: "sk-proj-" + g.s(B64URL, 74) + "T3BlbkFJ" + g.s(B64URL, 74),
               "OPENAI_API_KEY"),
    "openai-legacy": (lambda g: "sk-" + g.s(ALNUM, 20) + "T3BlbkFJ" + g.s(ALNUM, 20),
                      "OPENAI_KEY"),
    "anthropic": (lambda g: "sk-ant-api03-" + g.s(B64URL, 93) + "AA", "ANTHROPIC_API_KEY"),
    "huggingface": (lambda g: "hf_" + g.s(string.ascii_letters, 34), "HF_TOKEN"),
    "sendgrid": (lambda g: "SG." + g.s(B64URL, 22) + "." + g.s(B64URL, 43), "SENDGRID_API_KEY"),
    "mailgun": (lambda g: "key-" + g.s(HEX, 32), "MAILGUN_API_KEY"),
    "shopify": (lambda g: g.rng.choice(["shpat_", "shpca_", "shppa_", "shpss_"]) + g.s(HEX, 32),
                "SHOPIFY_ACCESS_TOKEN"),
    "digitalocean": (lambda g: g.rng.choice(["dop_v1_", "doo_v1_"]) + g.s(HEX, 64),
                     "DIGITALOCEAN_TOKEN"),
    "discord-bot": (_discord_bot, "DISCORD_BOT_TOKEN"),
    "discord-webhook": (lambda g: f"https://discord.com/api/webhooks/{g.digits(19)}/"
                        + g.s(B64URL, 68), "DISCORD_WEBHOOK"),
    "telegram-bot": (lambda g: f"{g.digits(10)}:AA{g.s(B64URL, 33)}", "TELEGRAM_BOT_TOKEN"),
    "atlassian": (lambda g: "ATATT3xFfGF0" + g.s(B64URL, 171) + "=" + g.s(HEX.upper(), 8),
                  "JIRA_API_TOKEN"),
    "databricks": (lambda g: "dapi" + g.s(HEX, 32), "DATABRICKS_TOKEN"),
    "doppler": (lambda g: "dp.pt." + g.s(ALNUM, 43), "DOPPLER_TOKEN"),
    "postman": (lambda g: f"PMAK-{g.s(HEX, 24)}-{g.s(HEX, 34)}", "POSTMAN_API_KEY"),
    "linear": (lambda g: "lin_api_" + g.s(ALNUM, 40), "LINEAR_API_KEY"),
    "newrelic": (lambda g: "NRAK-" + g.s(UPPER_NUM, 27), "NEW_RELIC_API_KEY"),
    "grafana-sa": (lambda g: "glsa_" + g.s(ALNUM, 32) + "_" + g.s(HEX, 8), "GRAFANA_TOKEN"),
    "vault": (lambda g: "hvs." + g.s(B64URL, 90), "VAULT_TOKEN"),
    "pulumi": (lambda g: "pul-" + g.s(HEX, 40), "PULUMI_ACCESS_TOKEN"),
    "dockerhub": (lambda g: "dckr_pat_" + g.s(B64URL, 27), "DOCKERHUB_TOKEN"),
    "airtable": (lambda g: "pat" + g.s(ALNUM, 14) + "." + g.s(HEX, 64), "AIRTABLE_TOKEN"),
    "notion": (lambda g: "ntn_" + g.s(string.digits, 11) + g.s(ALNUM, 35), "NOTION_TOKEN"),
    "flyio": (lambda g: "fo1_" + g.s(B64URL, 43), "FLY_API_TOKEN"),
    "replicate": (lambda g: "r8_" + g.s(ALNUM, 37), "REPLICATE_API_TOKEN"),
    "groq": (lambda g: "gsk_" + g.s(ALNUM, 52), "GROQ_API_KEY"),
    "perplexity": (lambda g: "pplx-" + g.s(ALNUM, 48), "PPLX_API_KEY"),
    "xai": (lambda g: "xai-" + g.s(ALNUM, 80), "XAI_API_KEY"),
    "age": (lambda g: "AGE-SECRET-KEY-1" + g.s(BECH32, 58), "SOPS_AGE_KEY"),
    "tailscale": (lambda g: "tskey-auth-k" + g.s(ALNUM, 16) + "-" + g.s(ALNUM, 33),
                  "TS_AUTHKEY"),
    "supabase": (lambda g: "sbp_" + g.s(HEX, 40), "SUPABASE_ACCESS_TOKEN"),
    "planetscale": (lambda g: "pscale_pw_" + g.s(ALNUM + "_", 43), "PLANETSCALE_PASSWORD"),
    "buildkite": (lambda g: "bkua_" + g.s(HEX, 40), "BUILDKITE_API_TOKEN"),
    "terraform-cloud": (lambda g: g.s(ALNUM, 14) + ".atlasv1." + g.s(ALNUM, 67), "TFE_TOKEN"),
    "artifactory": (lambda g: "AKCp" + g.s(ALNUM, 69), "ARTIFACTORY_API_KEY"),
    "twitter-bearer": (lambda g: "A" * 22 + g.s(ALNUM, 20) + "%2F" + g.s(ALNUM, 22) + "%3D"
                       + g.s(ALNUM, 40), "TWITTER_BEARER_TOKEN"),
    "facebook": (lambda g: "EAAC" + g.s(ALNUM, 150), "FB_ACCESS_TOKEN"),
    "alibaba": (lambda g: "LTAI" + g.s(ALNUM, 20), "ALIBABA_ACCESS_KEY_ID"),
    "tencent": (lambda g: "AKID" + g.s(ALNUM, 32), "TENCENTCLOUD_SECRET_ID"),
    "square": (lambda g: "EAAA" + g.s(B64URL, 60), "SQUARE_ACCESS_TOKEN"),
    "mapbox": (_mapbox, "MAPBOX_SECRET_TOKEN"),
    "sentry-user": (lambda g: "sntryu_" + g.s(HEX, 64), "SENTRY_AUTH_TOKEN"),
    "heroku": (lambda g: "HRKU-AA" + g.s(B64URL, 58), "HEROKU_API_KEY"),
    "cloudflare-origin-ca": (lambda g: f"v1.0-{g.s(HEX, 24)}-{g.s(HEX, 146)}",
                             "CF_ORIGIN_CA_KEY"),
    "pypi": (lambda g: "pypi-AgEIcHlwaS5vcmc" + g.s(B64URL, 70), "PYPI_TOKEN"),
    "rubygems": (lambda g: "rubygems_" + g.s(HEX, 48), "GEM_HOST_API_KEY"),
    "pinecone": (lambda g: "pcsk_" + g.s(ALNUM, 5) + "_" + g.s(ALNUM, 63), "PINECONE_API_KEY"),
    "langsmith": (lambda g: "lsv2_pt_" + g.s(HEX, 32) + "_" + g.s(HEX, 10), "LANGSMITH_API_KEY"),
    "figma": (lambda g: "figd_" + g.s(B64URL, 40), "FIGMA_TOKEN"),
    "contentful": (lambda g: "CFPAT-" + g.s(B64URL, 43), "CONTENTFUL_MANAGEMENT_TOKEN"),
    "sonarqube": (lambda g: g.rng.choice(["squ_", "sqp_"]) + g.s(HEX, 40), "SONAR_TOKEN"),
    "shippo": (lambda g: "shippo_live_" + g.s(HEX, 40), "SHIPPO_API_TOKEN"),
    "prefect": (lambda g: "pnu_" + g.s(ALNUM, 36), "PREFECT_API_KEY"),
    "dropbox": (lambda g: "sl." + g.s(B64URL, 136), "DROPBOX_ACCESS_TOKEN"),
    "firebase-fcm-server-key": (lambda g: "AAAA" + g.s(B64URL, 7) + ":APA91b" + g.s(B64URL, 134),
                                "FIREBASE_SERVER_KEY"),
    "teams-webhook": (lambda g: f"https://acme.webhook.office.com/webhookb2/{g.uuid()}@"
                      f"{g.uuid()}/IncomingWebhook/{g.s(HEX, 32)}/{g.uuid()}", "TEAMS_WEBHOOK"),
}

#: Secrets whose issuer gives them no identifying shape: only a name beside them says what
#: they are (name → generator).
UNSHAPED: dict[str, Callable[[_Gen], str]] = {
    "AWS_SECRET_ACCESS_KEY": lambda g: g.s(B64, 40),
    "TWILIO_AUTH_TOKEN": lambda g: g.s(HEX, 32),
    "DATADOG_API_KEY": lambda g: g.s(HEX, 32),
    "DD_APP_KEY": lambda g: g.s(HEX, 40),
    "IBM_CLOUD_API_KEY": lambda g: g.s(B64URL, 44),
    "CLOUDFLARE_API_TOKEN": lambda g: g.s(B64URL, 40),
    "SNYK_TOKEN": lambda g: g.uuid(),
    "SUMO_ACCESS_KEY": lambda g: g.s(ALNUM, 64),
    "OKTA_API_TOKEN": lambda g: "00" + g.s(B64URL, 40),
    "COHERE_API_KEY": lambda g: g.s(ALNUM, 40),
    "MISTRAL_API_KEY": lambda g: g.s(ALNUM, 32),
    "ALGOLIA_ADMIN_KEY": lambda g: g.s(HEX, 32),
    "JWT_SECRET": lambda g: g.b64(48),
    "SECRET_KEY_BASE": lambda g: g.s(HEX, 128),
    "DJANGO_SECRET_KEY": lambda g: g.s(string.ascii_lowercase + string.digits + "!@#%^&*(-_=+)",
                                       50),
    "SESSION_SECRET": lambda g: g.s(ALNUM, 32),
    "ENCRYPTION_KEY": lambda g: g.b64(32),
    "API_KEY": lambda g: g.s(ALNUM, 32),
    "CLIENT_SECRET": lambda g: g.s(B64URL, 40),
    "WEBHOOK_SECRET": lambda g: g.s(HEX, 40),
    "MAILCHIMP_API_KEY": lambda g: g.s(HEX, 32) + "-us" + str(g.rng.randint(1, 21)),
    "AUTH0_CLIENT_SECRET": lambda g: g.s(B64URL, 64),
}

# --- contexts ----------------------------------------------------------------------------
#: Each context: (name, place, template). `{s}` is the secret, `{n}` its environment name,
#: `{k}` the same name lowercased, `{u}` a user name.
NAMED_CONTEXTS = (
    ("env-file", "tool_result", "# .env\nNODE_ENV=production\n{n}={s}\nLOG_LEVEL=info\n"),
    ("export", "tool_use", "export {n}={s}"),
    ("export-quoted", "tool_use", 'export {n}="{s}" && ./deploy.sh'),
    ("yaml", "tool_result", "service:\n  name: billing\n  {k}: {s}\n  retries: 3\n"),
    ("yaml-quoted", "tool_result", "env:\n  - name: {n}\n    value: \"{s}\"\n"),
    ("json", "tool_result", '{{\n  "region": "eu-west-1",\n  "{k}": "{s}",\n  "debug": false\n}}'),
    ("prose-named", "assistant", "I set {n} to {s} in the CI settings, so the job can publish."),
    ("code", "tool_use", 'client = Client(\n    {k}="{s}",\n    timeout=30,\n)'),
    ("log", "tool_result", "2026-11-24T10:00:01.201Z DEBUG config loaded {k}={s} region=eu\n"),
    ("cat-env", "tool_result", "$ cat .env\nPORT=8080\n{n}={s}\nDEBUG=0"),
    ("docker-run", "tool_use", "docker run -e {n}={s} -p 8080:8080 acme/api:latest"),
    ("stack-trace", "tool_result",
     "Traceback (most recent call last):\n  File \"/srv/app/main.py\", line 41, in <module>\n"
     "    settings = load(os.environ)\n  File \"/srv/app/conf.py\", line 12, in load\n"
     "    raise ValueError(f\"rejected {n}={{value}}\")\nValueError: rejected {n}={s}"),
)
UNNAMED_CONTEXTS = (
    ("prose-unnamed", "user", "here's the one from the dashboard: {s} — use it for now"),
    ("prose-hint", "assistant", "The new key is {s}, and the old one is revoked."),
    ("prose-backticks", "user", "I pasted `{s}` into the form but it still says 401."),
    ("output-alone", "tool_result", "$ op read op://ci/deploy/credential\n{s}\n"),
    ("curl-bearer", "tool_use",
     'curl -sS -H "Authorization: Bearer {s}" https://api.example.com/v1/me'),
    ("curl-header", "tool_use", "curl -H 'X-Api-Key: {s}' https://api.example.com/v2/items"),
    ("url-query", "tool_result",
     "GET https://api.example.com/v1/search?q=shoes&api_key={s} 401 Unauthorized"),
    ("http-log", "tool_result",
     "2026-11-24 10:00:02,114 INFO httpx: request headers={{'authorization': 'Bearer {s}'}}"),
)


def _named_contexts(kind: str) -> tuple[tuple[str, str, str], ...]:
    if kind.endswith("webhook") and kind != "stripe-webhook":
        # A webhook secret is its URL: a bearer header or a query value is not where it goes.
        return (*NAMED_CONTEXTS, UNNAMED_CONTEXTS[0], UNNAMED_CONTEXTS[1], UNNAMED_CONTEXTS[3],
                ("curl-post", "tool_use", "curl -X POST -d '{{\"text\":\"deployed\"}}' {s}"))
    return NAMED_CONTEXTS + UNNAMED_CONTEXTS


def _fill(template: str, secret: str, name: str, user: str = "deploy") -> str:
    return template.format(s=secret, n=name, k=name.lower(), u=user)


def _generic(g: _Gen) -> Iterator[tuple[str, str, str, str]]:
    """(kind, value, context, text) of the secrets no provider's format identifies."""
    r = g.rng
    hosts = ["db.internal", "10.0.3.17", "pg-prod.acme.io", "mysql.staging.local"]
    # Passwords after a name, in every syntax.
    for ctx, tmpl in [
        ("env-file", "DB_HOST=db.internal\nDB_PASSWORD={p}\nDB_PORT=5432"),
        ("yaml", "database:\n  user: app\n  password: {p}\n"),
        ("yaml-quoted", "smtp:\n  password: '{p}'\n"),
        ("json", '{{"username": "admin", "password": "{p}"}}'),
        ("export", "export PGPASSWORD='{p}'; psql -h db.internal -U app"),
        ("prose-named", "The admin password is {p} until we move it to the vault."),
        ("mysql-flag", "mysql -h db.internal -u root -p'{p}' app < dump.sql"),
        ("ini", "[client]\nuser = backup\npassword = {p}\n"),
        ("xml", "<datasource>\n  <user>sa</user>\n  <password>{p}</password>\n</datasource>"),
        ("netrc", "machine api.example.com login deploy password {p}"),
        ("code", 'conn = psycopg2.connect(host="db", user="app", password="{p}")'),
        ("log", "2026-11-24T10:00:03Z WARN login retry user=ops passwd={p} attempt=2"),
        ("docker-run", "docker run -e POSTGRES_PASSWORD={p} -d postgres:16"),
        ("htpasswd-cli", "sshpass -p '{p}' ssh ops@10.0.3.17 uptime"),
        ("k8s-cli", "kubectl create secret generic db --from-literal=password={p}"),
        ("prose-hint", "ok I changed my password to {p}, can you update the config?"),
    ]:
        for _ in range(2):
            p = g.password() if r.random() < 0.7 else g.human_password()
            if "'" in tmpl and "'" in p:
                continue
            yield "password", p, ctx, tmpl.format(p=p)
    # Database and broker URLs with a password.
    for scheme, port in [("postgres", 5432), ("postgresql", 5432), ("mysql", 3306),
                         ("mongodb+srv", 0), ("redis", 6379), ("amqp", 5672), ("mssql", 1433)]:
        for ctx, tmpl in [
            ("env-file", "DATABASE_URL={url}\nREDIS_TTL=60"),
            ("stack-trace", "sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could"
             " not connect\n(Background on this error at: https://sqlalche.me/e/20/e3q8)\n"
             "engine = create_engine('{url}')"),
            ("prose-unnamed", "It connects with {url} right now."),
        ]:
            p = g.password().replace("@", "").replace("/", "").replace("#", "")
            host = r.choice(hosts) + (f":{port}" if port else "")
            url = f"{scheme}://{r.choice(['app', 'admin', 'svc'])}:{p}@{host}/app"
            yield "db-url", p, ctx, tmpl.format(url=url)
    # curl -u and basic auth.
    for ctx, tmpl in [
        ("curl-u", "curl -u {u}:{p} https://jenkins.example.com/api/json"),
        ("curl-u", "curl -s --user {u}:{p} -X POST https://registry.example.com/v2/token"),
        ("curl-u-quoted", "curl -u '{u}:{p}' https://api.example.com/v1/export"),
        ("url-userinfo", "git clone https://{u}:{p}@git.example.com/team/app.git"),
    ]:
        for _ in range(3):
            p = g.password().replace("'", "")
            if ctx == "url-userinfo":  # unencoded, `#`, `/`, `?` and `@` would end the userinfo
                p = "".join(ch for ch in p if ch not in "#/?@")
            yield "basic-password", p, ctx, tmpl.format(u=r.choice(["admin", "ci", "bob"]), p=p)
    for ctx, tmpl in [
        ("basic-header", 'curl -H "Authorization: Basic {b}" https://api.example.com/v1'),
        ("http-log", "> GET /v1/jobs HTTP/1.1\n> Host: ci.example.com\n> Authorization: Basic {b}"
         "\n> Accept: */*"),
        ("json", '{{"headers": {{"Authorization": "Basic {b}"}}}}'),
    ]:
        for _ in range(2):
            b = base64.b64encode(f"{r.choice(['admin', 'ci'])}:{g.password()}".encode()).decode()
            yield "basic-auth", b, ctx, tmpl.format(b=b)
    # JWTs.
    for ctx, tmpl in [
        ("curl-bearer", 'curl -H "Authorization: Bearer {j}" https://api.example.com/v1/me'),
        ("prose-unnamed", "This one came back from the login call: {j}"),
        ("json", '{{"access_token": "{j}", "token_type": "Bearer", "expires_in": 3600}}'),
        ("log", "2026-11-24T10:00:04Z INFO auth: issued session={j}"),
        ("cookie", "Set-Cookie: session={j}; Path=/; HttpOnly"),
    ]:
        for _ in range(2):
            j = _jwt(g)
            yield "jwt", j, ctx, tmpl.format(j=j)
    # Private key blocks.
    for label, nbytes in [("RSA PRIVATE KEY", 1190), ("EC PRIVATE KEY", 121),
                          ("PRIVATE KEY", 1218), ("ENCRYPTED PRIVATE KEY", 1298)]:
        for ctx, tmpl in [("output-alone", "$ cat deploy_key.pem\n{k}\n"),
                          ("prose-unnamed", "Here is the key, put it in the secret store:\n{k}")]:
            k = _pem(g, label, nbytes)
            yield "private-key", k, ctx, tmpl.format(k=k)
    for ctx, tmpl in [("output-alone", "$ cat ~/.ssh/id_ed25519\n{k}"),
                      ("json", "{j}")]:
        k = _openssh(g)
        text = tmpl.format(k=k, j=json.dumps({"deploy_key": k}))
        yield "private-key", k, ctx, text
    pgp = ("-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n" + "\n".join(g.b64(48) for _ in range(12))
           + "\n=" + g.s(B64, 4) + "\n-----END PGP PRIVATE KEY BLOCK-----")
    yield "private-key", pgp, "output-alone", "$ gpg --export-secret-keys -a ops\n" + pgp
    # Cloud credentials in their own files.
    for _ in range(3):
        akid = "AKIA" + g.s(string.ascii_uppercase + "234567", 16)
        sk = g.s(B64, 40)
        ctx = r.choice(["aws-credentials", "aws-env", "aws-prose"])
        text = {
            "aws-credentials": f"$ cat ~/.aws/credentials\n[default]\naws_access_key_id = {akid}"
                               f"\naws_secret_access_key = {sk}\n",
            "aws-env": f"AWS_ACCESS_KEY_ID={akid} AWS_SECRET_ACCESS_KEY={sk} aws s3 ls",
            "aws-prose": f"Use access key {akid} with secret {sk} for the backup bucket.",
        }[ctx]
        yield "aws-pair-id", akid, ctx, text
        yield "aws-pair-secret", sk, ctx, text
    for _ in range(3):
        pem = _pem(g, "PRIVATE KEY", 1218)
        kid = g.s(HEX, 40)
        sa = json.dumps({
            "type": "service_account", "project_id": "acme-prod-4821",
            "private_key_id": kid, "private_key": pem + "\n",
            "client_email": "deployer@acme-prod-4821.iam.gserviceaccount.com",
            "client_id": g.digits(21), "token_uri": "https://oauth2.googleapis.com/token",
        }, indent=2)
        # Its `private_key_id` is not a secret: every token request sends it in the clear
        # (the JWT header's `kid`), and the console lists it.
        yield "gcp-service-account", pem, "gcp-json", f"$ cat sa.json\n{sa}"
    for _ in range(3):
        key = g.b64(64)
        conn = (f"DefaultEndpointsProtocol=https;AccountName=acmestore{r.randint(10, 99)};"
                f"AccountKey={key};EndpointSuffix=core.windows.net")
        ctx = r.choice(["env-file", "json", "prose-unnamed"])
        text = {"env-file": f"AZURE_STORAGE_CONNECTION_STRING={conn}\n",
                "json": json.dumps({"ConnectionStrings": {"Storage": conn}}),
                "prose-unnamed": f"The function app reads {conn} at start-up."}[ctx]
        yield "azure-storage", key, ctx, text
    for _ in range(3):
        key = g.b64(32)
        conn = (f"Endpoint=sb://acme-bus.servicebus.windows.net/;SharedAccessKeyName="
                f"RootManageSharedAccessKey;SharedAccessKey={key}")
        yield "azure-servicebus", key, "env-file", f"SERVICEBUS_CONNECTION={conn}"
    for _ in range(2):
        sig = g.b64(32).replace("+", "%2B").replace("/", "%2F").replace("=", "%3D")
        url = (f"https://acmestore.blob.core.windows.net/backups/db.bak?sv=2022-11-02&ss=b"
               f"&srt=co&sp=rl&se=2026-12-31T00:00:00Z&spr=https&sig={sig}")
        yield "azure-sas", sig, "url-query", f"azcopy copy '{url}' ./db.bak"


def build(seed: int = 28) -> list[Secret]:
    """The mixed set, deterministic for `seed`."""
    rng = random.Random(seed)
    g = _Gen(rng)
    raw: list[tuple[str, bool, str, str, str]] = []  # kind, named, value, context, text
    for kind, (make, env) in PROVIDERS.items():
        contexts = _named_contexts(kind)
        for ctx_name, _place, tmpl in rng.sample(contexts, 2):
            value = make(g)
            raw.append((kind, True, value, ctx_name, _fill(tmpl, value, env)))
    for env, make in UNSHAPED.items():
        for ctx_name, _place, tmpl in rng.sample(NAMED_CONTEXTS, 2):
            value = make(g)
            raw.append(("named-generic", False, value, ctx_name, _fill(tmpl, value, env)))
    for kind, value, ctx_name, text in _generic(g):
        raw.append((kind, False, value, ctx_name, text))
    places = {c[0]: c[1] for c in (*NAMED_CONTEXTS, *UNNAMED_CONTEXTS)}
    out: list[Secret] = []
    for i, (kind, named, value, ctx_name, text) in enumerate(raw):
        place = places.get(ctx_name) or _place_of(ctx_name)
        out.append(Secret(i, kind, named, value, ctx_name, text, place))
    return out


def _place_of(context: str) -> str:
    if context.startswith(("prose", "aws-prose")):
        return "assistant"
    if context in ("curl-u", "curl-u-quoted", "url-userinfo", "basic-header", "mysql-flag",
                   "htpasswd-cli", "k8s-cli", "docker-run", "export", "curl-bearer", "curl-post",
                   "aws-env"):
        return "tool_use"
    return "tool_result"


# --- the transcript ---------------------------------------------------------------------------

def transcript_lines(secrets: list[Secret], session: str = "leak-session",
                     cwd: str = "/home/dev/acme") -> list[str]:
    """A Claude Code session that holds every secret once, where its place says.

    A user message asks for something, the assistant runs a Bash command (the secret in the
    command, or in its output) and answers; prose secrets are said by the user or the assistant.
    """
    lines: list[str] = []
    n = 0

    def rec(role: str, content: object, parent: str | None) -> str:
        nonlocal n
        n += 1
        uuid = f"00000000-0000-4000-8000-{n:012d}"
        ts = f"2026-11-24T{10 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"
        lines.append(json.dumps({
            "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
            "sessionId": session, "version": "2.1.7", "gitBranch": "main", "type": role,
            "message": {"role": role, "content": content}, "uuid": uuid, "timestamp": ts,
        }))
        return uuid

    parent: str | None = None
    for s in secrets:
        ask = f"Step {s.id}: please check the {s.kind.replace('-', ' ')} setup ({s.context})."
        parent = rec("user", ask, parent)
        if s.place == "user":
            parent = rec("user", s.text, parent)
            parent = rec("assistant", [{"type": "text", "text": f"Noted (step {s.id})."}],
                         parent)
        elif s.place == "assistant":
            parent = rec("assistant", [{"type": "text", "text": s.text}], parent)
        elif s.place == "tool_use":
            tid = f"toolu_{s.id:06d}"
            parent = rec("assistant", [{"type": "tool_use", "id": tid, "name": "Bash",
                                        "input": {"command": s.text,
                                                  "description": f"step {s.id}"}}], parent)
            parent = rec("user", [{"type": "tool_result", "tool_use_id": tid,
                                   "content": "ok"}], parent)
        else:
            tid = f"toolu_{s.id:06d}"
            parent = rec("assistant", [{"type": "tool_use", "id": tid, "name": "Bash",
                                        "input": {"command": f"./inspect.sh {s.id}"}}], parent)
            parent = rec("user", [{"type": "tool_result", "tool_use_id": tid,
                                   "content": s.text}], parent)
        parent = rec("assistant", [{"type": "text", "text":
                                    f"Canary sentence number {s.id} about the {s.context}."}],
                     parent)
    return lines


def write(secrets: list[Secret], transcript: Path, manifest: Path | None = None) -> None:
    """The session to `transcript`; the secrets, with where each one is, to `manifest`."""
    transcript.write_text("\n".join(transcript_lines(secrets)) + "\n", "utf-8")
    if manifest is not None:
        manifest.write_text(json.dumps([asdict(s) for s in secrets], indent=1), "utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--manifest", type=Path)
    args = ap.parse_args()
    secrets = build(args.seed)
    write(secrets, args.out, args.manifest)
    named = sum(s.named for s in secrets)
    print(f"{len(secrets)} secrets ({named} named-provider) -> {args.out}")


if __name__ == "__main__":
    main()
