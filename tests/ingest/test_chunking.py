"""Chunking: windows fit the model, cut at good places, overlap a little, stitch back exactly."""

from __future__ import annotations

import hashlib
import random
import string
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from funes.errors import UsageError
from funes.ingest.chunking import (
    DEFAULT_MAX_CHARS,
    DEFAULT_OVERLAP_TOKENS,
    HEAD_CHUNKS,
    LINE,
    PARAGRAPH,
    SENTENCE,
    TAIL_CHUNKS,
    TOOL_OUTPUT_BODY,
    ChunkingError,
    _best_cut,
    _level,
    _patterns,
    chunk_turn,
    overlap_start,
    render_block,
    split_text,
    stitch,
    stitch_texts,
)
from funes.ingest.tokenizer import count, get_tokenizer
from funes.model.turns import Block, Source, Turn
from tests.builders import tool_log, trace_strings
from tests.conftest import SHARED_MISSING

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT.parent / "shared" / "fixtures" / "traces"


def make_turn(*blocks: Block, **kw: object) -> Turn:
    fields: dict[str, object] = {
        "harness": "claude",
        "session_id": "sess-1",
        "turn_id": "turn-1",
        "seq": 3,
        "ts": "2026-05-11T11:26:55.123Z",
        "role": "assistant",
        "blocks": blocks,
    }
    fields.update(kw)
    return Turn(**fields)  # type: ignore[arg-type]


def check_windows(text: str, parts: list[str], *, max_tokens: int = 256,
                  overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
                  max_chars: int = DEFAULT_MAX_CHARS) -> None:
    """The contract every split must meet."""
    if not text:
        assert parts == []
        return
    assert parts, "a non-empty text gives at least one window"
    for part in parts:
        assert part, "no empty window"
        assert count(part) <= max_tokens, (count(part), max_tokens)
        assert len(part) <= max_chars
    assert stitch_texts(parts, overlap_tokens=overlap_tokens) == text
    for prev, cur in pairwise(parts):
        shared = prev[overlap_start(prev, overlap_tokens) :]
        assert cur.startswith(shared)
        assert len(cur) > len(shared), "every window adds new text"
        assert count(shared, add_special_tokens=False) <= overlap_tokens


fixture_strings = trace_strings


# -- rendering and provenance ----------------------------------------------------------------


def test_render_block() -> None:
    assert render_block(Block("text", "hello")) == "hello"
    assert render_block(Block("thinking", " hmm\n")) == " hmm\n"
    assert render_block(Block("tool_use", '{"command": "ls"}', tool_name="Bash")) == (
        '[tool_use Bash] {"command": "ls"}'
    )
    assert render_block(Block("tool_result", "a\nb", tool_name="Bash")) == "[tool_result Bash] a\nb"
    assert render_block(Block("tool_result", "ok")) == "[tool_result] ok"


def test_chunk_fields_carry_the_turns_provenance() -> None:
    turn = make_turn(
        Block("text", "   \n\t"),  # whitespace only: no chunk, but it keeps its index
        Block("tool_use", '{"command": "pytest -q"}', tool_name="Bash", tool_call_id="c1"),
        Block("text", ""),
        Block("tool_result", "3 passed", tool_name="Bash", noise="command-output"),
        parent_turn_id="turn-0",
        parent_session_id="parent-sess",
        workdir="/home/dev/app",
        project="github.com/acme/app",
        source=Source("/x/s.jsonl", 120, 980),
    )
    chunks = chunk_turn(turn)
    assert [(c.block_idx, c.split_idx, c.block_type) for c in chunks] == [
        (1, 0, "tool_use"),
        (3, 0, "tool_result"),
    ]
    first, second = chunks
    assert first.text == '[tool_use Bash] {"command": "pytest -q"}'
    assert second.noise == "command-output"
    for c in chunks:
        assert (c.harness, c.session_id, c.turn_id, c.seq, c.ts, c.role) == (
            "claude", "sess-1", "turn-1", 3, "2026-05-11T11:26:55.123Z", "assistant")
        assert (c.parent_turn_id, c.parent_session_id) == ("turn-0", "parent-sess")
        assert (c.workdir, c.project) == ("/home/dev/app", "github.com/acme/app")
        assert c.source == "/x/s.jsonl:120-980"
        assert c.tool_name == "Bash"
    assert chunk_turn(make_turn(Block("text", " \n "))) == []


