"""A Hugging Face model directory's tokenizer, in the form llama.cpp reads from a GGUF.

Two kinds are converted, each into the tokenizer llama.cpp runs for it:

* **WordPiece** (BERT, e.g. all-MiniLM-L6-v2, bge-small): llama.cpp's WPM tokenizer. Pieces
  that start a word get the U+2581 prefix, `##` continuation pieces lose their `##`, and the
  special tokens keep their text and are typed CONTROL. Two pieces that would collide in
  that form are refused.
* **Unigram** (SentencePiece, the XLM-R tokenizer of multilingual-e5): llama.cpp's UGM
  tokenizer, GGUF model `t5`. Pieces already carry U+2581 and are written as they are, with
  their log-probability scores; the normaliser is SentencePiece's precompiled character map
  (NFKC and friends), which llama.cpp applies itself, so it is copied byte for byte; the
  `Replace(" {2,}", " ")` Hugging Face adds to imitate SentencePiece's whitespace rule
  becomes `remove_extra_whitespaces`. Types follow llama.cpp's own converter: `<unk>`
  UNKNOWN, special added tokens CONTROL, other added tokens USER_DEFINED, the rest NORMAL.
  llama.cpp's UGM never produces a CONTROL or UNKNOWN piece from text (they are not in its
  match trie), so a transcript quoting `<s>` cannot forge structure.

A Unigram vocabulary may be shorter than the embedding matrix (XLM-R has 250,002 pieces,
multilingual-e5's matrix 250,037 rows): the extra rows get placeholder tokens that no text can
produce (llama.cpp's own converter pads with `[PAD<n>]` typed UNUSED, which its UGM match trie
includes; funes types them CONTROL and puts a space in their text, see `_unigram`).

What is refused rather than converted approximately: a normaliser or pre-tokenizer llama.cpp
cannot reproduce (lowercasing or NFKC as separate steps, a Metaspace that never prepends),
a byte-fallback Unigram (llama.cpp's UGM has none), and a post-processor that does not frame
a text as `<s> … </s>`.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from funes.inference.errors import ConversionError

if TYPE_CHECKING:
    import gguf

__all__ = ["MAX_WORD_CHARS_KEY", "PASSAGE_PREFIX_KEY", "QUERY_PREFIX_KEY", "Vocab", "load_vocab",
           "read_json", "write_vocab"]

#: GGUF key holding WordPiece's per-word character cap (longer words become one [UNK]).
MAX_WORD_CHARS_KEY = "funes.wordpiece_max_word_chars"
#: GGUF keys holding the text a model wants before a query and before a passage (e5:
#: "query: " / "passage: "). Absent for models that embed text as it is.
QUERY_PREFIX_KEY = "funes.query_prefix"
PASSAGE_PREFIX_KEY = "funes.passage_prefix"

_WORD_START = "\u2581"
_SPECIAL_NAMES = ("pad", "unk", "cls", "sep", "mask")
_DEFAULT_SPECIAL = {
    "pad": "[PAD]",
    "unk": "[UNK]",
    "cls": "[CLS]",
    "sep": "[SEP]",
    "mask": "[MASK]",
}
# llama.cpp's token types (gguf.TokenType), spelled out so loading a vocabulary needs no gguf.
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4
#: Hugging Face's imitation of SentencePiece's whitespace rule in XLM-R's tokenizer.json.
_COLLAPSE_SPACES = {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}


@dataclass(frozen=True)
class Vocab:
    """A tokenizer as written into a GGUF: token texts in llama.cpp's form, types, specials."""

    kind: Literal["wordpiece", "unigram"]
    texts: list[str]
    types: list[int]
    #: Token ids of pad/unk/cls/sep/mask (a Unigram vocabulary: <pad>, <unk>, <s>, </s>, <mask>).
    special: dict[str, int]
    #: Pieces the tokenizer itself has (a Unigram vocabulary may be padded past them).
    size: int
    #: Unigram log-probabilities, one per text (None for WordPiece).
    scores: list[float] | None = None
    lowercase: bool = False
    strip_accents: bool = False
    #: WordPiece maps a longer word to [UNK] whole; llama.cpp does not, so funes does it.
    max_word_chars: int = 100
    #: SentencePiece's precompiled normaliser (Unigram only).
    charsmap: bytes = field(default=b"", repr=False)
    add_space_prefix: bool = True
    remove_extra_whitespaces: bool = True


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from a model file, or a ConversionError naming the file."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConversionError(str(path), f"unreadable JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ConversionError(str(path), "expected a JSON object")
    return value


