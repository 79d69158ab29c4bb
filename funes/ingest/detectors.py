r"""Detectors learned from the field's other scanners, and the completion of every redaction.

funes's own detectors and the gitleaks rules (funes.ingest.redact, funes.ingest.gitleaks) know
credentials by a name beside them in an assignment, or by a shape gitleaks has a rule for.
trufflehog's and detect-secrets' test suites show what that misses: keys written after a name
in other syntaxes (``jira token - 'x'``, ``<secret>x</secret>`` of any length, ``("user",
"x")`` after a key word), tokens pasted alone in prose, provider formats no gitleaks rule knows,
and repeats (a value redacted where it is named, left verbatim where it is pasted again). What
is here was written from those formats as their providers document them and from
detect-secrets' keyword-and-entropy heuristics (Apache-2.0); no scanner code is copied.

Two parts here, each linear in the text (every expression is a single loop over a character
class, or a literal alternation, with bounded repetitions; no nested quantifier):

* :func:`scan` adds raw findings: provider tokens by prefix (:data:`PROVIDERS`), values near a
  secret word in any syntax, random tokens standing alone in prose (XML secret elements,
  Fly.io's token lists and bare private keys are funes.ingest.structured).
* funes.ingest.vetoes drops a finding of an assignment detector whose name is a well-known
  non-secret ending in ``token`` or ``key`` (AWS ``NextToken``, ``ClientToken``, pagination
  and idempotency tokens; ``key_id``-like names are already not secrets).

What a finding implies beyond itself (repeats, pieces, cut tokens) is funes.ingest.completion,
which reads values with the same tests (`random_word`, the word and name tests) so the
standalone detector and its repeats agree about a value.

Precision: the standalone test (:func:`random_word`) wants what a generated credential looks
like and what text, code and tool output rarely hold between spaces: 20+ characters, a run of
16+ alphanumerics (8+ in standard base64 of 30+ characters, whose `+` and `/` break runs),
digits and letters interleaved, high entropy, not hex (git SHAs, digests), not a UUID, not
words, not an id with a known id prefix (``req_``, ``toolu_``, ``msg_``).

One file because the standalone scan and the value tests are one judgement: the word, name and
randomness tests here are what the scan applies to each word and what completion and the vetoes
import to judge a value the same way, so their tables (common letter pairs, id prefixes) and
the scan change together.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from functools import cache
from typing import Final

from funes.ingest import providers
from funes.ingest.providers import ANCHORS

__all__ = ["ANCHORS", "KINDS", "random_word", "scan"]

#: Kinds this module names in ``[REDACTED:<kind>]``.
KINDS: Final = (
    "provider-token", "password-hash", "url-path-token", "url-signature", "named-secret",
    "random-token",
)
MARKER: Final = "[REDACTED:"

Raw = list[tuple[int, int, int, str]]


def _entropy(value: str) -> float:
    n = len(value)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# ------------------------------------------------------------------------------------------------
# Random-looking words
# ------------------------------------------------------------------------------------------------

_HEX: Final = frozenset("0123456789abcdefABCDEF-~")
_UUID_RE: Final = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_ALNUM_RUN: Final = re.compile(r"[A-Za-z0-9]{16,4096}")
_B64_RUN: Final = re.compile(r"[A-Za-z0-9]{8,4096}")
#: Prefixes of ids that look random and are not credentials: API request and message ids,
#: tool-call ids, payment object ids, content hashes, integrity strings, trace ids.
_ID_PREFIX: Final = re.compile(
    r"(?i)^(?:req|request|msg|message|toolu|tool|call|chatcmpl|run|thread|asst|file|batch|step"
    r"|resp|sess|session|trace|span|job|task|build|evt|cus|sub|ch|pi|pm|seti|in|ii|prod|price"
    r"|txn|po|acct|ba|card|src|tok|sha\d{0,3}|md5|blake\d{0,3}|h1|id|uid|uuid|ocid\d|arn|etag|commit"
    r"|rev|ref|img|image|data|cache|node|pod|deploy|chunk|row|doc|obj|vs|sk-ant-api\d\d-x)[_:-]"
)
_DOTTED: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,256}(?:\.[A-Za-z_][A-Za-z0-9_]{0,256}){1,64}")
_WORDY_PART: Final = re.compile(r"[A-Z][a-z]{2,4096}|[a-z]{3,4096}|[A-Z]{3,4096}")
_VOWELS: Final = frozenset("aeiouAEIOU")


def _transitions(value: str) -> int:
    """How often the character class changes (lower, upper, digit): random text changes often."""
    n = 0
    prev = -1
    for ch in value:
        cls = 0 if ch.islower() else 1 if ch.isupper() else 2 if ch.isdigit() else 3
        if cls != prev and prev != -1 and cls != 3 and prev != 3:
            n += 1
        prev = cls
    return n


#: The most frequent letter pairs of English text and code identifiers. In words most pairs
#: are among them; in random letters about one pair in five is (120 of 676 possible).
_PAIRS: Final = (
    "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io "
    "le ve co me de hi ri ro ic ne ea ra ce li ch ll be ma si om ur ca el ta la ns di fo ho "
    "pe ec pr no ct us ac ot il tr ly nc et ut ss so rs un lo wa ge ie wh ee wi em ad ol rt "
    "po we na ul ni ts mo ow pa im mi ai sh ir su id os iv ia am fi ci vi pl ig tu ev ld ry "
    "mp fe bl ab gh ty op wo sa ay ex ke fr oo av ag if ap gr od bo sp rd do uc bu ei ov by "
    "rm ep tt oc fa ef cu rn sc gi da yo cr cl du ga qu ue ff ba ey ls va um pp ua up lu go "
    "ht ru ug ds lt pi rc rr eg au ck ew mu br bi pt ak pu ui rg ib tl ny ki rk ys ob mm fu "
    "ph og ms ye ud mb ip ub oi rl gu dr hr cc ft wn nu af hu nn eo vo rv nf xp gn sm fl iz "
    "ok nl my gl aw ju oa eq sy sl ps jo lf nv je nk kn gs dy hy ze ks xt bs ik dd cy rp sk "
    "xi oe oy ws"
)
_COMMON_PAIRS: Final = frozenset(_PAIRS.split())


def _pronounceable(part: str) -> bool:
    """A run of letters that reads as a word: most of its letter pairs are common in English."""
    low = part.lower()
    pairs = [low[i : i + 2] for i in range(len(low) - 1)]
    if not pairs:
        return False
    return sum(p in _COMMON_PAIRS for p in pairs) * 10 >= len(pairs) * 7


def _word_letters(value: str) -> int:
    """How many letters of `value` are in pronounceable word parts (`Token`, `config`)."""
    return sum(len(p) for p in _WORDY_PART.findall(value) if _pronounceable(p))


_VERSION: Final = re.compile(r"v?\d{1,9}\.\d{1,9}[.+-]")
_B64_BODY: Final = re.compile(r"[A-Za-z0-9+/]{16,4096}={0,2}|[A-Za-z0-9_-]{16,4096}")


def _encoded_text(value: str) -> bool:
    """`value` is base64 of printable text (a JSON cursor, a sentence), so not random bytes."""
    if _B64_BODY.fullmatch(value) is None:
        return False
    body = value.rstrip("=").replace("-", "+").replace("_", "/")
    body = body[: len(body) - len(body) % 4] if len(body) % 4 != 1 else body[:-1]
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (ValueError, binascii.Error):
        return False
    if not raw:
        return False
    printable = sum(32 <= b < 127 or b in (9, 10, 13) for b in raw)
    return printable * 10 >= len(raw) * 9


#: Two words or more and separators at the start of a value (`public-key-`, `app-build-`);
#: one word may be a provider's prefix (Lob's `live_` + hex).
_WORDS_HEAD: Final = re.compile(r"[A-Za-z]{2,32}(?:[-_.][A-Za-z]{2,32}){1,4}[-_.]")
_GROUPS: Final = re.compile(r"[A-Za-z0-9]{3,16}(?:-[A-Za-z0-9]{3,16}){2,7}")


def _grouped(value: str) -> bool | None:
    """A key written in dash-separated groups (`2FTJTA1C-BXO0DV4J-…`, a UUID's shape in base36).

    Each group of a generated key mixes letters and digits; a slug, a pod name or a date has
    word or number groups. None: not in groups, the other tests decide.
    """
    if _GROUPS.fullmatch(value) is None:
        return None
    parts = value.split("-")
    mixed = sum(any(c.isdigit() for c in p) and any(c.isalpha() for c in p) for p in parts)
    body = value.replace("-", "")
    if mixed * 4 < len(parts) * 3 or len(body) < 20 or _HEX.issuperset(value):
        return False
    if _word_letters(value) * 2 > sum(ch.isalpha() for ch in value):
        return False
    return _entropy(body) >= 3.5


def random_word(value: str, *, relaxed: bool = False) -> bool:
    """Whether `value` looks machine-generated (a credential's body), not words, ids or digests.

    `relaxed`: a secret word is next to it, so hex (32+ characters), all-lowercase and shorter
    values are enough; standing alone it must be 20+ characters with a 16+ alphanumeric run and
    letters and digits interleaved.
    """
    n = len(value)
    if n < (12 if relaxed else 20) or n > 1024 or MARKER in value:
        return False
    if _UUID_RE.fullmatch(value):
        return False
    if value.lstrip("+-").startswith(("0x", "0X")) or _VERSION.match(value):
        return False  # a number literal, a version string
    grouped = _grouped(value)
    if grouped is not None:
        return grouped
    hexish = _HEX.issuperset(value)
    if hexish and (not relaxed or len(value.replace("-", "")) < 32):
        return False  # git SHAs, digests, ids: never alone; after a secret word, 32+ only
    head = None if relaxed else _WORDS_HEAD.match(value)
    if head is not None and _HEX.issuperset(value[head.end() :]) and _word_letters(
        head.group(0)
    ) * 2 >= sum(ch.isalpha() for ch in head.group(0)):
        return False  # words, then hex (`release-3f2a…`, `public-key-9b1c…`): a labelled digest
    digits = sum(ch.isdigit() for ch in value)
    letters = sum(ch.isalpha() for ch in value)
    if not letters or value.isdigit():
        return False
    if not relaxed:
        # Standard base64 (a `+` in it, or padded) breaks its runs at `+` and `/` every 32
        # characters on average: an AWS secret key's 40 rarely hold 16 alphanumerics in a row.
        run = _B64_RUN if n >= 30 and _standard_base64(value) else _ALNUM_RUN
        if digits < 2 or run.search(value) is None or _ID_PREFIX.match(value):
            return False
    elif not digits and (n < 20 or _word_letters(value) * 3 >= letters):
        return False  # no digit: only a long run of letters that are not words
    if providers.filler(value) or value.startswith("gAAAAA"):
        return False  # a test pattern (`0123…`, `AAAAA`), a Fernet ciphertext (`gAAAAA…`)
    body = value.replace("-", "").replace("_", "")
    for sep in "_-":
        if value.count(sep) >= 2 and max(map(len, value.split(sep))) < 12:
            return False  # snake_case or kebab-case (`gss_krb5_rfc1964_keydata`, a slug)
    if _encoded_text(value):
        return False  # base64 of words (`VGhpcyBpcyB0aGUgd2F5`: "This is the way"), not a key
    if _word_letters(value) * 2 > letters:
        return False  # mostly words: identifiers, file names, slugs
    if _DOTTED.fullmatch(value) and any(
        _word_letters(p) * 2 > sum(ch.isalpha() for ch in p) or len(p) < 6
        for p in value.split(".")
    ):
        return False  # attribute access (`ed25519.Ed25519PublicKey`), not `random.random`
    if hexish:
        return _entropy(body) >= 3.0
    trans = _transitions(body)
    unworded = _word_letters(value) * 2 < letters  # few words in it: lowercase base36 and kin
    per = 3 if not digits else 6 if relaxed else 5
    if trans < (4 if unworded and digits else max(4, len(body) // per)):
        return False  # CamelCase changes case once a word; random text every few characters
    return _entropy(body) >= (3.3 if relaxed else 3.7)


# ------------------------------------------------------------------------------------------------
# Tokens standing alone in prose, and values near a secret word in any syntax
# ------------------------------------------------------------------------------------------------

#: A candidate word: token characters, bounded (a longer run is data, not a key).
_WORD_TAIL: Final = r"(?:={1,8}[A-Za-z0-9+/_.~-]{1,1024}){0,16}={0,3}"
_WORD: Final = re.compile(r"(?<![A-Za-z0-9+/_.~-])[A-Za-z0-9+/_.~-]{12,1024}" + _WORD_TAIL)
#: The same, 20 characters at least and a digit in them: all a text without a secret word
#: needs (alone, a word must hold digits), so most words never reach Python.
_LONG_DIGIT_WORD: Final = re.compile(
    r"(?<![A-Za-z0-9+/_.~-])(?=[A-Za-z+/_.~-]{0,1023}[0-9])[A-Za-z0-9+/_.~-]{20,1024}" + _WORD_TAIL
)
#: `NAME=` at the start of a word: an assignment, whose value is the word after it.
_NAME_EQ: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}=")
_PROSE_BEFORE: Final = frozenset(" \t\n(`\"'*:<>,[=")
_NAMED_BEFORE: Final = frozenset(" \t\n(`\"'*:<>,[=&?{|")
_PROSE_AFTER: Final = frozenset(" \t\n)`\"'*.,;:!?<>]")
_PROSE_WORDS: Final = re.compile(r"(?<![\w/.+=-])[A-Za-z]{2,4096}(?![\w/.+=-])")
#: A label before a value that says it is an identifier or a digest, not a credential.
_ID_LABEL: Final = re.compile(
    r"(?i)(?:\b|_|(?<=[a-z]))(?:ids?|identifier|request|trace|span|nonce|hash|digest|checksum"
    r"|sha\d{0,3}|md5|etag|commit|revision|rev|uuid|guid|version|build|session|cursor|marker"
    r"|integrity)\b[\s:=#'\"(]{0,8}$"
)
_STANDALONE_PRIORITY: Final = 9
_CODE_PUNCT: Final = re.compile(r"[()\[\]{},;=:]")
_NOT_CREDENTIAL_LINE: Final = re.compile(r"ENC\[|(?i:csrf|xsrf|authenticity)")
#: Between a `…key` name and its value: quotes, spaces and one assignment operator at most.
_ASSIGN_GAP: Final = re.compile(
    r"[\"'`\]>]{0,3}[ \t]{0,4}(?::=|=>|->|[:=(,]|\s-)?[ \t]{0,4}[\"'`bru]{0,3}"
)
#: A Discord bot token: the bot's id in base64, a timestamp, an HMAC (found among the words).
_DISCORD: Final = re.compile(r"[A-Z][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}")
_NAMED_PRIORITY: Final = 7
#: Characters of one part of a joined credential (`id:secret`): funes.ingest.completion too.
_PART_CHARS: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
)

#: Words that say a secret is next: the names detect-secrets' keyword plugin and trufflehog's
#: keyword prefilters look for, in any syntax (no `=` needed).
_SECRET_STEMS: Final = ("token", "secret", "passw", "passphrase", "pwd", "credential", "bearer")
#: Words before "key" that make it a secret's name (`api key`, `access_key`, `licenseKey`).
_KEY_QUALIFIERS: Final = (
    "api", "access", "auth", "private", "signing", "license", "app", "master", "secret",
)
_LOWER: Final = frozenset("abcdefghijklmnopqrstuvwxyz")


def _secret_words(text: str, lowered: str) -> list[tuple[int, int]]:
    """Where the words that say a secret is next are, in order (one `str.find` loop per stem).

    The names detect-secrets' keyword plugin and trufflehog's keyword prefilters look for, in
    any syntax (no `=` needed): token, secret, password, passwd, passphrase, pwd, credential(s),
    bearer; and key after `_`/`-`, after a qualifier (`api key`, `accesskey`), at a camelCase
    hump (`boostnoteKey`) or as a query parameter (`?key=`).
    """
    out: list[tuple[int, int]] = []
    find = lowered.find
    for stem in _SECRET_STEMS:
        k = find(stem)
        while k >= 0:
            end = k + len(stem)
            if stem == "passw":
                if lowered.startswith("ord", end):
                    end += 3
                elif lowered.startswith("d", end):
                    end += 1
                if end == k + len(stem):
                    k = find(stem, end)
                    continue
            elif stem == "credential" and lowered.startswith("s", end):
                end += 1
            out.append((k, end))
            k = find(stem, end)
    k = find("key")
    while k >= 0:
        end = k + 3
        if lowered[end : end + 1] not in _LOWER or text[end : end + 1].isupper():
            before = lowered[max(0, k - 12) : k]
            if (
                before.endswith(("_", "-"))
                or before.rstrip(" _-").endswith(_KEY_QUALIFIERS)
                or (before[-1:] == " " and _brand(lowered[max(0, k - 30) : k].rstrip()))
                or (k and text[k] == "K" and (text[k - 1].islower() or text[k - 1].isdigit()))
                or (before.endswith(("?", "&")) and text.startswith("=", end))
            ):
                out.append((k, end))
        k = find("key", end)
    for stem in ("_pass", "-pass"):  # `db_pass`, `-pass`: "pass" ending a compound name
        k = find(stem)
        while k >= 0:
            end = k + len(stem)
            if not lowered[end : end + 1].isalnum() and text[end : end + 1] != "(":
                out.append((k + 1, end))  # not `should_pass(…)`: a call, not a name
            k = find(stem, end)
    out.sort()
    return out


#: Parts of a name that say its value is not a secret even though a secret word ends it.
_NOT_SECRET_PARTS: Final = re.compile(
    r"(?i)public|hash|sha\d{0,3}|md5|digest|checksum|fingerprint|cache|etag|_id\b|[a-z]Id\b|sort"
    r"|partition|primary|foreign|index|next|page|idempoten|continu|cursor|csrf|xsrf|type"
    r"|length|size|count|file|path|url|name|prefix|timeout|expir|authenticity"
)
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _secret_name(text: str, start: int, end: int) -> bool:
    """Whether the identifier holding the secret word at `start:end` names a secret.

    Not `public_key`, `cache_key`, `token_type`, `NextToken`.
    """
    s = start
    while s > 0 and start - s < 64 and text[s - 1] in _NAME_CHARS:
        s -= 1
    e = end
    while e < len(text) and e - end < 32 and (text[e].isalnum() or text[e] == "_"):
        e += 1
    return _NOT_SECRET_PARTS.search(text, s, e) is None


#: A quoted value right after a secret word, in syntaxes the assignment detectors do not read
#: (`token - 'x'`, `secret 'x'`, `password("x")`, `token -> "x"`).
_QUOTED_AFTER: Final = re.compile(
    r"""[ \t]{0,3}(?:-{1,2}>?|=>|->|\(|is|[!=]==?)?[ \t]{0,3}"""
    r"""(?:'(?P<v>[^'\n]{8,256})'|"(?P<v2>[^"\n]{8,256})"|`(?P<v3>[^`\n]{8,256})`)"""
)


#: A regular expression, a format string or a path, not a password made of symbols.
_PATTERN_SYNTAX: Final = re.compile(
    r"\\|\(\?|\.\*|\.\+|\[\^|\][+*?{]|%[sdr(]|\{\d{0,9}\}|/\w{1,1024}/|^[./~]|[a-z]-[a-z]\]"
)
#: The rest of an identifier after a secret word in it (`_secure` of `my_password_secure`;
#: not a plural's `s_output` of `n_tokens_output`).
_IDENT_REST: Final = re.compile(r"(?:_[A-Za-z0-9]|[A-Z])[A-Za-z0-9_]{0,31}")
_QUOTED_AFTER_NAME: Final = re.compile(
    r"""[ \t]{0,3}(?:-{1,2}>?|=>|->|\(|is|[!=]==?|:?=|:)?[ \t]{0,3}"""
    r"""(?:'(?P<v>[^'\n]{8,256})'|"(?P<v2>[^"\n]{8,256})"|`(?P<v3>[^`\n]{8,256})`)"""
)


def _quoted_secret(value: str) -> bool:
    """A quoted value after a secret word: a literal with some randomness, not prose or code."""
    if " " in value or MARKER in value or value[0] in "$%{<[" or value.endswith(("...", "…")):
        return False  # prose, a marker, a template, a truncated example
    if _ASCENDING.search(value.lower()) or providers.filler(value):
        return False  # `0123456789abcdef`, `xxxxx`: test data
    if value.isalpha() or _entropy(value) < 3.0:
        return False
    symbols = sum(not c.isalnum() and c != "_" for c in value)
    classes = any(c.islower() for c in value) + any(c.isupper() for c in value) + any(
        c.isdigit() for c in value) + (symbols > 0)
    low = value.lower()
    if classes < 2 or any(stem in low for stem in _SECRET_STEMS):
        return False  # `user:passwd`, `my-secret-name`: words about a secret, not one
    if symbols and _PATTERN_SYNTAX.search(value):
        return False  # a regular expression, a format string, a path
    if symbols * 4 >= len(value) and len(value) >= 12 and len(
        {c for c in value if not c.isalnum() and c != "_"}
    ) >= 3:
        return True  # a password of symbols (`m{{h}o)p${e]…`)
    letters = sum(ch.isalpha() for ch in value)
    return _word_letters(value) * 2 <= letters


def _line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    ls = text.rfind("\n", max(0, start - 400), start) + 1
    le = text.find("\n", end, end + 400)
    return (ls if ls else max(0, start - 400)), (le if le >= 0 else min(len(text), end + 400))


def _name_like(part: str) -> bool:
    """An identifier that names something (`API_KEY2`, `token`, `dbPassword`), not random."""
    if not part[:1].isalpha():
        return False
    letters = sum(ch.isalpha() for ch in part)
    return _transitions(part) <= 2 or _word_letters(part) * 2 >= letters


#: A name right before a value: `name: v`, `name = 'v'`, `name 'v'`, `Name("v")`, `name |v`.
_NAME_THEN_VALUE: Final = re.compile(
    r"(?<![A-Za-z0-9_.$/?&;=-])([A-Z]?[a-z]{3,24}|[A-Z]{4,24})[\"']?[ \t]{0,3}"
    r"(?::=|=>|->|[:=(])?[ \t]{0,3}[\"'`]?\Z"
)
#: An ascending run (`0123456789`, `abcdef`): test data, not a generated key.
_ASCENDING: Final = re.compile(
    r"012345|123456|234567|345678|456789|56789a|6789ab|789abc|89abcd|9abcde|abcdef"
)
_NUMBER_LITERAL: Final = re.compile(
    r"0[xX][0-9a-fA-F_]{1,256}|0[bB][01_]{1,256}|0[oO][0-7_]{1,256}|[0-9]{1,256}"
)
_NAME_PARTS: Final = re.compile(r"[A-Z]?[a-z]{1,64}|[A-Z]{1,64}(?![a-z])|[0-9]{1,64}")
#: Parts of a name that say the hex or UUID after it is an identifier, a digest or data: what
#: code, lockfiles, test vectors and tool output name their hex values and UUIDs.
_VALUE_LABELS: Final = frozenset((
    "id", "ids", "uuid", "guid", "uid", "hash", "hashes", "digest", "hexdigest", "checksum",
    "sum", "commit", "rev", "revision", "etag", "version", "ver", "integrity", "nonce", "salt",
    "seed", "fingerprint", "sig", "signature", "oid", "tree", "parent", "blob", "ref", "head",
    "build", "run", "job", "trace", "span", "request", "req", "session", "sess", "correlation",
    "transaction", "txn", "tx", "event", "msg", "message", "user", "account", "acct", "org",
    "tenant", "project", "instance", "device", "node", "container", "image", "kid",
    "serial", "mac", "hmac", "cipher", "ciphertext", "plaintext", "text", "data", "pub", "pubkey",
    "public", "cert", "certificate", "expected", "actual", "result", "res", "value", "val",
    "test", "vector", "example", "sample", "color", "file", "path", "url", "uri", "name", "hex",
    "bytes", "tag", "iv", "addr", "address", "block", "chain", "order", "point", "object", "obj",
    "item", "entry", "record", "row", "col", "column", "index", "idx", "key", "type", "kind",
    "class", "namespace", "ns", "clsid", "iid", "lib", "dll", "app", "client", "base", "b64",
    "png", "jpeg", "jpg", "gif", "svg", "webp", "pdf", "zip", "tar", "gz", "whl", "mime", "int",
    "assert", "check", "bool", "uint", "float", "str", "dtype", "http", "https", "ssh", "git",
    "changeset", "changelist", "patch", "snapshot", "release", "branch", "dir", "dirname",
    "eval", "repr", "print", "echo", "sha", "md", "crc", "rcl", "drc", "src", "href", "alt",
))
_LABEL_AFFIXES: Final = ("sha", "md5", "blake", "crc", "xxh", "murmur", "fnv")
#: Words that qualify a key rather than name its provider (`coinapi ACCESS …`).
_QUALIFIERS: Final = frozenset(
    ("access", "private", "secret", "token", "key", "api", "code", "auth")
)


def _provider_named(text: str, start: int, value: str) -> bool:
    """A hex key or UUID (or a random value) right after a provider's name (`currencycloud:`).

    Scanners key their generic detectors on the provider's name near the value; so do the
    people who paste keys (`cloudsmith: "6fd0…"`, `HubSpotAPI("76a8…")`). Hex and UUIDs are
    also what every digest, commit and id is, so the name must be a name no vocabulary has (a
    brand: not an English word or a common identifier, per the embedding model's vocabulary)
    with no part that labels an id, a digest or data, right before the value.
    """
    if len(value) > 256 or value[:1] in "+-/.~" or "/" in value or _NUMBER_LITERAL.fullmatch(value):
        return False  # data, a signed number, a literal (`0b1111…`) or a path, not a key
    if _ASCENDING.search(value.lower()) or providers.filler(value):
        return False  # test data: `0123456789abcdef`, `aaaaaaaaaa1111111111…`
    if not _hex_key(value) and not random_word(value, relaxed=True):
        return False
    m = _NAME_THEN_VALUE.search(text, max(0, start - 52), start)
    if m is None or m.group(1).lower() in _QUALIFIERS:
        m = _QUALIFIED.search(text, max(0, start - 72), start)
    if m is None:
        return False
    name = m.group(1).strip("._-")
    parts = [p.lower() for p in _NAME_PARTS.findall(name)]
    if _CAMEL_WORD.fullmatch(name) and parts[0] not in _VALUE_LABELS:
        parts = parts[:-1]  # `SoftLayer`: a brand's last hump is part of its name (`_brand`)
    if not parts or any(
        p in _VALUE_LABELS or p.startswith(_LABEL_AFFIXES) or "hex" in p
        or p.endswith(("hash", "sum", "id", "ids"))
        for p in parts
    ):
        return False
    return _brand(name)


_LAST_WORD: Final = re.compile(r"(?<![A-Za-z0-9_.$/?&;=-])(?:[A-Z]?[a-z]{3,24}|[A-Z]{4,24})\Z")


_CAMEL_WORD: Final = re.compile(r"[A-Z][a-z0-9]{1,24}(?:[A-Z][a-z0-9]{1,24}){1,2}")


def _brand(name: str) -> bool:
    """`name` (its last word) is one word no vocabulary has: a provider's name, not a word."""
    if _CAMEL_WORD.fullmatch(name):
        humps = [h.lower() for h in _NAME_PARTS.findall(name)]
        if any(h in _QUALIFIERS or h in _VALUE_LABELS for h in humps[:1] + humps[-1:]):
            return False  # `CacheKey`, `ImageLayer`: a word and what it labels, not a brand
        word = name.lower()  # `SoftLayer`, `HubSpot`: one brand written in two humps
    else:
        m = _LAST_WORD.search(name)
        if m is None:
            return False
        word = m.group(0).lower()
    return word not in _VALUE_LABELS and word not in _vocabulary()


@cache
def _vocabulary() -> frozenset[str]:
    """The embedding model's whole words: a name in it is a word, not a brand."""
    from funes.ingest.tokenizer import get_tokenizer

    return frozenset(w for w in get_tokenizer().vocab if w.isalpha())


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    """A word without the sentence's full stop after it."""
    while e > s and text[e - 1] == ".":
        e -= 1
    return s, e


def _standard_base64(value: str) -> bool:
    """Standard base64 by what base64url and identifiers never hold: padding or a `+`."""
    return value.endswith("=") or "+" in value


def _padded_base64(value: str) -> bool:
    """Base64 of a key's size, which a path cannot be.

    Standard base64 (padded or holding a `+`), no dot, at most 100 characters (64 bytes
    encode to 88). Longer base64 with slashes is data (an image, a signature), left to the
    elision of long base64.
    """
    return len(value) <= 100 and _standard_base64(value) and "." not in value


#: Secret words a key's name can end with when it is glued to its value in one word
#: (`bloggerKEY-ab12…`, `fileio.PRIVATE.TOKEN-…`, `prospect-access-4d9f…`).
_GLUE_WORDS: Final = ("key", "secret", "token", "access", "private", "password", "passwd", "pwd")
_GLUE_SEPARATORS: Final = frozenset("-_.")
_GLUED_TAIL: Final = re.compile(r"[A-Za-z0-9_=+-]{12,512}")
#: Words of a name that say its value is not a secret (as parts: `fileio` is a provider).
_NOT_SECRET_WORDS: Final = frozenset((
    "public", "pub", "hash", "sha", "md5", "digest", "checksum", "fingerprint", "cache", "etag",
    "id", "sort", "partition", "primary", "foreign", "index", "next", "page", "idempotency",
    "continuation", "cursor", "csrf", "xsrf", "type", "length", "size", "count", "file", "path",
    "url", "name", "prefix", "timeout", "expiry", "expires", "authenticity",
))


def _hex_key(value: str) -> bool:
    """Hex of a key's size with letters and digits mixed (a 32+ character API key or a UUID)."""
    letters = sum(c.isalpha() for c in value)
    return (_HEX.issuperset(value) and 32 <= len(value.replace("-", "")) <= 128
            and letters >= 6 and len(value) - letters >= 6)


def _glued(word: str) -> int:
    """Where the value starts in a name glued to its value (`codatoken-987e…`), or -1.

    People and scanners' examples write a provider's key as one word: the provider's name, a
    secret word, a separator and the key. The last secret word followed by a separator ends the
    name; what follows must be a key: random, hex of a key's size or a UUID, with no dot or
    slash (a file name, a path). The name before it must name a secret (`cache-key-…` does
    not).
    """
    low = word.lower()
    at = -1
    for i in range(len(word) - 12, 0, -1):
        if word[i] in _GLUE_SEPARATORS and low.endswith(_GLUE_WORDS, 0, i):
            at = i
            break
    if at < 0 or not word[:1].isalpha() or "/" in word[:at]:
        return -1
    value = word[at + 1 :]
    if _GLUED_TAIL.fullmatch(value) is None or any(
        p.lower() in _NOT_SECRET_WORDS for p in _NAME_PARTS.findall(word, 0, at)
    ):
        return -1  # `public-key-…`, `cache-key-…`, `file-token-…`: the name says not a secret
    if _ASCENDING.search(value.lower()) is not None and not _UUID_RE.fullmatch(value):
        return -1  # `abcdef123456…`: typed test data
    if _UUID_RE.fullmatch(value) or _hex_key(value) or random_word(value, relaxed=True):
        return at + 1
    return -1


#: A provider's name, then words that qualify its key (`mailboxlayer ACCESS`, `splunk_PRIVATE`,
#: `bugsnag private-key`), right before a value: the name of the key is the provider's name.
_QUALIFIED: Final = re.compile(
    r"(?<![A-Za-z0-9_.$/?&;=-])([A-Za-z][a-z0-9]{2,24}(?:[A-Z][a-z0-9]{1,24}){0,2}"
    r"|[A-Z][A-Z0-9]{3,24})"
    r"(?:[ \t_-]{0,2}(?i:access|private|secret|token|key|api|code|auth)){1,3}"
    r"[\"']?[ \t]{0,3}(?::=|=>|->|[:=(]|(?:is|was)[ \t]{1,3})?[ \t]{0,3}[\"'`]?\Z"
)


def _scan_words(text: str, lowered: str, out: Raw) -> None:
    """Random tokens alone in prose, and values within reach after a secret word."""
    named_until = -1
    named: list[int] = []
    strict: set[int] = set()
    for start, end in _secret_words(text, lowered):
        if not _secret_name(text, start, end):
            continue
        named.append(end)
        if lowered.endswith("key", 0, end):
            strict.add(end)  # "key" is everywhere in code: only as an assignment's name
        # `my_password_secure = "…"`: past the name's end, an assignment (which the assignment
        # detectors do not read when the secret word does not end the name) is a gap too.
        rest = _IDENT_REST.match(text, end)
        pattern = _QUOTED_AFTER
        if rest is not None and not lowered.endswith("key", 0, end):
            end, pattern = rest.end(), _QUOTED_AFTER_NAME
        q = None if text[end : end + 1] in "\"'`" else pattern.match(text, end)
        if q is not None:
            g = next(g for g in ("v", "v2", "v3") if q.group(g) is not None)
            if _quoted_secret(q.group(g)):
                out.append((q.start(g), q.end(g), _NAMED_PRIORITY, "named-secret"))
    k = 0
    for m in (_WORD if named else _LONG_DIGIT_WORD).finditer(text):
        s, e = m.span()
        if e - s < 20 and (k >= len(named) or named[k] > s or named[-1] < s - 48):
            continue  # short, and no secret word may be near
        s, e = _trim(text, s, e)
        glued = _glued(text[s:e]) if e - s >= 16 else -1
        if glued > 0 and (text[s - 1] if s else " ") in _NAMED_BEFORE:
            out.append((s + glued, e, _NAMED_PRIORITY, "named-secret"))
            continue
        head = _NAME_EQ.match(text, s, e)
        if head is not None and _name_like(head.group(0)[:-1]):
            s = head.end()
            if e - s < 12:
                continue
        value = text[s:e]
        before = text[s - 1] if s else " "
        if before not in _NAMED_BEFORE or text.startswith(("..", "…"), e):
            continue  # a value cut short in an example (`ops_eyJzaWdu..[Redacted]`)
        if m.end() - m.start() >= 1024 and text[m.end() : m.end() + 1] in _PART_CHARS:
            continue  # data longer than any key: the assignment detectors take it whole
        if value.count(".") == 2 and _DISCORD.fullmatch(value) and random_word(value):
            out.append((s, e, providers.PRIORITY, "provider-token"))
            continue
        while k < len(named) and named[k] < s - 48:
            k += 1
        near = k < len(named) and named[k] <= s and "\n" not in text[named[k] : s]
        if near and named[k] in strict and _ASSIGN_GAP.fullmatch(text, named[k], s) is None:
            near = False
        if near and _HEX.issuperset(value) and s - named[k] > 6:
            near = False  # a digest further along the line (`(b'password', …, 'fdba…')`)
        if near and named[k] > named_until and random_word(value, relaxed=True):
            ls, le = _line_bounds(text, s, e)
            if _NOT_CREDENTIAL_LINE.search(text, ls, le):
                continue  # ciphertext (SOPS `ENC[…]`), anti-forgery tokens: not credentials
            out.append((s, e, _NAMED_PRIORITY, "named-secret"))
            named_until = e
            continue
        if _provider_named(text, s, value):
            out.append((s, e, _NAMED_PRIORITY, "named-secret"))
            continue
        if before not in _PROSE_BEFORE or e - s < 20:
            continue
        if e < len(text) and text[e] not in _PROSE_AFTER:
            continue
        path_like = value.count("/") > 1 or value.startswith(("/", "~", "."))
        if (path_like and not _padded_base64(value)) or "://" in value:
            continue  # a path or URL; base64 with its padding or a `+` is not one
        label = text[e : e + 1] == ":" and text[e + 1 : e + 2] in ("", " ", "\t", "\n")
        if label or sum(ch.isalpha() for ch in value) * 10 < len(value) * 4:
            continue  # an object key or a label; numbers with a few letters (SVG paths)
        if not random_word(value) or _ID_LABEL.search(text, max(0, s - 40), s):
            continue
        ls, le = _line_bounds(text, s, e)
        if _NOT_CREDENTIAL_LINE.search(text, ls, le):
            continue
        line = text[ls:le]
        quoted = before in "\"'`" and text[e : e + 1] == before
        if quoted:
            # A quoted string in code or data: prose must be around it, not one key name.
            outside = line[: s - ls - 1] + " " + line[e - ls + 1 :]
            words = len(_PROSE_WORDS.findall(outside))
            if words < 1 or (words == 1 and _CODE_PUNCT.search(outside) is not None):
                continue  # `obj, "…"`, `{"value": "…"}`: a string in code; `vouchery '…'`: not
        elif _PROSE_WORDS.search(line) is None:
            continue  # a bare value on a line of data (tables, lists of digests): not prose
        out.append((s, e, _STANDALONE_PRIORITY, "random-token"))


def scan(text: str, lowered: str, present: set[str], out: Raw) -> None:
    """Append this module's raw findings on `text` to `out` (start, end, priority, kind).

    `lowered` is `text` lowercased, offsets unchanged; `present` the words of redaction's
    keyword pass found in it (a superset of the :data:`ANCHORS` present).
    """
    providers.scan(text, present, out)
    if len(text) >= 12:
        _scan_words(text, lowered, out)
