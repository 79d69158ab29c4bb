r"""The gitleaks default rule set, run the way gitleaks runs it, on text instead of files.

funes's own detectors (funes.ingest.redact) know a few dozen credential formats; the field's
scanners know hundreds. The rules here are gitleaks' (MIT), vendored as data in
``funes/ingest/data/gitleaks/rules.json`` with their licence and upstream commit, and produced
only by ``scripts/gitleaks_rules.py`` from the upstream ``config/gitleaks.toml`` (patterns
translated from Go RE2 to Python ``re`` there, once). Nothing here is edited by hand.

How a text is scanned (gitleaks' ``detect`` package, minus files and git):

1. **Keyword prefilter.** One pass over the lowercased text finds which rule keywords occur
   (a single compiled trie of every keyword); only the rules with a keyword present run, so
   an ordinary chunk runs a handful of the 220 rules, often none.
2. **Match.** Each candidate rule's pattern finds its matches; the secret is the rule's
   secret group, or the first non-empty group, or the whole match (gitleaks' choice).
3. **Filter.** A secret whose Shannon entropy is not above the rule's threshold is dropped; so
   is one an allowlist accepts: the rule's allowlists (regular expressions against the secret,
   the match or the line, stop words in the secret, with their OR/AND condition) and the
   global one.

Rules restricted to a file path (``path`` in the config) run on every text: a transcript has
no path, and the formats they know (Kubernetes Secret manifests, Terraform passwords) are
pasted into sessions without their file name. Rules with no content pattern are not ported;
the data file lists them.

Speed: patterns compile on first use, and the identifier prefix gitleaks puts before its
semi-generic rules (``[\w.-]{0,50}?`` before the key name) is not searched for: a backtracking
engine would try fifty lengths at every position. The match starts at the key name instead
and the prefix is found by scanning back over the same characters (at most fifty), which is
where RE2's leftmost match would have started.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from functools import cache
from importlib import resources
from typing import Any, Final

__all__ = ["Keywords", "Rule", "RuleSet", "lower_in_place", "rules", "rules_version"]

_IDENT_PREFIXES: Final = ("(?i)[\\w.-]{0,50}?", "[\\w.-]{0,50}?")
#: The same prefix twice, the second inside a case-insensitive group (five rules): up to a
#: hundred identifier characters before the key name.
_NESTED_PREFIX: Final = "[\\w.-]{0,50}?(?i:[\\w.-]{0,50}?"
#: The longest run any repetition in a rule's pattern may take, and in an allowlist's. An
#: unbounded repetition that fails after absorbing a long run is tried again from every
#: position of the run by a backtracking engine: quadratic time, and transcripts carry text
#: from strangers. Bounded, each attempt costs at most this much, so a scan stays linear.
#: Redaction extends a match cut short to its whole token (funes.ingest.redact), so a rule
#: still finds a longer secret; an allowlist that stops matching only lets less through.
RULE_REPEAT_MAX: Final = 4096
ALLOW_REPEAT_MAX: Final = 128
#: Characters of a line on either side of a finding an allowlist reads (its `line` target).
LINE_WINDOW: Final = 512
_IDENT_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
)


def _entropy(value: str) -> float:
    n = len(value)
    if n == 0:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


class Allowlist:
    """One of gitleaks' allowlists: what a finding may match to be let through."""

    __slots__ = ("condition", "regexes", "stopwords", "target")

    def __init__(self, condition: str, target: str, regexes: list[str],
                 stopwords: list[str]) -> None:
        self.condition = condition
        self.target = target
        # Any of the expressions: one search of their union.
        self.regexes = re.compile(
            "|".join(_scoped(bounded(r, ALLOW_REPEAT_MAX)) for r in regexes), re.ASCII
        ) if regexes else None
        # Stop words are searched all at once (gitleaks uses a trie too): the generic rule
        # has 1,446 of them.
        self.stopwords = re.compile(_trie(sorted(stopwords))) if stopwords else None

    def allows(self, secret: str, match: str, line: str) -> bool:
        target = {"match": match, "line": line}.get(self.target, secret)
        regex = bool(target) and self.regexes is not None and bool(self.regexes.search(target))
        stop = bool(secret) and self.stopwords is not None and bool(
            self.stopwords.search(secret.lower()))
        if self.condition == "AND":
            checks = ([regex] if self.regexes else []) + ([stop] if self.stopwords else [])
            return bool(checks) and all(checks)
        return regex or stop


