"""Texts built to make a backtracking regular expression engine take quadratic time.

Transcripts carry text from strangers (web pages, tool output), so every expression redaction
and the publish gate run must stay linear in the text. A backtracking engine goes quadratic
when a repetition can absorb a long run, fail at its end, and be tried again from many
starting points inside that run. The families here are those runs, next to the words the
rules' prefilters look for: a long value after a key name that never terminates, a key name
repeated with every separator a rule's name pattern accepts, long hex and base64 tool output.

`tests/ingest/test_linear_time.py` checks every rule on them; `bench/bench_redos.py` times the
worst case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["FAMILIES", "every_keyword", "family_texts"]


def _fill(unit: str, n: int) -> str:
    return (unit * (n // max(1, len(unit)) + 1))[:n]


#: name → (keyword, size) → text. Each text is about `size` characters.
FAMILIES: dict[str, Callable[[str, int], str]] = {
    # a long value after a key name (a 32 KB hex tool result after `"key": "`)
    "kw=lower": lambda kw, n: f"{kw}={_fill('a', n)}",
    "kw=hex#": lambda kw, n: f"{kw} = {_fill('0123456789abcdef', n)}#",
    'kw:"hex': lambda kw, n: f'"{kw}": "{_fill("0123456789abcdef", n)}',
    "kw=b64!": lambda kw, n: f"{kw}={_fill('aB3dE5fG7hJ9kL1m', n)}!",
    "kw=b64/": lambda kw, n: f"{kw}: {_fill('aB3d+E5f/G7hJ9kL', n)}",
    "kw=upper": lambda kw, n: f"{kw}={_fill('A', n)}",
    "kw=dash": lambda kw, n: f"{kw}={_fill('abc-', n)}",
    "kw=dots": lambda kw, n: f"{kw}={_fill('ab.1', n)}",
    "kw-url": lambda kw, n: f"https://{kw}:{_fill('a1', n)}",
    # the key name itself repeated with each separator names and values may contain
    "kw rep": lambda kw, n: _fill(kw + " ", n),
    "kw= rep": lambda kw, n: _fill(kw + "=", n),
    "kw=x rep": lambda kw, n: _fill(kw + "=x1 ", n),
    "kw: rep": lambda kw, n: _fill(kw + ": ", n),
    "kw_ rep": lambda kw, n: _fill(kw + "_", n),
    "kw. rep": lambda kw, n: _fill(kw + ".", n),
    "kw- rep": lambda kw, n: _fill(kw + "-", n),
    "kw/ rep": lambda kw, n: _fill(kw + "/", n),
    "kw:// rep": lambda kw, n: _fill(kw + "://a:", n),
    "kw glued": lambda kw, n: _fill(kw, n),
    "kw@ rep": lambda kw, n: _fill(kw + ":a@", n),
    "kw\\n rep": lambda kw, n: _fill(kw + "=\\n", n),
    "kw nl rep": lambda kw, n: _fill(kw + "=\n", n),
    "kw quote rep": lambda kw, n: _fill(f'"{kw}":"', n),
    "kw<> rep": lambda kw, n: _fill(f"<{kw}>", n),
}

#: Words that start funes's own detectors (beside the gitleaks rules' keywords).
OWN_WORDS: tuple[str, ...] = (
    "key", "password", "pass", "secret", "token", "credentials", "auth", "pwd", "creds",
    "eyJ", "AKIA", "ghp_", "github_pat_", "glpat-", "hf_", "sk-", "sk-ant-", "xoxb-",
    "bearer", "authorization", "Authorization: Basic", "curl -u", "machine", "default",
    "-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----", "://", "postgres://u",
    "kind: Secret\ndata:\n ", "sig=", "AccountKey=", "aws_secret_access_key", "sessiontoken",
    "AIza", "ya29.", "GOCSPX-", "npm_", "pypi-AgEIcHlwaS5vcmc", "whsec_", "sk_live_",
    "hooks.slack.com/services/", ":5432:", "<password>", "</password>", "--token", "-p",
    "[REDACTED:password]", "REDACTED", "$", "${", "%", "\\\"",
)


def every_keyword(extra: Iterable[str] = ()) -> list[str]:
    """Every rule keyword and every word funes's own detectors start from."""
    from funes.ingest import clients, gitleaks

    words = {kw for rule in gitleaks.rules().rules for kw in rule.keywords}
    return sorted(words | set(OWN_WORDS) | set(clients.ANCHORS) | set(extra))


def family_texts(keywords: Iterable[str], size: int) -> dict[str, str]:
    """For each family, one text of about `size` characters cycling through `keywords`.

    Each keyword gets its own stretch (`size` split among them, at least 64 characters), so
    every rule meets its own words in every shape in one text per family.
    """
    words = list(keywords)
    out: dict[str, str] = {}
    for name, make in FAMILIES.items():
        stretch = max(64, size // max(1, len(words)))
        parts: list[str] = []
        total = 0
        while total < size:
            for kw in words:
                piece = make(kw, stretch) + "\n"
                parts.append(piece)
                total += len(piece)
                if total >= size:
                    break
        out[name] = "".join(parts)
    return out
