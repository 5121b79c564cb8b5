"""train_cross_encoder(config=RerankTrainConfig(valid_frac=F)) without validation= holds that share of the queries out
and validates on it, as `rerank train --valid-frac F` does (it was ignored: the marker's "validation" was null and every
pair was trained on); and it takes threads=, as `rerank train --threads` and finetune_bi_encoder do."""
from __future__ import annotations

import json

import numpy as np

import twotower.utils.runtime as runtime
from twotower.search import RerankTrainConfig, train_cross_encoder

from tests.extras import needs_text

DOCS = ["red apple fruit", "green apple pie", "blue sky clouds", "grey sky rain", "black cat sleeps", "white dog runs"]
QUERIES = ["red apple", "green pie", "blue sky", "grey rain", "black cat", "white dog"]


@needs_text
def test_valid_frac_without_validation_holds_queries_out_and_threads_are_set(tmp_path, monkeypatch):
    threads = []
    real = runtime.set_threads
    monkeypatch.setattr(runtime, "set_threads", lambda n: (threads.append(n), real(n))[1])
    cfg = RerankTrainConfig(epochs=1, groups_per_step=2, negatives_per_query=1, max_length=16, freeze_layers=6,
                            seed=0, valid_frac=0.34)
    negatives = [np.array([(i + 2) % len(DOCS)]) for i in range(len(QUERIES))]
    train_cross_encoder(QUERIES, list(range(len(QUERIES))), negatives, DOCS, tmp_path / "ce", config=cfg,
                        show_progress=False, threads=1)
    meta = json.loads((tmp_path / "ce" / "twotower_cross_encoder.json").read_text())
    v = meta["validation"]
    assert v is not None and v["first_stage"] == "bm25" and v["queries"] >= 1
    # the held-out queries were not trained on
    assert meta["data"]["pairs"] == len(QUERIES) - v["queries"]
    assert threads == [1]
