r"""Measurement samples of secrets from other scanners' tests and rule examples.

They are read by bench/secret_coverage.py.

funes's detectors are tuned on gitleaks' tests (scripts/gitleaks_rules.py); these samples come
from suites that were not used for tuning, so the bench measures coverage the way a held-out
set does. Nothing from them is vendored: the samples are written to a scratch file outside the
repository and only read by the bench.

* **trufflehog** (AGPL-3.0, https://github.com/trufflesecurity/trufflehog): each detector's
  ``pkg/detectors/<name>/<name>_test.go`` pattern test is a table of ``input`` texts and the
  secrets the detector must ``want`` from them. A small evaluator of the Go expressions those
  tables are written in (string literals, identifiers bound to string literals, ``+``,
  ``fmt.Sprintf`` with ``%s``/``%v``/``%d``/``%q``, ``strings.Repeat``) recovers both; cases it
  cannot evaluate are skipped and counted. A ``want`` is often several parts glued together
  (``email:token:domain``, ``key + id``); the parts that occur in the input and are secrets
  (not an id, user, domain, host, URL or e-mail by their variable's name or their shape) are
  the sample's secrets. Only the test data is read; none of its detector code is used.
* **detect-secrets** (Apache-2.0, https://github.com/Yelp/detect-secrets): the plugins' tests
  (``tests/plugins/*_test.py``) parametrise payloads with ``should_flag``; the keyword plugin's
  test cases pair a line with its secret. The literals are evaluated with ``ast`` (no upstream
  code runs); the secret of a flagged payload is its longest credential-shaped token.

* **Nosey Parker** (https://github.com/praetorian-inc/noseyparker) and **Kingfisher**
  (https://github.com/mongodb/kingfisher), both Apache-2.0: every rule carries ``examples``;
  the rule's own pattern (a Rust regex, translated for the subset these use) finds the secret
  in each. A rule that also captures a user, host or key id writes the secret last, so the
  secret is its last capture that is not an address. Rules named for identifiers (buckets,
  ARNs, client and account ids, domains, public keys) are left out.

* **secretlint** (MIT, https://github.com/secretlint/secretlint): each rule's ``ng.*``
  snapshot is an input and the messages the rule must report there; a message's ``data``
  holds the secret (a URL's password is the part between ``:`` and ``@``). Rules about files
  or paths (home directories, dotenv files, P12 files), the user-pattern and comment-filter
  rules and identifier messages (account, tenant and client ids) are left out.
* **ripsecrets** (MIT, https://github.com/sirwart/ripsecrets): ``test/one_per_line/*`` holds
  one secret per line, named by the file (the secret is the line's longest credential-shaped
  token, read as detect-secrets' payloads are).
* **whispers** (Apache-2.0, https://github.com/Skyscanner/whispers): its fixtures are config
  files and code in 40 syntaxes (YAML, JSON, XML, .npmrc, pip.conf, Dockerfile, shell, Python,
  Go, PHP, Java, JavaScript, HTML …), with the values its tests must find marked by the word
  ``hardcoded`` (or base64 of it) in the sections marked noncompliant.
* **semgrep-rules** (Semgrep Rules License v1.0, https://github.com/semgrep/semgrep-rules): the
  test files of its ``generic/secrets/security`` rules mark each line a rule must find with a
  ``ruleid:`` comment above it (the secret is the line's longest credential-shaped token, a
  URL's password, or a key block's longest body line). Rules that find identifiers (account
  ids, service-account types, OAuth client ids), password hashes and shadow files are left out.

Run (the commits are pinned; a checkout at any commit works, the files are read with
``git show <pinned>``):

    python scripts/secret_samples.py --trufflehog /path/to/trufflehog \\
        --detect-secrets /path/to/detect-secrets [--noseyparker /path/to/noseyparker] \\
        [--kingfisher /path/to/kingfisher] [--secretlint /path/to/secretlint] \\
        [--ripsecrets /path/to/ripsecrets] [--whispers /path/to/whispers] \\
        [--semgrep /path/to/semgrep-rules] \\
        --out /work/scratch/secret-samples.json
"""

from __future__ import annotations

import argparse
import ast
import base64
import binascii
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

