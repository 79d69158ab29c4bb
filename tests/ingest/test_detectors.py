"""The field's detectors (funes.ingest.detectors): formats, syntaxes, prose, repeats, residues.

Every secret here is generated in its provider's documented format from a seeded generator, so
the tests need no scanner's data (bench/secret_coverage.py measures on those). A secret is
caught when no 16-character piece of it survives redaction, the same test the bench applies.
"""

from __future__ import annotations

import base64
import random
import string
import time

import pytest

from funes.ingest.detectors import random_word
from funes.ingest.noise import elide_base64
from funes.ingest.redact import redact
from tests.ingest.secretgen import ALNUM, B64URL, leaked, rnd

LOWER_ALNUM = string.ascii_lowercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"



def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def provider_tokens(seed: int) -> dict[str, str]:
    """One token per family, in the format the provider documents."""
    r = random.Random(seed)
    return {
        "shopify": "shpat_" + rnd(r, HEX, 32),
        "twilio": "SK" + rnd(r, HEX, 32),
        "mailgun": "key-" + rnd(r, HEX, 32),
        "sonar": "squ_" + rnd(r, HEX, 40),
        "atlassian": "ATATT3xFfGF0" + rnd(r, B64URL, 170),
        "discord": "M" + rnd(r, B64URL, 23) + "." + rnd(r, B64URL, 6) + "." + rnd(r, B64URL, 27),
        "digitalocean": "dop_v1_" + rnd(r, HEX, 64),
        "vault": "hvs." + rnd(r, B64URL, 90),
        "groq": "gsk_" + rnd(r, ALNUM, 52),
        "sentry": "sntryu_" + rnd(r, HEX, 64),
        "newrelic": "NRAK-" + rnd(r, string.ascii_uppercase + string.digits, 27),
        "linear": "lin_api_" + rnd(r, ALNUM, 40),
        "postman": "PMAK-" + rnd(r, HEX, 24) + "-" + rnd(r, HEX, 34),
        "square": "EAAA" + rnd(r, B64URL, 60),
        "teams-webhook": f"https://{rnd(r, string.ascii_lowercase, 8)}.webhook.office.com/"
        f"webhookb2/{rnd(r, HEX, 8)}-{rnd(r, HEX, 4)}@{rnd(r, HEX, 8)}/IncomingWebhook/"
        f"{rnd(r, HEX, 32)}/{rnd(r, HEX, 8)}",
        "discord-webhook": f"https://discord.com/api/webhooks/{r.randrange(10**17, 10**18)}/"
        + rnd(r, B64URL, 68),
        "salesforce": "00D" + rnd(r, ALNUM, 15) + "!" + rnd(r, ALNUM + ".", 96),
        "azure-ad": rnd(r, ALNUM, 3) + "8Q~" + rnd(r, ALNUM + "_~.-", 34),
        "doppler-scim": "dp.scim." + rnd(r, ALNUM, 43),
        "amazon-mws": f"amzn.mws.{rnd(r, HEX, 8)}-{rnd(r, HEX, 4)}-{rnd(r, HEX, 4)}-"
        f"{rnd(r, HEX, 4)}-{rnd(r, HEX, 12)}",
        "azure-devops": rnd(r, ALNUM, 52) + "JQQJ99" + rnd(r, ALNUM, 4) + "ACAAAAAA"
        + rnd(r, ALNUM, 6) + "AZDO" + rnd(r, ALNUM, 4),
        "dependency-track": "odt_" + rnd(r, ALNUM, 32),
        "ionic": "ion_" + rnd(r, ALNUM, 42),
        "shopify-lengthened": "shpss_" + rnd(r, ALNUM, 38),
        "github-installation": f"ghs_{r.randrange(10**4, 10**8)}_"
        + _b64url(b'{"alg":"RS256","typ":"JWT"}') + "."
        + _b64url(b'{"iat":%d,"iss":"%d"}' % (r.randrange(10**9, 2 * 10**9), r.randrange(10**6)))
        + "."
        + _b64url(r.randbytes(256)),
        "pagarme": "ak_live_" + rnd(r, ALNUM, 30),
        "ubidots": "BBFF-" + rnd(r, ALNUM, 30),
        "stackhawk": "hawk." + rnd(r, B64URL, 20) + "." + rnd(r, B64URL, 20),
        "clickup": "pk_" + str(r.randrange(10**6, 10**8)) + "_"
        + rnd(r, string.ascii_uppercase + string.digits, 32),
        "django": "django-insecure-" + rnd(r, ALNUM + "!@#%^&*(-_=+)", 50),
        "twitch-stream": f"live_{r.randrange(10**8, 10**9)}_{rnd(r, ALNUM, 30)}",
        "kolide": "k2sk_v1_" + rnd(r, ALNUM, 24),
        "azure-storage": rnd(r, B64, 76) + "+ASt" + rnd(r, B64, 5) + "Q==",
        "azure-servicebus": rnd(r, B64, 33) + "+ASb" + "C" + rnd(r, B64, 5) + "=",
        "azure-search": rnd(r, ALNUM, 42) + "AzSe" + "B" + rnd(r, ALNUM, 5),
        "azure-functions": rnd(r, B64URL, 44) + "AzFu" + rnd(r, B64URL, 5) + "g==",
        "azure-openai-cask": rnd(r, ALNUM, 52) + "JQQJ99" + rnd(r, ALNUM, 1) + "C"
        + rnd(r, ALNUM, 16) + "A" + rnd(r, ALNUM, 7),
        "onfido": "api_live_us." + rnd(r, B64URL, 11) + "." + rnd(r, B64URL, 32),
        "braintree": "access_token$production$" + rnd(r, LOWER_ALNUM, 16) + "$"
        + rnd(r, LOWER_ALNUM, 32),
        "outlook-webhook": f"https://outlook.office.com/webhook/{rnd(r, HEX, 8)}-{rnd(r, HEX, 4)}-"
        f"{rnd(r, HEX, 4)}-{rnd(r, HEX, 4)}-{rnd(r, HEX, 12)}@",
        "atlassian-dc": base64.b64encode(
            str(r.randrange(10**11, 10**12)).encode() + b":" + r.randbytes(20)).decode(),
        "asana": f"2/{r.randrange(10**15, 10**16)}/{r.randrange(10**15, 10**16)}:"
        + rnd(r, HEX, 32),
        "mailgun-hex": f"{rnd(r, HEX, 32)}-{rnd(r, HEX, 8)}-{rnd(r, HEX, 8)}",
        "vault-legacy": "s." + rnd(r, ALNUM, 24),
        "private-packagist": "packagist_" + r.choice(["ort", "out", "uut"]) + "_"
        + rnd(r, HEX, 68),
        "sas-signature": base64.b64encode(r.randbytes(32)).decode().replace("+", "%2B")
        .replace("/", "%2F").replace("=", "%3D"),
    }