# -- the window contract on real and synthetic text ------------------------------------------


def test_real_fixture_text() -> None:
    if not FIXTURES.exists():
        pytest.skip(SHARED_MISSING)
    strings = fixture_strings()
    long = 0
    for text in strings:
        parts = split_text(text)
        check_windows(text, parts)
        long += len(parts) > 1
    assert long > 100  # the fixtures exercise real multi-window texts


def test_small_windows_on_fixture_text() -> None:
    if not FIXTURES.exists():
        pytest.skip(SHARED_MISSING)
    strings = [s for s in fixture_strings() if len(s) > 200][:400]
    for text in strings:
        check_windows(text, split_text(text, max_tokens=24, overlap_tokens=6, max_chars=300),
                      max_tokens=24, overlap_tokens=6, max_chars=300)


CODE = '''\
import os
from pathlib import Path


class Store:
    """A tiny key-value store."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def put(self, key: str, value: bytes) -> None:
        tmp = self.root / f".{key}.tmp"
        tmp.write_bytes(value)
        os.replace(tmp, self.root / key)

    def get(self, key: str) -> bytes:
        return (self.root / key).read_bytes()
'''


def test_code_is_cut_at_line_starts_with_indentation() -> None:
    text = "\n\n".join([CODE] * 12)
    parts = split_text(text)
    check_windows(text, parts)
    assert len(parts) > 3
    for prev in parts[:-1]:
        assert prev.endswith("\n"), repr(prev[-40:])  # cut right after a newline...
        start = overlap_start(prev)
        assert start == len(prev) or prev[start - 1] == "\n"  # ...and so is the overlap


def test_paragraphs_are_preferred() -> None:
    rng = random.Random(0)
    words = ["memory", "agent", "session", "turn", "chunk", "recall", "index", "vector"]
    paragraphs = [
        " ".join(rng.choice(words) for _ in range(rng.randint(20, 60))) + "." for _ in range(30)
    ]
    text = "\n\n".join(paragraphs)
    parts = split_text(text, overlap_tokens=0)
    check_windows(text, parts, overlap_tokens=0)
    assert all(p.endswith("\n\n") for p in parts[:-1])


def test_sentences_when_there_are_no_lines() -> None:
    sentence = "The quick brown fox jumps over the lazy dog near the river bank. "
    text = sentence * 80
    parts = split_text(text)
    check_windows(text, parts)
    assert all(p.endswith(". ") for p in parts[:-1])
    # The overlap is whole sentences too.
    for p in parts[:-1]:
        assert p[overlap_start(p) :].startswith("The quick")


def test_cjk_text() -> None:
    text = "我们讨论了流式解析器的问题。最后决定放弃它，因为它太复杂了！" * 60
    parts = split_text(text)
    check_windows(text, parts)
    assert len(parts) > 2
    assert all(p.endswith(("。", "！")) for p in parts[:-1])


def test_mixed_scripts_and_emoji() -> None:
    text = ("Café naïve Ελληνικά ΟΔΟΣ 한국어 텍스트 🥰👍🏽 résumé\tdone.\r\n" * 100) + "end"
    check_windows(text, split_text(text))


def test_long_words_are_split_inside() -> None:
    word = "pneumonoultramicroscopicsilicovolcanoconiosis"
    text = " ".join([word] * 10)
    parts = split_text(text, max_tokens=8, overlap_tokens=2, max_chars=100)
    check_windows(text, parts, max_tokens=8, overlap_tokens=2, max_chars=100)


def test_a_blob_without_separators_is_capped_in_characters() -> None:
    blob = "".join(random.Random(5).choice("0123456789abcdef") for _ in range(50_000))
    text = f"sha dump: {blob} end"
    parts = split_text(text)
    check_windows(text, parts)
    assert max(len(p) for p in parts) == DEFAULT_MAX_CHARS
    assert len(parts) >= 50_000 // DEFAULT_MAX_CHARS


def test_whitespace_runs_are_capped_too() -> None:
    text = "start" + " " * 20_000 + "end" + "\n" * 9_000
    check_windows(text, split_text(text))


