"""Coverage beyond one scanner's tests (issue #28): names, groups, pieces, DER keys, formats.

Each detector family has positive cases and negative ones written for funes (what transcripts
and third-party code hold that must stay: digests, commits, UUIDs in logs, pod names, wheel
tags, certificates, regular expressions). Secrets are generated from a seeded generator in
their documented shape, never taken from a scanner's test data (bench/secret_coverage.py
measures on those). Caught means no 16-character piece of the secret survives.
"""

from __future__ import annotations

import base64
import hashlib
import random
import string
import time
import uuid

import pytest

from funes.ingest.detectors import random_word
from funes.ingest.redact import redact
from tests.ingest.secretgen import ALNUM, B64URL, leaked, rnd

LOWER36 = string.ascii_lowercase + string.digits
UPPER36 = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"



def uuid36(rng: random.Random) -> str:
    """A UUID's shape in base36: what generated keys of several providers look like."""
    return "-".join(rnd(rng, LOWER36, n) for n in (8, 4, 4, 4, 12))


# ------------------------------------------------------------------------------------------------
# A hex key or UUID named by a provider's name
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "template",
    [
        "zenquotas: {hex64} / ops@example.com",
        'brevlink: "{hex40}"',
        "const client = new Zentrixa(\"{uuid}\");",
        "flowmetric '{hex32}'",
        "notifyhub: {uuid}",
        "quillsync = {hex32}",
    ],
)
def test_a_hex_key_or_uuid_after_a_brand_name_is_redacted(template: str, seed: int) -> None:
    r = random.Random(seed)
    secret = {"hex64": rnd(r, HEX, 64), "hex40": rnd(r, HEX, 40), "hex32": rnd(r, HEX, 32),
              "uuid": str(uuid.UUID(int=r.getrandbits(128), version=4))}
    key = next(k for k in secret if "{" + k + "}" in template)
    out = redact(template.format(**secret))[0]
    assert not leaked(secret[key], out), out


@pytest.mark.parametrize(
    "line",
    [
        "commit: {sha}",
        "commit {sha}\nAuthor: Dev <dev@example.com>",
        "sha256: {digest}",
        'expected = "{digest}"',
        '{{"id": "{uuid}", "type": "message"}}',
        "session {uuid} turn 3",
        "request-id: {uuid}",
        'pubkey = "04{digest}"',
        "NAMESPACE_URL = UUID('{uuid}')",
        "hexdigest: {digest}",
        "checksum: {digest}",
        "blake2b {digest}",
        "wheelhash: {digest}",
        "The build finished; the artefact is {digest} and it is cached.",
        "railway = '{uuid}'",  # a word of the vocabulary: not known for a brand (a limit)
        '"integrity": "sha512-{digest}"',
        "parent {sha}\ntree {sha}",
        "Docker image ubuntu@sha256:{digest}",
        "tgt = {{'bool': '{digest}', 'uint8': '{digest}'}}",  # digests of test output
        "see metaZones.txt?rcl={sha} for the list",  # a URL's query parameter
        "# changeset {sha}",
        "ssh://{sha}@ssh.example.jobs",
        'should_pass("{sha}")',
        'dirname = "getcwd-test-0123456789abcdef-{sha}"',
        'assertEqual(eval("0000000000000000000000000000000000000777e0"), 777)',
    ],
)
def test_hex_and_uuids_named_as_ids_digests_or_words_stay(line: str) -> None:
    r = random.Random(line)
    text = line.format(sha=hashlib.sha1(r.randbytes(8)).hexdigest(),
                       digest=hashlib.sha256(r.randbytes(8)).hexdigest(),
                       uuid=str(uuid.UUID(int=r.getrandbits(128), version=4)))
    assert redact(text) == (text, [])


# ------------------------------------------------------------------------------------------------
# Keys in dash-separated groups
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_keys_written_in_groups_are_random_and_redacted_alone(seed: int) -> None:
    r = random.Random(seed)
    for key in (uuid36(r), "-".join(rnd(r, UPPER36, 8) for _ in range(4)),
                "-".join(rnd(r, UPPER36, 7) for _ in range(4))):
        if sum(any(c.isdigit() for c in p) and any(c.isalpha() for c in p)
               for p in key.split("-")) < 4:
            continue  # a group drawn without a digit or a letter: not this shape
        assert random_word(key), key
        out = redact(f"Rotated it; the new one is {key} so update the runner.")[0]
        assert key not in out, out


