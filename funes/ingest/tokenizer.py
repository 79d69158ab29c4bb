"""The embedding model's own tokenizer (BERT uncased WordPiece), in pure Python.

Chunking must measure text in the embedding model's tokens (docs/design.md §5): a window
that fits in characters can still overflow all-MiniLM-L6-v2's 256-token context, and
llama.cpp aborts the process rather than truncating. Pulling in the Rust `tokenizers` package
for that would make ingest heavy, so this module reimplements exactly what the model's
`tokenizer.json` does:

1. **Normalise** each character (BertNormalizer): drop NUL, U+FFFD and control/format/private-use
   characters, map whitespace to a space, put spaces around CJK ideographs, decompose (NFD) and
   drop non-spacing marks (accent stripping), lowercase.
2. **Pre-tokenise** (BertPreTokenizer): split on whitespace, and make every punctuation
   character a word of its own.
3. **WordPiece** each word: greedy longest-match-first against the vocabulary, continuation
   pieces prefixed ``##``; a word longer than 100 characters, or one that cannot be covered by
   pieces, becomes a single ``[UNK]``.

Step 1 is a per-character function, so it is stored as tables (``data/bert-unicode.json.gz``)
*derived from the reference implementation* by probing every code point, rather than computed
with :mod:`unicodedata`. That matters twice: the Rust crates behind `tokenizers` use other
Unicode versions than any given Python (so `unicodedata` disagrees on a few thousand code
points), and chunk ids must not change with the Python version on the indexing machine.

Two deliberate differences from calling `tokenizers` with its defaults, both documented in
docs/chunking.md: text that looks like a special token (``"[SEP]"``) is ordinary text here (the
reference with ``encode_special_tokens = True``), because transcripts are data and must not be
able to inject control tokens; and lone surrogates (which the reference cannot even accept) are
dropped like other invalid characters. The reference also reorders adjacent combining marks
canonically (part of NFD); this implementation does not, which only matters for marks that
survive accent stripping *and* arrive in non-canonical order, something NFC or NFD text never
contains.

Speed: ingest's budget is well under 0.3 ms per chunk for tokenising, chunking and redaction
together. Splitting into words is one compiled regular expression; WordPiece runs once per
distinct word thanks to a bounded cache, so steady-state cost is a dictionary lookup per word.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import sub
from pathlib import Path
from typing import Final

from funes.errors import FunesError

__all__ = [
    "DATA_DIR",
    "MAX_INPUT_CHARS_PER_WORD",
    "TokenizerDataError",
    "UnicodeTables",
    "WordPieceTokenizer",
    "WordSpans",
    "count",
    "encode",
    "get_tokenizer",
]

#: Where the bundled vocabulary and Unicode tables live.
DATA_DIR: Final = Path(__file__).resolve().parent / "data"
VOCAB_FILE: Final = "minilm-vocab.txt.gz"
UNICODE_FILE: Final = "bert-unicode.json.gz"

#: HF WordPiece's `max_input_chars_per_word`: longer words become one `[UNK]`.
MAX_INPUT_CHARS_PER_WORD: Final = 100
CONTINUATION_PREFIX: Final = "##"

#: Distinct words remembered before the cache is dropped and refilled. A transcript corpus has a
#: long tail of identifiers, paths and hashes; 200k entries is a few tens of MB at most.
DEFAULT_CACHE_SIZE: Final = 200_000

#: Longer "words" (hashes, blobs) are not cached: they rarely repeat and would pin memory.
_CACHE_MAX_WORD: Final = 4 * MAX_INPUT_CHARS_PER_WORD

_SURROGATES: Final = (0xD800, 0xDFFF)


class TokenizerDataError(FunesError):
    """The bundled tokenizer data is missing or malformed (a broken installation)."""

    def __init__(self, detail: str) -> None:
        super().__init__(
            f"tokenizer data is unusable: {detail}",
            hint="reinstall funes; funes/ingest/data/ must ship with the package",
        )


@dataclass(frozen=True)
class UnicodeTables:
    """What BERT normalisation and pre-tokenisation do to each code point.

    Attributes:
        removed: Inclusive code point ranges that normalise to nothing.
        space: Ranges that normalise to a space (word separators).
        isolate: Ranges that always form a word of their own: characters that normalise to
            punctuation, and CJK ideographs.
        mapping: Code point -> normalised text, for characters that change and are neither
            removed nor spaces (lowercasing, accent stripping, NFD); Hangul syllables are
            added by the loader.
    """

    removed: tuple[tuple[int, int], ...]
    space: tuple[tuple[int, int], ...]
    isolate: tuple[tuple[int, int], ...]
    mapping: dict[int, str]

    @classmethod
    def from_json(cls, data: dict[str, object]) -> UnicodeTables:
        """Build tables from the bundled JSON (see tests/ingest/test_tokenizer.py)."""
        try:
            if data.get("format") != 1:
                raise ValueError(f"unknown format {data.get('format')!r}")

            def ranges(key: str) -> tuple[tuple[int, int], ...]:
                raw = data[key]
                assert isinstance(raw, list)
                return tuple((int(lo), int(hi)) for lo, hi in raw)

            raw_map = data["map"]
            assert isinstance(raw_map, dict)
            mapping = {int(k): str(v) for k, v in raw_map.items()}
            hangul = data["hangul"]
            assert isinstance(hangul, list)
            for cp in range(int(hangul[0]), int(hangul[1]) + 1):
                mapping[cp] = _hangul_nfd(cp, int(hangul[0]))
            removed = (*ranges("removed"), _SURROGATES)
            return cls(removed, ranges("space"), ranges("isolate"), mapping)
        except (KeyError, TypeError, ValueError, AssertionError) as exc:
            raise TokenizerDataError(f"{UNICODE_FILE}: {exc}") from exc


def _hangul_nfd(cp: int, base: int) -> str:
    """Canonical decomposition of a Hangul syllable (Unicode §3.12), as the reference does."""
    s = cp - base
    out = chr(0x1100 + s // 588) + chr(0x1161 + (s % 588) // 28)
    return out + chr(0x11A7 + s % 28) if s % 28 else out


def _char_class(ranges: Iterable[tuple[int, int]]) -> str:
    """A regex character-class body for code point ranges."""
    parts = []
    for lo, hi in ranges:
        low = re.escape(chr(lo))
        parts.append(low if lo == hi else f"{low}-{re.escape(chr(hi))}")
    return "".join(parts)


def _clip(ranges: Iterable[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """The parts of `ranges` at or below code point `limit`."""
    return [(lo, min(hi, limit)) for lo, hi in ranges if lo <= limit]


_ASTRAL: Final = re.compile("[\U00010000-\U0010FFFF]")


@dataclass(frozen=True)
class WordSpans:
    """The words of a text with their positions and token counts (parallel lists).

    `text[starts[i]:ends[i]] == words[i]`; `counts[i]` is how many WordPiece tokens word *i*
    becomes (0 for a word made only of removed characters). Whatever lies between two words
    is whitespace.
    """

    words: list[str]
    starts: list[int]
    ends: list[int]
    counts: list[int]


class WordPieceTokenizer:
    """BERT uncased WordPiece, identical in ids to the model's `tokenizer.json`.

    Thread-safe: the word cache is only ever replaced or grown under the GIL, and a lost cache
    entry only costs recomputation.
    """

    def __init__(
        self,
        vocab: Sequence[str],
        tables: UnicodeTables,
        *,
        unk_token: str = "[UNK]",
        cls_token: str = "[CLS]",
        sep_token: str = "[SEP]",
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        """Build a tokenizer.

        Args:
            vocab: Tokens in id order (vocab.txt lines).
            tables: Per-code-point normalisation (see :class:`UnicodeTables`).
            unk_token: Token for words WordPiece cannot cover.
            cls_token: Token that opens a sequence.
            sep_token: Token that closes a sequence.
            cache_size: Distinct words kept in the WordPiece cache.
        """
        self.vocab: dict[str, int] = {}
        for index, token in enumerate(vocab):
            self.vocab.setdefault(token, index)
        self.id_to_token: list[str] = list(vocab)
        try:
            self.unk_id = self.vocab[unk_token]
            self.cls_id = self.vocab[cls_token]
            self.sep_id = self.vocab[sep_token]
        except KeyError as exc:
            raise TokenizerDataError(f"special token {exc} missing from the vocabulary") from exc
        self._unk: tuple[int, ...] = (self.unk_id,)
        # Word-start pieces and continuation pieces (without "##") in separate maps, so the
        # greedy loop never builds prefixed strings.
        self._start = dict(self.vocab)
        self._cont = {
            t[len(CONTINUATION_PREFIX):]: i
            for t, i in self.vocab.items()
            if t.startswith(CONTINUATION_PREFIX) and len(t) > len(CONTINUATION_PREFIX)
        }
        self._max_start = max(map(len, self._start))
        self._max_cont = max(map(len, self._cont), default=0)
        self._mapping = tables.mapping
        self._removed_res = tuple(
            re.compile(f"[{_char_class(_clip(tables.removed, limit))}]+")
            for limit in (0x7F, 0xFFFF, 0x10FFFF)
        )
        separators = tuple(sorted(tables.space + tables.isolate))
        # Words are runs of ordinary characters, or one isolated character; whitespace between
        # them is skipped. Removed characters stay inside runs ("a\u200bb" is one word, as in
        # the reference, where they vanish before pre-tokenisation). Compiled for ASCII, BMP
        # and all text: the narrowest one that covers a text is used (see _width).
        self._word_res = tuple(
            re.compile(
                f"[^{_char_class(_clip(separators, limit))}]+"
                f"|[{_char_class(_clip(tables.isolate, limit))}]"
            )
            for limit in (0x7F, 0xFFFF, 0x10FFFF)
        )
        # The same, capturing: `re.split` then yields [gap, word, gap, word, ..., gap], which
        # gives every word's offset without a Match object per word (a third faster).
        self._split_res = tuple(re.compile(f"({p.pattern})") for p in self._word_res)
        self._sep_re = re.compile(f"[{_char_class(separators)}]")
        #: The characters that separate words as whitespace (tab, newline, space, NBSP...).
        self.space_chars: str = "".join(
            chr(cp) for lo, hi in tables.space for cp in range(lo, hi + 1)
        )
        self._cache: dict[str, tuple[int, ...]] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    # -- public API ------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of entries in the vocabulary."""
        return len(self.id_to_token)

    def count(self, text: str, *, add_special_tokens: bool = True) -> int:
        """How many tokens the model sees for `text`.

        Args:
            text: Any string.
            add_special_tokens: Count the [CLS] and [SEP] the model adds (as `encode` does).
        """
        words = self.word_regex(text).findall(text)
        cache = self._cache
        try:
            n = sum(map(len, map(cache.__getitem__, words)))
        except KeyError:
            n = sum(map(len, map(self._word_ids, words)))
        return n + 2 if add_special_tokens else n

    def encode(
        self, text: str, *, add_special_tokens: bool = True, max_length: int | None = None
    ) -> list[int]:
        """Token ids for `text`, as the reference's ``encode(text).ids``.

        Args:
            text: Any string.
            add_special_tokens: Wrap in [CLS] ... [SEP].
            max_length: Truncate to this many ids in total, keeping [SEP] last (the embedding
                model aborts on over-long input instead of truncating).
        """
        ids: list[int] = []
        for word in self.word_regex(text).findall(text):
            ids.extend(self._word_ids(word))
        if add_special_tokens:
            if max_length is not None:
                if max_length < 2:
                    raise ValueError("max_length must leave room for [CLS] and [SEP]")
                del ids[max_length - 2 :]
            return [self.cls_id, *ids, self.sep_id]
        if max_length is not None:
            del ids[max_length:]
        return ids

    def tokenize(self, text: str) -> list[str]:
        """The WordPiece tokens of `text` as strings (for debugging and docs)."""
        return [self.id_to_token[i] for i in self.encode(text, add_special_tokens=False)]

    def word_spans(self, text: str) -> WordSpans:
        """Split `text` into words with their offsets and token counts (used by chunking)."""
        parts = self._split_res[self._width(text)].split(text)
        words = parts[1::2]
        ends = list(accumulate(map(len, parts)))[1::2]
        starts = list(map(sub, ends, map(len, words)))
        cache = self._cache
        try:
            counts = list(map(len, map(cache.__getitem__, words)))
        except KeyError:
            counts = list(map(len, map(self._word_ids, words)))
        return WordSpans(words, starts, ends, counts)

    def word_regex(self, text: str) -> re.Pattern[str]:
        """The word-splitting pattern to use for `text` (the fastest one that is exact)."""
        return self._word_res[self._width(text)]

    @staticmethod
    def _width(text: str) -> int:
        # sre checks a character class with astral ranges by scanning a list of ranges, three
        # times slower than the bitmap it uses when every range is in the BMP.
        if text.isascii():
            return 0
        return 1 if _ASTRAL.search(text) is None else 2

    def is_word_char(self, char: str) -> bool:
        """True if the one character `char` continues a word (not whitespace or isolated)."""
        return self._sep_re.match(char) is None

    def is_space(self, char: str) -> bool:
        """True if the one character `char` separates words and normalises to a space."""
        return len(char) == 1 and char in self.space_chars

    # -- internals -------------------------------------------------------------------------

    def _word_ids(self, word: str) -> tuple[int, ...]:
        ids = self._cache.get(word)
        if ids is None:
            ids = self._wordpiece(self._normalize(word))
            if len(word) > _CACHE_MAX_WORD:
                return ids  # a blob, not a word: not worth remembering
            cache = self._cache
            if len(cache) >= self._cache_size:
                with self._lock:
                    # Replace rather than clear, so a concurrent reader never sees a half-empty
                    # dict mid-iteration; results are identical either way.
                    self._cache = cache = {}
            cache[word] = ids
        return ids

    def _normalize(self, word: str) -> str:
        removed = self._removed_res[self._width(word)]
        if removed.search(word) is not None:
            word = removed.sub("", word)
        if len(word) > MAX_INPUT_CHARS_PER_WORD:
            # Mapping never shortens a character, so this is [UNK] already: skip the
            # translation of what may be a megabyte-long blob.
            return word
        return word.translate(self._mapping)

    def _wordpiece(self, word: str) -> tuple[int, ...]:
        n = len(word)
        if n == 0:
            return ()
        if n > MAX_INPUT_CHARS_PER_WORD:
            return self._unk
        whole = self._start.get(word)
        if whole is not None:
            return (whole,)
        out: list[int] = []
        start = 0
        table = self._start
        limit = self._max_start
        while start < n:
            end = min(n, start + limit)
            while end > start:
                piece = table.get(word[start:end])
                if piece is not None:
                    out.append(piece)
                    break
                end -= 1
            else:
                return self._unk
            start = end
            table = self._cont
            limit = self._max_cont
        return tuple(out)


