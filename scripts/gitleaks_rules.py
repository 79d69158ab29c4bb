"""Regenerate funes's copy of the gitleaks default rule set, and the test corpus from its tests.

funes redacts with the rule set the field maintains (gitleaks, MIT) instead of a hand-picked
subset. This script is the only way that copy is made: it reads a gitleaks checkout at a pinned
commit and writes

* ``funes/ingest/data/gitleaks/rules.json``: every rule of ``config/gitleaks.toml`` with its
  pattern translated from Go RE2 to Python ``re`` (the features ``re`` lacks are rewritten, see
  :func:`translate`), its keywords, entropy threshold, secret group and allowlists, the global
  allowlist, and the rules that could not be ported with the reason;
* ``funes/ingest/data/gitleaks/LICENSE.txt``: the upstream licence;
* ``tests/ingest/data/gitleaks_corpus.json``: each rule's true and false positives, taken from
  the rule's Go test code (``cmd/generate/config/rules/*.go``) by a small evaluator of the Go
  expressions they are written in (string literals, ``+``, ``fmt.Sprintf``,
  ``utils.GenerateSampleSecrets``, ``secrets.NewSecret(<regex>)`` drawn with a seeded random
  generator, so the corpus is the same on every run); statements it cannot evaluate are
  skipped and counted in the file.

Regenerate (the commit is pinned below; bump it deliberately and rerun the corpus tests):

    git clone https://github.com/gitleaks/gitleaks /tmp/gitleaks
    python scripts/gitleaks_rules.py /tmp/gitleaks

The checkout's files are read at ``PINNED_COMMIT`` with ``git show``, whatever is checked out.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import re._constants as sre_c  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PINNED_COMMIT = "b58d3f102cf3a2c84cb7f923d05c25c9b1aed84b"
#: `git describe --tags` of the pinned commit.
PINNED_VERSION = "v8.30.0-27-gb58d3f10"
UPSTREAM = "https://github.com/gitleaks/gitleaks"
#: How far `.*` may reach in a translated pattern (see `translate`): a line.
DOT_BOUND = 160
RULES_OUT = ROOT / "funes" / "ingest" / "data" / "gitleaks" / "rules.json"
LICENSE_OUT = ROOT / "funes" / "ingest" / "data" / "gitleaks" / "LICENSE.txt"
CORPUS_OUT = ROOT / "tests" / "ingest" / "data" / "gitleaks_corpus.json"


# ------------------------------------------------------------------------------------------------
# Go RE2 -> Python re
# ------------------------------------------------------------------------------------------------

_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@\\[-`{-~", "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z",
    "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}


class Unportable(ValueError):
    """A Go pattern this translator cannot express in Python ``re``."""


def translate(go: str) -> str:
    r"""A Python ``re`` pattern (to compile with ``re.ASCII``) matching what `go` matches in RE2.

    Rewrites: a flag group such as ``(?i)`` that is not at the start of the pattern (RE2 applies
    it to the rest of the enclosing group; Python only accepts flags at the very start) becomes
    a scoped ``(?i:…)`` closed with that group; ``\z`` becomes ``\Z``; ``(?<name>`` becomes
    ``(?P<name>``; POSIX classes ``[[:alpha:]]`` are expanded; a ``[`` or a doubled ``&&``,
    ``||``, ``--``, ``~~`` inside a class is escaped (Python reserves them for set operations).
    RE2 has no look-around, back-references or possessive quantifiers, so there is nothing to
    remove; ``re.ASCII`` gives ``\w``, ``\d``, ``\s`` and ``\b`` their RE2 meaning. One
    rewrite changes what matches, to keep the time linear: ``.*`` and ``.+`` (the two curl
    rules) reach at most `DOT_BOUND` characters.
    """
    out: list[str] = []
    # For every open group: the scoped flag groups opened inside it (closed with it, and at
    # each `|` of it, then reopened: RE2's flags run on across the alternatives of a group).
    stack: list[list[str]] = [[]]
    i, n = 0, len(go)
    while i < n:
        c = go[i]
        if c == "\\":
            if i + 1 >= n:
                raise Unportable("trailing backslash")
            nxt = go[i + 1]
            if nxt == "z":
                out.append("\\Z")
            elif nxt in "pP":
                raise Unportable("Unicode classes \\p / \\P")
            elif nxt == "Q":
                end = go.find("\\E", i + 2)
                lit = go[i + 2 : end if end >= 0 else n]
                out.append(re.escape(lit))
                i = (end + 2) if end >= 0 else n
                continue
            else:
                out.append(go[i : i + 2])
            i += 2
            continue
        if c == "[":
            j, cls = _class(go, i)
            out.append(cls)
            i = j
            continue
        if c == "(":
            m = re.match(r"\(\?([imsU-]+)\)", go[i:])
            if m:
                flags = m.group(1)
                if "U" in flags:
                    raise Unportable("ungreedy flag (?U)")
                if not out:
                    out.append(f"(?{flags})")  # leading global flags are fine in Python
                else:
                    out.append(f"(?{flags}:")
                    stack[-1].append(flags)
                i += m.end()
                continue
            if go.startswith("(?<", i) and not go.startswith(("(?<=", "(?<!"), i):
                out.append("(?P<")
                i += 3
            elif go.startswith("(?P<", i):
                out.append("(?P<")
                i += 4
            else:
                out.append("(")
                i += 1
            stack.append([])
            continue
        if c == "|" and stack[-1]:
            out.append(")" * len(stack[-1]) + "|" + "".join(f"(?{f}:" for f in stack[-1]))
            i += 1
            continue
        if c == ")":
            out.append(")" * len(stack.pop()))
            if not stack:
                raise Unportable("unbalanced parenthesis")
            out.append(")")
            i += 1
            continue
        if c == "." and go[i + 1 : i + 2] in ("*", "+"):
            # `.*` bounded: RE2 runs it in linear time, a backtracking engine retries it from
            # every earlier match start (quadratic on a long line holding the keyword often)
            lazy = go[i + 2 : i + 3] == "?"
            low = 0 if go[i + 1] == "*" else 1
            out.append(f".{{{low},{DOT_BOUND}}}" + ("?" if lazy else ""))
            i += 3 if lazy else 2
            continue
        out.append(c)
        i += 1
    out.append(")" * len(stack.pop()))
    if stack:
        raise Unportable("unbalanced parenthesis")
    return "".join(out)


def _class(go: str, i: int) -> tuple[int, str]:
    """Translate the character class starting at ``go[i] == "["``."""
    j = i + 1
    parts = ["["]
    if j < len(go) and go[j] == "^":
        parts.append("^")
        j += 1
    first = True
    while j < len(go):
        c = go[j]
        if c == "]" and not first:
            parts.append("]")
            return j + 1, "".join(parts)
        first = False
        if c == "\\":
            parts.append(go[j : j + 2])
            j += 2
            continue
        if c == "[":
            m = re.match(r"\[:(\^?)([a-z]+):\]", go[j:])
            if m:
                if m.group(1):
                    raise Unportable("negated POSIX class")
                parts.append(_POSIX[m.group(2)])
                j += m.end()
                continue
            parts.append("\\[")
            j += 1
            continue
        if c in "&|-~" and go[j + 1 : j + 2] == c:
            parts.append("\\" + c)
            j += 1
            continue
        parts.append(c)
        j += 1
    raise Unportable("unterminated character class")


# ------------------------------------------------------------------------------------------------
# The rule set
# ------------------------------------------------------------------------------------------------


def _allowlist(a: dict[str, Any]) -> dict[str, Any]:
    return {
        "condition": a.get("condition", "OR").upper(),
        "target": a.get("regexTarget", "secret"),
        "regexes": [translate(r) for r in a.get("regexes", [])],
        "stopwords": [s.lower() for s in a.get("stopwords", [])],
        "paths": bool(a.get("paths")),
        "commits": bool(a.get("commits")),
    }


def build_rules(config: dict[str, Any]) -> dict[str, Any]:
    """The data file's content: ported rules, the global allowlist, unported rules and why."""
    rules: list[dict[str, Any]] = []
    unported: list[dict[str, str]] = []
    for rule in config["rules"]:
        rid = rule["id"]
        if "regex" not in rule:
            unported.append({"id": rid, "reason": "matches file paths only (no content rule)"})
            continue
        try:
            pattern = translate(rule["regex"])
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                re.compile(pattern, re.ASCII)
            allowlists = [_allowlist(a) for a in rule.get("allowlists", [])]
            for a in allowlists:
                for r in a["regexes"]:
                    re.compile(r, re.ASCII)
        except (Unportable, re.error, FutureWarning) as exc:
            unported.append({"id": rid, "reason": f"pattern not portable: {exc}"})
            continue
        entry: dict[str, Any] = {
            "id": rid,
            "regex": pattern,
            "keywords": sorted({k.lower() for k in rule.get("keywords", [])}),
            "entropy": float(rule.get("entropy", 0.0)),
            "secret_group": int(rule.get("secretGroup", 0)),
            "allowlists": [a for a in allowlists if a["regexes"] or a["stopwords"]],
        }
        if "path" in rule:
            entry["path"] = rule["path"]
        rules.append(entry)
    glob = config.get("allowlist", {})
    return {
        "upstream": {
            "repository": UPSTREAM, "file": "config/gitleaks.toml", "commit": PINNED_COMMIT,
            "version": PINNED_VERSION, "license": "MIT (LICENSE.txt beside this file)",
            "generator": "scripts/gitleaks_rules.py",
        },
        "global_allowlist": {
            "regexes": [translate(r) for r in glob.get("regexes", [])],
            "stopwords": [s.lower() for s in glob.get("stopwords", [])],
        },
        "rules": rules,
        "unported": unported,
    }


# ------------------------------------------------------------------------------------------------
# Sample strings from a regular expression (the corpus's secrets.NewSecret)
# ------------------------------------------------------------------------------------------------

_PRINTABLE = [chr(c) for c in range(33, 127)]
_CATEGORIES = {
    sre_c.CATEGORY_DIGIT: "0123456789",
    sre_c.CATEGORY_WORD: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_",
    sre_c.CATEGORY_SPACE: " ",
}


def sample(pattern: str, rng: random.Random) -> str:
    """A random string matching `pattern` (repeats capped at their minimum + 10)."""
    return _gen(sre_parse.parse(pattern), rng)


def _charset(items: list[tuple[Any, Any]]) -> list[str]:
    chars: list[str] = []
    negate = False
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            chars.append(chr(av))
        elif op is sre_c.RANGE:
            chars.extend(chr(c) for c in range(av[0], av[1] + 1))
        elif op is sre_c.CATEGORY:
            chars.extend(_CATEGORIES.get(av, ""))
    if negate:
        return [c for c in _PRINTABLE if c not in set(chars)]
    return chars


def _gen(parsed: Any, rng: random.Random) -> str:
    out: list[str] = []
    for op, av in parsed:
        if op is sre_c.LITERAL:
            out.append(chr(av))
        elif op is sre_c.NOT_LITERAL:
            out.append(rng.choice([c for c in _PRINTABLE if c != chr(av)]))
        elif op is sre_c.ANY:
            out.append(rng.choice(_PRINTABLE))
        elif op is sre_c.IN:
            out.append(rng.choice(_charset(av)))
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
            lo, hi, sub = av
            hi = min(hi, lo + 10)
            out.extend(_gen(sub, rng) for _ in range(rng.randint(lo, hi)))
        elif op is sre_c.SUBPATTERN:
            out.append(_gen(av[-1], rng))
        elif op is sre_c.BRANCH:
            out.append(_gen(rng.choice(av[1]), rng))
        elif op is sre_c.CATEGORY:
            out.append(rng.choice(_CATEGORIES.get(av, "a")))
        # AT (anchors) and others generate nothing
    return "".join(out)


# ------------------------------------------------------------------------------------------------
# A small evaluator of the Go expressions gitleaks writes its rule tests in
# ------------------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""(?P<ws>\s+|//[^\n]*|/\*.*?\*/)
      |(?P<raw>`[^`]*`)
      |(?P<str>"(?:[^"\\\n]|\\.)*")
      |(?P<chr>'(?:[^'\\\n]|\\.)')
      |(?P<num>\d+)
      |(?P<id>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
      |(?P<op>\.\.\.|:=|[-+*/%(){}\[\],:=;!<>&|.])""",
    re.VERBOSE | re.DOTALL,
)


class Unsupported(ValueError):
    """A Go construct the evaluator does not know."""


def _unquote(tok: str) -> str:
    if tok.startswith("`"):
        return tok[1:-1].replace("\r", "")
    body = tok[1:-1]
    out: list[str] = []
    i = 0
    simple = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "a": "\a",
              "b": "\b", "f": "\f", "v": "\v"}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in simple:
            out.append(simple[e])
            i += 2
        elif e == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif e == "u":
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        elif e == "U":
            out.append(chr(int(body[i + 2 : i + 10], 16)))
            i += 10
        else:
            raise Unsupported(f"escape \\{e}")
    return "".join(out)


def tokenize(src: str) -> list[tuple[str, str]]:
    """Go source as (kind, text) tokens, comments and white space dropped."""
    toks: list[tuple[str, str]] = []
    pos = 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None:
            toks.append(("op", src[pos]))
            pos += 1
            continue
        pos = m.end()
        kind = m.lastgroup or ""
        if kind != "ws":
            toks.append((kind, m.group(0)))
    return toks


def _sprintf(fmt: str, args: list[Any]) -> str:
    it = iter(args)

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "%%":
            return "%"
        verb = m.group(0)[-1]
        value = next(it)
        if verb == "q":
            return json.dumps(str(value))
        return str(value)

    return re.sub(r"%%|%[-+# 0]*\d*(?:\.\d+)?[sdvqx]", one, fmt)


class GoEval:
    """Evaluate the string expressions of one function body."""

    def __init__(self, toks: list[tuple[str, str]], rng: random.Random,
                 samples: dict[str, str], env: dict[str, Any]) -> None:
        self.toks, self.i, self.rng, self.samples, self.env = toks, 0, rng, samples, env

    def peek(self, k: int = 0) -> tuple[str, str]:
        """The token `k` ahead (eof past the end)."""
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "")

    def take(self, text: str | None = None) -> tuple[str, str]:
        """Consume a token, checking its text when given."""
        tok = self.peek()
        if text is not None and tok[1] != text:
            raise Unsupported(f"expected {text!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def expr(self) -> Any:
        """`term ('+' term)*`: strings concatenate."""
        value = self.term()
        while self.peek()[1] == "+":
            self.take()
            rhs = self.term()
            if not (isinstance(value, str) and isinstance(rhs, str)):
                raise Unsupported("+ on non-strings")
            value += rhs
        return value

    def term(self) -> Any:
        """A literal, a call, a composite literal or a known name."""
        kind, text = self.peek()
        if kind in ("raw", "str"):
            self.take()
            return _unquote(text)
        if kind == "num":
            self.take()
            return int(text)
        if text == "[":
            return self.composite()
        if text == "map":
            return self.composite()
        if kind == "id":
            self.take()
            if self.peek()[1] == "(":
                return self.call(text)
            if text in self.env:
                return self.env[text]
            raise Unsupported(f"unknown name {text}")
        raise Unsupported(f"unexpected {text!r}")

    def composite(self) -> list[str]:
        """`[]string{…}` or `map[string]string{…}`: the values in order."""
        # []string{...} or map[string]string{...}: values in order (keys of maps dropped)
        depth = 0
        while True:  # skip the type
            kind, text = self.take()
            if text == "[":
                depth += 1
            elif text == "]":
                depth -= 1
            elif text == "{" and depth == 0:
                break
            elif kind == "eof":
                raise Unsupported("eof in type")
        values: list[str] = []
        while self.peek()[1] != "}":
            v = self.expr()
            if self.peek()[1] == ":":
                self.take()
                v = self.expr()
            if not isinstance(v, str):
                raise Unsupported("non-string element")
            values.append(v)
            if self.peek()[1] == ",":
                self.take()
        self.take("}")
        return values

    def args(self) -> list[Any]:
        """A call's arguments, `x...` spread."""
        self.take("(")
        out: list[Any] = []
        while self.peek()[1] != ")":
            value = self.expr()
            if self.peek()[1] == "...":
                self.take()
                if not isinstance(value, list):
                    raise Unsupported("spread of a non-list")
                out.extend(value)
            else:
                out.append(value)
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        return out

    def call(self, name: str) -> Any:
        """The functions gitleaks' rule tests use; anything else is Unsupported."""
        a = self.args()
        short = name.split(".")[-1]
        sizes = {"Numeric": "[0-9]{%s}", "Hex": "[a-f0-9]{%s}", "AlphaNumeric": "[a-z0-9]{%s}",
                 "AlphaNumericExtendedShort": "[a-z0-9_-]{%s}",
                 "AlphaNumericExtended": "[a-z0-9=_\\-]{%s}",
                 "AlphaNumericExtendedLong": "[a-z0-9\\/=_\\+\\-]{%s}"}
        if name.startswith("utils.") and short in sizes:
            return sizes[short] % a[0]
        if name == "utils.Hex8_4_4_4_12":
            return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        if name == "secrets.NewSecret":
            return sample(translate(a[0]), self.rng)
        if name == "utils.GenerateSampleSecrets":
            ident, secret = a
            return [t.replace("{i}", ident).replace("{I}", ident.upper()).replace("{s}", secret)
                    for t in self.samples.values()]
        if name == "utils.GenerateSampleSecret":
            return f'{a[0]}_api_token = "{a[1]}"'
        if name == "fmt.Sprintf":
            return _sprintf(a[0], a[1:])
        if name == "append":
            base = a[0]
            if not isinstance(base, list):
                raise Unsupported("append to a non-list")
            return base + [x for x in a[1:]]
        if name == "strings.Repeat":
            return str(a[0]) * int(a[1])
        if name in ("strings.ToUpper", "strings.ToLower"):
            return a[0].upper() if short == "ToUpper" else a[0].lower()
        raise Unsupported(f"call {name}")


def _functions(toks: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """The token lists of the bodies of top-level functions."""
    bodies: list[list[tuple[str, str]]] = []
    i = 0
    while i < len(toks):
        if toks[i] == ("id", "func"):
            j = i
            while j < len(toks) and toks[j][1] != "{":
                j += 1
            depth, k = 0, j
            while k < len(toks):
                if toks[k][1] == "{":
                    depth += 1
                elif toks[k][1] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
            bodies.append(toks[j + 1 : k])
            i = k + 1
        else:
            i += 1
    return bodies


def _sample_templates(generate_go: str) -> dict[str, str]:
    toks = tokenize(generate_go)
    for body in _functions(toks):
        for j, (_, text) in enumerate(body):
            if text == "samples" and body[j + 1][1] == ":=":
                ev = GoEval(body, random.Random(0), {}, {})
                ev.i = j + 2
                ev.take("map")
                ev.i -= 1
                start = ev.i
                # keep keys: re-read the map literal as key/value pairs
                while body[ev.i][1] != "{":
                    ev.i += 1
                ev.i += 1
                out: dict[str, str] = {}
                while body[ev.i][1] != "}":
                    key = ev.expr()
                    ev.take(":")
                    out[str(key)] = ev.expr()
                    if body[ev.i][1] == ",":
                        ev.i += 1
                del start
                return out
    raise SystemExit("GenerateSampleSecrets templates not found in generate.go")


def build_corpus(
    rule_files: dict[str, str], samples: dict[str, str], rule_ids: set[str]
) -> dict[str, Any]:
    """Rule id -> true positives and false positives, from the rules' Go test code.

    Only the rules of the default config count (`rule_ids`): some Go rule functions are not
    registered in it.
    """
    corpus: dict[str, dict[str, list[str]]] = {}
    skipped: list[dict[str, str]] = []
    for _, src in sorted(rule_files.items()):
        for body in _functions(tokenize(src)):
            rid = None
            for j, (_, text) in enumerate(body):
                if text == "RuleID" and body[j + 1][1] == ":" and body[j + 2][0] == "str":
                    rid = _unquote(body[j + 2][1])
                    break
            if rid is None or rid not in rule_ids:
                continue
            rng = random.Random(f"{PINNED_COMMIT}:{rid}")
            env: dict[str, Any] = {"tps": [], "fps": []}
            j = 0
            while j < len(body):
                kind, text = body[j]
                nxt = body[j + 1][1] if j + 1 < len(body) else ""
                prev = body[j - 1][1] if j else ""
                if kind == "id" and nxt in (":=", "=") and prev not in (".", ","):
                    ev = GoEval(body, rng, samples, env)
                    ev.i = j + 2
                    try:
                        value = ev.expr()
                    except (Unsupported, IndexError, KeyError, ValueError, re.error) as exc:
                        if text in ("tps", "fps"):
                            skipped.append({"rule": rid, "list": text, "reason": str(exc)[:80]})
                        j += 2
                        continue
                    env[text] = value
                    j = ev.i
                    continue
                j += 1
            tps = [t for t in env["tps"] if isinstance(t, str) and t]
            fps = [t for t in env["fps"] if isinstance(t, str)]
            if tps or fps:
                entry = corpus.setdefault(rid, {"tp": [], "fp": []})
                entry["tp"] += tps
                entry["fp"] += fps
    return {
        "upstream": {"repository": UPSTREAM, "commit": PINNED_COMMIT, "version": PINNED_VERSION,
                     "files": "cmd/generate/config/rules/*.go",
                     "license": "MIT, Copyright (c) 2019 Zachary Rice (GITLEAKS-LICENSE.txt)",
                     "generator": "scripts/gitleaks_rules.py"},
        "rules": corpus,
        "skipped_statements": skipped,
    }


def _add_secrets(corpus: dict[str, Any], data: dict[str, Any]) -> None:
    """Record, beside each true positive, the secret the rule itself takes from it.

    The corpus tests check that exactly this string is gone after redaction, and redact it
    again in another context (``export TOKEN=<secret>``). A sample the translated rule does
    not match (a random draw gitleaks' own generator would not make) gets ``null``.
    """
    sys.path.insert(0, str(ROOT))
    from funes.ingest.gitleaks import RuleSet

    ruleset = RuleSet(data)
    by_id = {r.id: r for r in ruleset.rules}
    for rid, entry in corpus["rules"].items():
        rule = by_id.get(rid)
        secrets: list[str | None] = []
        for tp in entry["tp"]:
            spans = rule.findings(tp, ruleset.glob) if rule is not None else []
            secrets.append(tp[spans[0][0] : spans[0][1]] if spans else None)
        entry["secret"] = secrets


# ------------------------------------------------------------------------------------------------


def _git_show(checkout: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "show", f"{PINNED_COMMIT}:{path}"],
        check=True, capture_output=True, text=True,
    ).stdout


def _git_ls(checkout: Path, folder: str) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(checkout), "ls-tree", "--name-only", f"{PINNED_COMMIT}:{folder}"],
        check=True, capture_output=True, text=True,
    ).stdout
    return [f"{folder}/{name}" for name in out.split() if name.endswith(".go")]