def load_vocab(model_dir: Path, rows: int) -> Vocab:
    """The tokenizer of `model_dir` (tokenizer.json, else vocab.txt) for a `rows`-row matrix.

    Raises:
        ConversionError: no tokenizer, an unsupported one, or one that does not fit the
            embedding matrix.
    """
    tok_json = model_dir / "tokenizer.json"
    if not tok_json.is_file():
        if (model_dir / "vocab.txt").is_file():
            return _wordpiece(model_dir, None)
        raise ConversionError(str(model_dir), "no tokenizer.json or vocab.txt")
    data = read_json(tok_json)
    try:
        model = data.get("model") or {}
        if model.get("type") == "Unigram":
            return _unigram(str(model_dir), data, rows)
        return _wordpiece(model_dir, data)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        # a field of the wrong shape somewhere in a file from a stranger
        raise ConversionError(str(tok_json), f"malformed tokenizer.json ({exc!r:.200})") from exc


# -- WordPiece --------------------------------------------------------------------------------


def _special_names(model_dir: Path) -> dict[str, str]:
    names = dict(_DEFAULT_SPECIAL)
    for fname in ("special_tokens_map.json", "tokenizer_config.json"):
        path = model_dir / fname
        if not path.is_file():
            continue
        data = read_json(path)
        for key in _SPECIAL_NAMES:
            value = data.get(f"{key}_token")
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str) and value:
                names[key] = value
    return names


