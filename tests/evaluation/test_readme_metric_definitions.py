"""The README states how each ranking figure is computed, and the code computes what it states.

An audit recomputed `twotower evaluate`'s figures from `recommend --out` lists and found them equal, but which
Recall it is (hits / |R| or hits / min(K, |R|): 0.2232 against 0.2293 for the same ML-100K run at K=20) and over
which users the mean runs were written only in code docstrings.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.evaluation import EvalProtocol, evaluate

# whitespace folded, so re-wrapping the paragraph does not fail the test
README = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())


class _Fixed:
    """Scores that rank items 0, 1, 2, ... for every user."""

    def __init__(self, n_items: int) -> None:
        self.n_items = n_items

    def score(self, users: np.ndarray) -> np.ndarray:
        return np.tile(-np.arange(self.n_items, dtype=np.float32), (len(users), 1))


@pytest.mark.parametrize("statement", [
    "`Recall@K = hits / |R|` (not `/ min(K, |R|)`",
    "`Precision@K = hits / K`",
    "over `Σ_{j≤min(K,|R|)} 1 / log2(j+1)`",
    "`MRR@K = 1 / (rank of the first hit)` within the top `K`, else 0",
    "Each is the mean over the evaluated users, each user weighing the same",
    "`users_skipped` counts the run's users with no such row",
])
def test_readme_states_the_definition(statement: str) -> None:
    assert statement in README


def test_the_figures_are_the_stated_definitions() -> None:
    # user 0: held-out {0, 1, 5} (|R| = 3 > K = 2, both top-2 items hit); user 1: held-out {1} (rank 2);
    # user 2: no held-out item (skipped, not a zero)
    relevant = sp.csr_matrix((np.ones(4), ([0, 0, 0, 1], [0, 1, 5, 1])), shape=(3, 8))
    res = evaluate(_Fixed(8), relevant, None, EvalProtocol(ks=(2,)))
    assert res["users_evaluated"] == 2 and res["users_skipped"] == 1
    assert res["Recall@2"] == pytest.approx((2 / 3 + 1) / 2)  # / |R|, so user 0 reads 2/3, not 1.0
    assert res["Precision@2"] == pytest.approx((2 / 2 + 1 / 2) / 2)
    # IDCG over min(K, |R|) positions: user 0's two hits are ideal (1.0); user 1's hit at rank 2 reads 1/log2(3)
    assert res["NDCG@2"] == pytest.approx((1.0 + 1 / math.log2(3)) / 2)
    assert res["MRR@2"] == pytest.approx((1 + 1 / 2) / 2)
    assert res["HitRate@2"] == pytest.approx(1.0)