def main(argv: list[str] | None = None) -> int:
    """Write the rules, their licence and the corpus from a checkout (see the module doc)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a gitleaks git checkout (or bare git dir)")
    args = parser.parse_args(argv)
    config = tomllib.loads(_git_show(args.checkout, "config/gitleaks.toml"))
    licence = _git_show(args.checkout, "LICENSE")
    data = build_rules(config)
    RULES_OUT.parent.mkdir(parents=True, exist_ok=True)
    RULES_OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", "utf-8")
    LICENSE_OUT.write_text(licence, "utf-8")
    samples = _sample_templates(_git_show(args.checkout, "cmd/generate/config/utils/generate.go"))
    files = {p: _git_show(args.checkout, p)
             for p in _git_ls(args.checkout, "cmd/generate/config/rules")}
    corpus = build_corpus(files, samples, {r["id"] for r in config["rules"]})
    _add_secrets(corpus, data)
    CORPUS_OUT.parent.mkdir(parents=True, exist_ok=True)
    CORPUS_OUT.write_text(json.dumps(corpus, indent=1, ensure_ascii=False) + "\n", "utf-8")
    (CORPUS_OUT.parent / "GITLEAKS-LICENSE.txt").write_text(licence, "utf-8")
    n_tp = sum(len(v["tp"]) for v in corpus["rules"].values())
    n_fp = sum(len(v["fp"]) for v in corpus["rules"].values())
    print(f"rules: {len(data['rules'])} ported, {len(data['unported'])} not "
          f"({', '.join(u['id'] for u in data['unported'])})")
    print(f"corpus: {len(corpus['rules'])} rules, {n_tp} true positives, {n_fp} false positives, "
          f"{len(corpus['skipped_statements'])} statements skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