TRUFFLEHOG_COMMIT = "3ab759fef4bb5935d4fe9ac68b503d05346b8364"
DETECT_SECRETS_COMMIT = "5e141933554a0b74e7341841f318be21e895339c"
NOSEYPARKER_COMMIT = "2e6e7f36ce36619852532bbe698d8cb7a26d2da7"
KINGFISHER_COMMIT = "ee7c0db3ef87575768f817820c24736249ffcdef"
SECRETLINT_COMMIT = "18346ba31b8173d52060b971221ab38c1943def0"
RIPSECRETS_COMMIT = "416e9d04d6ba8941fc3106bf986b6c8aa875767e"
WHISPERS_COMMIT = "5832bf74dcb127128ba653ed87601c927124b5aa"
SEMGREP_COMMIT = "157ae4706d7f54aa33647332f234dd68f30da195"
TRIVY_COMMIT = "dc3c56eed58ab21c7e08d26757c517bc946a86c5"
LICENCES = {
    "trufflehog": "AGPL-3.0 (test data read for measurement only, nothing vendored)",
    "detect-secrets": "Apache-2.0 (test data read for measurement only, nothing vendored)",
    "noseyparker": "Apache-2.0 (rule examples read for measurement only, nothing vendored)",
    "kingfisher": "Apache-2.0 (rule examples read for measurement only, nothing vendored)",
    "secretlint": "MIT (test snapshots read for measurement only, nothing vendored)",
    "ripsecrets": "MIT (test files read for measurement only, nothing vendored)",
    "semgrep": "Semgrep Rules License v1.0 (test files read for measurement only, nothing"
               " vendored)",
    "whispers": "Apache-2.0 (test fixtures read for measurement only, nothing vendored)",
    "trivy": "Apache-2.0 (test data read for measurement only, nothing vendored)",
}
#: Where each rules-with-examples scanner keeps its rule files.
RULE_DIRS = {
    "noseyparker": "crates/noseyparker/data/default/builtin/rules",
    "kingfisher": "data/rules",
}


#: detect-secrets plugins whose findings are not credentials (public IP addresses) or tests of
#: the plugin machinery.
NOT_SECRETS = frozenset({"ip_public", "base"})


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def _files(repo: Path, commit: str, under: str) -> list[str]:
    return _git(repo, "ls-tree", "-r", "--name-only", commit, under).splitlines()


# ------------------------------------------------------------------------------------------------
# A tiny evaluator of Go string expressions
# ------------------------------------------------------------------------------------------------