CRYPT = "./" + ALNUM


def password_hashes(seed: int) -> dict[str, str]:
    """One hash per modular-crypt scheme, in its documented layout."""
    r = random.Random(seed)
    return {
        "bcrypt": f"$2b$12${rnd(r, CRYPT, 53)}",
        "md5-crypt": f"$1${rnd(r, CRYPT, 8)}${rnd(r, CRYPT, 22)}",
        "apr1": f"$apr1${rnd(r, CRYPT, 8)}${rnd(r, CRYPT, 22)}",
        "sha256-crypt": f"$5$rounds=5000${rnd(r, CRYPT, 16)}${rnd(r, CRYPT, 43)}",
        "sha512-crypt": f"$6${rnd(r, CRYPT, 16)}${rnd(r, CRYPT, 86)}",
        "yescrypt": f"$y$j9T${rnd(r, CRYPT, 24)}${rnd(r, CRYPT, 43)}",
        "argon2": f"$argon2id$v=19$m=65536,t=3,p=4${rnd(r, B64, 22)}${rnd(r, B64, 43)}",
        "django": f"pbkdf2_sha256$600000${rnd(r, ALNUM, 22)}${rnd(r, B64, 43)}=",
        "krb5asrep": f"$krb5asrep$23$svc@corp.example:{rnd(r, HEX, 32)}${rnd(r, HEX, 400)}",
    }


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("context", [
    "{s}",
    "ops:{s}:19876:0:99999:7:::",
    "export HASH='{s}'",
    "The seeded admin's hash is {s} in the fixture.",
])
def test_password_hashes_are_redacted_and_only_the_hash(seed: int, context: str) -> None:
    for scheme, value in password_hashes(seed).items():
        out, found = redact(context.format(s=value))
        assert not leaked(value, out), (scheme, out)
        assert {f.kind for f in found} == {"password-hash"}, (scheme, found)
    # The hash ends where its format does: a shadow line's other fields stay.
    out = redact("ops:" + password_hashes(3)["sha512-crypt"] + ":19876:0:99999:7:::")[0]
    assert out == "ops:[REDACTED:password-hash]:19876:0:99999:7:::"


def test_an_okta_token_is_redacted_and_its_header_word_kept() -> None:
    token = "00" + rnd(random.Random(5), B64URL, 40)
    out, found = redact(f"the service sends SSWS {token} on every call")
    assert out == "the service sends SSWS [REDACTED:provider-token] on every call"
    assert [f.kind for f in found] == ["provider-token"]


