"""SentencePiece Unigram models (multilingual-e5's kind) through our converter and llama.cpp.

The model is tests/support/e5model.py: seeded BERT weights and a Unigram tokenizer trained
here on text in Chinese, Japanese, English, accented Latin and more, with SentencePiece's own
`nmt_nfkc` normaliser, in the layout of intfloat/multilingual-e5-small's files. The tokenizer
is held to the `tokenizers` reference (ids), the forward pass to the float64 numpy BERT of
conftest.py, and the query/passage prefixes to what e5 was trained with.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from funes.inference.convert import ConversionResult, Precision, convert_embedding
from funes.inference.errors import ConversionError
from tests.inference.conftest import BertReference
from tests.support.e5model import CORPUS, EXTRA_ROWS

#: Held to the reference id for id: every script of the corpus, the normaliser's own cases
#: (full-width and half-width forms, ligatures, decomposed accents, controls, no-break and
#: zero-width spaces), scripts the tokenizer never saw (unknown pieces), code, whitespace runs.
TEXTS = [
    "hello world",
    "We decided to keep the parser streaming, because the files are large.",
    "我们决定继续使用流式解析器，因为文件很大。",
    "为什么我们放弃了流式解析器？它在长会话中泄漏内存。",
    "キャッシュは sqlite を使います。",
    "ログイン画面がサインインの後でループします。",
    "東京の会議は来週の火曜日に延期されました",
    "Die Größe der Datei überschreitet das Limit für Übertragungen.",
    "Nous avons décidé de garder l'analyseur en flux.",
    "¿Por qué abandonamos el analizador? Perdía memoria.",
    "Chúng tôi quyết định giữ trình phân tích cú pháp.",
    "Мы решили оставить потоковый парсер.",
    "Ο διακομιστής επανεκκινήθηκε μετά την ενημέρωση.",
    "ＡＢＣ１２３ ｶﾀｶﾅ ｷｬｯｼｭ",
    "ﬁle ① ㍿ ℃ ½",
    "cafe\u0301 re\u0301sume\u0301 na\u0308ive",
    "Größe  der\t\tDatei\n\nneu   Zeile",
    "   leading spaces",
    "emoji 🎉 and ☃ ✓ 👩\u200d💻",
    "def load(path: str) -> dict: return json.loads(open(path).read())",
    "The cache 缓存 uses sqlite キャッシュ, c'est ça.",
    "tab\x07bell\x1bescape\x7fdel",
    "데이터베이스 마이그레이션이 실패했습니다",
    "zero\u200bwidth\u00a0no-break\u3000ideographic",
    "फ़ाइल बहुत बड़ी है",
    " ".join(CORPUS),
]


def test_token_ids_equal_the_reference(e5_embedder: Any, e5_tokenizer: Any) -> None:
    unk = 3
    differ = [t for t in TEXTS if [0, *e5_embedder.tokenize(t), 2] != e5_tokenizer.encode(t).ids]
    assert differ == []
    # what one embed feeds llama.cpp: the same, cut to the 512-token cap with </s> kept last
    for text in TEXTS:
        want = e5_tokenizer.encode(text).ids
        assert e5_embedder.input_ids(text) == (want if len(want) <= 512 else [*want[:511], 2])
    # the set is not trivial: unknown pieces, long inputs and the normaliser all take part
    ids = [e5_tokenizer.encode(t).ids for t in TEXTS]
    assert any(unk in i for i in ids) and max(map(len, ids)) > 300
    assert e5_tokenizer.encode("ＡＢＣ").ids == e5_tokenizer.encode("ABC").ids  # NFKC at work


def test_what_differs_from_huggingface_is_sentencepiece_s_rule(
    e5_embedder: Any, e5_tokenizer: Any
) -> None:
    """Two documented differences, both SentencePiece's own behaviour (not `tokenizers`').

    Trailing whitespace adds no piece (SentencePiece's `remove_extra_whitespaces`; the fast
    tokenizer keeps one lone U+2581), and text that spells a special token is text: no
    `<s>`/`</s>`/`<unk>` id comes out of content (the fast tokenizer's trie matches them).
    """
    for text in ("trailing space ", "trailing newline\n", "tabs\t\t"):
        assert e5_embedder.input_ids(text) == e5_tokenizer.encode(text.rstrip()).ids
    mask = e5_tokenizer.token_to_id("<mask>")
    quoted = e5_embedder.input_ids("a transcript quoting <s> and </s> and <pad> <mask>")
    assert quoted[0] == 0 and quoted[-1] == 2
    assert not {0, 1, 2, mask}.intersection(quoted[1:-1])
    assert e5_tokenizer.encode("quoting <s> and <mask>").ids.count(0) == 2  # the reference


@pytest.mark.slow  # the quick suite keeps the 512-token reference pass below
def test_embeddings_equal_the_numpy_reference(e5_embedder: Any, e5_dir: Path) -> None:
    ref = BertReference(e5_dir)
    texts = TEXTS[:-1]  # the long one: test_512_tokens_is_the_cap…
    got = e5_embedder.embed(texts)
    want = np.stack([ref.sentence_embedding(e5_embedder.input_ids(t)) for t in texts])
    cos = np.sum(got * want, axis=1)
    assert cos.min() >= 0.9999, cos
    # and the vectors tell texts apart (a degenerate model would pass the check above)
    sims = got @ got.T
    others = sims[~np.eye(len(texts), dtype=bool)]
    assert others.max() < 0.999 and float(np.median(others)) < 0.8


def test_512_tokens_is_the_cap_and_a_longer_text_is_truncated_safely(
    e5_embedder: Any, e5_dir: Path
) -> None:
    """e5 has 512 positions; more tokens abort llama.cpp, so funes never gives it more."""
    assert e5_embedder.max_tokens == 512
    long_text = "東京の会議は来週 " * 400 + "the end"
    ids = e5_embedder.input_ids(long_text)
    assert len(ids) == 512 and ids[0] == 0 and ids[-1] == 2
    assert len(e5_embedder.tokenize(long_text)) > 2000
    vec = e5_embedder.embed_query(long_text)  # prefixed, still 512: the prefix is kept, the
    want = BertReference(e5_dir).sentence_embedding(  # tail is what is cut
        e5_embedder.input_ids("query: " + long_text))
    assert float(vec @ want) >= 0.9999
    assert e5_embedder.input_ids("query: " + long_text)[1:5] == e5_embedder.tokenize("query:")


def test_prefixes_come_from_the_gguf_and_are_put_on_queries_and_passages(
    e5_embedder: Any, embedder: Any
) -> None:
    assert (e5_embedder.query_prefix, e5_embedder.passage_prefix) == ("query: ", "passage: ")
    text = "为什么我们放弃了流式解析器"
    plain, query, passage = e5_embedder.embed([text, "query: " + text, "passage: " + text])
    assert np.allclose(e5_embedder.embed_query(text), query, atol=1e-6)
    assert np.allclose(e5_embedder.embed_passages([text])[0], passage, atol=1e-6)
    assert float(query @ plain) < 0.99 and float(passage @ plain) < 0.99
    # a model without prefixes (MiniLM) embeds queries and passages as they are
    assert (embedder.query_prefix, embedder.passage_prefix) == ("", "")
    assert np.allclose(embedder.embed_query(text), embedder.embed([text])[0], atol=1e-6)
    with pytest.raises(TypeError):
        e5_embedder.embed_query(b"bytes")


def test_the_gguf_carries_a_unigram_vocabulary(e5_conversion: ConversionResult, e5_embedder: Any,
                                               e5_dir: Path, work_dir: Path) -> None:
    """Read back through llama.cpp itself: what its loader sees is what counts."""
    import base64

    import llama_cpp

    meta, vocab = e5_embedder.metadata, e5_embedder._rt.vocab
    data = json.loads((e5_dir / "tokenizer.json").read_text(encoding="utf-8"))
    pieces = data["model"]["vocab"]
    assert (meta["tokenizer.ggml.model"], meta["tokenizer.ggml.pre"]) == ("t5", "default")
    assert int(llama_cpp.llama_vocab_type(vocab)) == 4  # LLAMA_VOCAB_TYPE_UGM
    n = int(llama_cpp.llama_vocab_n_tokens(vocab))
    assert n == len(pieces) + EXTRA_ROWS == e5_conversion.vocab_size + EXTRA_ROWS
    texts = [llama_cpp.llama_vocab_get_text(vocab, i).decode() for i in range(n)]
    scores = [llama_cpp.llama_vocab_get_score(vocab, i) for i in range(len(pieces))]
    attrs = [int(llama_cpp.llama_vocab_get_attr(vocab, i)) for i in range(n)]
    assert texts[: len(pieces)] == [p for p, _ in pieces]
    assert np.allclose(scores, [s for _, s in pieces], atol=1e-6)
    control, unknown, normal = 8, 1, 4  # llama_token_attr bits
    assert [a & (control | unknown | normal) for a in attrs[:5]] == [control] * 3 + [unknown,
                                                                                      normal]
    assert all(a & control for a in attrs[len(pieces) - 1:])  # <mask> and the padding rows
    charsmap = base64.b64decode(data["normalizer"]["normalizers"][0]["precompiled_charsmap"])
    assert len(charsmap) > 1024 and charsmap in e5_conversion.path.read_bytes()  # byte for byte
    assert meta["tokenizer.ggml.add_space_prefix"] == "true"
    assert meta["tokenizer.ggml.remove_extra_whitespaces"] == "true"
    assert (meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"],
            meta["tokenizer.ggml.unknown_token_id"]) == ("0", "2", "3")
    assert meta["funes.query_prefix"] == "query: " and meta["funes.passage_prefix"] == "passage: "
    assert "funes.wordpiece_max_word_chars" not in meta
    again = convert_embedding(e5_dir, work_dir / "e5-again.gguf", precision=Precision.F16,
                              name="multilingual-e5-small", query_prefix="query: ",
                              passage_prefix="passage: ")
    assert again.sha256 == e5_conversion.sha256  # deterministic
    bare = convert_embedding(e5_dir, work_dir / "e5-bare.gguf", name="multilingual-e5-small")
    assert bare.sha256 != e5_conversion.sha256  # the prefixes are part of the identity


def _broken(e5_dir: Path, tmp_path: Path, edit: Any) -> Path:
    out = tmp_path / "broken"
    shutil.copytree(e5_dir, out)
    data = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    edit(data)
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return out


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d["model"].update(byte_fallback=True), "byte-fallback"),
    (lambda d: d["normalizer"]["normalizers"].insert(1, {"type": "Lowercase"}), "Lowercase"),
    (lambda d: d.update(normalizer={"type": "NFKC"}), "NFKC"),
    (lambda d: d.update(post_processor=None), "post-processor"),
    (lambda d: d.update(post_processor={"type": "RobertaProcessing"}), "malformed"),
    (lambda d: d["pre_tokenizer"].update(prepend_scheme="never"), "prepend_scheme"),
    (lambda d: d["added_tokens"][0].update(content="<S>"), "added token"),
    (lambda d: d["model"]["vocab"].extend([["x", -1.0]] * (EXTRA_ROWS + 1)), "rows"),
])
def test_what_llama_cpp_cannot_reproduce_is_refused(
    e5_dir: Path, tmp_path: Path, edit: Any, message: str
) -> None:
    model_dir = _broken(e5_dir, tmp_path, edit)
    with pytest.raises(ConversionError, match=message):
        convert_embedding(model_dir, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_loading_says_nothing_on_stderr(e5_conversion: ConversionResult,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """llama.cpp reports a missing newline token, at ERROR level, for every Unigram model;
    it is no error, and agents' hooks and `--format agent` output must stay clean."""
    from funes.inference.runtime import Runtime

    capsys.readouterr()
    runtime = Runtime(e5_conversion.path, kind="embed", max_tokens=None, n_threads=1)
    runtime.close()
    assert capsys.readouterr().err == ""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
def test_a_big_vocabulary_costs_no_logits_memory(e5_dir: Path, tmp_path: Path) -> None:
    """llama.cpp keeps n_vocab floats of logits per token even for pooled embeddings, which
    nothing reads; e5's 250k pieces would make that 488 MB at 512 tokens. funes returns the
    pages; a 120,000-row model here would hold 246 MB."""
    from funes.inference.embedder import Embedder
    from tests.support.e5model import write_weights

    model_dir = tmp_path / "big-vocabulary"
    model_dir.mkdir()
    shutil.copy(e5_dir / "tokenizer.json", model_dir / "tokenizer.json")
    rows = 120_000
    write_weights(model_dir, {"num_hidden_layers": 1, "hidden_size": 32,
                              "num_attention_heads": 2, "intermediate_size": 32,
                              "max_position_embeddings": 512}, rows)
    gguf = convert_embedding(model_dir, tmp_path / "big.gguf").path

    def resident_mb() -> float:
        status = Path("/proc/self/status").read_text().splitlines()
        return int(next(li for li in status if li.startswith("VmRSS")).split()[1]) / 1024

    emb = Embedder(gguf, n_threads=1)
    try:
        before = resident_mb()
        for text in ("東京の会議 " * 300, "the cache " * 400):
            assert len(emb.input_ids(text)) == 512
            emb.embed([text])
        grown = resident_mb() - before
    finally:
        emb.close()
    assert grown < 0.25 * rows * 512 * 4 / 2**20, grown  # the logits would be 234 MiB
