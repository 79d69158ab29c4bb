"""The levers report's statistics: a paired bootstrap that can tell a real gain from noise."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import recall_levers as rl  # noqa: E402


def test_bootstrap_separates_a_real_gain_from_a_tie() -> None:
    base = [0.0, 1.0] * 50
    better = [1.0, 1.0] * 50  # 50 of 100 questions flip to a hit
    d, lo, hi, p = rl.bootstrap(base, better)
    assert d == 0.5 and 0.3 < lo <= d <= hi < 0.7 and p == 0.0
    same = list(base)
    d, lo, hi, p = rl.bootstrap(base, same)
    assert d == 0.0 and lo == hi == 0.0 and p == 1.0
    noisy = [1.0 - x if i % 10 in (0, 1) else x for i, x in enumerate(base)]  # 10 flips each way
    d, lo, hi, p = rl.bootstrap(base, noisy)
    assert lo < 0 < hi and 0.2 < p < 0.8


def test_table_reports_each_type_against_the_baseline() -> None:
    types = {"q1": "a", "q2": "a", "q3": "b"}
    base = rl.Run(rl.BASELINE, {q: {"r1": 0.0, "r5": 1.0, "turn_r10": 1.0} for q in types})
    new = rl.Run("new", {q: {"r1": 1.0, "r5": 1.0, "turn_r10": 1.0} for q in types})
    lines = rl.table("demo", [base, new], types, rl.BASELINE)
    text = "\n".join(lines)
    assert "| variant | all (n=3) | a (n=2) | b (n=1) |" in text
    assert "| new | 1.000 (+1.000" in text


def test_a_hit_counts_for_its_identical_copies_only_in_the_copies_columns() -> None:
    """`r1_copies` finds the gold session among a hit's folded copies; `r1` stays strict."""
    import longmemeval as lme

    gold = lme.Gold(frozenset({"gold"}), frozenset())
    scores = lme.Scores()
    # the first hit's own session is another's; an identical passage sits in the gold one
    scores.add("q", ["other", "x", "gold"], [], gold, copies=[["gold"], [], []])
    row = scores.per_question["q"]
    assert row["r1"] == 0.0 and row["r1_copies"] == 1.0 and row["r5"] == row["r5_copies"] == 1.0
    scores.add("q2", ["other", "x"], [], gold, copies=[[], ["y"]])
    assert scores.per_question["q2"]["r1_copies"] == scores.per_question["q2"]["r5_copies"] == 0.0
    scores.add("q3", ["other"], [], gold)
    assert "r1_copies" not in scores.per_question["q3"]