def _wordpiece(model_dir: Path, data: dict[str, Any] | None) -> Vocab:
    """Read the WordPiece vocabulary and normaliser options, preferring tokenizer.json."""
    source = str(model_dir)
    names = _special_names(model_dir)
    control_texts: set[str] = set(names.values())
    lowercase: bool | None = None
    strip_accents: bool | None = None
    max_word_chars = 100
    tokens: list[str]
    if data is not None:
        model = data.get("model") or {}
        if model.get("type") != "WordPiece":
            raise ConversionError(
                source, f"tokenizer model is {model.get('type')}, not WordPiece or Unigram")
        if model.get("continuing_subword_prefix", "##") != "##":
            raise ConversionError(source, "WordPiece continuation prefix is not '##'")
        vocab_map = model.get("vocab")
        if not isinstance(vocab_map, dict) or not vocab_map:
            raise ConversionError(source, "tokenizer.json has no vocabulary")
        by_id = sorted((int(i), str(t)) for t, i in vocab_map.items())
        if [i for i, _ in by_id] != list(range(len(by_id))):
            raise ConversionError(source, "vocabulary ids are not contiguous")
        tokens = [t for _, t in by_id]
        max_word_chars = int(model.get("max_input_chars_per_word") or 100)
        for added in data.get("added_tokens") or []:
            if added.get("special"):
                control_texts.add(str(added.get("content")))
        norm = data.get("normalizer") or {}
        if norm.get("type") == "BertNormalizer":
            lowercase = bool(norm.get("lowercase", True))
            sa = norm.get("strip_accents")
            strip_accents = lowercase if sa is None else bool(sa)
        elif norm:
            raise ConversionError(source, f"unsupported normalizer {norm.get('type')}")
    else:
        lines = (model_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        tokens = [line.rstrip("\r") for line in lines]
    if lowercase is None:
        cfg_path = model_dir / "tokenizer_config.json"
        cfg = read_json(cfg_path) if cfg_path.is_file() else {}
        lowercase = bool(cfg.get("do_lower_case", True))
        sa = cfg.get("strip_accents")
        strip_accents = lowercase if sa is None else bool(sa)
    index = {t: i for i, t in enumerate(tokens)}
    special: dict[str, int] = {}
    for key in _SPECIAL_NAMES:
        if names[key] not in index:
            raise ConversionError(source, f"special token {names[key]} is not in the vocabulary")
        special[key] = index[names[key]]
    control = frozenset(index[t] for t in control_texts if t in index)
    texts: list[str] = []
    types: list[int] = []
    for i, tok in enumerate(tokens):
        if i in control:
            texts.append(tok)
            types.append(_CONTROL)
        elif tok.startswith("##"):
            texts.append(tok[2:])
            types.append(_NORMAL)
        else:
            texts.append(_WORD_START + tok)
            types.append(_NORMAL)
    _check_unique(source, texts)
    return Vocab("wordpiece", texts, types, special, len(texts), lowercase=lowercase,
                 strip_accents=bool(strip_accents), max_word_chars=max_word_chars)


def _check_unique(source: str, texts: list[str]) -> None:
    seen: dict[str, int] = {}
    for i, text in enumerate(texts):
        if text in seen:
            raise ConversionError(
                source, f"tokens {seen[text]} and {i} both become {text!r} in llama.cpp's form"
            )
        seen[text] = i


# -- Unigram ----------------------------------------------------------------------------------


def _normalizer(source: str, norm: dict[str, Any] | None) -> tuple[bytes, bool]:
    """(precompiled charsmap, remove_extra_whitespaces) from a tokenizer.json normalizer."""
    steps: list[dict[str, Any]]
    if not norm:
        steps = []
    elif norm.get("type") == "Sequence":
        steps = list(norm.get("normalizers") or [])
    else:
        steps = [norm]
    charsmap = b""
    collapse = False
    for i, step in enumerate(steps):
        kind = step.get("type")
        if kind == "Precompiled" and i == 0:
            try:
                charsmap = base64.b64decode(str(step.get("precompiled_charsmap") or ""),
                                            validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ConversionError(source, f"unreadable precompiled charsmap: {exc}") from exc
        elif step == _COLLAPSE_SPACES and i == len(steps) - 1:
            collapse = True
        else:
            raise ConversionError(
                source, f"normalizer step {kind} cannot be reproduced by llama.cpp's Unigram "
                "tokenizer (it applies a precompiled charsmap, then collapses spaces)")
    if charsmap and len(charsmap) < 4:
        raise ConversionError(source, "precompiled charsmap is truncated")
    return charsmap, collapse


def _check_pre_tokenizer(source: str, pre: dict[str, Any] | None) -> None:
    """Refuse a pre-tokenizer that is not SentencePiece's: a Metaspace marking every word."""
    steps = list(pre.get("pretokenizers") or []) if pre and pre.get("type") == "Sequence" else [
        pre or {}]
    if steps and steps[0].get("type") == "WhitespaceSplit":
        steps = steps[1:]
    meta = steps[0] if len(steps) == 1 else {}
    if meta.get("type") != "Metaspace" or meta.get("replacement", _WORD_START) != _WORD_START:
        raise ConversionError(source, "a Unigram tokenizer needs a Metaspace pre-tokenizer "
                                      "with the U+2581 replacement")
    scheme = meta.get("prepend_scheme")
    if scheme is None:
        scheme = "always" if meta.get("add_prefix_space", True) else "never"
    if scheme not in ("always", "first") or meta.get("split", True) is False:
        raise ConversionError(source, f"Metaspace prepend_scheme {scheme!r} without a leading "
                                      "U+2581 is not what llama.cpp's Unigram tokenizer does")


def _frame(source: str, post: dict[str, Any] | None) -> tuple[str, str]:
    """The (first, last) special texts the post-processor puts around one sequence."""
    if not post:
        raise ConversionError(source, "a Unigram tokenizer without a post-processor adds no "
                                      "<s>/</s>, which the model was trained with")
    kind = post.get("type")
    if kind == "RobertaProcessing":
        return str(post["cls"][0]), str(post["sep"][0])
    if kind == "TemplateProcessing":
        single = post.get("single") or []
        parts = [next(iter(p.values())) for p in single]
        ids = [p.get("id") for p in parts]
        if len(ids) == 3 and ids[1] == "A" and "SpecialToken" in single[0] \
                and "SpecialToken" in single[2]:
            return str(ids[0]), str(ids[2])
    raise ConversionError(source, f"post-processor {kind} does not frame a text as <s> … </s>")


def _unigram(source: str, data: dict[str, Any], rows: int) -> Vocab:
    model = data.get("model") or {}
    if model.get("byte_fallback"):
        raise ConversionError(source, "a byte-fallback Unigram model (llama.cpp's has none)")
    pieces = model.get("vocab")
    if not isinstance(pieces, list) or not pieces:
        raise ConversionError(source, "tokenizer.json has no vocabulary")
    texts: list[str] = []
    scores: list[float] = []
    for entry in pieces:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], int | float)):
            raise ConversionError(source, "Unigram vocabulary entries must be [piece, score]")
        texts.append(entry[0])
        scores.append(float(entry[1]))
    unk = model.get("unk_id")
    if not isinstance(unk, int) or not 0 <= unk < len(texts):
        raise ConversionError(source, "the Unigram model has no unknown piece (unk_id)")
    types = [_NORMAL] * len(texts)
    added_tokens = [a for a in data.get("added_tokens") or [] if isinstance(a, dict)]
    for added in sorted(added_tokens, key=lambda a: int(a.get("id", -1))):
        tid, content = added.get("id"), added.get("content")
        if isinstance(tid, int) and tid == len(texts) and isinstance(content, str):
            texts.append(content)  # added after the model's pieces: the next id
            scores.append(0.0)
            types.append(_NORMAL)
        elif not isinstance(tid, int) or not 0 <= tid < len(texts) or texts[tid] != content:
            raise ConversionError(source, f"added token {content!r} is not the vocabulary's "
                                          "piece of that id")
        types[tid] = _CONTROL if added.get("special") else _USER_DEFINED
    types[unk] = _UNKNOWN
    size = len(texts)
    if size > rows:
        raise ConversionError(
            source, f"the tokenizer has {size} pieces, the word embeddings {rows} rows")
    if len(set(texts)) != size:
        raise ConversionError(source, "two Unigram pieces have the same text")
    index = {t: i for i, t in enumerate(texts)}
    bos_text, eos_text = _frame(source, data.get("post_processor"))
    special: dict[str, int] = {"unk": unk}
    for key, text in (("cls", bos_text), ("sep", eos_text), ("pad", "<pad>"),
                      ("mask", "<mask>")):
        if text in index:
            special[key] = index[text]
    for key in ("cls", "sep"):
        if key not in special or types[special[key]] != _CONTROL:
            raise ConversionError(source, f"the post-processor's {key} token is not a special "
                                          "token of the vocabulary")
    charsmap, collapse = _normalizer(source, data.get("normalizer"))
    _check_pre_tokenizer(source, data.get("pre_tokenizer"))
    # Rows past the tokenizer's pieces: placeholders no text can produce. They are typed
    # CONTROL (not in llama.cpp's UGM match trie) and hold an ASCII space, which a normalised
    # input never does (its spaces are U+2581), so even a trie that had them could not match.
    floor = min(scores)
    for i in range(size, rows):
        texts.append(f"<funes padding {i}>")
        scores.append(floor)
        types.append(_CONTROL)
    return Vocab("unigram", texts, types, special, size, scores=scores, charsmap=charsmap,
                 add_space_prefix=True, remove_extra_whitespaces=collapse)