def test_200kb_tool_output() -> None:
    output = tool_log()
    lines = output.splitlines()
    assert len(output) > 200_000
    block = Block("tool_result", output, tool_name="Bash", tool_call_id="c9")
    turn = make_turn(Block("tool_use", '{"command": "run"}', tool_name="Bash"), block)
    chunks = chunk_turn(turn)  # its speed target is in bench/bench_tokenize.py
    body = [c for c in chunks if c.block_idx == 1]
    n = len(body)
    assert n > 100
    assert stitch(body) == render_block(block)
    assert [c.split_idx for c in body] == list(range(n))
    for c in body:
        expected = TOOL_OUTPUT_BODY if HEAD_CHUNKS <= c.split_idx < n - TAIL_CHUNKS else None
        assert c.noise == expected
        assert count(c.text) <= 256
    assert body[-1].text.endswith("FAILED: 1 error\n")
    # A block that already carries a noise tag keeps it on every chunk.
    tagged = chunk_turn(make_turn(Block("tool_result", output, noise="command-output")))
    assert {c.noise for c in tagged} == {"command-output"}
    # Short tool output is not tagged at all.
    short = chunk_turn(make_turn(Block("tool_result", "\n".join(lines[:10]))))
    assert 1 < len(short) <= HEAD_CHUNKS + TAIL_CHUNKS
    assert {c.noise for c in short} == {None}


# -- determinism -----------------------------------------------------------------------------

GOLDEN_TEXTS = [
    CODE * 3,
    "The quick brown fox jumps over the lazy dog. " * 40,
    "我们讨论了流式解析器的问题。" * 50,
    "x" * 5000,
    "\n\n".join(f"Paragraph {i}: " + "words and more words, " * 15 for i in range(10)),
]
#: Chunk ids of GOLDEN_TEXTS. They are part of the on-disk format: if this changes, chunking
#: changed, every stored id changes with it, and docs/chunking.md and the format version must
#: move too.
GOLDEN_DIGEST = "2f9658485963d8da21c4b29318f9f7d044c848bd3a2620aad1b2e48f8bc63451"


def golden_digest() -> str:
    ids = []
    for i, text in enumerate(GOLDEN_TEXTS):
        turn = make_turn(Block("text", text), Block("tool_result", text, tool_name="Bash"),
                         turn_id=f"golden-{i}")
        ids.extend(c.id for c in chunk_turn(turn))
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def test_same_turn_same_chunks_same_ids() -> None:
    assert golden_digest() == golden_digest()
    assert golden_digest() == GOLDEN_DIGEST


