"""Redaction coverage on other scanners' test secrets (held out: not what funes was tuned on).

Run:
    python scripts/secret_samples.py --trufflehog T --detect-secrets D [--noseyparker N]
        [--kingfisher K] --out S.json
    python bench/secret_coverage.py --samples S.json [--json] [--misses 30]

Each sample (a scanner's test input and the secrets it must find there) is indexed the way
ingest stores a block (base64 elision, then redaction) in three contexts:

* **own text**: the scanner's test input as it is;
* **after TOKEN=**: each secret alone after ``export TOKEN=`` (single-quoted when it holds a
  space or a shell character);
* **alone in a sentence**: each secret in a line of prose, with no name beside it.

A secret is *caught* in a context when the stored text no longer holds it; a *partial residue*
is a context where the secret was cut but a 16-character piece of it is still there (half a
secret is still a leak). Figures are per source; the families missed most are listed. The two
constructed contexts are also given per distinct value (`measure_distinct`), since a suite
may repeat one value in many payloads.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from funes.ingest.noise import elide_base64  # noqa: E402
from funes.ingest.redact import redact  # noqa: E402

DEFAULT_SAMPLES = Path(os.environ.get("FUNES_SECRET_SAMPLES", "/work/scratch/secret-samples.json"))
SENTENCE = "After the outage I rotated it, and the new one is {} so please update the runner."
_SHELL = frozenset(" \t\n'\"$`\\;&|<>(){}*?!#")
WINDOW = 16


def token_context(secret: str) -> str:
    if _SHELL.intersection(secret):
        return "export TOKEN='" + secret.replace("'", "'\\''") + "'"
    return f"export TOKEN={secret}"


#: Set by --first-engine: measure funes's own detectors and the gitleaks rules alone.
FIRST_ENGINE_ONLY = False


def stored(text: str) -> str:
    """What ingest stores for a block holding `text`.

    Elision runs first, as in the parsers; then every ingest engine in order
    (funes.ingest.engines: funes's detectors and gitleaks, then Betterleaks) unless
    `FIRST_ENGINE_ONLY`.
    """
    text = elide_base64(text)
    if FIRST_ENGINE_ONLY:
        return redact(text)[0]
    try:
        from funes.ingest import engines
    except ImportError:  # a tree from before the engines module: the first engine is ingest
        return redact(text)[0]
    return engines.redact_texts([text])[0][0]


def residue(secret: str, out: str) -> bool:
    """A 16-character piece of `secret` kept in `out`, unless the piece is a name.

    Some rule sets capture a key together with its name (Kingfisher's
    `launchdarkly-secret-<uuid>`): when only the key is redacted, the name is what is kept. A
    piece of letters of one case and separators, with no digit (`launchdarkly-sec`), is that
    name. A random key's 16 characters are that rarely: a few times in 10^6 in base62, once
    in 200 in lowercase base36.
    """
    if len(secret) < WINDOW:
        return False
    return any(
        secret[i : i + WINDOW] in out and not _name_piece(secret[i : i + WINDOW])
        for i in range(len(secret) - WINDOW + 1)
    )


def _name_piece(piece: str) -> bool:
    letters = piece.replace("-", "").replace("_", "").replace(".", "")
    return letters.isalpha() and (letters.islower() or letters.isupper())


def placeholder_shaped(secret: str) -> bool:
    """A test value no real generator makes: a run of five identical characters (`AKCxxxxx…`,
    `AKIAZZZZ…`), a short unit repeated (`abcd1234abcd1234…`), a typed run (`abcdefgh`,
    `1234567890`), the RFC's example UUID, a variable (`$Password`), a value made of the
    word for what it stands for (`SOME_PASSWORD`), or low entropy.

    Reported apart: funes leaves placeholders alone on purpose (docs carry `TOKEN=xxxx…`).
    """
    if re.search(r"(.)\1{4}", secret) or _run(secret) >= RUN or EXAMPLE_UUID in secret.lower():
        return True
    if _VARIABLE.fullmatch(secret) or (
        _NAMED_FOR.search(secret) and _WORDS_ONLY.fullmatch(secret)
    ):
        return True
    low = secret.lower()
    n = len(low)
    for p in range(1, 17):  # a unit repeated over three quarters of it, whatever the case
        if n >= 2 * p and low[p:] [: n * 3 // 4 - p] == low[: n * 3 // 4 - p]:
            return True
    return _entropy(secret) < 2.5


#: A variable standing for the value (`$Password`, `%nothing%`, `${DB_PASS}`).
_VARIABLE = re.compile(r"\$\{?[A-Za-z_]\w{0,40}\}?|%[A-Za-z_]\w{0,40}%")
#: A value that says what it stands for: a secret word in letters alone (`password`,
#: `SOME_PASSWORD`, `smtp_password`, `YOURPASSWROD`).
_NAMED_FOR = re.compile(r"(?i)passw|secret|token|pwd")
_WORDS_ONLY = re.compile(r"[A-Za-z_]{1,40}")
#: An ascending or descending run this long (`abcdefgh`, `12345678`, `87654321`) is typed by a
#: person: a random generator makes one about once in 10^12 values.
RUN = 8
#: RFC 4122's example UUID, which every tutorial copies.
EXAMPLE_UUID = "123e4567-e89b-12d3-a456-426614174000"


def _run(value: str) -> int:
    """The longest run of consecutive characters (a→b→c or 3→2→1), case folded."""
    best = cur = 1 if value else 0
    step = 0
    for a, b in itertools.pairwise(value.lower()):
        d = ord(b) - ord(a)
        if d in (1, -1) and a.isalnum() and b.isalnum():
            cur, step = (cur + 1 if d == step else 2), d
        else:
            cur, step = 1, 0
        best = max(best, cur)
    return best


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in collections.Counter(value).values()) if n else 0.0


def measure(samples: list[dict[str, Any]], skip_placeholders: bool = False) -> dict[str, Any]:
    by_source: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    missed: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    residues: list[dict[str, str]] = []
    for s in samples:
        src, fam = s["source"], s["family"]
        c = by_source[src]
        own = stored(s["text"])
        for secret in s["secrets"]:
            if skip_placeholders and placeholder_shaped(secret):
                continue
            c["secrets"] += 1
            ok = secret not in own
            c["own"] += ok
            if not ok:
                missed[src][f"own:{fam}"] += 1
            elif residue(secret, own):
                c["residue"] += 1
                residues.append({"source": src, "family": fam, "context": "own"})
            for ctx, text in (("token", token_context(secret)),
                              ("prose", SENTENCE.format(secret))):
                out = stored(text)
                hit = secret not in out
                c[ctx] += hit
                if not hit:
                    missed[src][f"{ctx}:{fam}"] += 1
                elif residue(secret, out):
                    c["residue"] += 1
                    residues.append({"source": src, "family": fam, "context": ctx})
    report: dict[str, Any] = {"sources": {}, "residues": residues}
    for src, c in sorted(by_source.items()):
        n = c["secrets"]
        report["sources"][src] = {
            "secrets": n,
            "own": round(c["own"] / n, 3),
            "token": round(c["token"] / n, 3),
            "prose": round(c["prose"] / n, 3),
            "partial_residues": c["residue"],
            "missed_most": missed[src].most_common(40),
        }
    return report


def measure_distinct(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """After TOKEN= and alone in a sentence, each distinct value once per source.

    Those two contexts are the same input for every repeat of a value, and a suite may repeat
    one value many times (detect-secrets' SoftLayer tests put `abcd1234…` in 49 payloads), so
    the per-sample figure weighs a value by how often its suite reuses it. Both are printed.
    """
    values: dict[str, set[str]] = collections.defaultdict(set)
    for s in samples:
        values[s["source"]].update(s["secrets"])
    out: dict[str, dict[str, Any]] = {}
    for src, secrets in sorted(values.items()):
        token = sum(v not in stored(token_context(v)) for v in secrets)
        prose = sum(v not in stored(SENTENCE.format(v)) for v in secrets)
        out[src] = {"values": len(secrets), "token": round(token / len(secrets), 3),
                    "prose": round(prose / len(secrets), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", type=int, default=20)
    parser.add_argument("--first-engine", action="store_true",
                        help="funes's detectors and gitleaks only (no Betterleaks)")
    args = parser.parse_args()
    global FIRST_ENGINE_ONLY
    FIRST_ENGINE_ONLY = args.first_engine
    if not args.samples.is_file():
        sys.exit(f"no samples at {args.samples}: run scripts/secret_samples.py first")
    data = json.loads(args.samples.read_text("utf-8"))
    report = measure(data["samples"])
    report["upstream"] = data["upstream"]
    real = measure(data["samples"], skip_placeholders=True)
    report["without_placeholders"] = real["sources"]
    report["distinct_values"] = measure_distinct(data["samples"])
    if args.json:
        print(json.dumps(report, indent=1))
        return
    for src, r in real["sources"].items():
        print(f"== {src}, placeholder-shaped test values left out: {r['secrets']} secrets  own "
              f"text {r['own']:.3f}  after TOKEN= {r['token']:.3f}  alone in a sentence "
              f"{r['prose']:.3f}  partial residues {r['partial_residues']}")
    for src, d in report["distinct_values"].items():
        print(f"== {src}, each distinct value once: {d['values']} values  after TOKEN= "
              f"{d['token']:.3f}  alone in a sentence {d['prose']:.3f}")
    for src, r in report["sources"].items():
        up = data["upstream"].get(src, {})
        print(f"== {src}@{up.get('commit', '?')[:12]}: {r['secrets']} secrets  own text "
              f"{r['own']:.3f}  after TOKEN= {r['token']:.3f}  alone in a sentence "
              f"{r['prose']:.3f}  partial residues {r['partial_residues']}")
        for key, n in r["missed_most"][: args.misses]:
            print(f"   missed {n:3d}  {key}")


if __name__ == "__main__":
    main()
