"""`search evaluate` says which flags its --retriever ignores.

`twotower search evaluate --beir DIR --model runs/bi --json` scored BM25 (the default retriever) and printed only the
metrics: nothing showed that the fine-tuned model had not been used.
"""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import main

from tests.extras import needs_text


@pytest.fixture
def model_dir(tmp_path):
    # a folder check_bi_encoder_dir accepts; BM25 never loads it
    d = tmp_path / "bi"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "bert"}')  # a transformers model's config, as the check asks
    return d


@needs_text
def test_model_with_the_default_bm25_retriever_is_warned_about(beir_dir, model_dir, caplog, capsys):
    with caplog.at_level("WARNING"):
        assert main(["search", "evaluate", "--beir", str(beir_dir), "--model", str(model_dir), "--json"]) == 0
    assert "--model has no effect with --retriever bm25 (the default); pass --retriever dense or hybrid" in caplog.text
    got = json.loads(capsys.readouterr().out)
    assert {"NDCG@10", "Recall@10", "Recall@100", "MRR@10"} <= set(got) and got["model"] is None  # BM25 only


@needs_text
def test_an_encoder_backend_with_bm25_is_warned_about(beir_dir, caplog):
    # BM25 reads no text encoder: --encoder-backend was dropped without a word, where --model was named
    with caplog.at_level("WARNING"):
        assert main(["search", "evaluate", "--beir", str(beir_dir), "--encoder-backend", "onnx", "--json"]) == 0
    assert ("--encoder-backend has no effect with --retriever bm25 (the default); pass --retriever dense or hybrid to "
            "use it") in caplog.text


@needs_text
def test_fusion_flags_without_hybrid_are_warned_about(beir_dir, caplog):
    with caplog.at_level("WARNING"):
        main(["search", "evaluate", "--beir", str(beir_dir), "--fusion", "minmax", "--bm25-weight", "0.7", "--json"])
    assert "--fusion, --bm25-weight have no effect with --retriever bm25 (the default); pass --retriever hybrid" \
        in caplog.text


@needs_text
def test_plain_bm25_evaluation_warns_about_nothing(beir_dir, caplog):
    with caplog.at_level("WARNING"):
        main(["search", "evaluate", "--beir", str(beir_dir), "--json"])
    assert "no effect" not in caplog.text


@pytest.fixture
def no_retrieval(monkeypatch):
    """search_evaluate answering fixed metrics: the warnings come before it, and no model is loaded."""
    import twotower.search.evaluate as evaluate

    def fake(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        return {"NDCG@10": 0.9958, "Recall@10": 1.0, "Recall@100": 1.0, "MRR@10": 1.0, "queries": 3, "skipped": 0,
                "seconds": 0.1}

    monkeypatch.setattr(evaluate, "search_evaluate", fake)


def test_bm25_weight_under_rrf_is_warned_about_once_for_a_hybrid(beir_dir, no_retrieval, caplog):
    """`search index` said it, `search evaluate --retriever hybrid --bm25-weight 0.9` must too (the same helper)."""
    with caplog.at_level("WARNING"):
        assert main(["search", "evaluate", "--beir", str(beir_dir), "--retriever", "hybrid", "--bm25-weight", "0.9",
                     "--json"]) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == ["--bm25-weight 0.9 has no effect with --fusion rrf (RRF fuses ranks, not weighted scores); use "
                      "--fusion minmax or zscore"]
    caplog.clear()
    with caplog.at_level("WARNING"):  # minmax reads the weight: nothing to say
        main(["search", "evaluate", "--beir", str(beir_dir), "--retriever", "hybrid", "--fusion", "minmax",
              "--bm25-weight", "0.9", "--json"])
    assert "no effect" not in caplog.text


def test_model_with_an_explicit_bm25_retriever_is_warned_about(beir_dir, model_dir, no_retrieval, caplog):
    with caplog.at_level("WARNING"):
        main(["search", "evaluate", "--beir", str(beir_dir), "--retriever", "bm25", "--model", str(model_dir), "--json"])
    assert "--model has no effect with --retriever bm25 (the default); pass --retriever dense or hybrid to use it" \
        in caplog.text


def _trained(folder, marker, kind, beir, split="train"):
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "bert", "architectures": ["BertForSequenceClassification"]}')
    (folder / marker).write_text(json.dumps({"kind": kind, "data": {"beir": str(beir.resolve()), "split": split}}))
    return folder


@pytest.mark.parametrize("retriever", ["dense", "hybrid"])
def test_scoring_the_split_a_model_was_fine_tuned_on_is_warned_about(retriever, beir_dir, tmp_path, no_retrieval,
                                                                     caplog):
    """NDCG@10 0.9958 on the very queries the bi-encoder was trained on came with no word of it."""
    bi = _trained(tmp_path / "bi", "twotower_bi_encoder.json", "bi_encoder", beir_dir)
    with caplog.at_level("WARNING"):
        main(["search", "evaluate", "--beir", str(beir_dir), "--split", "train", "--retriever", retriever,
              "--model", str(bi), "--json"])
    assert (f"--model {bi} was trained on split 'train' of this BEIR folder (its {bi / 'twotower_bi_encoder.json'} "
            "says so): these queries were seen in training, so the figures are not a held-out measurement; evaluate "
            "on a split it was not trained on (e.g. --split test)") in caplog.text


def test_a_model_trained_on_test_is_pointed_at_another_split(beir_dir, tmp_path, no_retrieval, caplog):
    """Scoring --split test with a model trained on test, the warning said "(e.g. --split test)"."""
    bi = _trained(tmp_path / "bi", "twotower_bi_encoder.json", "bi_encoder", beir_dir, split="test")
    with caplog.at_level("WARNING"):
        main(["search", "evaluate", "--beir", str(beir_dir), "--split", "test", "--retriever", "dense",
              "--model", str(bi), "--json"])
    assert "evaluate on a split it was not trained on (e.g. --split train)" in caplog.text
    assert "--split test)" not in caplog.text


def test_held_out_splits_other_folders_and_unused_models_are_not_warned_about(beir_dir, tmp_path, no_retrieval,
                                                                              caplog):
    from search_data import write_beir

    bi = _trained(tmp_path / "bi", "twotower_bi_encoder.json", "bi_encoder", beir_dir)
    other = write_beir(tmp_path / "other")
    with caplog.at_level("WARNING"):
        main(["search", "evaluate", "--beir", str(beir_dir), "--split", "test", "--retriever", "dense",
              "--model", str(bi), "--json"])  # held out
        main(["search", "evaluate", "--beir", str(other), "--split", "train", "--retriever", "dense",
              "--model", str(bi), "--json"])  # another corpus's train split
        main(["search", "evaluate", "--beir", str(beir_dir), "--split", "train", "--retriever", "bm25",
              "--model", str(bi), "--json"])  # BM25 ignores the model (said otherwise)
    assert "seen in training" not in caplog.text


def test_a_reranker_trained_on_the_split_is_warned_about_too(beir_dir, tmp_path, no_retrieval, caplog):
    ce = _trained(tmp_path / "ce", "twotower_cross_encoder.json", "cross_encoder", beir_dir.parent)  # the parent
    with caplog.at_level("WARNING"):  # --beir given as the folder holding beir/ is the same data
        main(["search", "evaluate", "--beir", str(beir_dir), "--split", "train", "--rerank", str(ce), "--json"])
    assert f"--rerank {ce} was trained on split 'train' of this BEIR folder" in caplog.text
