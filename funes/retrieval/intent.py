"""Whether a question asks for advice, and so which signal should lead the fusion.

"Any tips for my slow cooker?", "can you suggest a hotel for my trip?", "what should I serve
this weekend?" name a need, not the words of the passage that answers it. What the memory
holds for such a request is where the user said what they have, like or plan ("I grow basil
and tomatoes on the balcony"), in their own words; the request's words (tips, suggest, trip,
weekend) are the ones every other conversation about the topic also uses, so BM25 finds those
first, while the vector similarity of the topic reaches the user's statement. On LongMemEval's
preference questions (all of them advice requests) the vectors alone found the answer session
in the top 5 more often than the fusion did (bench/results/recall-levers.md).

An advice request is told by its form: asking the listener to suggest, recommend or advise
("can you suggest …", "do you think …"), asking for tips, ideas or suggestions ("any tips?"),
or asking what to do ("what should I …"). A question that asks back for something said
before ("which hotel did you recommend?", "remind me what you suggested") is a lookup, not a
request for advice: its words are the answer's words, and nothing changes for it.
"""

from __future__ import annotations

import re

__all__ = ["asks_advice"]

_ADVICE = re.compile(
    r"""
    \b(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:suggest|recommend|advise|give\s+me\s+(?:some\s+)?(?:tips|ideas|advice))\b
    | \b(?:do|would)\s+you\s+(?:think|recommend|suggest|have\s+any)\b
    | \bwhat\s+do\s+you\s+(?:think|recommend|suggest)\b
    | \bwhat\s+(?:should|could)\s+i\b
    | \b(?:any|some)\s+(?:\w+\s+){0,2}?
      (?:tips|suggestions?|advice|ideas|recommendations?|pointers)\b
    """,
    re.I | re.X,
)
#: Asking back for what was said: a lookup even when it mentions a recommendation.
_LOOKUP = re.compile(
    r"\b(?:remind\s+me|remember|recall|you\s+(?:mentioned|said|told|recommended|suggested|gave)"
    r"|did\s+you|was\s+(?:the|that)|were\s+the|last\s+time|previous\s+(?:conversation|chat))\b",
    re.I,
)


def asks_advice(query: str) -> bool:
    """True for a request for advice or suggestions, False for a lookup of what was said."""
    return _ADVICE.search(query) is not None and _LOOKUP.search(query) is None

