"""Whose words a question is about, and how much the other speaker's prose counts.

"What did I decide about the cache?" is answered by what the user said; "what did you suggest
for the cache?" by what the assistant said. A long assistant reply repeats a topic's words
often and tends to outrank the user's one sentence that holds the fact, so recall discounts
the other speaker's prose a little (OTHER_SPEAKER_FACTOR, never excluded). On the pooled
LongMemEval oracle (470 questions, full pipeline) this moved turn R@10 from 0.716 to 0.742 and
session R@1 from 0.609 to 0.617 (bench/results/recall-levers.md).

A question with both persons ("can you recommend something for my trip?") or neither ("how
did we fix the flaky test?", "what did Caroline research?") names nobody, and nothing changes.
Tool calls and tool output are not prose: they keep their own weights in recall.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["OTHER_SPEAKER_FACTOR", "speaker_factor", "speaker_of"]

#: The prose of the speaker the question is not about counts this much.
OTHER_SPEAKER_FACTOR = 0.85

#: "I'm", "I've" too: the apostrophe ends the word "I".
_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b", re.I)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself)\b", re.I)
#: Blocks that are someone's own words.
_PROSE = ("text", "thinking")
_SPEAKERS = ("user", "assistant")


def speaker_of(query: str) -> str | None:
    """"user" (I, my), "assistant" (you, your), or None when the question names both or neither."""
    first = _FIRST_PERSON.search(query) is not None
    second = _SECOND_PERSON.search(query) is not None
    if first == second:
        return None
    return "user" if first else "assistant"


def speaker_factor(row: dict[str, Any], about: str) -> float:
    """OTHER_SPEAKER_FACTOR for the other speaker's prose, else 1."""
    role = row.get("role")
    if row.get("block_type") in _PROSE and role in _SPEAKERS and role != about:
        return OTHER_SPEAKER_FACTOR
    return 1.0
