"""The embedding path against the reference tokenizer and a numpy BERT, with real llama.cpp."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from funes.inference.embedder import Embedder, open_embedder

LONG = " ".join(f"word{i} and some filler text about the parser" for i in range(200))

TEXTS = [
    "why did we drop the streaming parser",
    "Hello, world!",
    "def fibonacci(n: int) -> int:\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    '{"tool": "bash", "input": {"command": "git rebase -i HEAD~3"}, "ok": true}',
    "[tool_use Bash] ls -la /tmp && rm -rf ./build/*.o",
    "日本語のテキストです。中文也可以混合使用。",
    "한국어 텍스트입니다. 안녕하세요",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇺🇸 and a rainbow 🏳️‍🌈",
    "Café naïve résumé – Straße İstanbul ÀÉÎÕÜ",
    "Привет, мир! Ελληνικά κείμενα. हिन्दी भाषा में पाठ. النص العربي",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days';",
    "https://github.com/acme/funes/pull/42#issuecomment-1234567890",
    "error[E0382]: borrow of moved value: `x`\n --> src/main.rs:4:20",
    "The [SEP] and [CLS] markers in this sentence are plain text.",
    "tabs\tand\r\nwindows line endings\u00a0with a no-break space",
    "x" * 150 + " after an overlong word " + "é" * 120,
    "a\u200bzero\u200dwidth\ufeffbom\u00adsoft hyphen",
    "∑_{i=1}^n x_i ≤ ∞ ∀x∈ℝ √2 ≈ 1.414 ½ ①",
    "",
    "   \n\t  ",
    LONG,
    "Short.",
]


def _reference_ids(tok: Any, text: str, max_text_tokens: int) -> list[int]:
    body = tok.encode(text.replace("\x00", ""), add_special_tokens=False).ids
    return [101, *body[:max_text_tokens], 102]


def test_token_ids_equal_the_reference_wordpiece(embedder: Embedder, hf_tokenizer: Any) -> None:
    for text in TEXTS:
        assert embedder.tokenize(text) == hf_tokenizer.encode(text, add_special_tokens=False).ids, (
            text
        )


def test_token_ids_equal_the_reference_on_random_unicode(
    embedder: Embedder, hf_tokenizer: Any
) -> None:
    # Scripts, marks, controls, symbols and private-use characters mixed with ASCII words.
    pools = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x4FF), (0x590, 0x6FF),
             (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F),
             (0x2100, 0x22FF), (0x3000, 0x30FF), (0x4E00, 0x4E80), (0xAC00, 0xAC80),
             (0xFE00, 0xFE0F), (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF), (0x0, 0x1F),
             (0xE000, 0xE010), (0x1D400, 0x1D4FF)]  # fmt: skip
    rng = random.Random(1234)
    mismatches = []
    for _ in range(500):
        text = "".join(
            chr(rng.randint(*rng.choice(pools))) if rng.random() < 0.7 else rng.choice(" abc,.")
            for _ in range(rng.randint(1, 40))
        )
        if embedder.tokenize(text) != hf_tokenizer.encode(text, add_special_tokens=False).ids:
            mismatches.append(text)
    # Code points that only recent Unicode versions assign (e.g. U+061D) are classified
    # differently by the two libraries' tables; anything beyond that rare skew is a bug.
    assert len(mismatches) <= 2, [m.encode("unicode_escape") for m in mismatches]


def test_embeddings_match_the_numpy_reference(
    embedder: Embedder, hf_tokenizer: Any, minilm_reference: Any
) -> None:
    assert len(TEXTS) >= 20
    got = embedder.embed(TEXTS)
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 384)
    cosines = []
    for text, vec in zip(TEXTS, got, strict=True):
        ids = _reference_ids(hf_tokenizer, text, embedder.max_text_tokens)
        assert embedder.input_ids(text) == ids
        cosines.append(float(vec @ minilm_reference.sentence_embedding(ids)))
    assert min(cosines) >= 0.9999, cosines


def test_long_text_is_truncated_with_sep_last(embedder: Embedder, hf_tokenizer: Any) -> None:
    ids = embedder.input_ids(LONG * 50)
    assert len(ids) == embedder.max_tokens == 256
    assert ids[0] == 101 and ids[-1] == 102
    assert ids == _reference_ids(hf_tokenizer, LONG, embedder.max_text_tokens)
    # a huge text whose only whitespace is far away still truncates exactly
    odd = "ab" * 50_000 + " tail"
    assert embedder.input_ids(odd) == _reference_ids(hf_tokenizer, odd, embedder.max_text_tokens)


def test_vectors_are_unit_length_and_deterministic(embedder: Embedder) -> None:
    a = embedder.embed(["the same text", "another text"])
    b = embedder.embed(["the same text", "another text"])
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a, b)
    assert embedder.embed([]).shape == (0, 384)
    q = embedder.embed_query("the same text")
    assert q.shape == (384,) and np.array_equal(q, a[0])


def test_related_texts_are_closer(embedder: Embedder) -> None:
    q = embedder.embed_query("how do I undo the last git commit")
    near, far = embedder.embed(
        ["use git reset --soft HEAD~1 to undo the previous commit", "a recipe for banana bread"]
    )
    assert float(q @ near) > float(q @ far) + 0.2


def test_count_tokens(embedder: Embedder, hf_tokenizer: Any) -> None:
    text = "The chunker measures windows in the model's own tokens."
    assert embedder.count_tokens(text) == len(
        hf_tokenizer.encode(text, add_special_tokens=False).ids
    )
    assert embedder.count_tokens("") == 0
    assert embedder.max_text_tokens == 254


def test_loaded_once_per_process(embed_gguf: Path, embedder: Embedder) -> None:
    assert open_embedder(embed_gguf) is embedder
    smaller = open_embedder(embed_gguf, max_tokens=128)
    assert smaller is not embedder and smaller.max_tokens == 128
    assert open_embedder(embed_gguf, max_tokens=10_000).max_tokens == 256  # never raised


def test_non_str_input_is_a_type_error(embedder: Embedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed([b"bytes are not text"])  # type: ignore[list-item]


HOSTILE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import numpy as np
    from funes.inference.embedder import open_embedder
    from funes.inference.reranker import open_reranker
    from funes.inference.errors import ModelLoadError

    emb = open_embedder(Path(sys.argv[1]))
    rr = open_reranker(Path(sys.argv[2]))
    nasty = [
        "", " ", "\\n\\t\\r", "\\x00", "\\x00" * 5000, "a\\x00b", "\\ud800", "x\\udfffy\\ud83d",
        "word " * 5000, "a" * 200_000, "é" * 5000, "\\u0301" * 3000, "日本" * 3000,
        "😀" * 3000, "[SEP]" * 1000, "[CLS] [PAD] [MASK] [UNK]" * 100, "[seg1]▁the" * 50,
        "\\ufffd" * 100, "\\u2581" * 600, "".join(chr(c) for c in range(1, 2000)),
        "\\U0010ffff\\U000e0001\\ue000" * 300, "\\u202e" * 100 + "rtl",
    ]
    vecs = emb.embed(nasty)
    assert vecs.shape == (len(nasty), 384) and np.isfinite(vecs).all()
    for text in nasty:
        assert len(emb.input_ids(text)) <= emb.max_tokens
    scores = rr.score_pairs(list(zip(nasty[::2], reversed(nasty[::2]))))
    assert all(np.isfinite(scores))
    garbage = Path(sys.argv[3])
    garbage.write_bytes(b"GGUF" + b"\\xff" * 4096)
    try:
        open_embedder(garbage)
    except ModelLoadError:
        pass
    else:
        raise AssertionError("garbage loaded")
    for bad in (0, 1, 5):
        try:
            open_embedder(Path(sys.argv[1]), max_tokens=bad)
        except ValueError:
            pass
    print(json.dumps({"ok": True, "n": len(nasty)}))
    """
)


def test_process_killing_inputs_never_reach_llama_cpp(
    embed_gguf: Path, rerank_gguf: Path, tmp_path: Path
) -> None:
    # llama.cpp aborts the process on bad input (no exception to catch), so run in a child
    # and require that it exits normally.
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            HOSTILE,
            str(embed_gguf),
            str(rerank_gguf),
            str(tmp_path / "bad.gguf"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"ok": True, "n": 22}
