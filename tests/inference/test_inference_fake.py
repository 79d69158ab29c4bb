"""The deterministic fake embedder and reranker honour the protocols recall is typed against."""

from __future__ import annotations

import numpy as np

from funes.inference.fake import FakeEmbedder, FakeReranker
from funes.inference.protocols import EmbedderProtocol, RerankerProtocol


def test_fake_embedder_is_deterministic_and_topical() -> None:
    emb: EmbedderProtocol = FakeEmbedder(dim=128)
    a, b, c = emb.embed(["the parser crashed on unicode", "unicode crashed the parser",
                         "lunch at noon tomorrow"])
    assert a.dtype == np.float32 and a.shape == (128,)
    assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
    assert float(a @ b) > 0.85  # four of five words shared, another order
    assert float(a @ c) < 0.5  # no shared word
    again = FakeEmbedder(dim=128).embed_query("the parser crashed on unicode")
    assert np.array_equal(again, a)


def test_fake_identity_depends_on_name_and_width() -> None:
    one, two, wide = FakeEmbedder(64), FakeEmbedder(64), FakeEmbedder(96)
    assert one.info is not None and two.info is not None and wide.info is not None
    assert one.info.sha256 == two.info.sha256 != wide.info.sha256
    assert FakeEmbedder(64, name="other").info != one.info


def test_fake_reranker_prefers_passages_with_the_query_words() -> None:
    rr: RerankerProtocol = FakeReranker()
    scores = rr.score("which database did we pick", ["we pick the database: postgres",
                                                     "the weather was nice"])
    assert scores[0] > scores[1]
    assert all(-4.0 <= s <= 4.0 for s in scores)
