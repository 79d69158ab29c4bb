"""Vetoes: findings whose name ends like a secret's and whose value is not one.

Apart from the detectors because they judge every engine's findings (funes's assignments,
gitleaks' rules, the field's detectors) after the fact, by the name before a value and by the
value's code shape, not by finding anything themselves.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

from funes.ingest.contexts import NPMRC_HEAD
from funes.ingest.detectors import _NAME_PARTS, _encoded_text, _word_letters

__all__ = ["ini_value", "vetoed", "yaml_value"]


#: Names of well-known non-secret values ending in "token" or "key": pagination cursors,
#: idempotency and client request tokens, continuation markers. Matched on the name's parts
#: lowercased and joined by `_` (`NextPageToken` → `next_page_token`), so a part must start
#: where a part of the name starts: `statuspage_token` is Statuspage's API token, not a page's.
_NOT_SECRET_NAMES: Final = re.compile(
    r"(?:^|_)(?:next|page|next_?page|starting|start|continuation|pagination|sync|cursor|resume"
    r"|query|request|idempotency|marker|next_?marker)_?token$"
    # AWS's `ClientToken` alone: `VAULT_CLIENT_TOKEN`, `oauthClientToken` are credentials.
    r"|^client_?token$"
    r"|(?:^|_)idempotency(?:_?key)?$"
    r"|(?:^|_)(?:cache|partition|sort|primary|range|hash|object|s_?3|foreign)_?key$"
    r"|(?:^|_)token_?type$|(?:^|_)next_?marker$"
)
_NAME_BEFORE: Final = re.compile(
    r"([A-Za-z][A-Za-z0-9_.-]{0,60})[\"']?(?:\s{0,8}[:=]\s{0,8}|(?<=[A-Za-z0-9])[ \t]{1,8})[\"']?$"
)


#: A value that is a placeholder named in capitals: `PASSWORD`, `USER:PASSWORD`, `API_TOKEN`.
_CAPS_PLACEHOLDER: Final = re.compile(
    r"(?:[A-Z][A-Z0-9_]{0,30}:)?[A-Z_]{0,30}(?:PASS(?:WORD)?|PASSWD|TOKEN|SECRET|KEY|PWD)[A-Z_]{0,30}"
)


#: A type name where a schema or a docstring puts a value (`"password": "string?"`).
_TYPE_PLACEHOLDER: Final = re.compile(
    r"(?i)(?:string|str|boolean|bool|int|integer|float|double|number|binary|bytes|object|array"
    r"|any|none|null|optional|text|secretstr)[?!]?(?:\[\])?"
)
#: A type's name where a schema or a class body puts one (`token: AccessToken`, `String!`).
_TYPE_NAME: Final = re.compile(r"(?:[A-Z][a-z]{1,32}){1,6}[?!]?")
#: A YAML mapping line up to its value: indentation, a list item's dash, a plain key, `: `.
_YAML_HEAD: Final = re.compile(
    r"(?:^|\n)[ \t]{0,40}(?:-[ \t]{1,4})?[A-Za-z_][\w.-]{0,80}:[ \t]{1,8}$"
)


_MEMBER: Final = re.compile(r"[A-Za-z_$][\w$]{0,64}(?:\??\.[A-Za-z_$][\w$]{0,64}){0,8}")
#: An environment variable's name in capitals right before `=`, at a line's start or after
#: `export`/`-e`: what a shell or an env file assigns is a literal, never an expression.
_ENV_ASSIGNED: Final = re.compile(
    r"(?:^|\n|(?<![\w-])(?:export|-e|--env|ENV)[ \t]{1,4})[A-Z][A-Z0-9_]{1,80}=$"
)
#: The same line indented or commented out (`    REACT_APP_PASS=x  # note`, `# PASS=x`), when
#: nothing but a comment follows the value: a keyword argument in code goes on (`,` or `)`).
#: Also an item of a Compose file's `environment:` list (`  - POSTGRES_PASSWORD=postgres`).
_ENV_LINE_HEAD: Final = re.compile(
    r"(?:^|\n)[ \t]{0,16}(?:#[ \t]{0,4}|-[ \t]{1,4})?[A-Z][A-Z0-9_]{1,80}=$"
)
_DOCKER_ENV_HEAD: Final = re.compile(
    r"(?:^|\n)[ \t]{0,8}ENV[ \t]{1,8}[A-Za-z_][\w.-]{0,80}[ \t]{1,8}$"
)
#: After a value: nothing but spaces and a comment to the line's end (env, YAML, INI lines).
_ENV_LINE_TAIL: Final = re.compile(r"[ \t]{0,64}(?:#[^\n]{0,256})?(?:\n|$)")


def yaml_value(text: str, start: int, end: int) -> bool:
    """A plain value ending a line of YAML (`  password: wintermoon`): a literal, not a name.

    YAML writes strings unquoted, so the word after a key is the value itself, not a
    variable. Code writes the same `key: name` in an object literal or a type annotation, so
    the line must end at the value, and a neighbouring line must be a YAML key or list item
    with no `,`, `;`, `{` or `(` at its end; a type's name (`AccessToken`, `String!`) stays.
    """
    if not _YAML_HEAD.search(text, max(0, start - 124), start):
        return False
    if not _ENV_LINE_TAIL.match(text, end):
        return False
    if _TYPE_NAME.fullmatch(text, start, end) or text[end - 1 : end] in (",", ";", "{", "("):
        return False
    ls = text.rfind("\n", max(0, start - 124), start)
    le = text.find("\n", end)
    neighbours = []
    if ls > 0:
        prev = text.rfind("\n", max(0, ls - 400), ls) + 1
        neighbours.append(text[prev:ls])
    if le >= 0:
        nxt = text.find("\n", le + 1, le + 401)
        neighbours.append(text[le + 1 : nxt if nxt >= 0 else min(len(text), le + 401)])
    return any(
        ":" in line and line.rstrip()[-1:] not in (",", ";", "{", "(", "[")
        and _YAML_HEAD.search(line[: line.index(":") + 2] if ": " in line else line + " ")
        is not None
        for line in neighbours if line.strip()
    )


#: An INI line up to its value (`password = `, `password=`, `password: `) at a line's start.
_INI_HEAD: Final = re.compile(r"(?:^|\n)[ \t]{0,8}[A-Za-z_][\w.-]{0,80}[ \t]{0,4}[=:][ \t]{0,4}$")
#: An INI section's header on a line of its own (`[client]`, `[pypi]`, `[profile dev]`).
_INI_SECTION: Final = re.compile(r"(?m)^\[[A-Za-z0-9][\w .:\"-]{0,64}\][ \t]{0,8}\r?$")


def ini_value(text: str, start: int, end: int) -> bool:
    """A plain value ending a line of an INI file (`[client]` … `password = wintermoon`).

    MySQL's `my.cnf`, `.pypirc`, `pip.conf`, `setup.cfg`, `.aws/credentials`: their values are
    literals written as they are. Python writes `password = name` too, so the line must end at
    the value and a section header must come before it, with only INI lines (keys, comments,
    blank lines) between them.
    """
    if not _INI_HEAD.search(text, max(0, start - 96), start):
        return False
    if not _ENV_LINE_TAIL.match(text, end):
        return False
    lo = max(0, start - 2000)
    headers = list(_INI_SECTION.finditer(text, lo, start))
    if not headers:
        return False
    between = text[headers[-1].end() : text.rfind("\n", 0, start) + 1]
    return all(
        not line.strip() or line.lstrip()[:1] in "#;" or _INI_LINE.fullmatch(line) is not None
        for line in between.splitlines()
    )


_INI_LINE: Final = re.compile(r"[ \t]{0,8}[A-Za-z_][\w.-]{0,80}[ \t]{0,4}[=:][^\n;{}()]{0,400}")


def _code_value(text: str, start: int, end: int) -> bool:
    """An unquoted value that is an expression in code, not a literal.

    JavaScript and TypeScript read `password: tString`, `httpCredentials = httpCredentials`,
    `resumptionToken: lastEventId`, `browserToken = browser?.browserName`: an identifier or
    member access made of words, with no digit, and not quoted.
    """
    if start and text[start - 1] in "\"'`":
        return False
    if _ENV_ASSIGNED.search(text, max(0, start - 82), start) or (
        _ENV_LINE_HEAD.search(text, max(0, start - 104), start)
        and _ENV_LINE_TAIL.match(text, end)
    ):
        return False  # `REACT_APP_PASS=whiteduke` in an env file or a shell: a literal
    if _DOCKER_ENV_HEAD.search(text, max(0, start - 104), start):
        return False  # a Dockerfile's `ENV ARTEMIS_PASSWORD artemis`
    if yaml_value(text, start, end) or ini_value(text, start, end):
        return False  # `password: wintermoon` in YAML, `password = wintermoon` in an INI file
    ls = text.rfind("\n", max(0, start - 600), start) + 1
    npmrc = NPMRC_HEAD.fullmatch(text, ls, start)
    if npmrc is not None and npmrc.group("r"):
        return False  # `//registry.example.com/:_password=…` in an .npmrc: a literal
    value = text[start:end]
    if len(value) > 130 or _MEMBER.fullmatch(value) is None:
        return False
    digits = sum(c.isdigit() for c in value)
    letters = sum(ch.isalpha() for ch in value)
    if "." in value:  # member access: `options2?.onresumptiontoken`
        return digits <= 2 and _word_letters(value) * 2 > letters
    return not digits and _word_letters(value) * 2 > letters


#: The key types an OpenSSH public key's wire encoding starts with (RFC 4253 §6.6, RFC 5656,
#: RFC 8709, OpenSSH's PROTOCOL.u2f and certificate types).
_SSH_KEY_TYPE: Final = re.compile(
    rb"(?:ssh-(?:ed25519|ed448|rsa|dss)|ecdsa-sha2-nistp(?:256|384|521)"
    rb"|sk-(?:ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com)(?:-cert-v01@openssh\.com)?"
)


def ssh_public_key(value: str) -> bool:
    """An OpenSSH public key's base64 body (`AAAAC3NzaC1lZDI1NTE5…`): public, not a secret.

    Known by its structure, not its look: decoded, it starts with a 4-byte length and that many
    bytes naming a key type. Transcripts hold these (authorized_keys, deploy keys, `ssh-keygen`
    output), and they look as random as any token.
    """
    if not value.startswith("AAAA") or len(value) < 40:
        return False
    head = value[:64]
    try:
        raw = base64.b64decode(head[: len(head) // 4 * 4], validate=True)
    except (binascii.Error, ValueError):
        return False
    n = int.from_bytes(raw[:4], "big")
    name = raw[4 : 4 + n]
    return 7 <= n <= 40 and len(name) == n and _SSH_KEY_TYPE.fullmatch(name) is not None


_KEY_LINE: Final = re.compile(
    r"(?:(?:ssh|ecdsa|sk)-[a-z0-9@.-]{3,60}[ \t]{1,4})?(?P<blob>AAAA[A-Za-z0-9+/]{36,252})"
)


def _public_key_line(value: str) -> bool:
    """The blob alone, or an authorized_keys line's `type blob` taken as one value."""
    m = _KEY_LINE.match(value)
    return m is not None and ssh_public_key(m.group("blob"))


