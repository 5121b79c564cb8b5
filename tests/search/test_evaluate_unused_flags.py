"""`search evaluate` says which flags its --retriever ignores.

`twotower search evaluate --beir DIR --model runs/bi --json` scored BM25 (the default retriever) and printed only the
metrics: nothing showed that the fine-tuned model had not been used.
"""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import main


@pytest.fixture
def model_dir(tmp_path):
    # a folder check_bi_encoder_dir accepts; BM25 never loads it
    d = tmp_path / "bi"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "bert"}')  # a transformers model's config, as the check asks
    return d


def test_model_with_the_default_bm25_retriever_is_warned_about(beir_dir, model_dir, caplog, capsys):
    with caplog.at_level("WARNING"):
        assert main(["search", "evaluate", "--beir", str(beir_dir), "--model", str(model_dir), "--json"]) == 0
    assert "--model has no effect with --retriever bm25 (the default); pass --retriever dense or hybrid" in caplog.text
    assert set(json.loads(capsys.readouterr().out)) == {"NDCG@10", "Recall@10", "Recall@100", "MRR@10"}


def test_fusion_flags_without_hybrid_are_warned_about(beir_dir, caplog):
    with caplog.at_level("WARNING"):
        main(["search", "evaluate", "--beir", str(beir_dir), "--fusion", "minmax", "--bm25-weight", "0.7", "--json"])
    assert "--fusion, --bm25-weight have no effect with --retriever bm25 (the default); pass --retriever hybrid" \
        in caplog.text


def test_plain_bm25_evaluation_warns_about_nothing(beir_dir, caplog):
    with caplog.at_level("WARNING"):
        main(["search", "evaluate", "--beir", str(beir_dir), "--json"])
    assert "no effect" not in caplog.text
