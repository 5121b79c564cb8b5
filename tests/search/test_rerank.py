from __future__ import annotations

import numpy as np

from twotower.results import PAD_ID, Results
from twotower.search.rerank import CrossEncoderReranker


class OverlapModel:
    """Test double for a CrossEncoder: score = number of shared words."""

    def predict(self, pairs, **kwargs):
        return np.array([len(set(q.split()) & set(d.split())) for q, d in pairs], dtype=np.float32)


DOCS = ["red apple", "green apple pie", "blue sky", "apple pie with red cream"]


def test_reranker_reorders_the_head_and_keeps_the_tail():
    rr = CrossEncoderReranker.from_model(OverlapModel())
    first = Results(np.array([[2, 0, 1, 3]]), np.array([[4.0, 3.0, 2.0, 1.0]], dtype=np.float32))
    out = rr.rerank(["red apple pie"], first, DOCS, top_n=3)
    # head [2, 0, 1] scored 0, 2 ("red","apple"), 2 ("apple","pie") -> 0 and 1 tie at 2, smaller id first
    assert out.ids[0].tolist() == [0, 1, 2, 3]
    assert out.scores[0, :3].tolist() == [2.0, 2.0, 0.0]
    assert out.scores[0, 3] < out.scores[0, 2]  # tail kept below the reranked head
    assert rr.last_pairs == 3


def test_reranker_skips_padding():
    rr = CrossEncoderReranker.from_model(OverlapModel())
    first = Results(np.array([[2, PAD_ID]]), np.array([[1.0, -np.inf]], dtype=np.float32))
    out = rr.rerank(["blue sky"], first, DOCS, top_n=5)
    assert out.ids[0].tolist() == [2, PAD_ID] and rr.last_pairs == 1
