"""Baseline tuning grids log their progress (settings tried, metric, ETA) when given an interval."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.evaluation.baselines import tune_ease, tune_itemknn


def _data() -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(0)
    dense = rng.random((30, 20)) < 0.3
    valid = np.zeros_like(dense)
    for u in range(30):  # one held-out item per user, not among its training items
        valid[u, np.flatnonzero(~dense[u])[0]] = True
    return sp.csr_matrix(dense.astype(np.float32)), sp.csr_matrix(valid.astype(np.float32))


@pytest.mark.parametrize(("tune", "grid", "what"), [(tune_ease, {"lambdas": (10, 100)}, "EASE λ"),
                                                     (tune_itemknn, {"ks": (5, 10)}, "ItemKNN k")])
def test_tuning_logs_settings_tried_and_an_eta(tune, grid, what, caplog: pytest.LogCaptureFixture) -> None:
    train, valid = _data()
    with caplog.at_level(logging.INFO, logger="twotower.evaluation.baselines"):
        quiet = tune(train, valid, **grid)
        assert not caplog.records  # no interval: no lines
        loud = tune(train, valid, **grid, log_every_s=1e-9)
    lines = [r.getMessage() for r in caplog.records]
    first = next(iter(grid.values()))[0]
    assert lines[0].startswith(f"tuning {what}: 1 / 2 tried ({first:g}: NDCG@10 ") and "ETA" in lines[0]
    assert lines[-1].startswith(f"tuning {what}: 2 / 2 tried") and lines[-1].endswith("ETA 0s")
    assert loud[0] == quiet[0]  # same choice (the tables differ only in fit seconds)
