from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.results import PAD_ID, Results
from twotower.search.evaluate import METRIC_KEYS, evaluate_retriever
from twotower.cli.search_cmd import register


def test_metrics_by_hand():
    ids = np.full((2, 100), PAD_ID, dtype=np.int64)
    ids[0, :3] = [5, 1, 2]  # relevant {1}: rank 2 -> NDCG 1/log2(3) = 0.6309, MRR 0.5
    ids[1, :2] = [7, 8]  # relevant {9}: missed
    res = Results(ids, np.zeros((2, 100), dtype=np.float32))
    m = evaluate_retriever(res, [np.array([1]), np.array([9])])
    assert list(m) == list(METRIC_KEYS)
    assert m["NDCG@10"] == pytest.approx(0.6309298 / 2, rel=1e-5)
    assert m["MRR@10"] == pytest.approx(0.25) and m["Recall@10"] == pytest.approx(0.5)


def test_needs_100_columns():
    res = Results(np.zeros((1, 10), dtype=np.int64), np.zeros((1, 10), dtype=np.float32))
    with pytest.raises(ConfigError, match="k>=100"):
        evaluate_retriever(res, [np.array([0])])


def test_cli_search_evaluate_bm25_json(beir_dir, capsys):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["search", "evaluate", "--beir", str(beir_dir), "--split", "test",
                              "--retriever", "bm25", "--json"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == set(METRIC_KEYS)
    assert out["Recall@100"] == pytest.approx(1.0) and out["NDCG@10"] == pytest.approx(1.0)


def test_cli_search_index_and_query(beir_dir, tmp_path, capsys):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    idx = tmp_path / "idx"
    args = parser.parse_args(["search", "index", "--beir", str(beir_dir), "--out", str(idx),
                              "--cache", str(tmp_path / "cache"), "--max-length", "32"])
    assert args.func(args) == 0
    capsys.readouterr()
    args = parser.parse_args(["search", "query", "--index", str(idx), "--k", "2", "--json", "coffee and liver cancer"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["hits"][0]["doc_id"] == "d4" and len(out["hits"]) == 2