#: Kinds read from an assignment, whose value may be an expression in code: funes's and
#: gitleaks' (`generic-api-key`) and Betterleaks' (`generic-password`) generic rules.
_JUDGED_AS_CODE: Final = frozenset(
    {"secret", "password", "high-entropy", "generic-api-key", "generic-password"}
)


def vetoed(text: str, start: int, end: int, kind: str, *, literal: bool = False) -> bool:
    """Whether a raw finding is not a secret after all.

    A placeholder named in capitals (`curl -u USER:PASSWORD`), or, for an assignment-like
    `kind`, the value of a known non-secret name (`"NextToken": "…"`, `ClientToken=…`,
    `--starting-token …`) or an expression in code. `literal`: the syntax already says the
    value is a literal (a client's flag on a command line), so it is not judged as code.
    """
    if text.endswith("EXAMPLE", start, end):
        return True  # AWS's published keys (`AKIAIOSFODNN7EXAMPLE`) and the docs that copy them
    if end - start <= 64 and (
        _CAPS_PLACEHOLDER.fullmatch(text, start, end)
        or _TYPE_PLACEHOLDER.fullmatch(text, start, end)
    ):
        return True
    if not literal and kind in _JUDGED_AS_CODE and _code_value(text, start, end):
        return True
    if kind in ("high-entropy", "generic-api-key") and _encoded_text(text[start:end]):
        return True  # base64 of text: a protocol's sample nonce (`Sec-WebSocket-Key: dGhl…`)
    if _public_key_line(text[start : min(end, start + 256)]):
        return True
    if kind not in ("secret", "high-entropy", "generic-api-key", "named-secret", "random-token"):
        return False
    m = _NAME_BEFORE.search(text, max(0, start - 72), start)
    if m is None:
        return False
    parts = _NAME_PARTS.findall(m.group(1).rsplit(".", 1)[-1])
    return _NOT_SECRET_NAMES.search("_".join(parts).lower()) is not None
