"""`rerank train` on a corpus where BM25 finds no hard negative says so in the command's words, before any model loads.

Before: the MiniLM cross-encoder was loaded, then "error: no pair has a hard negative; mine some with
mine_hard_negatives first", a Python function a CLI user has no way to call.
"""
from __future__ import annotations

import pytest
from search_data import write_beir

from twotower.cli.main import main

from tests.extras import needs_text

DOCS = [
    {"_id": "d1", "title": "Vitamin D", "text": "Vitamin D supplements reduce fractures."},
    {"_id": "d2", "title": "Aspirin", "text": "Aspirin lowers heart attack risk."},
    {"_id": "d3", "title": "Calcium", "text": "Calcium intake and bone density."},
]
QUERIES = [{"_id": "1", "text": "vitamin fractures"}, {"_id": "2", "text": "aspirin heart"},
           {"_id": "3", "text": "calcium bone"}]


@needs_text
def test_no_bm25_negative_is_refused_naming_what_bm25_found(tmp_path, monkeypatch, capsys):
    import twotower.search.rerank as rerank

    def never(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("train_cross_encoder was reached")

    monkeypatch.setattr(rerank, "train_cross_encoder", never)
    qrels = "query-id\tcorpus-id\tscore\n1\td1\t1\n2\td2\t1\n3\td3\t1\n"
    beir = write_beir(tmp_path / "beir", {"train": qrels, "test": qrels}, docs=DOCS, queries=QUERIES)
    rc = main(["rerank", "train", "--beir", str(beir), "--out", str(tmp_path / "ce"), "--epochs", "1"])
    err = capsys.readouterr().err
    assert rc != 0
    assert "no hard negative for any of the 3 training queries: BM25's top 30 held 3 candidates, 3 of them known " \
           "positives" in err
    assert "mine_hard_negatives" not in err
    assert not (tmp_path / "ce").exists()


@needs_text
def test_negatives_dropped_as_too_close_point_at_the_margin(tmp_path, monkeypatch, capsys):
    import twotower.search.rerank as rerank

    monkeypatch.setattr(rerank, "train_cross_encoder", lambda *a, **k: pytest.fail("train_cross_encoder was reached"))
    docs = [*DOCS, {"_id": "d4", "title": "Vitamin D", "text": "Vitamin D supplements reduce fractures."}]
    qrels = "query-id\tcorpus-id\tscore\n1\td1\t1\n"
    beir = write_beir(tmp_path / "beir", {"train": qrels, "test": qrels}, docs=docs, queries=QUERIES)
    rc = main(["rerank", "train", "--beir", str(beir), "--out", str(tmp_path / "ce"), "--epochs", "1"])
    err = capsys.readouterr().err
    assert rc != 0 and "1 too close to the positive" in err and "lower --mining-margin (0.05" in err


@pytest.mark.parametrize("positives, negatives, match", [
    # -1, the padding of a Results row, read doc_texts[-1]: the last document, here pair 2's own positive, was
    # trained on as a negative without a word
    ([0, 1, 2], [[1], [2, -1], [0]], r"^negatives\[1\] holds the row -1: rows must lie in \[0, 3\), the corpus rows; "
                                     r"-1 is the padding of a Results row \(PAD_ID\): leave it out"),
    ([0, 3, 2], [[1], [2], [0]], r"^positive_rows holds the row 3: rows must lie in \[0, 3\), the corpus rows$"),
])
def test_rows_outside_the_corpus_are_refused_before_the_model_loads(tmp_path, monkeypatch, positives, negatives,
                                                                    match):
    import numpy as np

    import twotower.search.rerank as rerank
    from twotower.errors import DataError

    def never(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the cross-encoder was loaded")

    monkeypatch.setattr(rerank, "_load_fresh_head", never)
    texts = [d["text"] for d in DOCS]
    with pytest.raises(DataError, match=match):
        rerank.train_cross_encoder([q["text"] for q in QUERIES], positives, [np.array(n) for n in negatives], texts,
                                   tmp_path / "ce", show_progress=False)