def load_vocab(path: Path | None = None) -> list[str]:
    """Read the bundled vocabulary (one token per line, id = line number)."""
    path = path or DATA_DIR / VOCAB_FILE
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
            return f.read().split("\n")[:-1]
    except OSError as exc:
        raise TokenizerDataError(f"{path}: {exc}") from exc


def load_tables(path: Path | None = None) -> UnicodeTables:
    """Read the bundled Unicode tables."""
    path = path or DATA_DIR / UNICODE_FILE
    try:
        with gzip.open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError) as exc:
        raise TokenizerDataError(f"{path}: {exc}") from exc
    return UnicodeTables.from_json(data)


_DEFAULT: WordPieceTokenizer | None = None
_DEFAULT_LOCK = threading.Lock()


def get_tokenizer() -> WordPieceTokenizer:
    """The process-wide tokenizer for the bundled all-MiniLM-L6-v2 vocabulary (loaded once)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = WordPieceTokenizer(load_vocab(), load_tables())
    return _DEFAULT


def count(text: str, *, add_special_tokens: bool = True) -> int:
    """Tokens the embedding model sees for `text` ([CLS] and [SEP] included by default)."""
    return get_tokenizer().count(text, add_special_tokens=add_special_tokens)


def encode(
    text: str, *, add_special_tokens: bool = True, max_length: int | None = None
) -> list[int]:
    """Token ids of `text` for the embedding model (see :meth:`WordPieceTokenizer.encode`)."""
    return get_tokenizer().encode(
        text, add_special_tokens=add_special_tokens, max_length=max_length
    )
