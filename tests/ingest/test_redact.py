"""Redaction: every documented kind is caught, ordinary code is not, and redaction is stable.

The fake secrets are generated here with the real shapes (prefix, alphabet, length), never
written literally, so this file itself trips no secret scanner.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from funes.ingest.redact import KINDS, Finding, entropy, redact, redact_turn, scan
from funes.model.turns import Block, Turn
from tests.builders import trace_strings
from tests.conftest import SHARED_MISSING

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "traces"

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"


def rnd(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def fake_secrets(seed: int = 7) -> dict[str, list[str]]:
    """Realistic fake credentials of every kind, keyed by the kind that must redact them."""
    rng = random.Random(seed)
    pem_body = "\n".join(rnd(rng, B64, 64) for _ in range(12)) + "\n" + rnd(rng, B64, 20) + "=="
    jwt = ".".join(
        [
            b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()),
            b64url(json.dumps({"sub": "1234567890", "name": "Ada", "iat": 1516239022}).encode()),
            b64url(rng.randbytes(32)),
        ]
    )
    return {
        "aws-access-key-id": [
            "AKIA" + rnd(rng, UPPER_ALNUM, 16),
            "ASIA" + rnd(rng, UPPER_ALNUM, 16),
        ],
        "aws-secret-key": [rnd(rng, B64, 40)],
        "aws-session-token": [rnd(rng, B64, 300)],
        "gcp-api-key": ["AIza" + rnd(rng, B64URL, 35)],
        "gcp-oauth-token": ["ya29." + rnd(rng, B64URL, 120)],
        "gcp-client-secret": ["GOCSPX-" + rnd(rng, B64URL, 28)],
        "private-key": [pem_body],
        "azure-storage-key": [rnd(rng, B64, 86) + "=="],
        "azure-sas-token": [rnd(rng, ALNUM, 30) + "%2B" + rnd(rng, ALNUM, 10) + "%3D"],
        "github-token": [
            "ghp_" + rnd(rng, ALNUM, 36),
            "gho_" + rnd(rng, ALNUM, 36),
            "ghs_" + rnd(rng, ALNUM, 36),
            "github_pat_" + rnd(rng, ALNUM, 22) + "_" + rnd(rng, ALNUM, 59),
        ],
        "gitlab-token": ["glpat-" + rnd(rng, B64URL, 20)],
        "huggingface-token": ["hf_" + rnd(rng, string.ascii_letters, 34)],
        "openai-key": ["sk-" + rnd(rng, ALNUM, 48), "sk-proj-" + rnd(rng, B64URL, 156)],
        "anthropic-key": ["sk-ant-api03-" + rnd(rng, B64URL, 93) + "AA"],
        "slack-token": [
            f"xoxb-{rng.randrange(10**11, 10**12)}-{rng.randrange(10**12, 10**13)}-"
            + rnd(rng, ALNUM, 24)
        ],
        "slack-webhook": [
            "https://hooks.slack.com/services/T"
            + rnd(rng, UPPER_ALNUM, 8)
            + "/B"
            + rnd(rng, UPPER_ALNUM, 8)
            + "/"
            + rnd(rng, ALNUM, 24)
        ],
        "stripe-key": [
            "sk_live_" + rnd(rng, ALNUM, 24),
            "rk_live_" + rnd(rng, ALNUM, 24),
            "pk_live_" + rnd(rng, ALNUM, 24),
        ],
        "npm-token": ["npm_" + rnd(rng, ALNUM, 36)],
        "pypi-token": ["pypi-AgEIcHlwaS5vcmc" + rnd(rng, B64URL, 70)],
        "jwt": [jwt],
        "url-password": ["S3cr3t-Pa55w0rd"],
        "bearer-token": [rnd(rng, B64URL, 40)],
        "basic-auth": [base64.b64encode(b"deploy:" + rnd(rng, ALNUM, 16).encode()).decode()],
        "password": ["hunter2hunter2", "correct horse battery staple", "Tr0ub4dor&3"],
        "secret": [rnd(rng, ALNUM, 32), rnd(rng, string.hexdigits.lower(), 40)],
        "high-entropy": [rnd(rng, ALNUM, 40)],
        "authorization": [rnd(rng, ALNUM, 40)],
        "xml-secret": [rnd(rng, ALNUM, 20)],
        "netrc-password": [rnd(rng, ALNUM, 20)],
        "curl-user": [rnd(rng, ALNUM, 20)],
        "pgpass-password": [rnd(rng, ALNUM, 20)],
        "kubernetes-secret": [base64.b64encode(rnd(rng, ALNUM, 24).encode()).decode()],
        "provider-token": ["shpat_" + rnd(rng, "0123456789abcdef", 32)],
        "password-hash": ["$2b$12$" + rnd(rng, ALNUM + "./", 53)],
        "url-path-token": [rnd(rng, string.ascii_lowercase + string.digits, 20)],
        "url-signature": [rnd(rng, "0123456789abcdef", 64)],
        "named-secret": [rnd(rng, ALNUM, 24)],
        "random-token": [rnd(rng, ALNUM, 32)],
    }


def transcript(secrets: dict[str, list[str]]) -> str:
    """A transcript-like text that embeds every fake secret in a realistic context."""
    s = secrets
    pem = s["private-key"][0]
    service_account = json.dumps(
        {
            "type": "service_account",
            "project_id": "demo-project",
            "private_key_id": "0" * 40,
            "private_key": f"-----BEGIN PRIVATE KEY-----\n{pem}\n-----END PRIVATE KEY-----\n",
            "client_email": "svc@demo-project.iam.gserviceaccount.com",
        }
    )
    return "\n".join(
        [
            "I'll check the environment first.",
            "[tool_use Bash] {\"command\": \"cat .env\"}",
            "[tool_result Bash] # local settings",
            f"AWS_ACCESS_KEY_ID={s['aws-access-key-id'][0]}",
            f"AWS_SECRET_ACCESS_KEY={s['aws-secret-key'][0]}",
            f"export OPENAI_API_KEY={s['openai-key'][0]}",
            f"ANTHROPIC_API_KEY=\"{s['anthropic-key'][0]}\"",
            f"GITHUB_TOKEN={s['github-token'][0]}",
            f"HF_TOKEN={s['huggingface-token'][0]}",
            f"DB_PASSWORD={s['password'][0]}",
            f"DATABASE_URL=postgres://admin:{s['url-password'][0]}@db.internal.example.com:5432/app",
            f"STRIPE_SECRET_KEY={s['stripe-key'][0]}",
            f"SLACK_WEBHOOK={s['slack-webhook'][0]}",
            "[tool_result Bash] {\"Credentials\": {\"AccessKeyId\": \""
            + s["aws-access-key-id"][1]
            + "\", \"SecretAccessKey\": \""
            + s["aws-secret-key"][0]
            + "\", \"SessionToken\": \""
            + s["aws-session-token"][0]
            + "\"}}",
            f"[tool_use Write] {json.dumps({'file_path': 'sa.json', 'content': service_account})}",
            f"curl -H 'Authorization: Bearer {s['bearer-token'][0]}' https://api.example.com/v1/me",
            f"curl -H \"Authorization: Basic {s['basic-auth'][0]}\" https://ci.example.com/",
            f"git remote add origin https://oauth2:{s['gitlab-token'][0]}@gitlab.com/acme/app.git",
            f"maps_key = '{s['gcp-api-key'][0]}'",
            f"access_token = \"{s['gcp-oauth-token'][0]}\"",
            f"\"client_secret\": \"{s['gcp-client-secret'][0]}\"",
            "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey="
            + s["azure-storage-key"][0]
            + ";EndpointSuffix=core.windows.net",
            "https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&sig="
            + s["azure-sas-token"][0],
            f"token: {s['github-token'][1]}",
            f"Found leaked token {s['github-token'][2]} in logs; also {s['github-token'][3]}.",
            f"{{\"token\": \"{s['slack-token'][0]}\"}}",
            f"//registry.npmjs.org/:_authToken={s['npm-token'][0]}",
            f"password = {s['pypi-token'][0]}",
            f"twine upload -u __token__ -p {s['pypi-token'][0]}",
            f"Set-Cookie: session={s['jwt'][0]}; HttpOnly",
            f"stripe listen --api-key {s['stripe-key'][1]}",
            f"<script>Stripe('{s['stripe-key'][2]}')</script>",
            f"ssh-add - <<< '-----BEGIN OPENSSH PRIVATE KEY-----\n{pem}'",
            f"config = {{'password': '{s['password'][1]}', 'user': 'bob'}}",
            f"mysql --password {s['password'][2]} -u root",
            f"api_key: \"{s['secret'][0]}\"",
            f"\"secret\": \"{s['secret'][1]}\"",
            f"sshKey = \"{s['high-entropy'][0]}\"",
            f"Also tried {s['openai-key'][1]} which failed.",
            f"glpat rotate: {s['gitlab-token'][0]}",
            f"curl -H 'Authorization: Token {s['authorization'][0]}' https://api.example.com/v2",
            f"<settings><dbPassword>{s['xml-secret'][0]}</dbPassword></settings>",
            f"machine api.example.com login deploy password {s['netrc-password'][0]}",
            f"curl -s -u deploy:{s['curl-user'][0]} https://ci.example.com/api",
            f"db.internal:5432:app:deploy:{s['pgpass-password'][0]}",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: tls\ndata:\n"
            f"  tls.key: {s['kubernetes-secret'][0]}\n",
            f"The shop's admin token {s['provider-token'][0]} works again.",
            f"deploy:{s['password-hash'][0]}:19000:0:99999:7:::",
            f"curl -d @t.json https://thingsboard.cloud/api/v1/{s['url-path-token'][0]}/telemetry",
            "curl 'https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600"
            f"&X-Amz-SignedHeaders=host&X-Amz-Signature={s['url-signature'][0]}'",
            f"jira token - '{s['named-secret'][0]}'",
            f"I rotated it this morning and the new one is {s['random-token'][0]} for now.",
        ]
    )


def test_every_kind_is_redacted() -> None:
    secrets = fake_secrets()
    text = transcript(secrets)
    redacted, findings = redact(text)
    for kind, values in secrets.items():
        for value in values:
            assert value not in redacted, f"{kind} survived redaction"
    assert "[REDACTED:" in redacted
    found = Counter(f.kind for f in findings)
    # Every detector fires at least once on the transcript (the specific kinds, not only the
    # generic assignment ones that may also cover them).
    missing = set(KINDS) - set(found)
    assert not missing, f"never reported: {missing}"
    assert len(KINDS) == len(set(KINDS)), "a kind listed twice"  # two detectors may share one
    # The non-secret context survives.
    for keep in ("cat .env", "db.internal.example.com:5432/app", "svc@demo-project", "HttpOnly",
                 "api.example.com/v1/me", "AccountName=acme", "user': 'bob'"):
        assert keep in redacted


@pytest.mark.parametrize("seed", range(5))
def test_fresh_secrets_every_seed(seed: int) -> None:
    secrets = fake_secrets(seed)
    redacted, _ = redact(transcript(secrets))
    for values in secrets.values():
        for value in values:
            assert value not in redacted


def test_replacement_format_and_offsets() -> None:
    token = "ghp_" + "aB3" * 12
    text = f"token is {token} ok"
    redacted, findings = redact(text)
    assert redacted == "token is [REDACTED:github-token] ok"
    assert findings == [Finding("github-token", 9, 9 + len(token))]
    assert text[findings[0].start : findings[0].end] == token


def test_findings_never_hold_the_secret() -> None:
    secret = fake_secrets()["openai-key"][0]
    findings = scan(f"key={secret}")
    assert findings
    for f in findings:
        assert secret not in repr(f) and secret not in str(f)
        assert not hasattr(f, "__dict__")  # slots: nowhere to stash the value


ORDINARY = [
    "commit 3f2a9c1e8b7d6f5a4e3d2c1b0a9f8e7d6c5b4a39 (HEAD -> main)",
    "git show 9fceb02 && git log --oneline -5",
    "session 0195f4a2-7c1e-7b3a-9d2e-5f6a7b8c9d0e resumed",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    '{"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}',
    "[image/png base64, 123 KB elided]",
    "/home/user/.config/funes/models/all-MiniLM-L6-v2.Q8_0.gguf",
    "C:\\Users\\dev\\AppData\\Local\\Temp\\build_4f9a2c",
    "see https://github.com/huggingface/funes/blob/main/docs/format.md#chunk-ids",
    "https://user@example.com/path and ssh://git@github.com:22/org/repo.git",
    "token = tokenizer.encode(text)\nmax_tokens = 256\ntokens: list[int] = []",
    "def login(username: str, password: str) -> Session:\n    return auth(password=password)",
    "password = getpass.getpass()\nsecret = os.environ['APP_SECRET']",
    "api_key = os.environ.get('OPENAI_API_KEY')\ntoken: Optional[str] = None",
    "client = OpenAI(api_key=settings.openai_api_key)",
    '"input_tokens": 1234, "cache_creation_input_tokens": 0, "output_tokens": 56',
    "headers = {'Authorization': f'Bearer {token}'}",
    "const { data: { session } } = await supabase.auth.getSession()",
    "key = f'{prefix}:{user_id}'\ncache_key = hashlib.sha256(raw).hexdigest()",
    "The password must be at least 12 characters; the token expires after 1 hour.",
    "export GITHUB_TOKEN=$(gh auth token)\nexport HF_TOKEN=${HF_TOKEN:-}",
    "password: ********\nsecret: <your-secret-here>\napi_key: YOUR_API_KEY",
    "- uses: actions/checkout@v4\n  with:\n    token: ${{ secrets.GITHUB_TOKEN }}",
    "risk-assessment, task-runner and disk-usage are sk-learn-free",
    "monkey = Monkey(); bypass = True; keyboard = 'qwerty'",
    "uuid.uuid4() -> 123e4567-e89b-12d3-a456-426614174000",
    "ETag: \"33a64df551425fcc55e4d42a148795d9f25f89d4\"",
    "data = base64.b64encode(payload)  # 'SGVsbG8gd29ybGQ='",
    "ssh-keygen -t ed25519 -f ~/.ssh/id_ed25519 -N ''",
    "if line.startswith('-----BEGIN PRIVATE KEY-----'):",
    "BEGIN_MARKER = '-----BEGIN RSA PRIVATE KEY-----\\n...\\n-----END RSA PRIVATE KEY-----'",
    "Authorization: Bearer <token>",
    "postgres://user:password@localhost:5432/db is the local default",
    "function signature(payload, secretKey) { return hmac(secretKey, payload) }",
    "def fallback_getpass(prompt='Password: ', stream=None):",
    'input("Enter your API key: ")',
    "https://example.com/a:b/c@d",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert scan(text) == [], [(f.kind, text[f.start : f.end]) for f in scan(text)]


_fixture_strings = trace_strings


#: The real fixtures hold no live credentials (reviewed by hand: every candidate value in them
#: is a placeholder such as "sk-...", "REDACTED_API_KEY" or "test-key"; bench/redaction_fp.py
#: lists them), so every finding there is a false positive. The detectors currently report
#: none on 2.3 MB of transcripts. Two are tolerated so a new detector may have a rare miss
#: without failing, while a systematic false positive (which hits real transcripts dozens of
#: times) does fail.
MAX_FIXTURE_FINDINGS = 2


def test_false_positives_on_real_fixtures() -> None:
    if not FIXTURES.exists():
        pytest.skip(SHARED_MISSING)
    strings = _fixture_strings()
    assert sum(map(len, strings)) > 1_000_000
    findings = [(f.kind, s[f.start : f.end][:12]) for s in strings for f in scan(s)]
    assert len(findings) <= MAX_FIXTURE_FINDINGS, findings


# -- idempotency -----------------------------------------------------------------------------

_SECRET_POOL = [v for values in fake_secrets(11).values() for v in values]
_CONTEXTS = [
    "{}",
    "token={}",
    'password: "{}"',
    "api_key = '{}'",
    "https://u:{}@h.example.com/",
    "Authorization: Bearer {}",
    "--token {}",
    '{{"secret": "{}"}}',
    "AccountKey={};",
    "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
]


@st.composite
def secret_text(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            context = draw(st.sampled_from(_CONTEXTS))
            parts.append(context.format(draw(st.sampled_from(_SECRET_POOL))))
        else:
            parts.append(draw(st.text(st.characters(codec="utf-8"), max_size=40)))
        parts.append(draw(st.sampled_from([" ", "\n", "", "; ", "\\n", '"'])))
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(secret_text())
def test_redaction_is_idempotent(text: str) -> None:
    once, _ = redact(text)
    twice, again = redact(once)
    assert twice == once
    assert again == []
    assert scan(once) == []


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_findings_are_ordered_disjoint_and_in_bounds(text: str) -> None:
    findings = scan(text)
    last = 0
    for f in findings:
        assert last <= f.start < f.end <= len(text)
        last = f.end


# -- turns, entropy, speed -------------------------------------------------------------------


def test_redact_turn_covers_blocks_and_provenance() -> None:
    s = fake_secrets(3)
    gitlab = s["gitlab-token"][0]
    turn = Turn(
        harness="claude",
        session_id="s1",
        turn_id="t1",
        seq=0,
        ts="2026-01-01T00:00:00Z",
        role="user",
        blocks=(
            Block("text", f"use {s['github-token'][0]} please"),
            Block("tool_result", "nothing here", tool_name="Bash"),
        ),
        project=f"https://oauth2:{gitlab}@gitlab.com/acme/app.git",
        workdir="/home/dev/app",
    )
    clean, counts = redact_turn(turn)
    assert counts == Counter({"github-token": 1, "gitlab-token": 1})
    assert s["github-token"][0] not in clean.blocks[0].text
    assert gitlab not in (clean.project or "")
    assert clean.blocks[1] is turn.blocks[1]
    assert clean.workdir == turn.workdir
    same, none = redact_turn(clean)
    assert same is clean and not none


def test_entropy() -> None:
    assert entropy("") == 0.0
    assert entropy("aaaa") == 0.0
    assert entropy("abcd") == pytest.approx(2.0)
    assert entropy(rnd(random.Random(1), ALNUM, 64)) > 4.5


@pytest.mark.parametrize(
    "text",
    [
        "a" * 200_000,
        "-----BEGIN PRIVATE KEY-----\n" + "A" * 200_000,
        "-----BEGIN PRIVATE KEY-----" * 5_000,
        "password=" * 20_000,
        "token: " * 30_000 + "x",
        "eyJ" * 50_000,
        "https://" + "a:" * 50_000 + "@",
        "sk-" + "a-" * 50_000,
        "key " * 50_000,
        "curl " * 20_000,  # gitleaks' curl rules: `.*` bounded, or this is quadratic
    ],
)
def test_pathological_inputs_stay_fast(text: str) -> None:
    start = time.process_time()
    redact(text)
    assert time.process_time() - start < 2.0


def test_telling_words_from_a_random_value_is_linear() -> None:
    """A value of letter pairs and digit runs that is not words at its very end is refused at
    once, not after trying every way of cutting it into parts (exponential before)."""
    from funes.ingest.redact import _wordy

    start = time.process_time()
    assert not _wordy("ab1234567" * 8 + "c")
    assert _wordy("ab1234567" * 8 + "ed")
    assert time.process_time() - start < 2.0


def test_later_passes_map_back_to_original_offsets() -> None:
    from funes.ingest.redact import _apply, _unmap

    text = "ab SECRET cd OTHER ef"
    out, edits = _apply(text, [Finding("x", 3, 9), Finding("y", 13, 18)])
    assert out == "ab [REDACTED:x] cd [REDACTED:y] ef"
    # A span found in `out` that covers "] cd [" maps to the original "SECRET cd OTHER".
    start, end = out.index("] cd"), out.index(" ef")
    assert (_unmap(start, edits, False), _unmap(end, edits, True)) == (3, 18)
    assert _unmap(out.index("cd"), edits, False) == text.index("cd")
    assert _unmap(0, edits, False) == 0 and _unmap(len(out), edits, True) == len(text)


def test_a_flag_glued_to_a_token_is_still_a_flag() -> None:
    key = "AKIA" + "Z7Q2M4XK9PLR3TW8"  # random-looking: "AKIA" + "Q" * 16 reads as a placeholder
    redacted, findings = redact(f" {key}--token S3cr3t-Pa55w0rd ")
    assert redacted == " [REDACTED:aws-access-key-id]--token [REDACTED:secret] "
    assert [f.kind for f in findings] == ["aws-access-key-id", "secret"]


@pytest.mark.parametrize("url, kept", [
    ("mongodb+srv://hpapp:bria@pass135!@briaserver.example.net/test", "@briaserver.example.net/"),
    ("redis://:p4ss@w0rd@cache:6379", "@cache:6379"),
    ("postgres://admin:Zq8vLm2x@db:5432/app?notify=bob@example.com", "@db:5432/app?notify=bob@"),
])
def test_a_url_password_holding_an_at_sign_goes_whole(url: str, kept: str) -> None:
    out = redact(url)[0]
    assert "[REDACTED:url-password]" + kept in out, out


@pytest.mark.parametrize("text", [
    '"access_key": "AKIAIOSFODNN7EXAMPLE",',
    "access_key: AKIAI44QH8DHBEXAMPLE",
    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
])
def test_awss_published_example_keys_are_left_under_any_name(text: str) -> None:
    """The documentation's keys, as gitleaks' allowlist has them; a name does not make them real."""
    assert redact(text) == (text, [])


@pytest.mark.parametrize("url, user, host", [
    ("https://oauth2:glpat-Zq8vLm2xWp4rTs6uYv8w@gitlab.com/x/y.git", "oauth2",
     "gitlab.com/x/y.git"),
    ("https://x-access-token2:ghs_16C7e42F292c6912E7710c838347Ae178B4a@github.com/o/r",
     "x-access-token2", "github.com/o/r"),
    ("https://token:Zq8vLm2xWp4rTs6uYv8wQ1@git.example.com/o/r", "token", "git.example.com/o/r"),
])
def test_a_token_as_a_urls_password_keeps_the_user_and_the_host(
    url: str, user: str, host: str
) -> None:
    """Only the password goes: a user named like a credential is no name for what follows."""
    out = redact(f"git clone {url}")[0]
    assert out.startswith(f"git clone https://{user}:[REDACTED:") and out.endswith(f"]@{host}"), out
