"""Secrets known by the structure around them, not by a name or a value's shape.

XML secret elements of any length, private keys' bodies (DER, OpenSSH) without their PEM
armour, Fly.io's comma-separated token lists, Vault AppRole ids, Maven's master password, and
tokens whose own layout says what they are wherever they stand (Atlassian Data Center and
Asana personal access tokens, Vault's legacy tokens, Mailgun's keys, a percent-encoded SAS
signature).

Apart from funes.ingest.detectors (whose value tests it reuses) because each of these is read
by its own framing; linear like the rest (bounded repetitions, a single loop per expression).
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Final

from funes.ingest import contexts, providers
from funes.ingest.detectors import _HEX, _NAMED_PRIORITY, _UUID_RE, MARKER, Raw, random_word

__all__ = ["scan"]


_XML_OPEN: Final = re.compile(
    r"<((?:[a-z_][\w.:-]{0,40}?)?(?:password|passwd|passphrase|secret|token|api_?key"
    r"|credentials?|pwd))>"
)
_XML_MAX: Final = 16384
_FLY: Final = re.compile(
    r"FlyV1[ \t]{1,8}(fm\d[a-z]?_[A-Za-z0-9+/=_-]{20,4096}"
    r"(?:,f[mo]\d[a-z]?_[A-Za-z0-9+/=_-]{20,4096}){0,16})"
)


def _scan_xml(text: str, lowered: str, out: Raw) -> None:
    for m in _XML_OPEN.finditer(lowered):
        close = lowered.find(f"</{m.group(1)}>", m.end(), m.end() + _XML_MAX)
        if close < 0:
            continue
        s, e = m.end(), close
        while s < e and text[s] in " \t\r\n":
            s += 1
        while e > s and text[e - 1] in " \t\r\n":
            e -= 1
        value = text[s:e]
        if MARKER in value or "<" in value:
            continue
        if e - s > 256 or value.startswith("{AQAAAB") or _holds_key(value):
            # Longer ones than redact's xml-secret detector reads, Jenkins' stored secrets
            # (`{AQAAABAAAAAQ…}`, credentials.xml: decryptable with the controller's key), and
            # a braced or spaced value with a key among its words (redact reads `{…}` as a
            # template placeholder, and a value with spaces as prose).
            out.append((s, e, 5, "xml-secret"))


_VALUE_WORDS: Final = re.compile(r"[^\s{}()\[\],;|]{12,1024}")


def _holds_key(value: str) -> bool:
    """A braced or spaced element value with a key-shaped word in it (hex, UUID, random)."""
    if not (value.startswith("{") or " " in value) or value.startswith(("${", "{{")):
        return False
    for word in _VALUE_WORDS.findall(value):
        bare = word.replace("-", "")
        if (_UUID_RE.fullmatch(word) or (len(bare) >= 32 and _HEX.issuperset(word))
                or random_word(word, relaxed=True)):
            return True
    return False


#: A private key's body in base64 without its PEM armour (a `private_key` JSON value cut
#: from its BEGIN line, a key pasted bare or as a value): the structure's fixed header says
#: what it is. DER: PKCS#8 RSA, PKCS#1 RSA, SEC1 EC (P-256, P-384), PKCS#8 EC and Ed25519;
#: and OpenSSH's own format, whose body opens with `openssh-key-v1` (`b3BlbnNzaC1rZXktdjE`).
#: Certificates and public keys (`MIIDdzCCA…`, `MIIBIjANBgkq…`, `AAAAB3NzaC1yc2E…`) have
#: other headers and are left alone. The body runs over its line breaks: real ones, JSON's
#: escaped `\n`, and a source file's string literals joined across lines (`"…" +` newline
#: `"…"`, or side by side as C and Python join them).
_DER_KEY: Final = re.compile(
    r"(?:(?<=\\[nr])|(?<![A-Za-z0-9+/]))"
    r"(?:MII[A-Za-z0-9+/]{3}IBADANBgkqhkiG9w0BAQEFAAS|MII[A-Za-z0-9+/]{3}IBAAKC"
    r"|MHcCAQEEI|MIGkAgEBBDA|MIGHAgEAMBMGByqGSM49|MC4CAQAwBQYDK2Vw|b3BlbnNzaC1rZXktdjE)"
    r"(?:[A-Za-z0-9+/=]|\\[nr]|\r?\n(?:[ \t]{1,64}(?=[A-Za-z0-9+/]))?"
    r"|[\"'][ \t]{0,8}\+?[ \t]{0,8}\r?\n[ \t]{0,64}[\"']){0,16384}"
)
_DER_ANCHORS: Final = (
    "IBADANBgkqhkiG9w0BAQEFAAS", "IBAAKC", "MHcCAQEEI", "MIGkAgEBBDA", "MIGHAgEAMBMG",
    "MC4CAQAwBQYDK2Vw", "b3BlbnNzaC1rZXktdjE",
)


def _scan_der(text: str, out: Raw) -> None:
    for m in _DER_KEY.finditer(text):
        end = m.end()
        while end > m.start() and text[end - 1] in "\r\n":
            end -= 1
        if text.endswith(("\\n", "\\r"), m.start(), end):
            end -= 2
        out.append((m.start(), end, 0, "private-key"))


#: Vault AppRole's `secret_id` is a UUID and a credential (an AWS `--secret-id` names a secret
#: by its name or ARN, not a UUID).
_SECRET_ID: Final = re.compile(
    r"(?i:secret[_-]?id)\d{0,2}[\"']?[ \t]{0,3}(?::=|=>|[:=])[ \t]{0,3}[\"']?"
    r"([0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12})(?![0-9a-fA-F-])"
)


#: Maven's encrypted master password (settings-security.xml): with the settings file's
#: encrypted passwords, it opens them all.
_MAVEN_MASTER: Final = re.compile(r"<master>\{([A-Za-z0-9+/=\\]{16,512})\}</master>")
#: A plain one (not yet encrypted): `<master>` names other things in other files (Spark's
#: `<master>yarn-cluster</master>` in an Oozie workflow), so its settings file must be there
#: or the value must look like a password.
_MAVEN_PLAIN: Final = re.compile(r"<master>[ \t]{0,8}([^\s<{][^\s<]{3,127})[ \t]{0,8}</master>")


#: A PuTTY key file's private half: `Private-Lines: N` and N lines of base64 (escaped
#: `\n` in a JSON or HCL string too). The public lines before it stay.
_PPK_PRIVATE: Final = re.compile(r"Private-Lines:[ \t]{0,4}([0-9]{1,3})(?:\r?\n|(?:\\r)?\\n)")
_PPK_LINE: Final = re.compile(r"[A-Za-z0-9+/=]{1,128}(?:\r?\n|(?:\\r)?\\n|$)")


def _scan_ppk(text: str, out: Raw) -> None:
    for m in _PPK_PRIVATE.finditer(text):
        pos = m.end()
        for _ in range(min(int(m.group(1)), 256)):
            line = _PPK_LINE.match(text, pos)
            if line is None:
                break
            pos = line.end()
        end = pos
        while end > m.end() and text[end - 1] in "\r\n":
            end -= 1
        if text.endswith(("\\n", "\\r"), m.end(), end):
            end -= 2
        if end - m.end() >= 16:
            out.append((m.end(), end, 0, "private-key"))


def _strong_password(value: str) -> bool:
    """Upper and lower case and a digit (`node-1` and `yarn-cluster` are hosts' names)."""
    return (len(value) >= 8 and any(c.isupper() for c in value)
            and any(c.islower() for c in value) and any(c.isdigit() for c in value))


def _scan_fly(text: str, out: Raw) -> None:
    for m in _FLY.finditer(text):
        out.append((m.start(1), m.end(1), providers.PRIORITY, "provider-token"))


#: An Atlassian Data Center personal access token (Jira, Confluence, Bitbucket): base64 of a
#: 12-digit id, `:` and 20 random bytes. Base64 of digits has a fixed alphabet per place
#: (`[MNO][DTjz][AEIMQUYcgk][w-z0-5]` per three digits), and the colon gives `O[g-v]`, so the
#: layout alone names it, with a name beside it or none.
#: (The look-behind follows the first character: a pattern that opens with a character class
#: is searched for by that class, five times faster than one that opens with a look-behind.)
_ATLASSIAN_DC: Final = re.compile(
    r"[MNO](?<![A-Za-z0-9+/][MNO])[DTjz][AEIMQUYcgk][w-z0-5]"
    r"(?:[MNO][DTjz][AEIMQUYcgk][w-z0-5]){3}O[g-v][A-Za-z0-9+/]{26}(?![A-Za-z0-9+/=])"
)
#: Asana's personal access token: version, `/`, user id, (`/`, token id,) `:`, secret. Found
#: from its first `/` (a literal start keeps the search fast); the version is read backwards.
_ASANA: Final = re.compile(r"/[0-9]{16,20}(?:/[0-9]{16,20})?:[A-Za-z0-9]{32,64}(?![A-Za-z0-9_])")
#: Mailgun's API and webhook signing keys: 32, 8 and 8 hex digits in dash-separated groups
#: (a UUID groups 8-4-4-4-12). Found from its first `-`; the 32 digits before are read back.
_MAILGUN: Final = re.compile(r"-[a-f0-9]{8}-[a-f0-9]{8}(?![A-Za-z0-9_-])")
_LOWER_HEX: Final = frozenset("0123456789abcdef")
#: A SAS or other HMAC-SHA256 signature percent-encoded on its own (a URL's `sig` value cut
#: from its URL): 43 base64 characters and `=`, written `%2B`, `%2F`, `%3D`.
_ENCODED_SIGNATURE: Final = re.compile(r"(?<![A-Za-z0-9%])[A-Za-z0-9%]{43,100}%3D(?![A-Za-z0-9%])")
_SIGNATURE_B64: Final = re.compile(r"[A-Za-z0-9+/]{43}=")


#: Vault's tokens from before 1.10 (service `s.`, batch `b.`, recovery `r.`; 24 random
#: characters, or a longer protobuf body in `CAES…`): a one-letter variable's attribute has
#: the same shape (`s.addComponentsFromRegistry`), so the body must look generated.
_VAULT_LEGACY: Final = re.compile(
    r"[sbr](?<![A-Za-z0-9_.$][sbr])\.([A-Za-z0-9_-]{24,500})(?![A-Za-z0-9_.(-])"
)


#: A name and its value inside a percent-encoded URL (a login's `next=` or an OAuth
#: `redirect_uri=` carrying `…%3Ftoken%3D<value>%26…`): `=` written `%3D`, `&` `%26`.
_ENCODED_PAIR: Final = re.compile(r"(?i)%3D")
_ENCODED_NAME: Final = re.compile(r"(?i)(?:%3F|%26|[?&\s\"'=/]|^)([A-Za-z][A-Za-z0-9_.-]{0,63})\Z")
_ENCODED_VALUE: Final = re.compile(r"(?:[A-Za-z0-9._~+-]|%(?!26|23)[0-9A-Fa-f]{2}){4,512}")


def _scan_encoded_pairs(text: str, out: Raw) -> None:
    k = _ENCODED_PAIR.search(text)
    while k is not None:
        m = _ENCODED_NAME.search(text, max(0, k.start() - 67), k.start())
        if m is not None:
            cls = contexts.name_class(m.group(1))
            v = _ENCODED_VALUE.match(text, k.end()) if cls else None
            if cls and v is not None and contexts.credential_value(
                cls, urllib.parse.unquote(v.group(0))
            ):
                out.append((v.start(), v.end(), _NAMED_PRIORITY,
                            "password" if cls == "password" else "named-secret"))
        k = _ENCODED_PAIR.search(text, k.end())


def _scan_layouts(text: str, out: Raw) -> None:
    if "." in text:
        for m in _VAULT_LEGACY.finditer(text):
            if random_word(m.group(1)):
                out.append((m.start(), m.end(), providers.PRIORITY, "provider-token"))
    for m in _ATLASSIAN_DC.finditer(text):
        if providers.random_enough(m.group(0)[18:]):
            out.append((m.start(), m.end(), providers.PRIORITY, "provider-token"))
    if ":" in text:
        for m in _ASANA.finditer(text):
            start = m.start()
            while start > max(0, m.start() - 4) and text[start - 1].isdigit():
                start -= 1
            if start == m.start() or (start and (text[start - 1].isalnum()
                                                 or text[start - 1] in "_/.")):
                continue  # no version, more than a version's digits, a path's or a word's part
            if providers.random_enough(text[text.index(":", m.start()) + 1 : m.end()]):
                out.append((start, m.end(), providers.PRIORITY, "provider-token"))
    if "-" in text:
        for m in _MAILGUN.finditer(text):
            start = m.start() - 32
            if start < 0 or not _LOWER_HEX.issuperset(text[start : m.start()]) or (
                start and (text[start - 1].isalnum() or text[start - 1] in "_-")
            ):
                continue
            if providers.random_enough(text[start : m.end()]):
                out.append((start, m.end(), providers.PRIORITY, "provider-token"))
    if "%3D" in text or "%3d" in text:
        _scan_encoded_pairs(text, out)
    if "%3D" in text:
        for m in _ENCODED_SIGNATURE.finditer(text):
            value = urllib.parse.unquote(m.group(0))
            if _SIGNATURE_B64.fullmatch(value) and providers.random_enough(value):
                out.append((m.start(), m.end(), providers.PRIORITY, "azure-sas-token"))


def scan(text: str, lowered: str, out: Raw) -> None:
    """Append the structured findings on `text` to `out` (start, end, priority, kind)."""
    if "</" in text:
        _scan_xml(text, lowered, out)
    if "<master>" in text:
        for m in _MAVEN_MASTER.finditer(text):
            out.append((m.start(1), m.end(1), _NAMED_PRIORITY, "xml-secret"))
        in_settings = "settingssecurity" in lowered
        for m in _MAVEN_PLAIN.finditer(text):
            if in_settings or _strong_password(m.group(1)):
                out.append((m.start(1), m.end(1), _NAMED_PRIORITY, "xml-secret"))
    if "Private-Lines:" in text:
        _scan_ppk(text, out)
    if "FlyV1" in text:
        _scan_fly(text, out)
    if any(a in text for a in _DER_ANCHORS):
        _scan_der(text, out)
    if "secret" in lowered and "id" in lowered:
        for m in _SECRET_ID.finditer(text):
            out.append((m.start(1), m.end(1), _NAMED_PRIORITY, "named-secret"))
    if len(text) >= 26:  # the shortest layout: a legacy Vault token, `s.` and 24
        _scan_layouts(text, out)
