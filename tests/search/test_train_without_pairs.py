"""`search train` / `rerank train` on a split without enough relevant pairs are refused before any model is loaded.

`search train` on a split whose judgements are all 0 loaded MiniLM, encoded the whole corpus (minutes on SciFact
with a cold cache) and then failed with "need one positive row per query; got 0 queries and 0 rows".
"""
from __future__ import annotations

import argparse

import pytest
from search_data import write_beir

from twotower.cli.search_cmd import register
from twotower.errors import DataError


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(list(argv))


@pytest.fixture
def no_models(monkeypatch):
    def refuse(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a model was loaded before the pairs were checked")

    monkeypatch.setattr("twotower.text.encoder.load_text_encoder", refuse)
    monkeypatch.setattr("twotower.search.rerank.train_cross_encoder", refuse)


@pytest.mark.parametrize("command", [("search", "train", "--cache"), ("rerank", "train")])
def test_a_split_without_relevant_pairs_is_refused_naming_the_qrels_file(tmp_path, no_models, command):
    beir = write_beir(tmp_path / "b", qrels={"train": "query-id\tcorpus-id\tscore\n1\td1\t0\n2\td2\t0\n",
                                             "test": "query-id\tcorpus-id\tscore\n4\td4\t1\n"})
    cache = [str(tmp_path / "c")] if "--cache" in command else []
    args = _args(*command, *cache, "--beir", str(beir), "--out", str(tmp_path / "m"))
    with pytest.raises(DataError, match=r"train.tsv: 0 \(query, relevant document\) pairs with a score > 0 in "
                                        r"split 'train'; training needs at least"):
        args.func(args)
    assert not (tmp_path / "m").exists()


def test_search_train_needs_a_second_pair_for_in_batch_negatives(tmp_path, no_models):
    beir = write_beir(tmp_path / "b", qrels={"train": "query-id\tcorpus-id\tscore\n1\td1\t1\n",
                                             "test": "query-id\tcorpus-id\tscore\n4\td4\t1\n"})
    args = _args("search", "train", "--beir", str(beir), "--out", str(tmp_path / "m"), "--cache", str(tmp_path / "c"))
    with pytest.raises(DataError, match=r"1 \(query, relevant document\) pair with a score > 0 in split 'train'; "
                                        r"training needs at least 2"):
        args.func(args)