_GO_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|`[^`]*`|\d+|[A-Za-z_][\w.]*|\S', re.S
)
_GO_ESC = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "0": "\0"}


class Unevaluable(ValueError):
    """A Go expression outside the subset this script understands."""


def _tokens(src: str) -> list[str]:
    return [t for t in _GO_TOKEN.findall(src) if t.strip() and not t.startswith(("//", "/*"))]


def _go_string(tok: str) -> str:
    if tok.startswith("`"):
        return tok[1:-1]
    body = tok[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x":
                out.append(chr(int(body[i + 2 : i + 4], 16)))
                i += 4
                continue
            if nxt == "u":
                out.append(chr(int(body[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_GO_ESC.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


Leaf = tuple[str | None, str]  # (identifier it came from, value)


class _Parser:
    def __init__(self, toks: list[str], env: dict[str, str]) -> None:
        self.toks, self.env, self.i = toks, env, 0

    def peek(self) -> str:
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def take(self) -> str:
        tok = self.peek()
        self.i += 1
        return tok

    def expr(self) -> tuple[str, list[Leaf]]:
        value, leaves = self.term()
        while self.peek() == "+":
            self.take()
            more, more_leaves = self.term()
            value += more
            leaves += more_leaves
        return value, leaves

    def term(self) -> tuple[str, list[Leaf]]:
        tok = self.take()
        if tok[:1] in ('"', "`"):
            s = _go_string(tok)
            return s, [(None, s)]
        if tok == "(":
            out = self.expr()
            if self.take() != ")":
                raise Unevaluable("paren")
            return out
        if re.fullmatch(r"[A-Za-z_][\w.]*", tok):
            if self.peek() == "(":
                return self.call(tok)
            if tok in self.env:
                return self.env[tok], [(tok, self.env[tok])]
        raise Unevaluable(tok)

    def call(self, name: str) -> tuple[str, list[Leaf]]:
        self.take()  # (
        args: list[tuple[str, list[Leaf]]] = []
        raw: list[str] = []
        while self.peek() != ")":
            if self.peek().isdigit():
                raw.append(self.take())
                args.append(("", []))
            else:
                args.append(self.expr())
                raw.append("")
            if self.peek() == ",":
                self.take()
            elif self.peek() != ")":
                raise Unevaluable("args")
        self.take()
        if name in ("fmt.Sprintf", "fmt.Sprint") and args:
            fmt = args[0][0]
            rest = args[1:]
            leaves: list[Leaf] = []
            out: list[str] = []
            k = 0
            i = 0
            while i < len(fmt):
                if fmt[i] == "%" and i + 1 < len(fmt):
                    verb = fmt[i + 1]
                    if verb == "%":
                        out.append("%")
                    elif verb in "svdq":
                        if k >= len(rest):
                            raise Unevaluable("sprintf args")
                        v = rest[k][0] if rest[k][1] or not raw[k + 1] else raw[k + 1]
                        out.append(f'"{v}"' if verb == "q" else v)
                        leaves += rest[k][1]
                        k += 1
                    else:
                        raise Unevaluable(f"verb %{verb}")
                    i += 2
                    continue
                out.append(fmt[i])
                i += 1
            return "".join(out), leaves
        if name == "strings.Repeat" and len(args) == 2 and raw[1]:
            return args[0][0] * int(raw[1]), [(None, args[0][0] * int(raw[1]))]
        if name in ("strings.ToUpper", "strings.ToLower") and len(args) == 1:
            v = args[0][0].upper() if name.endswith("Upper") else args[0][0].lower()
            return v, [(None, v)]
        raise Unevaluable(name)


_GO_BIND = re.compile(r"(?m)^\s*(?:const\s+|var\s+)?(\w+)\s*(?::=|=)\s*(?=[\"`])")


def _go_env(src: str) -> dict[str, str]:
    """Identifiers bound to string expressions (package level and inside functions)."""
    env: dict[str, str] = {}
    for m in _GO_BIND.finditer(src):
        toks = _tokens(src[m.end() : m.end() + 20000])
        try:
            value, _ = _Parser(toks, env).expr()
        except (Unevaluable, ValueError, IndexError):
            continue
        env[m.group(1)] = value
    return env


_CASE_INPUT = re.compile(r"\binput:\s*")


def _go_cases(src: str, env: dict[str, str]) -> tuple[list[dict[str, Any]], int]:
    cases: list[dict[str, Any]] = []
    skipped = 0
    for m in _CASE_INPUT.finditer(src):
        toks = _tokens(src[m.end() : m.end() + 30000])
        p = _Parser(toks, env)
        try:
            text, _ = p.expr()
        except (Unevaluable, ValueError, IndexError):
            skipped += 1
            continue
        # The want list follows in the same case literal (before the next case's input).
        while p.peek() and p.peek() != "input" and not (
            p.peek() == "want" and p.toks[p.i + 1 : p.i + 2] == [":"]
        ):
            p.take()
        if p.take() != "want" or p.take() != ":":
            skipped += 1
            continue
        if p.peek() == "nil":
            cases.append({"text": text, "wants": []})
            continue
        if [p.take() for _ in range(4)] != ["[", "]", "string", "{"]:
            skipped += 1
            continue
        wants: list[list[Leaf]] = []
        try:
            while p.peek() != "}":
                value, leaves = p.expr()
                wants.append([(None, value)] if len(leaves) <= 1 else leaves)
                if p.peek() == ",":
                    p.take()
        except (Unevaluable, ValueError, IndexError):
            skipped += 1
            continue
        cases.append({"text": text, "wants": wants})
    return cases, skipped


_NOT_SECRET_NAME = re.compile(
    r"(?i)(?:id|domain|email|mail|user(?:name)?|url|uri|host(?:name)?|endpoint|region|account|org"
    r"|name|tenant|instance|server|base|zone|project|workspace|location|phone|number|port|env"
    r"|path|cloud|site|subdomain|app|team|database|db|realm|cluster|region)(?:pattern)?\d*$"
)
_SECRET_NAME = re.compile(r"(?i)key|token|secret|pass|pwd|cred|auth|sig|pat\b|pat\d|jwt|cert")
_HOSTLIKE = re.compile(r"(?i)^(?:[a-z0-9-]+\.)+[a-z]{2,10}(?::\d+)?(?:/\S*)?$")


_URL_PASSWORD = re.compile(r"://[^/\s:@]*:([^/\s@]+)@")
_SECRET_PARAM = re.compile(
    r"(?i)(?:^|[;&?\s])(?:password|pwd|secret|sig|accountkey|sharedaccesskey|key|token)=([^;&\s]+)"
)


def core(value: str) -> str:
    """The credential inside a connection string or URL: what leaking would hurt.

    A URL's user name and host, a connection string's endpoint and the parameters of a SAS URL
    are not secret; the password, ``Secret=``/``AccountKey=`` value or signature is.
    """
    m = _URL_PASSWORD.search(value)
    if m:
        return m.group(1)
    if "=" in value and (";" in value or "&" in value):
        m = _SECRET_PARAM.search(value)
        if m and len(m.group(1)) >= 8:
            return m.group(1)
    return value


def _secret_parts(text: str, leaves: list[Leaf], fallback: bool = True) -> list[str]:
    """The parts of one `want` that are secrets and occur in the input.

    With `fallback`, the longest part when none looks like a secret.
    """
    parts: list[Leaf] = []
    for name, value in leaves:
        if value in text:
            parts.append((name, value))
        elif name is None and "PRIVATE KEY-----" in value:
            m = re.search(r"-----BEGIN[^-]*-----(.*?)-----END", value, re.S)
            if m and m.group(1).strip() and m.group(1).strip() in text:
                parts.append((None, m.group(1).strip()))
        elif name is None and "{" not in value:
            parts += [(None, v) for v in re.split(r"[:;|,\s]+", value) if v and v in text]
    out: list[str] = []
    for name, value in parts:
        value = value.strip('"')
        if len(value) < 8 or value.startswith("//") or re.fullmatch(r"[a-z_.]+", value):
            continue
        bare = name.rsplit(".", 1)[-1] if name else ""
        if bare and _NOT_SECRET_NAME.search(bare) and not _SECRET_NAME.search(
            re.sub(r"(?i)pattern$", "", bare)
        ):
            continue
        if ("@" in value and "." in value.rsplit("@", 1)[-1] and " " not in value
                and not re.search(r"://[^/\s]*:[^/\s]*@", value)):
            continue  # an e-mail
        if _HOSTLIKE.match(value) and not any(c.isupper() for c in value):
            continue
        if value.isalpha() and value.islower() and name is None:
            continue  # a literal word beside the secret (a user name)
        if value.startswith(("http://", "https://")) and not re.search(r"[?&/][^/?&]{16,}", value):
            continue
        out.append(core(value))
    if not out and fallback:
        longest = max((v for _, v in parts), key=len, default="")
        if len(longest) >= 8:
            out.append(longest)
    return sorted(set(out))


def trufflehog_samples(repo: Path, commit: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every detector's pattern-test cases with a non-empty `want`, and counts of the rest."""
    samples: list[dict[str, Any]] = []
    stats = {"files": 0, "skipped_cases": 0, "negatives": 0}
    for path in _files(repo, commit, "pkg/detectors"):
        if not path.endswith("_test.go") or "integration" in path:
            continue
        src = _git(repo, "show", f"{commit}:{path}")
        if "input:" not in src:
            continue
        stats["files"] += 1
        detector = path.split("/")[2]
        cases, skipped = _go_cases(src, _go_env(src))
        stats["skipped_cases"] += skipped
        for case in cases:
            secrets: set[str] = set()
            for leaves in case["wants"]:
                secrets.update(_secret_parts(case["text"], leaves))
            if not case["wants"]:
                stats["negatives"] += 1
                continue
            if secrets:
                samples.append({"source": "trufflehog", "family": detector,
                                "text": case["text"], "secrets": sorted(secrets)})
    return samples, stats


# ------------------------------------------------------------------------------------------------
# detect-secrets
# ------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"[^\s\"'`,;()<>{}\[\]]+")
_NAME_PREFIX = re.compile(r"^[\w.-]{1,60}?(?::=|=>|[:=])(?=.)")


def _payload_secret(payload: str) -> str | None:
    """The longest credential-shaped token of a flagged payload (a name before `=`/`:` cut off)."""
    best = ""
    for tok in _TOKEN.findall(payload):
        if tok.endswith((":", "=")) and not tok.endswith("=="):
            continue  # a name before its value
        if "://" not in tok:
            core = tok.rstrip("=")
            tok = re.split(r":=|=>|[:=]", core)[-1] + tok[len(core):]
        tok = tok.strip(".:")
        if len(tok) > len(best):
            best = tok
    return best if len(best) >= 8 else None


class _Safe(ast.NodeVisitor):
    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            f = node.func
            ok = isinstance(f, ast.Attribute) and f.attr in ("format", "encode", "decode", "join")
            if not ok:
                raise Unevaluable("call")
        super().generic_visit(node)


def _evaluate(node: ast.AST, env: dict[str, Any]) -> Any:
    _Safe().visit(node)
    code = compile(ast.Expression(node), "<test>", "eval")  # type: ignore[arg-type]
    return eval(code, {"__builtins__": {}}, env)  # literals and .format() only (checked above)


def detect_secrets_samples(repo: Path, commit: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every plugin test's flagged payload and keyword case, and counts of the rest."""
    samples: list[dict[str, Any]] = []
    stats = {"files": 0, "skipped": 0, "negatives": 0}
    for path in _files(repo, commit, "tests/plugins"):
        if not path.endswith("_test.py"):
            continue
        family = Path(path).stem.removesuffix("_test")
        if family in NOT_SECRETS:
            continue
        tree = ast.parse(_git(repo, "show", f"{commit}:{path}"))
        stats["files"] += 1
        env: dict[str, Any] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name
            ):
                try:
                    env[node.targets[0].id] = _evaluate(node.value, env)
                except Exception:  # a constant built by a call: not a literal sample
                    continue
        for name, value in env.items():  # the keyword plugin's (line, secret) tables
            if name.endswith("_TEST_CASES") and isinstance(value, list):
                for item in value:
                    if (isinstance(item, tuple) and len(item) == 2
                            and isinstance(item[1], str) and item[1] in item[0]):
                        samples.append({"source": "detect-secrets", "family": family,
                                        "text": item[0], "secrets": [item[1]]})
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "parametrize"):
                continue
            if len(node.args) < 2:
                continue
            try:
                names = _evaluate(node.args[0], env)
                rows = _evaluate(node.args[1], env)
            except Exception:
                stats["skipped"] += 1
                continue
            if not isinstance(names, str) or "should_flag" not in names:
                continue
            for row in rows:
                if not (isinstance(row, tuple) and len(row) == 2 and isinstance(row[0], str)):
                    continue
                if not row[1]:
                    stats["negatives"] += 1
                    continue
                secret = _payload_secret(row[0])
                if secret is None:
                    stats["skipped"] += 1
                    continue
                samples.append({"source": "detect-secrets", "family": family,
                                "text": row[0], "secrets": [core(secret)]})
    return samples, stats


# ------------------------------------------------------------------------------------------------
# Rules that carry their own examples (Nosey Parker, Kingfisher)
# ------------------------------------------------------------------------------------------------

_POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "xdigit": "0-9a-fA-F",
          "upper": "A-Z", "lower": "a-z", "space": r"\s", "punct": r"!-/:-@\[-`{-~",
          "word": r"\w"}
_INLINE_FLAGS = re.compile(r"\(\?([imsx]+)\)")


def rust_regex(pattern: str) -> re.Pattern[str]:
    """A Rust `regex` pattern as a Python one, for the subset these rules use.

    Rust allows `(?i)` anywhere and POSIX classes in brackets; Python wants global flags first
    and has no POSIX classes. Hoisting a mid-pattern flag widens it to the whole pattern, which
    is fine here: the pattern only has to find its capture in the rule's own example.
    """
    flags = "".join(sorted(set("".join(_INLINE_FLAGS.findall(pattern)))))
    body = _INLINE_FLAGS.sub("", pattern)
    body = re.sub(r"\[:(\w+):\]", lambda m: _POSIX.get(m.group(1), m.group(0)), body)
    body = body.replace(r"\z", r"\Z").replace("(?<", "(?P<").replace("(?P<=", "(?<=")
    body = body.replace("(?P<!", "(?<!")
    return re.compile((f"(?{flags})" if flags else "") + body)


_ADDRESS = re.compile(
    r"(?i)(?:[a-z][a-z0-9+.-]*://\S*|machine\s.*|[^@\s]+@[\w-]+(?:\.[\w-]+)+"
    r"|(?:[\w-]+\.)*[\w-]+(?:\.[a-z]{2,}|\.\d+)?:\d{1,5}|(?:[\w-]+\.)+[a-z]{2,}|localhost)"
)


_DOCUMENT = re.compile(r'\{\s*"[\w.-]+"\s*:')


def _rule_secrets(match: re.Match[str]) -> list[str]:
    """The capture of one example match that is the secret.

    A rule with several captures pairs the secret with what it unlocks (a user, a host, an
    account name, a key id), and these rules write the secret after the user or key id:
    ``user, password, host``, ``AccountName, AccountKey``, ``Endpoint, Id, Secret``. So the
    secret is the last capture that is not an address (a URL, host, host:port or e-mail),
    however weak it looks.
    """
    groups = [g.strip("\\\"'") for g in match.groups() if g] or [match.group(0)]
    if len(groups) == 1 and _DOCUMENT.match(groups[0]):
        return []  # a whole JSON document (a service-account file): its fields, not a value
    if len(groups) == 1:
        return _secret_parts(match.string, [(None, groups[0])])
    for group in reversed(groups):
        if group and not _ADDRESS.fullmatch(group):
            return [core(group)]
    return []


#: Rules that find identifiers, not secrets, by their names: buckets, ARNs, domains, user
#: names, client and account ids, public keys and public tokens; and the companions a rule set
#: finds beside a secret to validate it (its host, service URL, account or org name, e-mail).
#: A webhook URL and a URL with a password in it are secrets and stay.
NOT_SECRET_RULE = re.compile(
    r"\b(?:(?:Client|Account|App|Bot|Organization|Project|Tenant|User) ID|Identifier|Bucket"
    r"|Domain|Resource Name|Username|Recipient|Public)\b"
    r"|\b(?:Host|Hostname|Email|(?:Account|Org|Organization) Name)$|(?<!Webhook)(?<!in a) URL$"
)


def rule_example_samples(
    repo: Path, commit: str, source: str
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each rule's `examples`, with the secret its own pattern captures there."""
    import yaml

    samples: list[dict[str, Any]] = []
    stats = {"files": 0, "rules": 0, "identifier_rules": 0, "unparsed_rules": 0,
             "unmatched_examples": 0, "negatives": 0}
    for path in _files(repo, commit, RULE_DIRS[source]):
        if not path.endswith((".yml", ".yaml")):
            continue
        stats["files"] += 1
        doc = yaml.safe_load(_git(repo, "show", f"{commit}:{path}")) or {}
        for rule in doc.get("rules") or []:
            stats["rules"] += 1
            stats["negatives"] += len(rule.get("negative_examples") or [])
            try:
                rx = rust_regex(rule["pattern"])
            except (re.error, KeyError, TypeError):
                stats["unparsed_rules"] += 1
                continue
            family = str(rule.get("id") or rule.get("name") or Path(path).stem)
            if NOT_SECRET_RULE.search(str(rule.get("name") or "")):
                stats["identifier_rules"] += 1
                continue
            for example in rule.get("examples") or []:
                m = rx.search(str(example))
                secrets = _rule_secrets(m) if m else []
                if not secrets:
                    stats["unmatched_examples"] += 1
                    continue
                samples.append({"source": source, "family": family, "text": str(example),
                                "secrets": secrets})
    return samples, stats


# ------------------------------------------------------------------------------------------------
# Test snapshots and files (secretlint, ripsecrets, whispers)
# ------------------------------------------------------------------------------------------------

#: secretlint rules that judge files or paths, or run a user's own patterns, not secrets in text.
SECRETLINT_NOT_SECRETS = frozenset(
    {"pattern", "filter-comments", "example", "no-homedir", "no-dotenv", "gcp"}
)
#: secretlint messages that report an identifier beside a secret, not a secret.
SECRETLINT_IDS = frozenset({"AWSAccountID", "AzureTenantId", "AzureClientId"})


def secretlint_samples(repo: Path, commit: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each rule's `ng.*` snapshots: the input and the secret of every message it must raise."""
    samples: list[dict[str, Any]] = []
    stats = {"snapshots": 0, "file_rules": 0, "identifiers": 0, "negatives": 0}
    for path in _files(repo, commit, "packages/@secretlint"):
        parts = path.split("/")
        if len(parts) < 6 or parts[3:5] != ["test", "snapshots"] or parts[-1] != "output.json":
            continue
        rule = parts[2].removeprefix("secretlint-rule-")
        if parts[5].startswith("ok"):
            stats["negatives"] += 1
            continue
        if not parts[5].startswith("ng") or not parts[2].startswith("secretlint-rule-"):
            continue
        if rule in SECRETLINT_NOT_SECRETS:
            stats["file_rules"] += 1
            continue
        stats["snapshots"] += 1
        doc = json.loads(_git(repo, "show", f"{commit}:{path}"))
        text = str(doc.get("sourceContent") or "")
        for message in doc.get("messages") or []:
            if message.get("messageId") in SECRETLINT_IDS:
                stats["identifiers"] += 1
                continue
            values = [v for v in (message.get("data") or {}).values()
                      if isinstance(v, str) and len(v) >= 4 and v in text]
            secrets = []
            for v in values:
                m = _URL_PASSWORD.search(v)
                secrets.append(m.group(1) if m else v)
            if secrets:
                samples.append({"source": "secretlint",
                                "family": f"{rule}.{message.get('messageId')}",
                                "text": text, "secrets": secrets})
    return samples, stats


def ripsecrets_samples(repo: Path, commit: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every line of `test/one_per_line/*`, with its longest credential-shaped token."""
    samples: list[dict[str, Any]] = []
    stats = {"files": 0, "skipped": 0}
    for path in _files(repo, commit, "test/one_per_line"):
        stats["files"] += 1
        family = Path(path).name
        for line in _git(repo, "show", f"{commit}:{path}").splitlines():
            if not line.strip():
                continue
            m = _URL_PASSWORD.search(line)
            secret = m.group(1) if m else _payload_secret(line.strip().rstrip(","))
            if secret is None or secret not in line:
                stats["skipped"] += 1
                continue
            samples.append({"source": "ripsecrets", "family": family, "text": line,
                            "secrets": [secret]})
    return samples, stats


_MARKED: Final = re.compile(r"(?i)[^\s\"'<>=:,;(){}\[\]`]*hardcoded[^\s\"'<>=:,;(){}\[\]`]*")
_B64_WORD: Final = re.compile(r"[A-Za-z0-9+/]{8,512}={0,2}")
_NONCOMPLIANT: Final = re.compile(r"(?i)non-?compliant")
_COMPLIANT: Final = re.compile(r"(?i)(?<![a-z-])compliant")


def _marked_secrets(line: str) -> list[str]:
    """The marked values of a line: not a key or an element named with the mark."""
    found = []
    for m in _MARKED.finditer(line):
        after = line[m.end() :].lstrip("\"'")
        if after.startswith((":", "=", ">")) or line[max(0, m.start() - 1) : m.start()] == "<":
            continue  # `hardcoded_password: x`, `<o1_hardcoded_password>`: a name
        value = m.group(0)
        if "//" in value:  # a webhook URL: its marked path segment, not the host
            value = next(p for p in reversed(value.split("/")) if "hardcoded" in p.lower())
        found.append(value.split("@")[0])  # `hardcoded1@pypi.example.com`: the password
    for m in _B64_WORD.finditer(line):
        word = m.group(0)
        try:
            raw = base64.b64decode(word + "=" * (-len(word) % 4), validate=True)
        except (ValueError, binascii.Error):
            continue
        if b"hardcoded" in raw.lower() and word not in found:
            found.append(word)
    return found


def whispers_samples(repo: Path, commit: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each fixture, with the marked values of its noncompliant sections (all, if unmarked)."""
    samples: list[dict[str, Any]] = []
    stats = {"files": 0, "without_secrets": 0}
    for path in _files(repo, commit, "tests/fixtures"):
        if Path(path).stem == "excluded":
            continue  # the values its tests exclude by configuration
        try:
            text = _git(repo, "show", f"{commit}:{path}")
        except (subprocess.CalledProcessError, UnicodeDecodeError):
            continue
        stats["files"] += 1
        sectioned = _COMPLIANT.search(text) is not None
        secrets: list[str] = []
        state = not sectioned  # unsectioned: every marked value counts
        for line in text.splitlines():
            if _NONCOMPLIANT.search(line):
                state = True
            elif _COMPLIANT.search(line):
                state = False
            elif state:
                secrets += [v for v in _marked_secrets(line) if v not in secrets]
        if not secrets:
            stats["without_secrets"] += 1
            continue
        samples.append({"source": "whispers", "family": Path(path).name, "text": text,
                        "secrets": secrets})
    return samples, stats


#: semgrep rules that find identifiers, hashes of passwords or whole files, not secrets.
SEMGREP_NOT_SECRETS: Final = re.compile(
    r"account-id|service-account|oauth-url|bcrypt-hash|etc-shadow"
)
_QUERY_VALUE: Final = re.compile(r"[?&]\w+=([^&#\s]+)")
_ANNOTATION: Final = re.compile(r"^\s*(?:#|//|<!--|--|/\*)\s*(ruleid|ok|todoruleid):\s*([\w.-]+)")


def semgrep_samples(repo: Path, commit: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The line under each `ruleid:` comment of the generic secrets rules' test files."""
    samples: list[dict[str, Any]] = []
    stats = {"files": 0, "identifier_rules": 0, "negatives": 0, "skipped": 0}
    for path in _files(repo, commit, "generic/secrets/security"):
        if path.endswith(".yaml"):
            continue
        stats["files"] += 1
        lines = _git(repo, "show", f"{commit}:{path}").splitlines()
        for i, line in enumerate(lines):
            m = _ANNOTATION.match(line)
            if m is None:
                continue
            if m.group(1) == "ok":
                stats["negatives"] += 1
                continue
            if SEMGREP_NOT_SECRETS.search(m.group(2)):
                stats["identifier_rules"] += 1
                continue
            rest = [x for x in lines[i + 1 :] if x.strip()]
            if not rest or _ANNOTATION.match(rest[0]):
                stats["skipped"] += 1
                continue
            text = rest[0]
            if "-----BEGIN" in text:  # a key block: its lines up to its end or a blank line
                block = []
                for x in lines[i + 1 :]:
                    if not x.strip() or _ANNOTATION.match(x):
                        break
                    block.append(x)
                    if "-----END" in x:
                        break
                text = "\n".join(block)
                body = [x.strip() for x in block[1:] if "-----" not in x and ":" not in x]
                secret = max(body, key=len) if body else None
            else:
                u = _URL_PASSWORD.search(text)
                secret = u.group(1) if u else _payload_secret(text.strip().rstrip(",;"))
                query = _QUERY_VALUE.findall(secret or "")
                if query:  # a URL holding its key in a query: the longest parameter's value
                    secret = max(query, key=len)
            if secret is None or secret not in text:
                stats["skipped"] += 1
                continue
            samples.append({"source": "semgrep", "family": m.group(2), "text": text,
                            "secrets": [secret]})
    return samples, stats


_TRIVY_RULE: Final = re.compile(r'\bRuleID:\s*"([^"]+)"')
_TRIVY_MATCH: Final = re.compile(r"\bMatch:\s*")
_TRIVY_DIR: Final = "pkg/fanal/secret"


def trivy_samples(repo: Path, commit: str) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Each built-in rule's finding in the scanner's test table, read back from its test file.

    A finding's ``Match`` is the matched text with the secret masked by one ``*`` per
    character; the test file that holds that text, the stars taken as wildcards, gives the
    secret back. Findings of the tests' own configured rules (``rule1`` …) are left out.
    """
    src = _git(repo, "show", f"{commit}:{_TRIVY_DIR}/scanner_test.go")
    env = _go_env(src)
    rules = _git(repo, "show", f"{commit}:{_TRIVY_DIR}/builtin-rules.go")
    builtin = set(re.findall(r'\bID:\s*"([^"]+)"', rules))
    texts = []
    for path in _files(repo, commit, f"{_TRIVY_DIR}/testdata"):
        if not path.endswith((".yaml", ".yml")):
            try:
                texts.append(_git(repo, "show", f"{commit}:{path}"))
            except UnicodeDecodeError:  # the test of a file that is not UTF-8
                continue
    samples: list[dict[str, Any]] = []
    stats = {"files": len(texts), "findings": 0, "configured_rules": 0, "unmatched": 0}
    for m in _TRIVY_RULE.finditer(src):
        stats["findings"] += 1
        rule = m.group(1)
        if rule not in builtin:
            stats["configured_rules"] += 1
            continue
        following = _TRIVY_RULE.search(src, m.end())
        at = _TRIVY_MATCH.search(src, m.end(), following.start() if following else len(src))
        try:
            masked, _ = _Parser(_tokens(src[at.end() : at.end() + 20000]), env).expr() if at \
                else ("", [])
        except (Unevaluable, ValueError, IndexError):
            masked = ""
        parts = re.split(r"(\*+)", masked)
        pattern = "".join(f"([\\s\\S]{{{len(x)}}})" if x.startswith("*") else re.escape(x)
                          for x in parts if x)
        if len(re.sub(r"\*+", "", masked).strip()) < 4:  # nothing left to find it by
            stats["unmatched"] += 1
            continue
        hit = next((h for t in texts
                    for h in [re.search(pattern, t)] if h), None)
        if hit is None:
            stats["unmatched"] += 1
            continue
        whole = hit.string
        start = whole.rfind("\n", 0, hit.start()) + 1
        end = whole.find("\n", hit.end())
        text = whole[start : end if end >= 0 else len(whole)]
        found = [g.strip().strip("\"'") for g in hit.groups()]
        if rule == "private-key":  # a key block: its longest line of base64
            found = [max(re.findall(r"[A-Za-z0-9+/=]{16,}", g.replace("\\n", "\n")) or [""],
                         key=len) for g in found]
        secrets = [g for g in found if len(g) >= 8]
        if not secrets:
            stats["unmatched"] += 1
            continue
        samples.append({"source": "trivy", "family": rule, "text": text, "secrets": secrets})
    return samples, stats


def _dedupe(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    out = []
    for s in samples:
        key = (s["source"], s["text"], tuple(s["secrets"]))
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def main() -> None:
    """Write the samples file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trufflehog", type=Path)
    parser.add_argument("--detect-secrets", type=Path)
    parser.add_argument("--noseyparker", type=Path)
    parser.add_argument("--kingfisher", type=Path)
    parser.add_argument("--secretlint", type=Path)
    parser.add_argument("--ripsecrets", type=Path)
    parser.add_argument("--whispers", type=Path)
    parser.add_argument("--semgrep", type=Path)
    parser.add_argument("--trivy", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    readers = {
        "trufflehog": (args.trufflehog, TRUFFLEHOG_COMMIT, trufflehog_samples),
        "detect-secrets": (args.detect_secrets, DETECT_SECRETS_COMMIT, detect_secrets_samples),
        "noseyparker": (args.noseyparker, NOSEYPARKER_COMMIT,
                        lambda r, c: rule_example_samples(r, c, "noseyparker")),
        "kingfisher": (args.kingfisher, KINGFISHER_COMMIT,
                       lambda r, c: rule_example_samples(r, c, "kingfisher")),
        "secretlint": (args.secretlint, SECRETLINT_COMMIT, secretlint_samples),
        "ripsecrets": (args.ripsecrets, RIPSECRETS_COMMIT, ripsecrets_samples),
        "whispers": (args.whispers, WHISPERS_COMMIT, whispers_samples),
        "semgrep": (args.semgrep, SEMGREP_COMMIT, semgrep_samples),
        "trivy": (args.trivy, TRIVY_COMMIT, trivy_samples),
    }
    upstream: dict[str, Any] = {}
    samples: list[dict[str, Any]] = []
    for name, (repo, commit, read) in readers.items():
        if repo is None:
            continue
        got, stats = read(repo, commit)
        samples += got
        upstream[name] = {"commit": commit, "licence": LICENCES[name], **stats}
    if not upstream:
        parser.error("name at least one scanner checkout (--trufflehog, --detect-secrets, …)")
    data: dict[str, Any] = {"upstream": upstream, "samples": _dedupe(samples)}
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False), "utf-8")
    counts = {src: sum(s["source"] == src for s in data["samples"]) for src in upstream}
    print(f"wrote {args.out}: {counts}; {upstream}", file=sys.stderr)


if __name__ == "__main__":
    main()