@pytest.mark.parametrize("text", [
    "$2b$12$short",  # not the format's length
    "cost is $5 and $6 per seat",
    "echo $1$2$3",
])
def test_what_only_resembles_a_crypt_hash_is_left(text: str) -> None:
    assert redact(text) == (text, [])


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "context",
    [
        "{s}",
        "export TOKEN={s}",
        "After the outage I rotated it, and the new one is {s} so please update the runner.",
        '{{"config": {{"value": "{s}"}}}}',
    ],
)
def test_provider_formats_are_caught_named_or_not(seed: int, context: str) -> None:
    for family, secret in provider_tokens(seed).items():
        out = redact(context.format(s=secret))[0]
        assert not leaked(secret, out), (family, out)


@pytest.mark.parametrize(
    "template",
    [
        "jira token - '{s}'",
        "okta token -> \"{s}\"",
        "plivo secret ('{s}')",
        "mixpanel api key {s}",
        '<string name="api_key">{s}</string>',
        "client_secret: {s}",
        "https://api.example.com/geoip?edition=City&license_key={s}",
        "AZURE_OPENAI_KEY: {s}",
    ],
)
def test_values_near_a_secret_word_in_any_syntax(template: str) -> None:
    r = random.Random(template)
    for secret in (rnd(r, LOWER_ALNUM, 32), rnd(r, ALNUM, 24), rnd(r, HEX, 32)):
        out = redact(template.format(s=secret))[0]
        assert not leaked(secret, out), out


@pytest.mark.parametrize("seed", range(6))
def test_random_tokens_alone_in_prose(seed: int) -> None:
    r = random.Random(seed)
    for secret in (rnd(r, ALNUM, 40), rnd(r, LOWER_ALNUM, 36), rnd(r, B64URL, 48)):
        for line in (
            f"I pasted {secret} into the dashboard and it still says unauthorized.",
            f"use {secret}.",
            f"(it was {secret})",
        ):
            out = redact(line)[0]
            assert not leaked(secret, out), out


def test_a_base64_key_whose_plus_signs_break_its_runs_is_found_alone() -> None:
    """An AWS secret access key is 40 characters of standard base64: a `+` or `/` about every
    32, so it seldom holds the 16 alphanumerics in a row a token alone needs."""
    r = random.Random(22)
    alphabet = string.ascii_letters + string.digits + "+/"
    keys: list[str] = []
    while len(keys) < 100:
        key = "".join(r.choice(alphabet) for _ in range(40))
        if "+" in key and key.count("/") <= 1 and key[0] != "/":
            keys.append(key)
    caught = sum(
        not leaked(k, redact(f"After the outage I rotated it, and the new one is {k} so "
                             "please update the runner.")[0])
        for k in keys
    )
    assert caught >= 95, caught


def test_a_padded_base64_key_with_slashes_is_not_a_path() -> None:
    """A 64-byte key in base64 (an Azure storage key: 88 characters, `==`) holds slashes as
    often as not; padded or with a `+`, it is not a path, and alone in prose it goes."""
    r = random.Random(21)
    found = 0
    for _ in range(40):
        key = base64.b64encode(r.randbytes(64)).decode()
        if key.count("/") < 2:
            continue
        found += 1
        out = redact(f"After the outage I rotated it, and the new one is {key} so update it.")[0]
        assert not leaked(key, out), out
    assert found >= 10
    # a path, and long base64 data with slashes (an image, a signature), stay
    for text in ("see src/c++/lib/foo.h and docs/a+b/notes.md for the details",
                 "the signature was " + base64.b64encode(r.randbytes(300)).decode() + " here"):
        assert redact(text)[1] == [], text


@pytest.mark.parametrize("direct", [False, True])
def test_a_jwe_in_its_five_parts_is_one_token(direct: bool) -> None:
    """A JWE's compact form: header, encrypted key (empty with `"alg": "dir"`), IV,
    ciphertext, tag. The JWT form (three parts, claims starting `eyJ`) was all that was known."""
    r = random.Random(direct)
    header = _b64url(b'{"alg":"dir","enc":"A256GCM"}' if direct
                     else b'{"alg":"RSA-OAEP","enc":"A256GCM"}')
    key = "" if direct else _b64url(r.randbytes(256))
    jwe = ".".join([header, key, _b64url(r.randbytes(12)), _b64url(r.randbytes(120)),
                    _b64url(r.randbytes(16))])
    for line in (jwe, f"Cookie: session={jwe}; Path=/", f"the token was {jwe} until it expired"):
        out = redact(line)[0]
        assert not leaked(jwe.replace("..", "."), out) and "[REDACTED:jwt]" in out, out