@pytest.mark.parametrize(
    "word",
    [
        "web-5d8f7c9b4-x2k9p",  # a Kubernetes pod name
        "api-server-6b7f9d8c5-q2w3e",
        "cp311-cp311-manylinux2014-x86",  # a wheel tag
        "2023-05-18-release-notes",
        "ubuntu-22-04-lts",
        "e2e-test-k8s-node1-abc",
        "9f0e2b7a-1c3d-4e5f-8a9b-0c1d2e3f4a5b",  # a UUID
    ],
)
def test_slugs_pod_names_and_uuids_are_not_grouped_keys(word: str) -> None:
    assert not random_word(word)
    text = f"Deployed {word} to the cluster, then checked the logs."
    assert redact(text) == (text, [])


# ------------------------------------------------------------------------------------------------
# Pieces of a found secret elsewhere, quoted values holding their quote
# ------------------------------------------------------------------------------------------------


def test_an_id_that_is_the_secrets_tail_goes_with_the_secret() -> None:
    r = random.Random(7)
    body = rnd(r, HEX, 40)
    text = f"client_id = 'app-{body}'\nclient_secret = 'sec-{body}'\n"
    out = redact(text)[0]
    assert not leaked("sec-" + body, out), out
    assert "client_id" in out and "client_secret" in out


def test_a_shared_piece_needs_sixteen_characters() -> None:
    r = random.Random(8)
    secret = rnd(r, ALNUM, 40)
    other = secret[:12] + rnd(r, "-", 1) + "release"
    text = f"API_TOKEN={secret}\nbranch: {other}\n"
    out = redact(text)[0]
    assert secret not in out
    assert other in out  # twelve characters in common are not a piece of it


def test_a_quoted_secret_holding_its_quote_is_redacted_whole() -> None:
    r = random.Random(9)
    secret = rnd(r, ALNUM, 20) + "'" + rnd(r, ALNUM, 30) + "#&" + rnd(r, ALNUM, 20)
    for text in (f"relaytoken token = '{secret}' | 'x'",
                 "export TOKEN='" + secret.replace("'", "'\\''") + "'"):
        out = redact(text)[0]
        for part in secret.split("'"):
            assert not leaked(part, out), out


def test_a_quoted_value_runs_to_its_own_closing_quote() -> None:
    """Backquotes and the other quote inside a generated value, and the shell's `'\\''`, do
    not end it: the whole value goes, as JWT signing secrets are written."""
    r = random.Random(12)
    head, tail = rnd(r, ALNUM, 3), rnd(r, ALNUM, 40)
    for text, value in ((f"export TOKEN='{head}`D'\\''}}/v){tail}'", f"{head}`D'\\''}}/v){tail}"),
                        (f'jwt_secret = "{head}`D\\"}}/v){tail}"', f'{head}`D\\"}}/v){tail}'),
                        (f"secret: '{head}\"x){tail}'", f'{head}"x){tail}')):
        out = redact(text)[0]
        assert value not in out and head not in out and tail not in out, out
    # prose that quotes a word keeps its text
    text = "'pass': 'The \"pass\" statement is a null operation'"
    assert redact(text)[0] == text


def test_periodic_and_self_overlapping_values_stay_linear() -> None:
    for text in ("password=" * 20_000, "token: " + "ab1" * 30_000,
                 "'" + "AKIAZ7Q2LKWP4MNB3XRT'" * 3000):
        start = time.process_time()
        redact(text)
        assert time.process_time() - start < 2.0


# ------------------------------------------------------------------------------------------------
# Private keys without their armour
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "MIIEowIBAAKCAQEA",
                                    "MHcCAQEEI", "MC4CAQAwBQYDK2VwBCIEI",
                                    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"])