#: How most rules end a token: a quote, a space, `;`, an escaped newline or the end. In prose
#: a token ends at a sentence's punctuation too (`the key is dapi…, and`), which this misses.
_TOKEN_END: Final = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
_TOKEN_END_IN_PROSE: Final = r"""(?:[\x60'"\s;,)!?\]>]|\.(?:\s|$)|\\[nr]|$)"""
#: A rule for a token that starts with its own prefix (`\b(dapi…`, `\b(v1\.0-…`): only there is
#: the punctuation after the token no part of a value (a quoted list item ends in `",` too).
_SHAPED: Final = re.compile(r"(?:\(\?i\))?\\b\(+(?:\?:)?[A-Za-z0-9]")


class Rule:
    """One gitleaks rule, its pattern compiled on first use."""

    __slots__ = ("_confirm", "_pattern", "allowlists", "confirm", "entropy", "id", "keywords",
                 "on_lowered", "path", "prefix", "regex", "secret_group")

    def __init__(self, data: dict[str, Any]) -> None:
        self.id: str = data["id"]
        self.keywords: tuple[str, ...] = tuple(data["keywords"])
        self.entropy: float = data["entropy"]
        self.secret_group: int = data["secret_group"]
        #: The file-path pattern gitleaks restricts the rule to (not applied here: see above).
        self.path: str | None = data.get("path")
        regex: str = data["regex"]
        self.prefix = 0
        if regex.startswith(_NESTED_PREFIX):
            regex = "(?i:" + regex[len(_NESTED_PREFIX):]
            self.prefix = 100
        for prefix in _IDENT_PREFIXES:
            if regex.startswith(prefix):
                regex = ("(?i)" if prefix.startswith("(?i)") else "") + regex[len(prefix):]
                self.prefix = 50
                break
        regex = bounded(regex, RULE_REPEAT_MAX)
        if _SHAPED.match(regex):
            regex = regex.replace(_TOKEN_END, _TOKEN_END_IN_PROSE)
        # A rule that ignores case throughout is run on the lowercased text with a lowercased
        # pattern and no flag: the same matches at the same offsets, several times faster
        # (sre folds case character by character). A case-sensitive group inside it
        # ("(?-i:[Aa]pi|API)") ignores case there too, so each such candidate is confirmed by
        # the exact pattern, anchored where it starts.
        self.on_lowered = regex.startswith("(?i)")
        self.confirm = regex if self.on_lowered and "(?-i:" in regex else None
        self.regex = _lowercase_pattern(regex[4:]) if self.on_lowered else regex
        self._confirm: re.Pattern[str] | None = None
        self.allowlists = tuple(
            Allowlist(a["condition"], a["target"], a["regexes"], a["stopwords"])
            for a in data["allowlists"]
        )
        self._pattern: re.Pattern[str] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        """The compiled pattern (compiled on first use: most rules never run)."""
        if self._pattern is None:
            self._pattern = re.compile(self.regex, re.ASCII)
        return self._pattern

    def findings(
        self, text: str, glob: tuple[Allowlist, ...], lowered: str | None = None
    ) -> list[tuple[int, int]]:
        """The (start, end) of each secret this rule finds in `text`.

        `lowered` is `text` lowercased without moving any offset (computed when not given).
        """
        out: list[tuple[int, int]] = []
        floor = 0
        if self.on_lowered and lowered is None:
            lowered = lower_in_place(text)
        for m in self.pattern.finditer(lowered if self.on_lowered and lowered else text):
            if self.confirm is not None:
                if self._confirm is None:
                    self._confirm = re.compile(self.confirm, re.ASCII)
                exact = self._confirm.match(text, m.start())
                if exact is None:
                    continue
                m = exact
            start = m.start()
            if self.prefix:  # where RE2's leftmost match would start (see the module doc)
                limit = max(floor, start - self.prefix)
                while start > limit and text[start - 1] in _IDENT_CHARS:
                    start -= 1
            floor = m.end()
            match = text[start : m.end()]
            trimmed = match.strip("\n")
            span = (start + (len(match) - len(match.lstrip("\n"))), 0)
            span = (span[0], span[0] + len(trimmed))
            secret_span = span
            if m.re.groups:
                if self.secret_group:
                    if m.group(self.secret_group) is None:
                        continue
                    secret_span = m.span(self.secret_group)
                else:
                    for g in range(1, m.re.groups + 1):
                        if m.group(g):
                            secret_span = m.span(g)
                            break
            secret = text[secret_span[0] : secret_span[1]]
            if not secret:
                continue
            if self.entropy and _entropy(secret) <= self.entropy:
                continue
            line = _line_around(text, *span)
            if any(a.allows(secret, trimmed, line) for a in (*glob, *self.allowlists)):
                continue
            out.append(secret_span)
        return out