def _uuid(r: random.Random) -> str:
    return "-".join(rnd(r, HEX, n) for n in (8, 4, 4, 4, 12))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", [
    "bloggerKEY-", "hellosign-PRIVATE-key-", "fileio.PRIVATE.TOKEN-", "prospect-access-",
    "codatoken-", "dd_secret_key-", "urlscan-access-token-key-", "signupgeniusPRIVATE.",
])
def test_a_name_glued_to_its_key_in_one_word(name: str, seed: int) -> None:
    """`<provider><secret word><separator><key>` written as one word: the key after the last
    secret word goes, whether random, hex of a key's size or a UUID; the name stays."""
    r = random.Random(f"{name}{seed}")
    for key in (rnd(r, ALNUM, 40), rnd(r, HEX, 32), _uuid(r)):
        for line in (f"{name}{key}", f"set it to {name}{key} in the dashboard."):
            out = redact(line)[0]
            assert not leaked(key, out) and name in out, out


@pytest.mark.parametrize("text", [
    "the cache-key-layer-build-artifacts-v2 was stale",
    "fix-token-refresh-race-in-login was merged",
    "see ./secrets/token-rotation-2024-01-15.md for the plan",
    "the public-key-3f2a9b1c8d7e6f50a4b3c2d1e0f9a8b7 is pinned",
])
def test_a_glued_name_whose_rest_is_no_key_is_left(text: str) -> None:
    assert redact(text)[1] == [], text


@pytest.mark.parametrize("template", [
    "mailboxlayer ACCESS {s}", "weatherbitACCESS {s}", "splunk_PRIVATE {s}",
    "bugsnag private-key {s}", "tyntec access token: {s}",
    "Our SoftLayer key is {s}", "SoftLayer API key: {s}",
])
def test_a_providers_name_then_words_that_qualify_its_key(template: str) -> None:
    """`coinapi ACCESS <key>`: the provider's name (a word no vocabulary has) names the key
    even with qualifying words between them; an English word before them does not."""
    r = random.Random(template)
    for key in (rnd(r, HEX, 32), rnd(r, ALNUM, 24)):
        out = redact(template.format(s=key))[0]
        assert not leaked(key, out), out
    hexkey = rnd(r, HEX, 32)
    assert redact(f"daily access {hexkey[:31]}")[1] == []  # not a key's size


@pytest.mark.parametrize("name", [
    "LastCommit:", "CacheKey:", "the ImageLayer key is", "layer:", "FileHash:", "ObjectKey:",
    "the cache key is", "NodeVersion:", "AssertionError:", "ValueError:",
])
def test_a_word_and_what_it_labels_is_no_brand(name: str) -> None:
    """A brand in two humps (`SoftLayer`) names a key; two words in two humps do not."""
    text = f"{name} 8f3c2a9d1e7b4f6a0c5d2e9f8a7b6c1d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b"
    assert redact(text) == (text, []), text


