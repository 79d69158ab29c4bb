r"""Secrets named by the syntax around them, in the forms transcripts write them.

The assignment detectors (funes.ingest.redact) read ``name=value`` and ``name: value`` and
judge the value by how it looks; funes.ingest.detectors reads values near a secret word. The
end-to-end bench (bench/bench_leak.py) found the forms both leave, each a way people and tools
write a credential down that says plainly what it is:

* **a secret's name, then a linking word**: ``the admin password is …``, ``I set DATADOG_API_KEY
  to …``, ``changed my password to …``: prose says *is* and *to* where code says ``=``;
* **hex and symbol-rich values after an explicit name**: ``SECRET_KEY_BASE=<128 hex>``,
  ``DJANGO_SECRET_KEY=+(kz2*q_…)#…``: a hex value is taken for a digest and a value with
  shell characters is cut at the first one, yet after ``…_API_KEY``/``…SECRET…`` the name
  says what it is (a digest's name says *hash*, *sha*, *checksum*: those are left);
* **a name and its value in two fields**: Kubernetes and ECS environment lists (``- name:
  OKTA_API_TOKEN`` then ``value: "…"``; ``{"name": "…", "value": "…"}``), key-value entries
  (``key``/``value`` in JSON, YAML, XML elements), a parameter store's ``--name … --value …``;
  a quoted name opening a call or a subscript, then its value (``define('DB_PASSWORD', '…')``,
  ``$config['db_password'] = '…'``); the items of a list under a credential's plural name;
* **a shell, env or properties assignment to a credential's name** (`export DB_PASSWORD=…`,
  `docker run -e API_TOKEN=…`, `ENV AUTH_TOKEN=…`, `DB_PASSWORD=…` at a line's start): the
  syntax stores the literal as written, so any literal is taken, weak or filler-bodied, and
  only references, substitutions, templates, masks, paths and stock placeholder words are left
  (`shell_literal`);
* **a Discord bot token**, by its structure (the bot's id in base64, a timestamp, an HMAC);
* **a credential header's whole value**: ``Authorization: Bearer …`` up to the space or quote
  that ends it (percent-encoded tokens included, e.g. X/Twitter's ``AAAA…%2F…%3D…``).

Names are judged by their parts (``DB_PASSWORD`` → db, password; ``apiKey`` → api, key): a
secret part (password, secret, token, key, …) and no part that says the value is something
else (``TOKEN_URL``, ``key_id``, ``password_hash``, ``public_key``, ``NextToken``). Values
are judged by the name's class: after a password name any literal with a letter and a digit (or
a symbol and both cases); after any other secret name something generated (funes.ingest.
detectors.random_word), 32+ hex, a UUID after a token's name, or a long symbol-rich string.
Never a placeholder (``$X``, ``<…>``, ``{…}``, ``***``), code (calls, attribute access), a path
or a URL.

Linear: names are found by `str.find` of a few stems; each is grown over identifier
characters (bounded) and one anchored match reads what follows it (bounded).

One file because every form here is judged by the same two tests, `name_class` on the name's
parts and `credential_value` on the value, through one value reader (`_value_at`): the forms
differ only in the syntax between name and value, and apart they would drift into judging
the same name and value differently.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from typing import Final

from funes.ingest.detectors import random_word
from funes.ingest.markers import MARKER_PREFIX

__all__ = ["ANCHORS", "scan"]

Raw = list[tuple[int, int, int, str]]

#: Where these findings rank when they overlap another detector's (they yield to shapes).
PRIORITY: Final = 7

_STEMS: Final = ("pass", "pwd", "secret", "token", "credential", "creds", "key", "auth", "pat")
#: The stems, for redaction's keyword pass (funes.ingest.redact): a text holding none is
#: not read here.
ANCHORS: Final = frozenset((*_STEMS, "directoryentry"))
#: A value that names a secret again (`token=token=…`, `auth@auth…`) is not one.
_STEM_IN: Final = re.compile(r"(?i)token|secret|passw|credential|api_?key|creds|auth")
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_PARTS: Final = re.compile(r"[A-Z]{2,64}(?![a-z])|[A-Z]?[a-z]{1,64}|[0-9]{1,64}")
_PASSWORD_PARTS: Final = frozenset({"password", "passwd", "pwd", "passphrase", "pass", "pw"})
_SECRET_PARTS: Final = frozenset({
    "secret", "secrets", "token", "tokens", "credential", "credentials", "creds", "apikey",
    "auth", "bearer", "pat",
})
_KEY_PARTS: Final = frozenset({"key", "privatekey", "accesskey", "secretkey"})
#: Parts that say, anywhere in the name, that its value is not a credential.
_NOT_ANYWHERE: Final = frozenset({
    "public", "pub", "next", "page", "cursor", "csrf", "xsrf", "idempotency", "continuation",
    "example", "sample", "dummy", "fake", "test", "mock", "placeholder",
})
#: Parts that say so when they come after the secret part (`TOKEN_URL`; `ID_TOKEN` is one).
_NOT_AFTER: Final = frozenset({
    "id", "ids", "name", "names", "url", "uri", "path", "file", "dir", "type", "hash",
    "hashed", "digest", "sha", "md", "checksum", "fingerprint", "cache", "etag", "length",
    "len", "size", "count", "prefix", "suffix", "timeout", "ttl", "expires", "expiry",
    "expiration", "expire", "exp", "format", "kind", "mode", "max", "min", "field", "header",
    "policy", "rotation", "endpoint", "host", "port", "region", "version", "env", "var", "ref",
    "arn", "label", "enabled", "disabled", "required", "store", "manager", "provider",
    "limit", "lifetime", "usage", "index", "schema", "issuer", "audience", "scope", "scopes",
    "user", "username", "login", "email", "location", "source", "strategy", "method", "reset",
    "hint", "rule", "rules", "regex", "pattern", "changed", "set", "code", "codes",
})

#: Between a name and its value: an operator (quotes around it) or, in prose, a linking word.
_GAP: Final = re.compile(
    r"(?:\\?[\"'`]|\])?[ \t]{0,3}(?::=|=>|->|=|:)[ \t]{0,3}(?P<q>\\[\"']|[\"'`])?"
    r"|[ \t]{1,3}(?:is|was|to|as|now|is[ \t]now|=)[ \t]{1,3}(?P<pq>[\"'`])?"
    r"|(?P<space>[ \t])(?=[^\s])"
)
_SPACED_PASSWORD: Final = re.compile(r"(?=[^\s]{0,127}[0-9])(?=[^\s]{0,127}[A-Za-z])[^\s]{8,128}")
#: An unquoted value: up to a space, a quote, or punctuation that continues code or data
#: (`password:e,raw:…` in minified code; generated secrets' alphabets hold none of `,;{}[]<>|`).
_UNQUOTED: Final = re.compile(r"[^\s\"'`\\,;{}\[\]<>|]{1,512}")
_TRAILING: Final = ".,;:)]}>"
_HEXISH: Final = re.compile(r"[0-9a-fA-F]{32,1024}")
_UUID: Final = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_CALL: Final = re.compile(r"[A-Za-z_$][\w.$]{0,128}[(\[]")
#: Attribute access then an operator (`e.altKey?r.C0.ESC…`, `r.C0.NUL))…`): an expression.
_MEMBER_EXPR: Final = re.compile(
    r"[A-Za-z_$][\w$]{0,64}(?:\.[A-Za-z_$][\w$]{0,64}){1,8}[?+*/()\]:]"
)
_DOTTED: Final = re.compile(r"[A-Za-z_$][\w$]{0,64}(?:\.[A-Za-z_$][\w$]{0,64}){1,16}\.?")
_VERSIONISH: Final = re.compile(
    r"(?i)v?\d{1,9}(?:\.\d{1,9}){1,8}|(?:sha|md|utf|base|aes|rsa|hs|rs|es)-?\d{1,6}"
)
_PLACEHOLDER_WORDS: Final = re.compile(
    r"(?i)^(?:changeme|change_me|password\d{0,4}|secret\d{0,4}|token\d{0,4}|redacted"
    r"|example\w{0,64}|dummy\w{0,64}|your[_-]\w{0,64}|x{3,64}\w{0,64}|none|null|nil|true|false"
    r"|undefined|required|optional|string|str"
    r"|bytes|int)$"
)
#: A reference to a secret kept elsewhere (`env:DB_PASSWORD`, `vault:secret/db#pw`,
#: `op://…` is a URL), or an environment variable's name standing for it.
_REFERENCE: Final = re.compile(
    r"(?:env|vault|secret|secrets|file|ref|ssm|awssm|gcpsm|azkv|k8s|sops|keyring|keychain"
    r"|doppler|infisical|bw|gopass|pass):[^\s]{1,256}$|[A-Z][A-Z0-9_]{2,64}$"
)
_PERCENT: Final = re.compile(r"%[0-9A-Fa-f]{2}")
_SYMBOLS: Final = frozenset("!#%^&*+=?~_-.@$()[]{}|/<>,;:")

#: A name, then its value, in two fields of a list entry: Kubernetes and ECS environments
#: (`- name: X` / `value: …`), CloudFormation's `Name`/`Value`, key-value stores' `key`.
_PAIR_YAML: Final = re.compile(
    r"(?m)^[ \t]{0,40}-?[ \t]{0,8}(?i:name|key):[ \t]{0,4}[\"']?"
    r"(?P<n>[A-Za-z_][A-Za-z0-9_.-]{0,80})"
    r"[\"']?[ \t]{0,4}\r?\n[ \t]{0,40}(?i:value):[ \t]{0,4}(?P<q>[\"']?)"
)
#: The same in XML elements: `<key>db_password</key><value>…</value>`, `<name>…</name>`.
_PAIR_ELEMENTS: Final = re.compile(
    r"<(?P<t>(?i:key|name))>[ \t]{0,4}(?P<n>[A-Za-z_][A-Za-z0-9_.-]{0,80})[ \t]{0,4}</(?P=t)>"
    r"[ \t\r\n]{0,80}<(?i:value)>(?P<q>)"
)
#: A quoted name, then its quoted value: as a subscript assigned (`$config['db_password'] =
#: '…'`, Python's `environ["DB_PASSWORD"] = "…"`) or as a call's next argument (PHP's `define(
#: 'DB_PASSWORD', '…')`, `System.setProperty("db.password", "…")`, `config.set(…)`).
_PAIR_QUOTED: Final = re.compile(
    r"(?P<nq>[\"'])(?P<n>[A-Za-z_][A-Za-z0-9_.-]{0,80})(?P=nq)[ \t]{0,4}(?:\][ \t]{0,4}=|,)"
    r"[ \t]{0,8}(?P<q>[\"'])"
)
#: A list under a credential's (plural) name: JSON's `"api_keys": [` and YAML's `tokens:`
#: then `- …` items; each item is judged as a value of that name.
_LIST_JSON: Final = re.compile(
    r"(?P<nq>[\"'])(?P<n>[A-Za-z0-9_][A-Za-z0-9_.-]{0,80})(?P=nq)[ \t]{0,4}:[ \t]{0,4}\["
)
_LIST_YAML: Final = re.compile(
    r"(?m)^[ \t]{0,40}(?P<n>[A-Za-z0-9_][A-Za-z0-9_.-]{0,80}):[ \t]{0,4}$"
)
_JSON_ITEM: Final = re.compile(
    r"[ \t\r\n]{0,80}(?P<q>[\"'])(?P<v>[^\"'\n]{1,256})(?P=q)[ \t\r\n]{0,80}(?P<end>[,\]])"
)
_YAML_ITEM: Final = re.compile(
    r"\r?\n[ \t]{0,40}-[ \t]{1,4}(?P<q>[\"']?)(?P<v>[^\s\"'#][^\n\"']{0,255}?)(?P=q)"
    r"[ \t]{0,8}(?=\r?\n|$)"
)
_LIST_ITEMS: Final = 64
_MAPPING_ITEM: Final = re.compile(r"[A-Za-z0-9_.-]{1,80}:(?:[ \t]|$)")
#: A line that names a credential and ends in `:`, then the value alone on a line of its own
#: (Jenkins' first-start banner: `Please use the following password to proceed to
#: installation:`, a blank line, the password; `Your new API key:` then the key).
_LINE_THEN_VALUE: Final = re.compile(
    r"(?i)\b(?P<n>password|passphrase|passcode|api[ _-]?key|access[ _-]?key|secret[ _-]?key"
    r"|token|secret)\b[^\n:]{0,80}:[ \t]{0,8}\r?\n(?:[ \t]{0,8}\r?\n){0,2}[ \t]{0,8}"
    r"(?P<v>[^\s]{6,256})[ \t]{0,8}(?=\r?\n|$)"
)
#: Names assigned quoted values together (Python's `user, password = "…", "…"`, Go's
#: `const a, b string = "…", "…"`, `a, b := "…", "…"`): each name takes the value at its place.
_TUPLE_ASSIGN: Final = re.compile(
    r"(?P<names>[A-Za-z_][A-Za-z0-9_]{0,80}(?:[ \t]{0,4},[ \t]{0,4}[A-Za-z_][A-Za-z0-9_]{0,80})"
    r"{1,7})(?:[ \t]{1,4}[A-Za-z_][A-Za-z0-9_.]{0,40})?[ \t]{0,4}:?=[ \t]{0,4}"
    r"(?P<values>(?:[\"'][^\"'\n]{0,256}[\"'][ \t]{0,4},[ \t]{0,4}){1,7}[\"'][^\"'\n]{0,256}[\"'])"
)
_TUPLE_VALUE: Final = re.compile(r"(?P<q>[\"'])(?P<v>[^\"'\n]{0,256})(?P=q)")
#: A parameter store's CLI: `aws ssm put-parameter --name /prod/db/password --value "…"`.
_PAIR_FLAGS: Final = re.compile(
    r"--name[ \t=]{1,4}[\"']?(?P<n>[A-Za-z0-9_./-]{1,120})[\"']?[ \t]{1,4}"
    r"(?:[^\n]{0,200}?[ \t])?--value[ \t=]{1,4}(?P<q>[\"']?)"
)
#: .NET's `<add key="SmtpPassword" value="…"/>` (appSettings, web.config): the key names it.
_PAIR_XML: Final = re.compile(
    r"(?i:\bkey)[ \t]{0,4}=[ \t]{0,4}(?P<kq>[\"'])(?P<n>[A-Za-z_][A-Za-z0-9_.:-]{0,80})(?P=kq)"
    r"[ \t]{1,8}(?i:value)[ \t]{0,4}=[ \t]{0,4}(?P<q>[\"'])"
)
#: An environment lookup's fallback: Python's `environ.get("DJANGO_SECRET_KEY", "…")`,
#: `getenv('API_TOKEN', '…')`, Ruby's `ENV.fetch("…", "…")` (Java's `System.getenv` has none).
_ENV_DEFAULT: Final = re.compile(
    r"(?:getenv|environ\.get|environ\.setdefault|env\.get|ENV\.fetch|env\.fetch)\([ \t]{0,4}"
    r"(?P<nq>[\"'])(?P<n>[A-Za-z_][A-Za-z0-9_.-]{0,80})(?P=nq)[ \t]{0,4},[ \t]{0,4}"
    r"(?:default[ \t]{0,2}=[ \t]{0,2})?(?P<q>[\"'])"
)
#: Terraform's `variable "db_password" { default = "…" }`: the block's label names it.
_HCL_DEFAULT: Final = re.compile(
    r"\bvariable[ \t]{1,4}\"(?P<n>[A-Za-z_][A-Za-z0-9_-]{0,80})\"[ \t]{0,4}\{[^{}]{0,400}?"
    r"\bdefault[ \t]{0,4}=[ \t]{0,4}(?P<q>\")"
)
#: Constructors whose argument after the user name is the password, by their API:
#: `NetworkCredential("u", "…")`, `HTTPBasicAuth("u", "…")`, `PasswordAuthentication("u",
#: "…".toCharArray())`, requests' `auth=("u", "…")`, `DirectoryEntry("LDAP://…", "u", "…")`.
_CREDENTIAL_CALL: Final = re.compile(
    r"(?:\b(?:NetworkCredential|HTTPBasicAuth|HTTPDigestAuth|HTTPProxyAuth|BasicAuth|DigestAuth"
    r"|PasswordAuthentication|UsernamePasswordCredentials|PSCredential)[ \t]{0,2}\("
    r"|\bDirectoryEntry[ \t]{0,2}\([ \t\r\n]{0,40}(?P<dq>[\"'])[^\"'\n]{1,256}(?P=dq)[ \t]{0,4},"
    r"|\bauth[ \t]{0,2}=[ \t]{0,2}\()"
    r"[ \t\r\n]{0,40}(?P<uq>[\"'])[^\"'\n]{1,128}(?P=uq)[ \t]{0,4},[ \t\r\n]{0,40}(?P<q>[\"'])"
)
#: What docs and tests pass a credential constructor (`BasicAuth("user", "pass2")`).
_STOCK_ARGUMENT: Final = re.compile(r"(?i)(?:pass|pw|user|test|demo|foo|bar)\w{0,8}")
_PAIR_JSON: Final = re.compile(
    r"\\?\"(?i:name|key)\\?\"[ \t]{0,4}:[ \t]{0,4}\\?\"(?P<n>[A-Za-z_][A-Za-z0-9_.-]{0,80})\\?\""
    r"[ \t]{0,4},[ \t\r\n]{0,40}\\?\"(?i:value)\\?\"[ \t]{0,4}:[ \t]{0,4}(?P<q>\\?\")"
)
#: A credential header's value, whole: up to the space, quote or backslash that ends it.
_AUTH_HEADER: Final = re.compile(
    r"(?i:\b(?:proxy-)?authorization)\\?[\"']?[ \t]{0,3}[:=][ \t]{0,3}\\?[\"']?"
    r"(?i:(?:bearer|token|basic|digest|apikey|api-key|sso-key)[ \t]{1,3})?"
    r"(?P<v>[A-Za-z0-9._~+/=%:-]{8,4096})"
)


#: X/Twitter's app-only bearer token: 22 `A`s, then URL-encoded base64 (no other shape's
#: filler test may take the run of `A`s for a placeholder).
_TWITTER_BEARER: Final = re.compile(
    r"(?<![A-Za-z0-9%])A{22}(?P<body>[A-Za-z0-9%]{60,160})(?![A-Za-z0-9%])"
)


#: A Discord bot token: the bot's id (17-20 digits) in base64, a timestamp, an HMAC.
_DISCORD_BOT: Final = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<id>[MNO][A-Za-z0-9_-]{23,26})\.[A-Za-z0-9_-]{6}\."
    r"(?P<mac>[A-Za-z0-9_-]{27,38})(?![A-Za-z0-9_-])"
)


_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,511}")
#: An `.npmrc` auth line up to its value: `//registry.example.com/path/:_authToken=`, `_auth = `.
_NPMRC_NAME: Final = (
    r"[ \t]{0,8}(?P<r>//[^\s=]{1,512}:)?_(?P<n>authToken|auth|password)[ \t]{0,4}=[ \t]{0,4}"
)
#: The same line's head, to its opening quote (funes.ingest.vetoes reads a registry's as a
#: literal's, whatever detector found the value).
NPMRC_HEAD: Final = re.compile(_NPMRC_NAME + r"[\"']?")
_NPMRC_AUTH: Final = re.compile(
    r"(?m)^" + _NPMRC_NAME + r"(?P<q>[\"']?)(?P<v>[^\s\"'#;]{6,512})(?P=q)[ \t]{0,8}\r?$"
)


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def name_class(name: str) -> str | None:
    """``password``, ``secret`` or ``key`` for a name that names a credential, else None."""
    parts = [p.lower() for p in _PARTS.findall(name)]
    if not parts or parts == ["key"] or _NOT_ANYWHERE.intersection(parts):
        return None
    if "client" in parts and parts[-1] == "token":
        return None  # AWS's `ClientToken`: an idempotency token
    last = -1
    cls = None
    for i, p in enumerate(parts):
        if (p in _PASSWORD_PARTS and (p != "pass" or len(parts) > 1)) or p.startswith("passw"):
            cls, last = "password", i
        elif p == "pat" and len(parts) == 1:
            continue  # `pat = re.compile(…)`: a pattern; `ADO_PAT`, `github_pat` are tokens
        elif p in _SECRET_PARTS and cls != "password":
            cls, last = "secret", i
        elif p in _KEY_PARTS and cls is None:
            cls, last = "key", i
        elif p in _KEY_PARTS or p in _SECRET_PARTS:
            last = i
    if cls is None or _NOT_AFTER.intersection(parts[last + 1 :]):
        return None
    return cls


def _placeholder(value: str) -> bool:
    """A marker, a reference (`$X`, `%s`, `{…}`, `<…>`), a mask (`****`), an operator."""
    return (MARKER_PREFIX in value or value[0] in "$%{<[&@=!" or value.startswith("**")
            or value.strip("*") == "")


def _code(value: str) -> bool:
    """A call, a dotted name, or attribute access then an operator: an expression, not a value."""
    return bool(_CALL.match(value) or _DOTTED.fullmatch(value) or _MEMBER_EXPR.match(value))


def _not_a_value(value: str) -> bool:
    """A placeholder, code, a path, a URL, a marker: what a name is followed by in code."""
    if _placeholder(value) or "://" in value or value.startswith("ENC["):
        return True  # … or SOPS ciphertext (`ENC[AES256_GCM,data:…]`)
    if value.startswith(("~/", "./", "../")) or (value[0] == "/" and value.count("/") > 1):
        return True
    if _code(value) or _PLACEHOLDER_WORDS.match(value) or _REFERENCE.match(value):
        return True
    return _VERSIONISH.fullmatch(value) is not None or len(set(value)) < 4


def credential_value(cls: str, value: str) -> bool:
    """Whether `value`, after a name of class `cls`, is the credential the name says."""
    if not value or _not_a_value(value):
        return False
    letters = sum(ch.isalpha() for ch in value)
    digits = sum(ch.isdigit() for ch in value)
    symbols = sum(ch in _SYMBOLS for ch in value)
    if cls == "password":
        if not 6 <= len(value) <= 128 or not letters or " " in value:
            return False
        cased = any(c.isupper() for c in value) and any(c.islower() for c in value)
        return digits > 0 or (symbols > 0 and cased and len(value) >= 8)
    if len(value) < 16:
        return False
    if _HEXISH.fullmatch(value) is not None:
        return _entropy(value) >= 3.0  # after a name that is not a digest's: a key
    if _UUID.fullmatch(value):
        return cls == "secret"  # Heroku's, Snyk's API tokens are UUIDs after their names
    if random_word(_PERCENT.sub("", value), relaxed=True):
        return True
    # Symbol-rich generated secrets (Django's SECRET_KEY, Rails' keys with punctuation).
    return len(value) >= 30 and symbols >= 5 and digits >= 3 and _entropy(value) >= 4.0


#: What a shell puts before `NAME=value`: a command that exports it, a container's `-e`/
#: `--env`/`--build-arg`, Helm's `--set`, a command separator, a prompt (`$ TOKEN=… cmd`).
#: Not `(` or `,` or `&`: a call's keyword arguments and a URL's query are judged by look.
_SHELL_BEFORE: Final = re.compile(
    r"(?:(?:;|&&|\|\||(?<![\w$])\$)[ \t]{1,4}|(?<![\w-])(?:export|declare[ \t]{1,4}-x|local"
    r"|readonly|env|set|setx|ENV|ARG|-e)[ \t]{1,4}"
    r"|(?<![\w-])--(?:env|build-arg|set|set-string)(?:[ \t]{1,4}|=))$"
)
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,80}")
_PROPERTY_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,120}")
#: The part before a trailing `KEY` that makes it a credential's name (`API_KEY`,
#: `STRIPE_SECRET_KEY`), not a sort key's or a cache key's.
_KEY_QUALIFIERS: Final = frozenset({
    "api", "access", "secret", "private", "master", "license", "licence", "client", "app",
    "service", "account", "encryption", "signing", "admin", "root", "deploy", "auth",
    "subscription", "write", "read", "server", "consumer", "integration", "management",
    "webhook", "ingest", "ingestion", "sdk", "project", "org", "personal", "live", "prod",
})


def _strict_name(name: str, cls: str) -> bool:
    """A name that says its value is a credential outright: it ends in the secret's word.

    (`AUTH_SERVER`, `SORT_KEY` name a class of thing but not the credential itself.)
    """
    parts = [p.lower() for p in _PARTS.findall(name)]
    while len(parts) > 1 and parts[-1].isdigit():
        parts.pop()  # `DB_PASSWORD_2`, `static_password02`: a numbered credential
    last = parts[-1]
    if cls == "password":
        return last in _PASSWORD_PARTS or last.startswith("passw")
    if last in _SECRET_PARTS:
        return True
    return last in _KEY_PARTS and len(parts) > 1 and parts[-2] in _KEY_QUALIFIERS


def _assigned_in_shell(text: str, s: int, e: int, gap: str) -> bool:
    """`NAME=value` as a shell command line, an env file or a properties file writes it."""
    if gap not in ("=", '="', "='"):
        return False
    if s == 0 or text[s - 1] == "\n":  # an env file (`.env`, `KEY=…`) or a properties file
        return _PROPERTY_NAME.fullmatch(text, s, e) is not None
    if _ENV_NAME.fullmatch(text, s, e) is None:
        return False
    ws = max(0, s - 48)  # bounded: a long line of names costs each name 48 characters
    return _SHELL_BEFORE.search(text[text.rfind("\n", ws, s) + 1 or ws : s]) is not None


def shell_literal(value: str, quote: str = "") -> bool:
    """Whether `value`, assigned to a credential's name in a shell, is a literal credential.

    The name says what the value is, so its look is not judged: a weak password (`pass456`), a
    provider's key with a filler body, a connection string. What is left is what a shell would
    not store as written (a reference, a substitution, a template, a mask), a path, code, and
    the stock placeholder words (a value cut short for display is left by the caller). In
    single quotes (`quote` is `'`) a shell expands nothing, so `$` and backticks are literal:
    `'$2b$12$…'`, `'pa$$word1'`.
    """
    literal = quote == "'"
    if len(value) < 6 or value[0] == "*" or (
        _placeholder(value) and not (literal and value[0] == "$" and MARKER_PREFIX not in value)
    ):
        return False
    if not literal and ("$(" in value or "${" in value or "`" in value):
        return False
    if value.strip("*xX.-_#0") == "":
        return False
    if value.startswith(("~/", "./", "../")) or (value[0] == "/" and value[1:2] != "/"):
        return False
    if _PLACEHOLDER_WORDS.match(value) or (_REFERENCE.match(value) and "_" in value):
        return False
    if _code(value):
        return False  # code at a line's start (`password=getpass.getpass()`), not a shell
    # A value that names a secret again in a name's shape (`PASS=smtp_password`,
    # `TOKEN=GITHUB_TOKEN`) is a name; `thisismypassword` is a literal, however weak.
    return not (_STEM_IN.search(value) and _ENV_NAME.fullmatch(value)
                and ("_" in value or value.isupper()))


def _quoted_in_prose(value: str) -> bool:
    """A password a sentence quotes (`the default password is "centipede"`).

    The sentence says what it is and the quotes mark it as written, so a weak word counts too;
    stock words, references, code and paths stay.
    """
    return 4 <= len(value) <= 64 and " " not in value and not _not_a_value(value)


def _spaced_value(cls: str, text: str, start: int) -> bool:
    m = _UNQUOTED.match(text, start)
    if m is None:
        return False
    value = m.group(0).rstrip(_TRAILING)
    if cls == "password":
        return _SPACED_PASSWORD.fullmatch(value) is not None and credential_value(cls, value)
    digits = sum(ch.isdigit() for ch in value)
    return len(value) >= 20 and digits >= 2 and random_word(value, relaxed=True)


def _value_at(text: str, start: int, quote: str | None, in_query: bool) -> tuple[int, int]:
    """The span of the value starting at `start` (after its opening quote, if any)."""
    if quote:
        close = text.find(quote, start, start + 1024)
        newline = text.find("\n", start, start + 1024)
        if close < 0 or (0 <= newline < close):
            return start, start
        return start, close
    m = _UNQUOTED.match(text, start)
    if m is None:
        return start, start
    end = m.end()
    if in_query:
        amp = text.find("&", start, end)
        end = amp if amp >= 0 else end
    while end > start and text[end - 1] in _TRAILING:
        end -= 1
    return start, end


def _names(text: str, lowered: str) -> list[tuple[int, int]]:
    """The identifiers holding a stem, each once, in order."""
    seen: set[tuple[int, int]] = set()
    for stem in _STEMS:
        k = lowered.find(stem)
        while k >= 0:
            s, e = k, k + len(stem)
            while s > 0 and k - s < 64 and text[s - 1] in _NAME_CHARS:
                s -= 1
            while e < len(text) and e - k < 64 and text[e] in _NAME_CHARS:
                e += 1
            while e > s and text[e - 1] in ".-":
                e -= 1  # a sentence's full stop, a flag's dash: not the name
            while s < e and text[s] in ".-":
                s += 1
            seen.add((s, e))
            k = lowered.find(stem, e)
    return sorted(seen)


def _scan_named(text: str, lowered: str, out: Raw) -> None:
    until = -1
    for s, e in _names(text, lowered):
        if s < until:
            continue
        gap = _GAP.match(text, e)
        if gap is None:
            continue
        cls = name_class(text[s:e])
        if cls is None or text.endswith("://", 0, s):
            continue  # (`https://x-access-token:…@host`: a URL's user, its password is read there)
        quote = gap.group("q") or gap.group("pq")
        # `with secret X`, `password X`: no operator, so only a singular name and a value
        # that looks generated (`tokens truncated`, `password reset` are not).
        if gap.group("space") and (text[e - 1] in "sS" or not _spaced_value(cls, text, e + 1)):
            continue
        in_query = s > 0 and text[s - 1] in "?&"
        vs, ve = _value_at(text, gap.end(), quote, in_query)
        if ve <= vs:
            continue
        # A name inside a value already read is part of that value: every character is read
        # in one value at most (`token=token=…` would otherwise cost its length squared).
        until = ve
        value = text[vs:ve]
        if value.endswith(("..", "\u2026")) or text.startswith(("..", "\u2026"), ve):
            continue  # cut short for display (`ghp_abc...`, a doc's `verify_token="eyJh…..."`)
        if _strict_name(text[s:e], cls) and _assigned_in_shell(text, s, e, gap.group(0)):
            judged = shell_literal(value, quote or "")
        elif cls == "password" and gap.group("pq") and _STEM_IN.search(value) is None:
            judged = _quoted_in_prose(value)  # `the password is 'blooberry'`
        else:
            judged = _STEM_IN.search(value) is None and credential_value(cls, value)
        if judged:
            out.append((vs, ve, PRIORITY, "password" if cls == "password" else "named-secret"))


def _scan_pairs(text: str, out: Raw, patterns: tuple[re.Pattern[str], ...]) -> None:
    for pattern in patterns:
        for m in pattern.finditer(text):
            cls = name_class(m.group("n"))
            if cls is None and m.group("n").lower() in ("pass", "pwd"):
                cls = "password"  # a pair's name field says it: `{"key": "PASS", "value": …}`
            if cls is None or (cls == "key" and not _strict_name(m.group("n"), cls)):
                continue  # `cache_key`, `sort_key`: a key-value store's own keys
            vs, ve = _value_at(text, m.end(), m.group("q") or None, False)
            if ve > vs and credential_value(cls, text[vs:ve]):
                out.append((vs, ve, PRIORITY, "password" if cls == "password" else
                            "named-secret"))


def _scan_quoted_pairs(text: str, out: Raw) -> None:
    """A quoted credential's name, then its quoted value (`define('DB_PASSWORD', '…')`).

    Lists of names are what such pairs look like in code too (`('old_password',
    'new_password1')`, an argv's `'key.passwd.pem', '-aes256'`), so the name must end in the
    credential's word, open the call or the subscript (`('http', 'joe', 'password',
    'localhost:22')` is a tuple of values), and the value must neither name a secret again nor
    be a flag.
    """
    for m in _PAIR_QUOTED.finditer(text):
        k = m.start()
        while k > 0 and text[k - 1] in " \t" and m.start() - k < 8:
            k -= 1
        if text[k - 1 : k] not in ("(", "["):
            continue
        name = m.group("n")
        cls = name_class(name)
        if cls is None or not _strict_name(name, cls):
            continue
        vs, ve = _value_at(text, m.end(), m.group("q"), False)
        value = text[vs:ve]
        if ve > vs and value[0] != "-" and _STEM_IN.search(value) is None and credential_value(
            cls, value
        ):
            out.append((vs, ve, PRIORITY, "password" if cls == "password" else "named-secret"))


def _scan_tuples(text: str, out: Raw) -> None:
    """Names assigned quoted values together: each value judged by the name at its place."""
    for m in _TUPLE_ASSIGN.finditer(text):
        names = [n.strip() for n in m.group("names").split(",")]
        values = list(_TUPLE_VALUE.finditer(text, m.start("values"), m.end("values")))
        if len(names) != len(values):
            continue
        for name, v in zip(names, values, strict=True):
            cls = name_class(name)
            if cls is None or not _strict_name(name, cls):
                continue
            value = v.group("v")
            if not value or _STEM_IN.search(value) is not None or " " in value:
                continue
            # A quoted literal assigned to a password's name is the password, as in
            # `password = "coyote"` (funes.ingest.redact); other names want a credential's look.
            if (cls == "password" and len(value) >= 4 and not _not_a_value(value)) or (
                    credential_value(cls, value)):
                out.append((v.start("v"), v.end("v"), PRIORITY,
                            "password" if cls == "password" else "named-secret"))


def _scan_line_values(text: str, out: Raw) -> None:
    """A value alone on its line after a line naming it and ending in `:`."""
    for m in _LINE_THEN_VALUE.finditer(text):
        name = m.group("n").replace(" ", "_")
        cls = name_class(name) or "secret"
        value = m.group("v")
        if _STEM_IN.search(value) is None and credential_value(cls, value):
            out.append((m.start("v"), m.end("v"), PRIORITY,
                        "password" if cls == "password" else "named-secret"))


def _scan_lists(text: str, out: Raw) -> None:
    """The items of a list under a credential's name (`"api_keys": ["…", "…"]`, `tokens:`)."""
    for pattern, item in ((_LIST_JSON, _JSON_ITEM), (_LIST_YAML, _YAML_ITEM)):
        for m in pattern.finditer(text):
            name = m.group("n")
            singular = name[:-1] if name.endswith(("s", "S")) else name
            cls = name_class(singular)
            if cls is None or (cls == "key" and not _strict_name(singular, cls)):
                continue
            pos = m.end()
            for _ in range(_LIST_ITEMS):
                it = item.match(text, pos)
                if it is None:
                    break
                value = it.group("v")
                if _MAPPING_ITEM.match(value):
                    break  # `- name: db`: a list of mappings, not of values
                if _STEM_IN.search(value) is None and credential_value(cls, value):
                    kind = "password" if cls == "password" else "named-secret"
                    out.append((it.start("v"), it.end("v"), PRIORITY, kind))
                pos = it.end()
                if it.groupdict().get("end") == "]":
                    break


def _scan_npmrc(text: str, out: Raw) -> None:
    """The auth settings of npm (`_auth`, `_authToken`, `_password`), per registry or global.

    An `.npmrc` stores them as written: base64 of `user:password`, a token, base64 of a
    password, none of which looks random enough for a bare value to be taken by its look.
    Only references (`${NPM_TOKEN}`) and placeholders stay, and outside a registry's line
    an identifier (Python writes `_auth = auth` too).
    """
    for m in _NPMRC_AUTH.finditer(text):
        value = m.group("v")
        if _placeholder(value) or _PLACEHOLDER_WORDS.match(value) or "$" in value:
            continue
        if m.group("r") is None and _IDENTIFIER.fullmatch(value) and not any(
            c.isdigit() for c in value
        ):
            continue  # `_auth = auth_header` in code; a registry's line is never code
        kind = "named-secret" if m.group("n").startswith("auth") else "password"
        out.append((m.start("v"), m.end("v"), PRIORITY, kind))


def _scan_credential_calls(text: str, out: Raw) -> None:
    """The password argument of a credential constructor.

    The API says what it is, so its look is not judged (`NetworkCredential("ops",
    "vzihlaquknriqlht")`); stock words, references and templates stay.
    """
    for m in _CREDENTIAL_CALL.finditer(text):
        vs, ve = _value_at(text, m.end(), m.group("q"), False)
        value = text[vs:ve]
        if ve - vs >= 6 and not _placeholder(value) and not _PLACEHOLDER_WORDS.match(value) \
                and not _STOCK_ARGUMENT.fullmatch(value) and "{" not in value:
            out.append((vs, ve, PRIORITY, "password"))


def _scan_headers(text: str, out: Raw) -> None:
    for m in _AUTH_HEADER.finditer(text):
        value = m.group("v")
        if _not_a_value(value) or not any(ch.isdigit() for ch in value):
            continue
        if random_word(value.replace("%", ""), relaxed=True) or len(value) >= 32:
            out.append((m.start("v"), m.end("v"), PRIORITY, "authorization"))


def _scan_discord(text: str, out: Raw) -> None:
    """Discord bot tokens, by their structure: the first part is the bot's numeric id in base64.

    (funes.ingest.detectors takes them for random words; the id part is base64 of digits, which
    its test for base64 of text refuses, so a bot token quoted in configuration was left.)
    """
    for m in _DISCORD_BOT.finditer(text):
        head = m.group("id")
        try:
            decoded = base64.b64decode(head + "=" * (-len(head) % 4), altchars=b"-_",
                                       validate=True)
        except (binascii.Error, ValueError):
            continue
        if 17 <= len(decoded) <= 20 and decoded.isdigit() and _entropy(m.group("mac")) >= 3.5:
            out.append((m.start(), m.end(), PRIORITY, "provider-token"))


def scan(text: str, lowered: str, present: set[str], out: Raw) -> None:
    """Append the findings of every form above in `text` to `out` (start, end, priority, kind).

    `lowered` is `text` lowercased; `present` the words redaction's keyword pass found.
    """
    if (present.isdisjoint(ANCHORS) and "authorization" not in present
            and "AAAAAAAAAA" not in text):
        return
    _scan_named(text, lowered, out)
    if "value" in lowered and ("name" in lowered or "key" in lowered):
        _scan_pairs(text, out, (_PAIR_YAML, _PAIR_JSON, _PAIR_XML, _PAIR_ELEMENTS, _PAIR_FLAGS))
    if "," in text or "]" in text:
        _scan_quoted_pairs(text, out)
    if "," in text and "=" in text:
        _scan_tuples(text, out)
    if "[" in text or "\n" in text:
        _scan_lists(text, out)
    if ":\n" in text or ":\r\n" in text or ": \n" in text:
        _scan_line_values(text, out)
    if "env" in lowered and ("getenv" in lowered or "environ" in lowered or ".fetch" in lowered
                             or "env.get" in lowered):
        _scan_pairs(text, out, (_ENV_DEFAULT,))
    if "variable" in lowered and "default" in lowered:
        _scan_pairs(text, out, (_HCL_DEFAULT,))
    if "_auth" in lowered or "_password" in lowered:
        _scan_npmrc(text, out)
    if "(" in text and ("auth" in lowered or "credential" in lowered
                        or "directoryentry" in lowered):
        _scan_credential_calls(text, out)
    if "authorization" in lowered:
        _scan_headers(text, out)
    if "." in text:
        _scan_discord(text, out)
    if "AAAAAAAAAAAAAAAAAAAAAA" in text:
        for m in _TWITTER_BEARER.finditer(text):
            if _entropy(_PERCENT.sub("", m.group("body"))) >= 4.0:
                out.append((m.start(), m.end(), PRIORITY, "provider-token"))