def test_a_private_key_body_without_its_pem_lines_is_redacted(header: str) -> None:
    r = random.Random(header)
    body = header + rnd(r, ALNUM + "+/", 120)
    for text in (f'"private_key": "\\n{body}\\n"', f"key material:\n{body}\n", body):
        out, found = redact(text)
        assert not leaked(body, out), out
        assert "private-key" in {f.kind for f in found}


@pytest.mark.parametrize("join", ['" +\n"', '"\n    "', "' +\n  '", "\n  ", "\\r\\n", "\n"])
def test_a_bare_key_body_is_redacted_over_every_line_it_spans(join: str) -> None:
    """An OpenSSH key pasted as a value, or kept in source as string literals joined across
    lines: every line of it goes, not the first."""
    r = random.Random(join)
    lines = ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAlwAAAAdzc2gtcn"]
    lines += [rnd(r, ALNUM + "+/", 70) for _ in range(6)] + [rnd(r, ALNUM, 30) + "=="]
    quote = join[0] if join[0] in "\"'" else ""
    text = f"String key = {quote}{join.join(lines)}{quote};\nthen the build ran"
    out = redact(text)[0]
    for line in lines:
        assert not leaked(line, out), out
    assert out.endswith("then the build ran")


def test_certificates_and_public_keys_are_not_private_keys() -> None:
    r = random.Random(3)
    for header in ("MIIDdzCCAl+gAwIBAgIE", "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"):
        text = f"cert = {header}{rnd(r, ALNUM, 60)}"
        assert "private-key" not in {f.kind for f in redact(text)[1]}


# ------------------------------------------------------------------------------------------------
# XML secret elements, comparisons, env lines
# ------------------------------------------------------------------------------------------------


def test_a_braced_or_spaced_xml_secret_with_a_key_in_it_is_redacted() -> None:
    r = random.Random(4)
    for key in (rnd(r, HEX, 64), str(uuid.UUID(int=r.getrandbits(128))), rnd(r, ALNUM, 30)):
        text = f"<secret>{{acme AQAAABAAA {key}}}</secret>"
        out = redact(text)[0]
        assert key not in out, out


@pytest.mark.parametrize("text", ["<password>{{ vault_db_password }}</password>",
                                  "<token>the token goes here</token>",
                                  "<secret>${SECRET}</secret>"])
def test_templates_and_prose_in_xml_secret_elements_stay(text: str) -> None:
    assert redact(text) == (text, [])


def test_a_password_of_symbols_compared_or_passed_is_redacted() -> None:
    secret = "q{{w}e)r${t]yuio(pas[dfg>-_$#hjkl}}"
    for text in (f'if (secret == "{secret}")', f'std::string secret("{secret}");',
                 f'if (db_pass != "{secret}")', f'my_password_secure = "{secret}";'):
        out = redact(text)[0]
        assert secret not in out, out


@pytest.mark.parametrize("text", ['token_regex = "[A-Za-z0-9]+"', 'secret_fmt = "%(name)s-%s"',
                                  'token("(?i)[a-z_]+")', 'password_hint = "4-16 chars"'])
def test_patterns_and_formats_after_secret_words_stay(text: str) -> None:
    assert redact(text) == (text, [])


def test_an_env_value_runs_to_the_next_space() -> None:
    r = random.Random(5)
    secret = rnd(r, ALNUM, 8) + "]" + rnd(r, ALNUM, 12) + "]" + rnd(r, ALNUM, 8)
    out = redact(f"export RELAY_TOKEN={secret} && run")[0]
    assert not leaked(secret, out) and "&& run" in out, out


# ------------------------------------------------------------------------------------------------
# Documented provider formats added for issue #28
# ------------------------------------------------------------------------------------------------


