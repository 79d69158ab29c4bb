"""The vendored gitleaks rules: how they were translated, and the engine that runs them."""

from __future__ import annotations

import random
import re

import pytest

from funes.ingest import gitleaks
from scripts.gitleaks_rules import PINNED_COMMIT, translate


def test_the_data_file_names_its_upstream_and_licence() -> None:
    rules = gitleaks.rules()
    assert rules.upstream["commit"] == PINNED_COMMIT
    assert rules.upstream["repository"].endswith("gitleaks/gitleaks")
    licence = gitleaks.resources.files("funes.ingest").joinpath("data/gitleaks/LICENSE.txt")
    assert licence.read_text("utf-8").startswith("MIT License")
    assert len(rules.rules) >= 220 and [u["id"] for u in rules.unported] == ["pkcs12-file"]


def test_every_rule_compiles() -> None:
    for rule in gitleaks.rules().rules:
        assert rule.pattern.pattern


@pytest.mark.parametrize(
    ("go", "text", "expected"),
    [
        # a mid-pattern (?i) runs to the end of its group, across the group's alternatives
        (r"""(?:"(?i)abc"|'(?i)def')x""", "'DEF'x", True),
        (r"""(?:"(?i)abc"|'(?i)def')x""", '"ABC"X', False),
        (r"key(?i)VALUE", "keyvalue", True),
        (r"key(?i)VALUE", "KEYvalue", False),
        (r"end\z", "the end", True),
        (r"end\z", "the end\n", False),
        (r"(?<tok>[[:digit:]]{3})", "abc123", True),
        (r"[a-z&&]+", "&&", True),
        (r"\bword\b", "éword", True),  # RE2's \b is ASCII: é is not a word character
    ],
)
def test_go_patterns_translate_to_the_same_matches(go: str, text: str, expected: bool) -> None:
    assert bool(re.search(translate(go), text, re.ASCII)) is expected


def test_the_keyword_prefilter_finds_exactly_the_keywords_present() -> None:
    rules = gitleaks.rules()
    keywords = sorted(rules.by_keyword)
    rng = random.Random(7)
    filler = list("abcdefghijklmnopqrstuvwxyz0123456789_-.~: \n")
    for _ in range(300):
        parts = [rng.choice(keywords) if rng.random() < 0.3 else
                 "".join(rng.choice(filler) for _ in range(rng.randint(0, 6)))
                 for _ in range(rng.randint(1, 12))]
        text = "".join(parts)
        assert rules.keywords_in(text) == {k for k in keywords if k in text}, text


def test_overlapping_keywords_are_all_found() -> None:
    rules = gitleaks.rules()
    keywords = sorted(rules.by_keyword)
    # a keyword that starts inside another one and runs past its end
    pairs = [(a, b) for a in keywords for b in keywords
             if a != b and any(a[d:] == b[: len(a) - d] for d in range(1, len(a)))][:50]
    assert pairs
    for a, b in pairs:
        d = next(d for d in range(1, len(a)) if a[d:] == b[: len(a) - d])
        text = a[:d] + b
        assert {a, b} <= rules.keywords_in(text), (a, b, text)


def test_rules_without_their_keyword_do_not_run() -> None:
    rules = gitleaks.rules()
    assert rules.candidates("nothing to see here at all") == []
    ids = {r.id for r in rules.candidates("export DATABRICKS_TOKEN=dapi0000")}
    assert "databricks-api-token" in ids and "github-pat" not in ids


def test_a_rule_is_checked_as_gitleaks_checks_it() -> None:
    rules = gitleaks.rules()
    rule = rules.by_id["databricks-api-token"]
    secret = "dapi" + "f13ac4b49d1cb31f69f678e39602e381"
    assert [(s, e) for s, e in rule.findings(f"token = {secret}", rules.glob)] == [(8, 44)]
    assert rule.findings("token = dapi" + "0" * 32, rules.glob) == []  # entropy under 3
    aws = rules.by_id["aws-access-token"]
    assert aws.findings("AKIAIOSFODNN7EXAMPLE", rules.glob) == []  # the rule's allowlist