class Keywords:
    """Which of a set of lowercase words occur in a text: one pass of one expression.

    The expression is a trie of the words (shared prefixes factored out), so at each position
    it takes the longest word there. The words inside a match, and words that start inside it
    and run past its end (the next search starts after the match), are added from tables
    built here, so the result is exactly the words that occur.
    """

    def __init__(self, words: Iterable[str]) -> None:
        keywords = sorted(set(words))
        self._pattern = re.compile(_trie(keywords))
        self._inside = {k: [o for o in keywords if o in k] for k in keywords}
        proper_prefixes = {o[:j] for o in keywords for j in range(1, len(o))}
        self._straddle = {
            k: [d for d in range(1, len(k)) if k[d:] in proper_prefixes] for k in keywords
        }

    def find(self, lowered: str) -> set[str]:
        """The words occurring in `lowered` (a lowercased text)."""
        found: set[str] = set()
        match = self._pattern.match
        for m in self._pattern.finditer(lowered):
            kw = m.group(0)
            found.update(self._inside[kw])
            for d in self._straddle[kw]:
                more = match(lowered, m.start() + d)
                if more is not None:
                    found.update(self._inside[more.group(0)])
        return found


class RuleSet:
    """Every ported rule, the keyword prefilter over them, and the global allowlist."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.upstream: dict[str, str] = data["upstream"]
        self.rules = tuple(Rule(r) for r in data["rules"])
        self.unported: tuple[dict[str, str], ...] = tuple(data["unported"])
        g = data["global_allowlist"]
        self.glob = (Allowlist("OR", "secret", g["regexes"], g["stopwords"]),)
        self.always = tuple(r for r in self.rules if not r.keywords)
        self.by_id = {r.id: r for r in self.rules}
        self.by_keyword: dict[str, list[Rule]] = {}
        for rule in self.rules:
            for kw in rule.keywords:
                self.by_keyword.setdefault(kw, []).append(rule)
        self.prefilter = Keywords(self.by_keyword)

    @property
    def version(self) -> str:
        """The upstream commit the rules were generated from (what `funes status` compares)."""
        return f"gitleaks@{self.upstream['commit'][:12]}"

    def keywords_in(self, lowered: str) -> set[str]:
        """Every rule keyword occurring in `lowered`."""
        return self.prefilter.find(lowered)

    def candidates(self, lowered: str, present: set[str] | None = None) -> list[Rule]:
        """The rules to evaluate on a text: those with a keyword in it (gitleaks' prefilter).

        `present` is the keywords already found in `lowered` (by a `Keywords` over more words
        than these rules', as redaction's single pass is); found here when not given.
        """
        seen: dict[str, Rule] = {r.id: r for r in self.always}
        for kw in self.keywords_in(lowered) if present is None else present:
            for rule in self.by_keyword.get(kw, ()):
                seen.setdefault(rule.id, rule)
        return list(seen.values())

    def allows(self, rule_id: str, secret: str, text: str, start: int, end: int) -> bool:
        """Whether gitleaks would let `secret` (at `start:end` of `text`) through for a rule.

        funes's own detectors ask this for the formats a gitleaks rule also knows, so a
        published example key that gitleaks allowlists is not redacted by either.
        """
        rule = self.by_id.get(rule_id)
        if rule is None:
            return False
        line = _line_around(text, start, end)
        return any(a.allows(secret, secret, line) for a in (*self.glob, *rule.allowlists))

    def scan(
        self, text: str, lowered: str, present: set[str] | None = None
    ) -> list[tuple[int, int, str]]:
        """(start, end, rule id) of every secret the rules find in `text`."""
        out: list[tuple[int, int, str]] = []
        for rule in self.candidates(lowered, present):
            out.extend((s, e, rule.id) for s, e in rule.findings(text, self.glob, lowered))
        return out


def _line_around(text: str, start: int, end: int) -> str:
    """The line holding `text[start:end]`, at most `LINE_WINDOW` characters either side of it.

    A line target's allowlists (`--mount=type=secret,`, an `import {…} from` line) describe
    what is next to the finding; reading a whole 64 KB line for each finding on it would make
    a long line quadratic.
    """
    lo = max(0, start - LINE_WINDOW)
    line_start = text.rfind("\n", lo, start) + 1 or lo
    hi = min(len(text), end + LINE_WINDOW)
    line_end = text.find("\n", end, hi)
    return text[line_start : line_end if line_end >= 0 else hi]


def bounded(pattern: str, most: int) -> str:
    """`pattern` with every unbounded repetition bounded by `most` (`*`, `+`, `{n,}`).

    Laziness and possessiveness are kept (`*?` becomes `{0,most}?`). Escapes, character
    classes and group syntax are copied as they are.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    quantified = False  # the last token was a quantifier: a `?` or `+` after it modifies it
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            quantified = False
            continue
        if ch == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            out.append(pattern[i : j + 1])
            i = j + 1
            quantified = False
            continue
        if ch in "?+" and quantified:
            out.append(ch)
            i += 1
            quantified = False
            continue
        if ch == "(" and pattern.startswith("(?", i):
            # group syntax: `(?:`, `(?i:`, `(?P<name>`, `(?<!`, `(?=`: copied to its body
            m = re.match(r"\(\?(?:P<\w+>|P=\w+\)|<[=!]|[=!:>]|[a-zA-Z-]+[:)])", pattern[i:])
            step = m.end() if m else 2
            out.append(pattern[i : i + step])
            i += step
            quantified = False
            continue
        if ch == "*" or ch == "+":
            out.append(f"{{{0 if ch == '*' else 1},{most}}}")
            i += 1
            quantified = True
            continue
        if ch == "{":
            m = re.match(r"\{(\d*)(,?)(\d*)\}", pattern[i:])
            if m:
                low, comma, high = m.groups()
                if comma and not high:
                    out.append(f"{{{low or 0},{max(most, int(low or 0))}}}")
                else:
                    out.append(m.group(0))
                i += m.end()
                quantified = True
                continue
        if ch == "?":
            out.append(ch)
            i += 1
            quantified = True
            continue
        out.append(ch)
        i += 1
        quantified = False
    return "".join(out)


def lower_in_place(text: str) -> str:
    """`text` lowercased without moving any offset (a few characters lowercase to two)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in text)


def _lowercase_pattern(pattern: str) -> str:
    r"""`pattern` with its literals and class ranges lowercased, escapes (`\W`, `\S`) kept."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            out.append(pattern[i : i + 2])
            i += 2
        elif pattern.startswith("(?-i:", i):
            out.append("(?:")
            i += 5
        else:
            out.append(pattern[i].lower())
            i += 1
    return "".join(out)


def _scoped(pattern: str) -> str:
    """`pattern` as a group that can join an alternation (leading flags made scoped)."""
    m = re.match(r"\(\?([a-z]+)\)", pattern)
    if m:
        return f"(?{m.group(1)}:{pattern[m.end():]})"
    return f"(?:{pattern})"


def _trie(words: list[str]) -> str:
    """One expression matching any of `words`, longest first, with shared prefixes factored."""
    root: dict[str, Any] = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + emit(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        return f"(?:{body})?" if "" in node else body

    return emit(root)


@cache
def rules() -> RuleSet:
    """The vendored rule set (loaded once, on first use: importing funes stays light)."""
    text = resources.files("funes.ingest").joinpath("data/gitleaks/rules.json").read_text("utf-8")
    return RuleSet(json.loads(text))


def rules_version() -> str:
    """The identity of the installed rules (what `funes status` compares)."""
    return rules().version