def new_formats(seed: int) -> dict[str, str]:
    r = random.Random(seed)
    u = str(uuid.UUID(int=r.getrandbits(128), version=4))
    return {
        "hubspot": "pat-na1-" + u,
        "pubnub": "sub-c-" + uuid36(r),
        "plaid": "access-production-" + u,
        "zoho": f"1000.{rnd(r, HEX, 32)}.{rnd(r, HEX, 32)}",
        "duffel": "duffel_live_" + rnd(r, B64URL, 43),
        "langfuse": "sk-lf-" + u,
        "tickettailor": f"sk_{r.randrange(1000, 9999)}_{r.randrange(10**5, 10**6)}_"
        + rnd(r, HEX, 32),
        "iex": "sk_" + rnd(r, HEX, 32),
        "newrelic-query": "NRIQ-" + rnd(r, B64URL, 32),
        "newrelic-mobile": "AA" + rnd(r, HEX, 40) + "-NRMA",
        "sourcegraph-cody": "slk_" + rnd(r, HEX, 64),
        "spectral": "spu-" + rnd(r, HEX, 32),
        "tines": f"https://{rnd(r, LOWER36, 6)}.tines.com/webhook/{rnd(r, LOWER36, 32)}/"
        + rnd(r, LOWER36, 32),
        "launchdarkly": "sdk-" + uuid36(r),
        "pixie": "px-dep-" + u,
        "tableau": base64.b64encode(r.randbytes(16)).decode() + ":" + rnd(r, ALNUM, 32),
        # a Mapbox temporary token: `{"u":"<user>","a":"<id>"}` in base64url, then a signature
        "mapbox-temporary": "tk." + base64.urlsafe_b64encode(
            f'{{"u":"{rnd(r, string.ascii_lowercase, 6)}","a":"{rnd(r, LOWER36, 25)}"}}'.encode()
        ).decode().rstrip("=") + "." + rnd(r, B64URL, 22),
        # a secret one whose JSON was written with spaces (`{"u": "…"}`: `eyJ1Ijog…`)
        "mapbox-secret": "sk." + base64.urlsafe_b64encode(
            f'{{"u": "{rnd(r, string.ascii_lowercase, 9)}", "a": "{rnd(r, LOWER36, 25)}"}}'
            .encode()).decode().rstrip("=") + "." + rnd(r, B64URL, 22),
    }


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("family", sorted(new_formats(0)))
def test_new_provider_formats_are_caught_alone_and_in_prose(family: str, seed: int) -> None:
    token = new_formats(seed)[family]
    for text in (token, f"the new one is {token} so update it", f'"value": "{token}"'):
        out = redact(text)[0]
        assert not leaked(token, out), (family, out)


@pytest.mark.parametrize("filler", ["sk_" + "0" * 32, "spu-" + "a" * 32,
                                    "pat-na1-00000000-0000-0000-0000-000000000000"])
def test_filler_in_a_provider_format_is_left_as_a_placeholder(filler: str) -> None:
    assert redact(f"TOKEN_EXAMPLE: {filler}") == (f"TOKEN_EXAMPLE: {filler}", [])


# ------------------------------------------------------------------------------------------------
# Vault's secret_id, short repeats, header calls, a brand's key
# ------------------------------------------------------------------------------------------------


def test_a_vault_secret_id_is_a_secret_and_an_aws_secret_id_is_a_name() -> None:
    r = random.Random(11)
    sid = str(uuid.UUID(int=r.getrandbits(128), version=4))
    out = redact(f"role_id = 'x'\nsecret_id = '{sid}'\n")[0]
    assert sid not in out
    text = "aws secretsmanager get-secret-value --secret-id prod/db/password-rotation"
    assert redact(text) == (text, [])


def test_a_short_found_value_is_redacted_where_it_is_repeated() -> None:
    r = random.Random(12)
    for value in (rnd(r, HEX, 14), rnd(r, string.ascii_letters, 12)):
        out = redact(f"relay token = '{value}' | '{value}'")[0]
        assert value not in out, out


def test_a_key_passed_beside_its_header_name_is_redacted() -> None:
    r = random.Random(13)
    key = rnd(r, ALNUM, 40)
    out = redact(f'req.Header.Set("X-Relay-Api-Key", "{key}")')[0]
    assert key not in out, out
    text = 'value = settings.get("api_key", "default-unset")'
    assert redact(text) == (text, [])


def test_a_brands_key_is_named_by_the_brand() -> None:
    r = random.Random(14)
    key = rnd(r, ALNUM, 20)
    out = redact(f"zentrixa key = '{key}'")[0]
    assert key not in out, out
    for text in ("the primary key = 'users_pkey'", "set the cache key to 'session-store'"):
        assert redact(text) == (text, [])
