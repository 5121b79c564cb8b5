"""`search evaluate --rerank-top N` re-scores N candidates per query, also past the 100 the metrics need.

With --rerank-top 150 the first stage still returned 100 candidates, so the cross-encoder re-scored 100, not the 150
the flag (and `search query`, which retrieves max(k, rerank_top)) promise.
"""
from __future__ import annotations

import json

from search_data import write_beir

from twotower.search import rerank as rerank_module
from twotower.search.evaluate import search_evaluate

from tests.extras import needs_text

pytestmark = needs_text

DOCS = [{"_id": f"d{i}", "title": "", "text": f"aspirin trial number{i}"} for i in range(160)]


class _Counting:
    """A cross-encoder double that counts the pairs it scores per query."""

    per_query: dict[str, int] = {}

    def predict(self, pairs, **kwargs):  # noqa: ANN001, ANN003, ANN201
        for q, _ in pairs:
            self.per_query[q] = self.per_query.get(q, 0) + 1
        return [float(len(d)) for _, d in pairs]


def test_rerank_top_past_the_metric_depth_rescores_that_many_candidates(tmp_path, monkeypatch):
    beir = write_beir(tmp_path / "b", docs=DOCS, queries=[{"_id": "1", "text": "aspirin trial"}],
                      qrels={"test": "query-id\tcorpus-id\tscore\n1\td7\t1\n"})
    model = _Counting()
    real = rerank_module.CrossEncoderReranker
    monkeypatch.setattr(rerank_module, "CrossEncoderReranker", lambda path, **kw: real.from_model(model, **kw))
    (tmp_path / "ce").mkdir()
    m = search_evaluate(beir, "test", "bm25", rerank=tmp_path / "ce", rerank_top=150)
    assert model.per_query == {"aspirin trial": 150}
    assert set(json.loads(json.dumps(m))) >= {"NDCG@10", "Recall@10", "Recall@100", "MRR@10"}
    model.per_query.clear()
    search_evaluate(beir, "test", "bm25", rerank=tmp_path / "ce", rerank_top=20)
    assert model.per_query == {"aspirin trial": 20}
    model.per_query.clear()  # more than the corpus holds: every document, once
    search_evaluate(beir, "test", "bm25", rerank=tmp_path / "ce", rerank_top=100_000)
    assert model.per_query == {"aspirin trial": 160}
