"""How the secret-coverage bench reads other scanners' rule examples and judges placeholders.

The samples come from upstream checkouts that tests do not have; what is tested here is the
reading: a Rust rule's pattern in Python, which capture of an example is the secret, and which
test values count as placeholders.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))

import secret_coverage as sc  # noqa: E402
import secret_samples as ss  # noqa: E402


def test_a_rust_pattern_with_inline_flags_and_posix_classes_compiles() -> None:
    rx = ss.rust_regex(r"(?x) \b (?i) ghp_ ([[:alnum:]]{36}) \b  # a comment")
    token = "ghp_" + "Ab3" * 12
    assert rx.search(f"export GH={token.upper()}").group(1) == token.upper()[4:]
    assert ss.rust_regex(r"(?<name>x+)\z").search("axx").group("name") == "xx"


def test_the_secret_is_the_last_capture_that_is_not_an_address() -> None:
    rx = ss.rust_regex(r"mongodb://([^:]+):([^@]+)@([\w.-]+(?::\d+)?)")
    m = rx.search("mongodb://svc_user:D1ffic-ult9@db.example.com:27017/app")
    assert ss._rule_secrets(m) == ["D1ffic-ult9"]
    rx = ss.rust_regex(r"AccountName=(\w+);AccountKey=([A-Za-z0-9+/=]{20,})")
    m = rx.search("AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4cXV1eA==")
    assert ss._rule_secrets(m) == ["Zm9vYmFyYmF6cXV4cXV1eA=="]
    assert ss.NOT_SECRET_RULE.search("AWS S3 Bucket")
    assert not ss.NOT_SECRET_RULE.search("GitHub Personal Access Token")


def test_a_rules_companions_and_whole_documents_are_not_secrets() -> None:
    """What a rule set finds beside a secret to validate it (host, service URL, account name,
    e-mail) is not a secret; a webhook URL or a URL with a password is. A capture that is a
    whole JSON document is its fields, not one value."""
    for name in ("SonarQube Host", "Azure Search URL", "Azure Storage Account Name",
                 "Azure DevOps Org Name", "Eagle Eye Networks Email"):
        assert ss.NOT_SECRET_RULE.search(name), name
    for name in ("Discord Webhook URL", "Credentials in a URL", "Postgres URL with hardcoded "
                 "password", "Azure Storage Account Key", "SendGrid API Key"):
        assert not ss.NOT_SECRET_RULE.search(name), name
    rx = ss.rust_regex(r'(\{\s*"auth_provider_x509_cert_url"[^}]+\})')
    assert ss._rule_secrets(rx.search('{"auth_provider_x509_cert_url": "https://x"}')) == []


def test_typed_runs_and_the_rfc_uuid_are_placeholders_and_random_keys_are_not() -> None:
    assert sc._run("zyxwvuts") == 8 and sc._run("x9Fq2kLm") == 3 and sc._run("") == 0
    for value in ("abcdefghijklmnop1234", "besttime_1234567890ab",
                  "123e4567-e89b-12d3-a456-426614174000", "SOME_PASSWORD", "smtp_password",
                  "YOURPASSWROD", "$Password", "%nothing%", "${DB_PASS}"):
        assert sc.placeholder_shaped(value), value
    for value in ("x9Fq2kLm0PzR7tVb", "ghp_XIxB7KMNdAr3zqWtQqhE94qglHqOzn1D1stg", "whiteduke",
                  "p@ssw0rd99", "secret_Kq8vN2xT", "$Kq8vN2xT!"):
        assert not sc.placeholder_shaped(value), value


def test_a_kept_name_is_not_a_residue_and_a_kept_half_key_is() -> None:
    """A capture that holds its key's name (`launchdarkly-secret-<uuid>`) keeps the name when
    the key alone is redacted: that is not half a secret. Sixteen characters of the key are."""
    secret = "launchdarkly-secret-7d1e4a90-3b2c-4f5e-9a8b-c6d5e4f3a2b1"
    assert not sc.residue(secret, "launchdarkly-secret-[REDACTED:named-secret]")
    assert sc.residue(secret, "launchdarkly-secret-7d1e4a90-3b2c-[REDACTED:x]")
    key = "x9Fq2kLm0PzR7tVbQ3wE"
    assert sc.residue(key, key[:17] + "[REDACTED:x]")
    assert not sc.residue(key, "[REDACTED:x]")


def _commit(repo: Path, files: dict[str, str]) -> str:
    import subprocess

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, "utf-8")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "x"], check=True, env=env)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_secretlint_snapshots_give_each_messages_secret_and_leave_ids_and_file_rules(
    tmp_path: Path,
) -> None:
    import json

    snap = "packages/@secretlint/secretlint-rule-{}/test/snapshots/{}/output.json"
    text = "token ghp_" + "Ab3" * 12 + "\nurl https://deploy:Kq8vN2xT@ci.example.com/\n"
    out = {"sourceContent": text, "messages": [
        {"messageId": "GITHUB_TOKEN", "data": {"TOKEN": "ghp_" + "Ab3" * 12}},
        {"messageId": "BasicAuth", "data": {"CREDENTIAL": "https://deploy:Kq8vN2xT@ci.example.com"}},
        {"messageId": "AzureTenantId", "data": {"ID": "deploy"}},
    ]}
    commit = _commit(tmp_path, {
        snap.format("github", "ng.secret"): json.dumps(out),
        snap.format("github", "ok.valid"): json.dumps({"sourceContent": "x", "messages": []}),
        snap.format("no-homedir", "ng.secret"): json.dumps(out),
    })
    samples, stats = ss.secretlint_samples(tmp_path, commit)
    assert [s["secrets"] for s in samples] == [["ghp_" + "Ab3" * 12], ["Kq8vN2xT"]]
    assert stats == {"snapshots": 1, "file_rules": 1, "identifiers": 1, "negatives": 1}


def test_ripsecrets_lines_give_their_longest_credential_token(tmp_path: Path) -> None:
    commit = _commit(tmp_path, {
        "test/one_per_line/random": 'clientSecretKey := "2Tm6cdsRVBTL9hRCmR6MRDTpMLFS4I"\n\n'
                                    "mysql://USER:hunter2x@db.example.com\n",
    })
    samples, _ = ss.ripsecrets_samples(tmp_path, commit)
    assert [s["secrets"] for s in samples] == [["2Tm6cdsRVBTL9hRCmR6MRDTpMLFS4I"], ["hunter2x"]]


def test_whispers_fixtures_give_the_marked_values_of_noncompliant_sections(tmp_path: Path) -> None:
    commit = _commit(tmp_path, {
        "tests/fixtures/passwords.yml": "# Compliant\nusername: hardcoded\n\n# Noncompliant\n"
                                        "pwd: hardcoded1\nhardcoded_password: x\n"
                                        "index: https://user:hardcoded2@pypi.example.com/simple\n"
                                        "hook: https://hooks.slack.com/services/T0/B0/hardcodedHook\n",
        "tests/fixtures/plain.env": "TOKEN=aGFyZGNvZGVkdmFsdWU=\n",  # base64 of "hardcodedvalue"
        "tests/fixtures/excluded.yml": "noncompliant:\n  a: hardcoded9\n",
    })
    samples, _ = ss.whispers_samples(tmp_path, commit)
    assert {s["family"]: s["secrets"] for s in samples} == {
        "passwords.yml": ["hardcoded1", "hardcoded2", "hardcodedHook"],
        "plain.env": ["aGFyZGNvZGVkdmFsdWU="],
    }


def test_semgrep_test_files_give_the_line_under_each_ruleid(tmp_path: Path) -> None:
    key = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEogIBAAKCAQEAjosMtDUqbE1\n"
           "-----END RSA PRIVATE KEY-----")
    commit = _commit(tmp_path, {
        "generic/secrets/security/detected-x.txt":
            "# ruleid: detected-x\nX_TOKEN=ghp_Ab3Ab3Ab3\n\n# ok: detected-x\nX_TOKEN=$T\n"
            "// ruleid: detected-fb\nhttps://graph.example.com/me?fields=id&access_token=EAAB9xK2"
            "qLm8Rt5v&limit=1\n# ruleid: detected-x\n" + key + "\n",
        "generic/secrets/security/detected-aws-account-id.txt":
            "# ruleid: detected-aws-account-id\naws_account_id = 287139315271\n",
        "generic/secrets/security/detected-x.yaml": "rules: []\n",
    })
    samples, stats = ss.semgrep_samples(tmp_path, commit)
    assert [s["secrets"] for s in samples] == [
        ["ghp_Ab3Ab3Ab3"], ["EAAB9xK2qLm8Rt5v"], ["MIIEogIBAAKCAQEAjosMtDUqbE1"]]
    assert samples[2]["text"] == key
    assert stats == {"files": 2, "identifier_rules": 1, "negatives": 1, "skipped": 0}
