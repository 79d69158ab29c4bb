"""The supersession and CJK benches' own logic, on their checked-in data (no embedding)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_cjk  # noqa: E402
import bench_supersede as bs  # noqa: E402


def test_the_generated_sde_data_holds_six_amended_decisions_among_decoys() -> None:
    data = bs.load_sde()
    assert data["source"]["commit"] == "afcce15c1f608242e28e48832c301f39c5aed708"
    assert len(data["tasks"]) == 6 and len(data["decoys"]) == 140
    for task in data["tasks"]:
        decision, amendment = task["chats"]
        assert decision and amendment and task["bug_report"]
        assert any("amend" in t["text"].lower() for t in amendment)


def test_chat_lines_put_every_chat_in_the_project_a_minute_per_turn() -> None:
    lines = bs.chat_lines("s", bs.START, [{"role": "user", "text": "a"},
                                          {"role": "assistant", "text": "b"}])
    assert [line.count(bs.WORKDIR) for line in lines] == [1, 1]
    assert '"timestamp": "2026-01-05T09:01:00Z"' in lines[1]


def test_newer_first_needs_the_latest_evidence_above_every_earlier_one() -> None:
    entry = {"haystack_dates": ["2023/01/01 (Sun) 10:00", "2023/03/01 (Wed) 10:00",
                                "2023/02/01 (Wed) 10:00"],
             "haystack_session_ids": ["old", "new", "other"],
             "answer_session_ids": ["old", "new"]}
    assert bs.newer_first(entry, ["new", "other", "old"]) == 1.0
    assert bs.newer_first(entry, ["other", "old", "new"]) == 0.0
    assert bs.newer_first(entry, ["old"]) == 0.0  # the newer one must be found
    assert bs.TaskResult("t", rank_a=3, rank_b=1, a_hits=1, a_marked=1).newer_first
    assert not bs.TaskResult("t", rank_a=1, rank_b=None, a_hits=1, a_marked=0).newer_first


def test_the_cjk_data_has_twenty_questions_or_more_per_script_pair() -> None:
    data = bench_cjk.load()
    ids = {s["id"] for s in data["sessions"]}
    cjk = [q for q in data["questions"] if q["lang"] in ("zh", "ja")]
    assert len(cjk) >= 20 and all(q["gold"] in ids for q in data["questions"])
    assert len(bench_cjk.import_lines(data)) == sum(len(s["turns"]) for s in data["sessions"])