# -- writing ----------------------------------------------------------------------------------


def write_vocab(writer: gguf.GGUFWriter, vocab: Vocab, token_type_count: int) -> None:
    """Write the tokenizer keys of `vocab` (the order is part of the pinned bytes)."""
    sp = vocab.special
    if vocab.kind == "wordpiece":
        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre("default")
        writer.add_token_list(vocab.texts)
        writer.add_token_types(vocab.types)
        writer.add_token_type_count(token_type_count)
        writer.add_bos_token_id(sp["cls"])
        writer.add_sep_token_id(sp["sep"])
        writer.add_unk_token_id(sp["unk"])
        writer.add_pad_token_id(sp["pad"])
        writer.add_mask_token_id(sp["mask"])
        writer.add_add_bos_token(True)
        writer.add_add_eos_token(False)
        writer.add_add_sep_token(True)
        writer.add_bool("tokenizer.ggml.normalizer.lowercase", vocab.lowercase)
        writer.add_bool("tokenizer.ggml.normalizer.strip_accents", vocab.strip_accents)
        return
    assert vocab.scores is not None
    writer.add_tokenizer_model("t5")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(vocab.texts)
    writer.add_token_scores(vocab.scores)
    writer.add_token_types(vocab.types)
    writer.add_token_type_count(token_type_count)
    writer.add_add_space_prefix(vocab.add_space_prefix)
    writer.add_remove_extra_whitespaces(vocab.remove_extra_whitespaces)
    if vocab.charsmap:
        writer.add_precompiled_charsmap(vocab.charsmap)
    writer.add_bos_token_id(sp["cls"])
    writer.add_eos_token_id(sp["sep"])
    writer.add_sep_token_id(sp["sep"])
    writer.add_unk_token_id(sp["unk"])
    if "pad" in sp:
        writer.add_pad_token_id(sp["pad"])
    if "mask" in sp:
        writer.add_mask_token_id(sp["mask"])
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    writer.add_add_sep_token(False)
