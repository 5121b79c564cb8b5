"""Fusion parameters that fuse every document to one score are refused: the list came back in corpus order."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.results import PAD_ID, Results
from twotower.search.fusion import FusionChoice, rrf, score_interpolation

A = Results(np.array([[3, 1, 2]]), np.array([[3.0, 2.0, 1.0]], dtype=np.float32))
B = Results(np.array([[2, 0, PAD_ID]]), np.array([[0.9, 0.5, -np.inf]], dtype=np.float32))


def test_rrf_refuses_an_infinite_k():
    # k=inf scored every document 1 / inf = 0, and the fused list was [0, 1, 2, 3]: corpus order
    with pytest.raises(ConfigError, match=r"rrf k must be a number in \[0, 1,000,000\], got inf"):
        rrf([A, B], k=float("inf"))
    with pytest.raises(ConfigError, match=r"cannot be applied \(rrf k must be a number in"):
        FusionChoice(name="rrf", params={"k": float("inf")})


@pytest.mark.parametrize("weights", [[0.0, 0.0], [-1.0, 2.0], [0.5, -0.5]])
def test_interpolation_refuses_negative_or_all_zero_weights(weights):
    # [0, 0] fused every document to 0 (corpus order); [-1, 2] ranked BM25's best hit below every document it missed
    with pytest.raises(ConfigError, match=r"weights must be >= 0, at least one of them > 0"):
        score_interpolation([A, B], weights, "minmax")
    with pytest.raises(ConfigError, match=r"weights must be >= 0"):
        FusionChoice(name="interpolation", params={"weights": weights, "normalization": "zscore"})


def test_interpolation_takes_a_zero_weight_beside_a_positive_one():
    # w=0 and w=1 are the ends of tune_fusion's grid: one list alone
    assert score_interpolation([A, B], [0.0, 1.0], "minmax", top_k=2).ids[0].tolist()[:1] == [2]
    assert score_interpolation([A, B], [1.0, 0.0], "minmax", top_k=1).ids[0].tolist() == [3]
