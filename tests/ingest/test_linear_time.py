"""Every expression redaction and the gate run on transcript text takes time linear in the text.

Transcripts carry text from strangers, so a regular expression that backtracks quadratically is
an attack on every hook: the ported gitleaks `generic-api-key` allowlist took 4-19 s on a 16 KB
value after a key name, and a 32 KB hex tool result made `funes index` take 40 s (issue #28).

Two checks. Structurally, no repetition in a rule, an allowlist or one of funes's detectors is
unbounded, so a match attempt costs at most a constant. Empirically, on the adversarial
families of tests/support/adversarial.py, the time of a 64 KB text is compared with the time of
an 8 KB one in the same run, in CPU time of this thread (a ratio of CPU times, so neither the
machine's speed nor its load matters): about 8 when linear, about 64 when quadratic; the test
fails above 24. Absolute figures are in bench/results/redos.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import pytest

from funes.ingest import clients, contexts, detectors, gitleaks, providers, structured, vetoes
from funes.ingest.redact import DETECTORS, redact
from tests.support.adversarial import FAMILIES, every_keyword, family_texts

try:  # Python 3.11+
    import re._constants as sre_constants
    import re._parser as sre_parse
except ImportError:  # pragma: no cover
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT,
            getattr(sre_constants, "POSSESSIVE_REPEAT", sre_constants.MAX_REPEAT)}
#: Linear is about 8 (64 KB against 8 KB), quadratic about 64.
MAX_RATIO = 24.0


def _unbounded(pattern: str, flags: int = 0) -> list[str]:
    """The repetitions of `pattern` without an upper bound."""
    found: list[str] = []

    def walk(items: object) -> None:
        for op, av in items:  # type: ignore[attr-defined]
            if op in _REPEATS:
                low, high, sub = av
                if high == sre_constants.MAXREPEAT:
                    found.append(f"{{{low},}} over {str(sub)[:60]}")
                walk(sub)
            elif op is sre_constants.SUBPATTERN:
                walk(av[-1])
            elif op is sre_constants.BRANCH:
                for alt in av[1]:
                    walk(alt)
            elif op in (sre_constants.ASSERT, sre_constants.ASSERT_NOT):
                walk(av[1])
            elif op is getattr(sre_constants, "ATOMIC_GROUP", None):
                walk(av)
            elif op is sre_constants.GROUPREF_EXISTS:
                walk(av[1])
                if av[2] is not None:
                    walk(av[2])

    walk(sre_parse.parse(pattern, flags))
    return found


def _patterns() -> Iterator[tuple[str, str]]:
    rules = gitleaks.rules()
    for rule in rules.rules:
        yield f"rule {rule.id}", rule.pattern.pattern
        for allow in rule.allowlists:
            if allow.regexes is not None:
                yield f"allowlist of {rule.id}", allow.regexes.pattern
    for allow in rules.glob:
        if allow.regexes is not None:
            yield "global allowlist", allow.regexes.pattern
    for det in DETECTORS:
        yield f"detector {det.kind}", det.pattern.pattern
    for module in (contexts, clients, vetoes, detectors, structured):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                yield f"{module.__name__}.{name}", value.pattern
    for i, flag in enumerate(clients._FLAGS):
        yield f"clients._FLAGS[{i}]", flag.pattern
    for family, _anchors, pattern in providers._PROVIDERS:
        yield f"provider {family}", pattern.pattern


def test_no_rule_allowlist_or_detector_repeats_without_bound() -> None:
    loose = [f"{where}: {u}" for where, pattern in _patterns() for u in _unbounded(pattern)]
    assert not loose, "\n".join(loose[:20])


def test_the_bound_keeps_what_a_pattern_means() -> None:
    assert gitleaks.bounded(r"a*b+?c{3,}d{2,5}[*+]\*(?P<n>x+)(?i:y*+)", 9) == (
        r"a{0,9}b{1,9}?c{3,9}d{2,5}[*+]\*(?P<n>x{1,9})(?i:y{0,9}+)"
    )
    assert re.fullmatch(gitleaks.bounded(r"[a\]]+-\d{2,}", 100), "a]a-123")


def _best(fn: Callable[[str], object], text: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        fn(text)
        best = min(best, time.thread_time() - t0)
    return best


def _ratio(fn: Callable[[str], object], small: str, big: str) -> float:
    fn(small)  # warm: patterns compile on first use
    return _best(fn, big) / max(_best(fn, small), 1e-6)


@pytest.mark.parametrize("name", ["key", "token", "secret", "password", "api", "credentials"])
def test_a_64kb_value_after_a_key_name_is_linear(name: str) -> None:
    """The issue's case: a long hex tool result after a key name (`"key": "0123…`)."""
    make = FAMILIES['kw:"hex']
    assert _ratio(redact, make(name, 8192), make(name, 65536)) < MAX_RATIO


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_rule_meets_its_words_in_every_shape_in_linear_time(family: str) -> None:
    """Each family cycles through every rule keyword and detector word, 32 KB against 4 KB."""
    words = every_keyword()
    small = family_texts(words, 4096)[family]
    big = small * 8
    assert _ratio(redact, small, big) < MAX_RATIO


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_keyword_alone_in_every_shape_is_linear(family: str) -> None:
    """Every keyword's own 64 KB run (what bench/bench_redos.py times), against 8 KB."""
    make = FAMILIES[family]
    slow = []
    for word in every_keyword():
        small, big = make(word, 8192), make(word, 65536)
        if _best(redact, small, 1) < 0.002:
            continue  # too fast to be a run a rule scans
        ratio = _ratio(redact, small, big)
        if ratio >= MAX_RATIO:
            slow.append(f"{word!r}: x{ratio:.0f}")
    assert not slow, slow


@pytest.mark.parametrize("family", ['kw:"hex', "kw=b64!", "kw=lower", "kw= rep", "kw\\n rep"])
def test_the_second_engine_is_linear_too(family: str) -> None:
    """Betterleaks goes quadratic in a long value after a key name; it is shown runs cut short."""
    pytest.importorskip("betterleaks")
    from funes.ingest.engines import betterleaks_findings

    def scan(text: str) -> object:
        return betterleaks_findings([text])

    make = FAMILIES[family]
    assert _ratio(scan, make("password", 8192), make("password", 65536)) < MAX_RATIO