def test_ids_do_not_depend_on_the_process() -> None:
    code = (
        "import sys; sys.path.insert(0, 'tests/ingest'); "
        "from test_chunking import golden_digest; print(golden_digest())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == golden_digest()


# -- stitching and overlap -------------------------------------------------------------------


NUMBERED = "".join(f"Sentence {i} says the quick brown fox jumps over it. " for i in range(200))


def test_stitch_rejects_what_does_not_fit_together() -> None:
    text = NUMBERED
    turn = make_turn(Block("text", text))
    chunks = chunk_turn(turn)
    assert len(chunks) >= 3
    assert stitch(list(reversed(chunks))) == text  # order is taken from split_idx
    with pytest.raises(ChunkingError):
        stitch(chunks[:1] + chunks[2:])
    other = chunk_turn(make_turn(Block("text", text), Block("text", text)))
    with pytest.raises(ChunkingError):
        stitch([other[0], *[c for c in other if c.block_idx == 1]])
    with pytest.raises(ChunkingError):
        stitch_texts([chunks[0].text, chunks[2].text])
    assert stitch([]) == ""


def test_overlap_size() -> None:
    text = NUMBERED
    parts = split_text(text)
    for part in parts[:-1]:
        shared = part[overlap_start(part) :]
        n = count(shared, add_special_tokens=False)
        assert 0 < n <= DEFAULT_OVERLAP_TOKENS
    assert all(overlap_start(p, 0) == len(p) for p in parts)
    assert split_text(text, overlap_tokens=0) == split_text(text, overlap_tokens=0)
    assert len(split_text(text, overlap_tokens=0)) < len(parts)


def test_parameters_are_validated() -> None:
    with pytest.raises(UsageError):
        split_text("x", max_tokens=4)
    with pytest.raises(UsageError):
        split_text("x", max_tokens=64, overlap_tokens=40)
    with pytest.raises(UsageError):
        split_text("x", overlap_tokens=-1)
    with pytest.raises(UsageError):
        split_text("x", overlap_tokens=32, max_chars=100)


TEXT_ALPHABET = st.characters(codec="utf-8")
CODEY = st.sampled_from([*string.printable, "é", "中", "。", "🥰", "\u200b", "\u00a0"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(st.text(TEXT_ALPHABET, max_size=600), st.text(CODEY, max_size=1500)),
    st.sampled_from([(8, 3, 49), (12, 0, 64), (16, 4, 200), (32, 15, 500), (256, 32, 4096)]),
)
def test_stitch_round_trip(text: str, params: tuple[int, int, int]) -> None:
    max_tokens, overlap, max_chars = params
    parts = split_text(text, max_tokens=max_tokens, overlap_tokens=overlap, max_chars=max_chars)
    check_windows(text, parts, max_tokens=max_tokens, overlap_tokens=overlap, max_chars=max_chars)


@settings(max_examples=200, deadline=None)
@given(st.text(CODEY, min_size=2, max_size=400), st.data())
def test_best_cut_is_the_last_strongest_boundary(text: str, data: st.DataObject) -> None:
    tok = get_tokenizer()
    spans = tok.word_spans(text)
    n = len(spans.starts)
    if n < 3:
        return
    lo = data.draw(st.integers(1, n - 1))
    hi = data.draw(st.integers(lo, n - 1))
    pos = data.draw(st.integers(0, spans.starts[lo - 1]))
    levels = [_level(text, spans, j, pos) for j in range(lo, hi + 1)]
    best = max(levels)
    expected = lo + len(levels) - 1 - levels[::-1].index(best)
    assert _best_cut(text, spans, pos, lo, hi, _patterns(tok)) == expected
    assert PARAGRAPH > LINE > SENTENCE


@pytest.mark.parametrize(
    "text",
    [
        "a" * 200_000,
        "🥰" * 100_000,
        "-----BEGIN PRIVATE KEY-----\n" + "A" * 200_000,
        "\u200b" * 100_000 + "word",
        ". " * 100_000,
        "\n" * 100_000 + "x",
        "中" * 100_000,
    ],
)
def test_pathological_inputs_stay_fast(text: str) -> None:
    start = time.process_time()
    parts = split_text(text)
    assert time.process_time() - start < 3.0
    assert "".join(parts) == text or stitch_texts(parts) == text


def _overlap_start_of_all(text: str, overlap_tokens: int = DEFAULT_OVERLAP_TOKENS) -> int:
    """overlap_start computed from every word of `text` (what it did before `_tail_start`)."""
    from itertools import accumulate

    from funes.ingest.chunking import _boundary, _overlap_word

    tok = get_tokenizer()
    if overlap_tokens <= 0 or not text or tok.is_word_char(text[-1]):
        return len(text)
    spans = tok.word_spans(text)
    cum = [0, *accumulate(spans.counts)]
    j = _overlap_word(text, spans, cum, 0, len(text), 1, len(spans.starts), overlap_tokens)
    return len(text) if j is None else _boundary(text, spans, j)


_PIECES = ["word", "Sentence.", "end!", "(aside)", "\n", "\n\n", "  ", "\t", "\u00a0", "é",
           "漢字。", "x" * 300, "--", "foo_bar()", "\u200b", " ", " ", " ", "a", "..."]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=400),
       st.sampled_from([1, 8, 64]))
def test_the_overlap_depends_on_the_tail_only(parts: list[str], overlap: int) -> None:
    text = "".join(parts) + " "
    assert overlap_start(text, overlap) == _overlap_start_of_all(text, overlap)


def test_the_overlap_of_real_windows_is_found_from_their_tail() -> None:
    for text in fixture_strings()[:200]:
        for window in split_text(text, max_tokens=80):
            assert overlap_start(window) == _overlap_start_of_all(window)