@pytest.mark.parametrize("seed", [1, 2])
def test_a_urls_signature_is_redacted_and_the_rest_of_the_url_kept(seed: int) -> None:
    """SAS, Logic Apps and presigned URLs grant access by their signature alone."""
    r = random.Random(seed)
    sig, amz = rnd(r, B64URL, 43), rnd(r, HEX, 64)
    token = rnd(r, ALNUM, 60) + "%2F" + rnd(r, ALNUM, 80) + "%3D"
    for text, secret in (
        ("https://prod-1.westus.logic.azure.com:443/workflows/1f/triggers/manual/paths/invoke"
         f"?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={sig}", sig),
        ("GET https://b.s3.amazonaws.com/k.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=60"
         f"&X-Amz-SignedHeaders=host&X-Amz-Signature={amz} 200", amz),
        (f"https://b.s3.amazonaws.com/k?X-Amz-Security-Token={token}&X-Amz-Expires=60", token),
    ):
        out = redact(text)[0]
        assert secret not in out and "[REDACTED:" in out, out
        assert out.startswith(text[:30]), out
    # a signature's name in prose, a placeholder, a parameter whose name ends in "sig"
    for text in ("append ?sig=<signature> to the URL",
                 "the ?sig=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                 "https://example.com/x?design=wintermoon_on_the_lake_at_dawn_2"):
        assert redact(text) == (text, []), text


def test_a_pagination_name_must_start_where_a_part_of_the_name_starts() -> None:
    """`NextPageToken` is a cursor; `statuspage_token` is Statuspage's API token."""
    key = _uuid(random.Random(3))
    assert leaked(key, redact(f'"NextPageToken": "{key}"')[0])
    assert leaked(key, redact(f"page_token = {key}")[0])
    assert not leaked(key, redact(f"statuspage_token = {key}")[0])
    value = "a8Kd93JfLq0Zx7VbN2mPw5Rt"  # an object store's key, by its name's parts
    assert leaked(value, redact(f'"S3Key": "{value}"')[0])
    assert not leaked(value, redact(f'"MyApiKey": "{value}"')[0])


@pytest.mark.parametrize(
    "text",
    [
        "Merged 3ab759fef4bb5935d4fe9ac68b503d05346b8364 into main after review.",
        "The run id is 123e4567-e89b-12d3-a456-426614174000 and it passed.",
        '"integrity": "sha512-kfba9OXKzZutdbXshWGqk7MbehqfJp3lyd/qJy5XQIHFFhwS2hT0z2iIjGwmthA2'
        'fgl8VmOfqe4qY5dIlGPkMe=="',
        "Request failed (request id: req_011CVxAbC9dEfGh2JkLmN3pQ) please retry.",
        "The tool call toolu_01XyZaBcDeFgHiJkLmNoPqRs returned nothing.",
        "see AbstractSingletonProxyFactoryBean and KeySerializationEncryptionBuilder here",
        "public_key = ed25519.Ed25519PublicKey.from_public_bytes(data)",
        "arn:aws:iam::123456789012:role/service-role/MyRole-20240101T000000",
        '"NextToken": "eyJOZXh0VG9rZW4iOiBudWxsLCAiYm90b190cnVuY2F0ZV9hbW91bnQiOiAyfQ=="',
        '"ClientToken": "a8Kd93JfLq0Zx7VbN2mPw5Rt"',
        "--idempotency-token 91ad3b2c7f1e4d8a9b0c",
        "| sha256 | e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 |",
        "![plot](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
        "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
        "FAILED tests/test_x.py::test_hash - AssertionError: 9f86d081884c7d659a2feaa0c55ad015 != "
        "5d41402abc4b2a76b9719d911017c592",
        "Usage: tool --api-key <API_KEY> --token YOUR_TOKEN_HERE --secret ${SECRET}",
        "src/funes/ingest/detectors_test_helpers_2024_v2.py and docs/reference/redaction-rules.md",
        "pip install torch==2.3.1+cu121 llama-cpp-python==0.2.90 huggingface-hub==0.24.6",
        "The password_hash column is pbkdf2_sha256$600000$salt$hash and nothing else.",
        # code, not values (JavaScript and TypeScript read bare names after a colon)
        "      password: tString,\n      origin: tOptional(tString)",
        '  "httpCredentials": httpCredentials,\n  resumptionToken: lastEventId,',
        "const browserToken = browser?.browserName ?? options2?.onresumptiontoken;",
        '{"password": "string?", "secret": "boolean?", "checked": "boolean?"}',
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13",
        '  AppXq0fevzme2pys62n3e0fbqa7peapykr8v: { name: "Edge", id: "com.microsoft.edge" },',
        "<path d=`M240-560v400q0 33-23.5 56.5T160-80h640q33 0 56.5-23.5T880-160`/>",
        # the layouts of funes.ingest.structured, when they are something else
        "GET /v1/1700000000000000/1700000000000001:d41d8cd98f00b204e9800998ecf8427e 404",
        "built 0123456789abcdef0123456789abcdef-00000000-00000000 from the cache",
        "base64 of digits MDAwMDAwMDAwMDAwOjAwMDAwMDAwMDAwMDAwMDAwMDAw is no token",
        "?q=hello%20world%2C%20this%20is%20a%20search%20for%20things%3D",
        "function(){s.addComponentsFromRegistry()}",
        "this._err(s.unexpectedCharacterAfterDoctypeSystemIdentifier)",
        "ServerAddressByClientCIDRs: s.getServerAddressByClientCIDRs(req.Request),",
    ],
)
def test_what_transcripts_are_full_of_is_left_alone(text: str) -> None:
    assert redact(elide_base64(text))[1] == []


def test_every_repeat_of_a_found_value_is_redacted() -> None:
    secret = rnd(random.Random(5), ALNUM, 28)
    text = (
        f"SERVICE_PASSWORD={secret}\n"
        f"later the agent ran: login {secret}; echo '{secret}' > /tmp/x\n"
        f"and the log said {{\"pw\":\"{secret}\"}}"
    )
    out = redact(text)[0]
    assert secret not in out and out.count("[REDACTED:") == 4, out


def test_a_cut_at_a_dot_runs_to_the_token_end() -> None:
    r = random.Random(9)
    head, tail = rnd(r, ALNUM, 20), rnd(r, ALNUM, 20)
    out = redact(f"api_key: {head}.{tail}")[0]
    assert not leaked(head, out) and not leaked(tail, out), out


def test_colon_joined_parts_go_together() -> None:
    r = random.Random(10)
    secret = f"{rnd(r, LOWER_ALNUM, 21)}:{rnd(r, LOWER_ALNUM, 5)}:{rnd(r, LOWER_ALNUM, 22)}"
    out = redact(f"[DEBUG] Using Key={secret}")[0]
    assert not leaked(secret, out), out


@pytest.mark.parametrize("size", [300, 2000, 12000])
def test_long_xml_secret_elements(size: int) -> None:
    secret = rnd(random.Random(size), B64 + " ", size).strip()
    out = redact(f"<settings>\n<password>{secret}</password>\n</settings>")[0]
    assert not leaked(secret.replace(" ", ""), out.replace(" ", "")), out[:200]


def test_base64_secret_starting_with_a_slash() -> None:
    secret = "/" + rnd(random.Random(11), B64, 39)
    for text in (f"aws_secret = {secret}", f'"client_secret": "{secret}"', f"my_token={secret}"):
        out = redact(text)[0]
        assert not leaked(secret, out), out


@pytest.mark.parametrize("url, secret", [
    ("https://app.example.com/login?next=%2Fcallback%3Ftoken%3DZq8vLm2xWp4rTs6uYv8wQ1%26u%3D1",
     "Zq8vLm2xWp4rTs6uYv8wQ1"),
    ("https://x.com/cb?redirect=https%3A%2F%2Fapp%2Fdone%3Fpassword%3DZq8vLm2x%2BWp4r%26u%3D1",
     "Zq8vLm2x%2BWp4r"),
])
def test_a_credential_inside_a_percent_encoded_url(url: str, secret: str) -> None:
    out = redact(url)[0]
    assert secret not in out and "%26u%3D1" in out, out


def test_what_a_percent_encoded_url_names_otherwise_is_left() -> None:
    for url in ("https://x.com/search?q=size%3D10%26sort%3Dname%26page_token%3Dabc",
                "https://x.com/l?u=https%3A%2F%2Fy.com%2F%3Fid%3D123e4567-e89b-12d3-a456-426614174000"):
        assert redact(url) == (url, []), url


def test_a_layout_alone_in_a_short_text() -> None:
    assert redact("s.Z4bTMtngfLeQ18AqVoBBkUAOD1")[0] == "[REDACTED:provider-token]"


def test_mavens_encrypted_master_password() -> None:
    master = "jSMOWnoPFgsHVpMvz5VrIt5kRbzGpI8u+9EF1iFQyJQ="
    text = f"<settingsSecurity>\n  <master>{{{master}}}</master>\n</settingsSecurity>\n"
    assert redact(text)[0] == text.replace(master, "[REDACTED:xml-secret]")
    assert redact("<master>true</master>")[1] == []


def test_mavens_plain_master_password_and_key_passphrase() -> None:
    """Before `mvn --encrypt-master-password`, the master is plain; a server's `<passphrase>`
    opens its private key."""
    settings = "<settingsSecurity>\n  <master>plainMaster</master>\n</settingsSecurity>"
    assert redact(settings)[0] == settings.replace("plainMaster", "[REDACTED:xml-secret]")
    assert redact("<master>Hunter2secret</master>")[0] == "<master>[REDACTED:xml-secret]</master>"
    server = "<server><passphrase>  gpgPassphrase  </passphrase></server>"
    assert redact(server)[0] == server.replace("gpgPassphrase", "[REDACTED:xml-secret]")
    for other in ("<master>yarn-cluster</master>", "<master>local[*]</master>",
                  "<master>plainMaster</master>", "<master>node-1</master>"):
        assert redact(other)[1] == [], other


@pytest.mark.parametrize("text", [
    "  .dockercfg: {v}",
    "  .dockerconfigjson: {v}",
    '{{".dockerconfigjson": "{v}"}}',
    ".dockerconfigjson: |\n    {v}",
])
def test_a_registry_login_config_outside_its_manifest(text: str) -> None:
    """A pull secret's value is base64 of the registry's JSON login, password included."""
    value = base64.b64encode(b'{"auths":{"registry.example.com":{"auth":"dXNlcjpodW50ZXIy"}}}')
    out, found = redact(text.format(v=value.decode()))
    assert value.decode() not in out and [f.kind for f in found] == ["kubernetes-secret"], out
    assert redact("name: .dockerconfigjson")[1] == []


def test_a_private_key_block_on_one_line() -> None:
    for body in ("4c6f4a5cb2d395f828384c2ab29d1f55", rnd(random.Random(3), B64, 64)):
        text = f"-----BEGIN PRIVATE KEY-----{body}-----END PRIVATE KEY-----"
        assert redact(text)[0] == "[REDACTED:private-key]", body
    assert redact("-----BEGIN PRIVATE KEY-----...-----END PRIVATE KEY-----")[1] == []


def test_a_telegram_bot_token_of_32_characters_after_aa() -> None:
    token = "4839574813:AAFD39kkdpWt3ywyRZergyOLMaJhac61qc"
    assert not leaked(token, redact(f"bot = Bot('{token}')")[0])


def test_fly_io_token_lists() -> None:
    r = random.Random(12)
    parts = ["fm2_" + rnd(r, B64, 120) for _ in range(3)] + ["fo1_" + rnd(r, B64URL, 43)]
    out = redact(f"Authorization: FlyV1 {','.join(parts)}")[0]
    for p in parts:
        assert not leaked(p, out), out


def test_a_long_jwt_survives_base64_elision_whole() -> None:
    r = random.Random(13)
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJ" + rnd(r, B64URL, 1500) + "." + rnd(r, B64URL, 342)
    out = redact(elide_base64(f"the session cookie was {jwt} today"))[0]
    assert not leaked(jwt, out), out[:300]


def test_random_word_tells_credentials_from_words() -> None:
    assert random_word("Xk9fP2qLm8Rt5vBn3wZy7Qa1")
    assert random_word("hysqax25w3gqgvz7k1exe07xqosc38yu2oyudjuiaqcyxo")
    assert not random_word("3ab759fef4bb5935d4fe9ac68b503d05346b8364")  # hex: a git SHA
    assert random_word("237eb668c01429518426aa82b374c9da", relaxed=True)  # named hex key
    assert not random_word("test_module_name_2024_v2_final")
    assert not random_word("AbstractSingletonProxyFactoryBean2")
    assert not random_word("req_011CVxAbC9dEfGh2JkLmN3pQ")


ADVERSARIAL = [
    "a" * 65536,
    "token " * 10923,
    ("Xk9fP2qLm8Rt5vBn3wZy7Qa1=" * 2700)[:65536],
    ("key-" + "0" * 60 + " ") * 1000,
    "<password>" + "x" * 65000,
    ("abc:" * 16384),
    ("A1=" * 21845),
    "FlyV1 " + ("fm2_" + "A" * 30 + ",") * 1900,
    ("api_key " * 8000)[:65536],
    ("secret '" + "a1" * 30) * 700,
    ("bloggerKEY-" * 6000)[:65536],
    ("fileio.PRIVATE.TOKEN-a1B2c3D4e5F6g7H8i9 " * 1600)[:65536],
    ("mailboxlayer ACCESS private token key " * 1700)[:65536],
    # the name-and-value forms of funes.ingest.contexts
    ("define('DB_PASSWORD', 'a1b2c3d4e5'," * 3000)[:65536],
    ("$c['db_password'] = 'x1y2z3w4'; " * 3000)[:65536],
    ('"passwords": [' + '"Hardcoded1", ' * 6000)[:65536],
    ("api_keys:\n" + "  - a8Kd93JfLq0Zx7VbN2mPw5Rt\n" * 3000)[:65536],
    ("  user: app\n  password: wintermoon\n" * 2000)[:65536],
    ("<key>password</key><value>" * 3000)[:65536],
    ("--name /prod/db/password " * 3000 + "--value x")[:65536],
    ("[s]\n" + "password = wintermoon\n" * 3000)[:65536],
    ("the password to use:\n\n" * 3000)[:65536],
    ("/api/v1/" * 8192)[:65536],
    ("a, " * 21845)[:65536],
    ('user, password = "x1", ' * 3000)[:65536],
    ("//" + "r/" * 32767)[:65536],
    ("//registry.example.com/:_auth=" * 2200)[:65536],
    ("?sig=" + "%2B" * 21844)[:65536],
    (" " + "Xk9fP2qLm8Rt5vBn" * 5 + "+ASt+ACRAzSeJQQJ9AzFu" * 3000)[:65536],
    ("&X-Amz-Security-Token=" + "A%2F" * 16380)[:65536],
    # layouts of funes.ingest.structured: base64 of digits, ids and a colon, hex groups, %3D
    ("MDAwMDAwMDAwMDAwOg" * 3641)[:65536],
    ("1/" + "1234567890123456/" * 3855 + ":")[:65536],
    ("0123456789abcdef" * 2 + "-01234567") * 1591,
    ("%2B" * 21844 + "%3")[:65536],
    (" s." + "A1b2" * 120 + "(") * 133,
    ("%3Ftoken%3D" + "a1B2" * 140) * 114,
    ("password" * 8 + "%3D") * 1260,
    ("x://u:" + "p@q" * 5 + " ") * 2978,  # a URL password's `@`s
    "x://u:" + "p@" * 32765,
    # PuTTY's private lines, Maven's plain master, registry configs, Dockerfile ENV, `: a&b`
    ("Private-Lines: 999\n" + "QUJD\n" * 300) * 27,
    ("<master>" + "Ab1" * 40 + " ") * 520,
    (".dockerconfigjson: ew" + "A" * 60 + " ") * 780,
    ("\nENV " + "A_PASSWORD " * 8) * 600,
    ("api_token: Tr0ub4dor" + "&x" * 200 + " ") * 150,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_64kb_stays_linear(text: str) -> None:
    """64 KB built to make a backtracking pattern or a repeat search blow up indexes quickly.

    The bound is loose (a quadratic blow-up on 64 KB takes minutes, linear a fraction of a
    second); it only guards against the blow-up, not the speed (that is bench/'s job).
    """
    start = time.process_time()
    redact(text)
    assert time.process_time() - start < 5.0


ED25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIG4rT3vTt99Ox5kndS4HmgTrKBT8SKzhK4rhGkEVGlCI"
RSA = ("AAAAB3NzaC1yc2EAAAADAQABAAABgQDM7gQq1eGZqFq8XfHh3kV0yJ3d3Vh8mYB1rQ5n2xXq9Lw4yZb5Nf"
       "0cKXH8v3QmW2kR7tYp1sG6jL4nD9aE0uF5bC3hM2xZ7wV")


@pytest.mark.parametrize("text", [
    f"ssh-ed25519 {ED25519} deploy@ci",
    f"Add this to ~/.ssh/authorized_keys on the box:\n\nssh-rsa {RSA} me@laptop\n",
    f'deploy_key: "ssh-ed25519 {ED25519} ci@example"',
    f"The server's host key is {ED25519}, pinned in known_hosts.",
])
def test_an_ssh_public_key_is_public(text: str) -> None:
    """Every engine leaves a public key: its blob decodes to a key type's wire encoding."""
    from funes.ingest.engines import redact_texts

    assert redact_texts([text])[0] == (text, [])


def test_a_random_value_dressed_as_a_key_type_is_still_redacted() -> None:
    from funes.ingest.vetoes import ssh_public_key

    assert ssh_public_key(ED25519) and ssh_public_key(RSA)
    # `AAAA` + base64 that does not decode to a length-prefixed key type name
    assert not ssh_public_key("AAAAQk9H9xq7Lm2Vn3Rt9Wz4YbHc6JdPe5Gs0Ua1XoKw8Pz")
    out, found = redact("the new token is AAAAQk9H9xq7Lm2Vn3Rt9Wz4YbHc6JdPe5Gs0Ua1XoKw8Pz ok")
    assert found and "Qk9H9xq7" not in out


@pytest.mark.parametrize("text, where", [
    ("services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD=postgres\n"
     "      - POSTGRES_USER=app", "POSTGRES_PASSWORD=postgres"),
    ("FROM alpine\nENV ARTEMIS_USER artemis\nENV ARTEMIS_PASSWORD artemis\nRUN make",
     "ARTEMIS_PASSWORD artemis"),
    ("FROM alpine\nENV DB_PASSWORD   s3cr3tPass\n", "DB_PASSWORD   s3cr3tPass"),
])
def test_literal_passwords_in_compose_lists_and_dockerfile_env(text: str, where: str) -> None:
    """A Compose file's `- NAME=value` and a Dockerfile's `ENV NAME value` are literals."""
    name = where.rpartition(where.split()[-1] if " " in where else where.split("=")[1])[0]
    assert redact(text)[0] == text.replace(where, name + "[REDACTED:password]")


def test_dockerfile_env_references_stay() -> None:
    for text in ("ENV ARTEMIS_PASSWORD $PASS", "ENV DB_PASSWORD ${DB_PASSWORD}"):
        assert redact(text)[1] == [], text


def test_a_value_after_a_colon_runs_over_ampersands() -> None:
    """After `: ` a value ends at a space; a query's `&` still ends its value."""
    assert redact("api_token: Tr0ub4dor&3x")[0] == "api_token: [REDACTED:secret]"
    url = "https://x.example/?token=Zq8vLm2xWp4rTs6uYv8wQ1&u=1"
    assert redact(url)[0] == "https://x.example/?token=[REDACTED:secret]&u=1"


def test_a_teams_webhook_whose_tenant_host_has_an_underscore() -> None:
    url = ("https://team_name.webhook.office.com/webhookb2/7aa49aa6-7840-443d-806c-08ebe8f59966"
           "@c662313f-14fc-43a2-9a7a-d2e27f4f3478/IncomingWebhook/8592f62b50cf41b9b93ba0c0a00a0b88"
           "/eff4cd58-1bb8-4899-94de-795f656b4a18")
    assert redact(f"  - url: {url}")[0] == "  - url: [REDACTED:provider-token]"


@pytest.mark.parametrize("newline", ["\n", "\\n"])
def test_a_putty_key_files_private_lines(newline: str) -> None:
    r = random.Random(5)
    public = [rnd(r, B64, 64), rnd(r, B64, 40)]
    private = [rnd(r, B64, 64), rnd(r, B64, 64), rnd(r, B64, 20) + "=="]
    text = newline.join([
        "PuTTY-User-Key-File-2: ssh-rsa", "Encryption: none", "Comment: rsa-key-20200108",
        "Public-Lines: 2", *public, "Private-Lines: 3", *private, "Private-MAC: " + rnd(r, HEX, 40),
    ])
    out, found = redact(f'"key": "{text}"' if newline == "\\n" else text)
    assert not any(leaked(p, out) for p in private), out
    assert all(p in out for p in public) and [f.kind for f in found] == ["private-key"], out
