"""Advice requests (funes.retrieval.intent) and the fusion weight they get in recall."""

from __future__ import annotations

import pytest

from funes.retrieval import recall as core
from funes.retrieval.intent import asks_advice


@pytest.mark.parametrize("query", [
    "Can you suggest some accessories that would complement my camera?",
    "Could you recommend a hotel for my trip to Lisbon?",
    "My slow cooker dishes come out watery. Any tips?",
    "I'm refactoring the retry loop, any suggestions on how to structure it?",
    "What should I cook for the team dinner on Friday?",
    "Do you think I should move the cache to Redis?",
    "Any good documentary recommendations for tonight?",
    "what do you recommend for pinning the CI images",
])
def test_requests_for_advice(query: str) -> None:
    assert asks_advice(query)


@pytest.mark.parametrize("query", [
    "Which hotel did you recommend for Lisbon?",
    "Can you remind me what you suggested for the retry loop?",
    "What was the name of the restaurant you recommended last time?",
    "How long is my commute to work?",
    "why does the login test fail on CI",
    "lance fts index tokenizer",
    "I wanted to follow up on our previous conversation: any tips you gave on sourdough?",
])
def test_lookups_and_plain_questions(query: str) -> None:
    assert not asks_advice(query)


LEXICAL = [{"id": "words", "_score": 9.0}, {"id": "mid", "_score": 5.0},
           {"id": "low", "_score": 1.0}]
SEMANTIC = [("meaning", 0.70), ("words", 0.62), ("mid", 0.50), ("low", 0.45)]


def test_a_lower_bm25_weight_lets_the_vector_lead() -> None:
    even = core.fuse(LEXICAL, SEMANTIC, head=4)
    # an advice request's share (recall.retrieve): the vector's best passage leads
    vector_led = core.fuse(LEXICAL, SEMANTIC, head=4, bm25_weight=core.ADVICE_BM25_WEIGHT)
    assert max(even, key=even.__getitem__) == "words"
    assert max(vector_led, key=vector_led.__getitem__) == "meaning"
    assert core.fuse(LEXICAL, SEMANTIC, head=4, bm25_weight=core.BM25_WEIGHT) == even
