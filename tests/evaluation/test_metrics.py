"""Pure ranking metrics on hand-made rankings whose values are worked out in comments."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.errors import ConfigError, DataError
from twotower.evaluation import (
    coverage_at_k,
    hit_rate_at_k,
    hits_at_k,
    mean_popularity_at_k,
    mrr_at_k,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
)

# Three users, top-4 lists over a catalogue of 6 items; -1 pads user 2's list.
RANKED = np.array(
    [
        [3, 1, 4, 0],
        [5, 2, 0, 1],
        [2, 0, -1, -1],
    ],
    dtype=np.int64,
)
# user 0: relevant {1, 0, 5} -> hits at ranks 2 and 4 (only rank 2 within k=2)
# user 1: relevant {}        -> undefined, NaN everywhere
# user 2: relevant {2}       -> hit at rank 1
RELEVANT = [np.array([1, 0, 5]), np.array([], dtype=np.int64), np.array([2])]


def _csr(relevant: list[np.ndarray], n_items: int = 6) -> sp.csr_matrix:
    rows = np.repeat(np.arange(len(relevant)), [len(r) for r in relevant])
    cols = np.concatenate(relevant)
    return sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(relevant), n_items))


LOG3 = math.log2(3)


@pytest.mark.parametrize("relevant", [RELEVANT, _csr(RELEVANT)], ids=["list", "csr"])
def test_per_user_metrics_at_2(relevant) -> None:
    # user 0, top-2 = [3, 1]: one hit at rank 2.
    #   recall = 1/3, precision = 1/2, DCG = 1/log2(3), IDCG = 1 + 1/log2(3) (min(|rel|=3, k=2) = 2 slots),
    #   MRR = 1/2, hit = 1
    # user 2, top-2 = [2, 0]: hit at rank 1. recall 1, precision 1/2, NDCG 1 (IDCG over min(1, 2) = 1 slot), MRR 1
    np.testing.assert_allclose(recall_at_k(RANKED, relevant, 2), [1 / 3, np.nan, 1.0])
    np.testing.assert_allclose(precision_at_k(RANKED, relevant, 2), [0.5, np.nan, 0.5])
    np.testing.assert_allclose(ndcg_at_k(RANKED, relevant, 2), [(1 / LOG3) / (1 + 1 / LOG3), np.nan, 1.0])
    np.testing.assert_allclose(mrr_at_k(RANKED, relevant, 2), [0.5, np.nan, 1.0])
    np.testing.assert_allclose(hit_rate_at_k(RANKED, relevant, 2), [1.0, np.nan, 1.0])


def test_metrics_at_4_count_padding_as_a_miss() -> None:
    # user 0, top-4 = [3, 1, 4, 0]: hits at ranks 2 and 4 -> recall 2/3, precision 2/4,
    #   DCG = 1/log2(3) + 1/log2(5), IDCG = 1 + 1/log2(3) + 1/log2(4) (3 relevant items)
    # user 2, top-4 = [2, 0, -1, -1]: precision keeps denominator k = 4 -> 1/4
    dcg = 1 / LOG3 + 1 / math.log2(5)
    idcg = 1 + 1 / LOG3 + 1 / 2
    np.testing.assert_allclose(recall_at_k(RANKED, RELEVANT, 4), [2 / 3, np.nan, 1.0])
    np.testing.assert_allclose(precision_at_k(RANKED, RELEVANT, 4), [0.5, np.nan, 0.25])
    np.testing.assert_allclose(ndcg_at_k(RANKED, RELEVANT, 4), [dcg / idcg, np.nan, 1.0])


def test_miss_gives_zero_not_nan() -> None:
    ranked = np.array([[0, 1]])
    rel = [np.array([5])]
    assert recall_at_k(ranked, rel, 2)[0] == 0.0
    assert ndcg_at_k(ranked, rel, 2)[0] == 0.0
    assert mrr_at_k(ranked, rel, 2)[0] == 0.0
    assert hit_rate_at_k(ranked, rel, 2)[0] == 0.0


def test_padding_never_matches_previous_users_last_item() -> None:
    # Keys are user * width + item; padding -1 of user 1 would collide with item width-1 of user 0.
    ranked = np.array([[0, 1], [-1, -1]])
    rel = [np.array([1]), np.array([0])]
    hits, n_rel = hits_at_k(ranked, rel, 2)
    assert hits.tolist() == [[False, True], [False, False]]
    assert n_rel.tolist() == [1, 1]


def test_duplicate_relevant_items_count_once() -> None:
    ranked = np.array([[7, 8]])
    assert recall_at_k(ranked, [np.array([7, 7, 9])], 2)[0] == pytest.approx(0.5)  # |{7, 9}| = 2


def test_perfect_ranking_scores_one() -> None:
    ranked = np.array([[4, 2, 9, 1]])
    rel = [np.array([2, 4])]
    assert ndcg_at_k(ranked, rel, 4)[0] == pytest.approx(1.0)
    assert recall_at_k(ranked, rel, 2)[0] == pytest.approx(1.0)


def test_k_larger_than_ranked_raises() -> None:
    with pytest.raises(ConfigError, match="k=5"):
        recall_at_k(RANKED, RELEVANT, 5)
    with pytest.raises(ConfigError):
        recall_at_k(RANKED, RELEVANT, 0)


def test_user_count_mismatch_raises() -> None:
    with pytest.raises(DataError, match="relevant has 2"):
        recall_at_k(RANKED, RELEVANT[:2], 2)


def test_coverage_counts_distinct_items_over_catalogue() -> None:
    # top-2 lists: {3, 1}, {5, 2}, {2, 0} -> 5 distinct of 10 items
    assert coverage_at_k(RANKED, 10, 2) == pytest.approx(0.5)
    # top-4 adds 4 and ignores padding: {0, 1, 2, 3, 4, 5} -> 6 / 10
    assert coverage_at_k(RANKED, 10, 4) == pytest.approx(0.6)


def test_mean_popularity_over_non_padding_slots() -> None:
    pop = np.arange(6, dtype=float) * 10  # item i was seen 10 i times
    # top-4 slots without padding: 3 1 4 0 5 2 0 1 2 0 -> item rows sum to 18 -> 180 / 10 slots
    assert mean_popularity_at_k(RANKED, pop, 4) == pytest.approx(18.0)
    assert math.isnan(mean_popularity_at_k(np.full((2, 3), -1), pop, 3))


def test_a_ranked_row_listing_an_item_twice_is_refused() -> None:
    # [3, 3, 1] against {3} read as Recall 2.0 and NDCG 1.63: one relevant item counted twice
    for metric in (recall_at_k, ndcg_at_k):
        with pytest.raises(DataError, match="lists item 3 twice in row 1"):
            metric(np.array([[0, 1, 2], [3, 3, 1]]), [np.array([0]), np.array([3])], 3)
    # padding may repeat, and a repeat past k is not read
    assert recall_at_k(np.array([[3, -1, -1]]), [np.array([3])], 3)[0] == pytest.approx(1.0)
    assert recall_at_k(np.array([[3, 1, 3]]), [np.array([3])], 2)[0] == pytest.approx(1.0)
    with pytest.raises(DataError, match="below -1"):
        recall_at_k(np.array([[3, -2, 1]]), [np.array([3])], 3)
