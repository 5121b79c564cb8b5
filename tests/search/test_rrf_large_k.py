"""RRF with a large k keeps the order its sums say: ordered on float64, and a k past float64's resolution refused."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.config import MAX_RRF_K, SearchConfig
from twotower.errors import ConfigError
from twotower.results import PAD_ID, Results
from twotower.search.fusion import FusionChoice, rrf

ONES = np.ones((1, 3), dtype=np.float32)


@pytest.mark.parametrize("k", [60, 10_000, 100_000, MAX_RRF_K])
def test_ranks_1_and_3_beat_2_and_2_for_every_allowed_k(k):
    # 1/(k+1) + 1/(k+3) > 2/(k+2) for every finite k; as float32 the sums tied from k=10,000 and corpus row 5 won
    bm25 = Results(np.array([[7, 5, 1]]), ONES)
    dense = Results(np.array([[2, 5, 7]]), ONES)
    assert rrf([bm25, dense], k=k).ids[0].tolist()[:2] == [7, 5]


def test_one_lists_order_survives_a_large_k():
    # doc 29 at rank 1 ... doc 0 at rank 30 in one list, nothing in the other: RRF keeps that order
    ids = np.arange(30, dtype=np.int64)[::-1].copy()[None]
    one = Results(ids, np.linspace(1, 0, 30, dtype=np.float32)[None])
    empty = Results(np.full((1, 30), PAD_ID, dtype=np.int64), np.full((1, 30), -np.inf, dtype=np.float32))
    assert rrf([one, empty], k=MAX_RRF_K).ids[0].tolist() == ids[0].tolist()


@pytest.mark.parametrize("k", [MAX_RRF_K + 1, 1e7, 1e16])
def test_a_k_past_the_bound_is_refused(k):
    with pytest.raises(ConfigError, match=r"rrf k must be a number in \[0, 1,000,000\]"):
        rrf([Results(np.array([[1]]), ONES[:, :1])] * 2, k=k)
    with pytest.raises(ConfigError, match=r"cannot be applied"):
        FusionChoice(name="rrf", params={"k": k})


def test_search_config_refuses_an_rrf_k_past_the_bound():
    with pytest.raises(ConfigError, match=r"search.rrf_k.*at most 1,000,000"):
        SearchConfig(rrf_k=10_000_000)
    assert SearchConfig(rrf_k=MAX_RRF_K).rrf_k == MAX_RRF_K
