"""Baseline tuning grids log their progress (settings tried, metric, ETA) when given an interval."""
from __future__ import annotations

import logging

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.errors import ConfigError
from twotower.evaluation.baselines import ItemKNN, tune_ease, tune_itemknn


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
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"tuning {what}:")]
    assert len(lines) == 2  # one a setting (the similarity pass has lines of its own)
    first = next(iter(grid.values()))[0]
    assert lines[0].startswith(f"tuning {what}: 1 / 2 tried ({first:g}: NDCG@10 ") and "ETA" in lines[0]
    assert lines[-1].startswith(f"tuning {what}: 2 / 2 tried") and lines[-1].endswith("ETA 0s")
    assert loud[0] == quiet[0]  # same choice (the tables differ only in fit seconds)


def test_itemknn_similarity_pass_and_each_tried_setting_log_progress(caplog: pytest.LogCaptureFixture,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # on Book-Crossing's raw train (299k items) the similarity pass and each k's evaluation ran for minutes
    # with no line between "tuning itemknn" and the end of the grid
    import twotower.evaluation.baselines as baselines

    monkeypatch.setattr(baselines, "_SIMILARITY_BLOCK", 1)  # one item row a block: several progress points
    train, valid = _data()
    with caplog.at_level(logging.INFO, logger="twotower"):
        tune_itemknn(train, valid, ks=(5, 10), log_every_s=1e-9)
    lines = [r.getMessage() for r in caplog.records]
    similarity = [line for line in lines if line.startswith("ItemKNN similarity: ")]
    assert similarity[-1].startswith("ItemKNN similarity: 20 / 20 item rows") and similarity[-1].endswith("ETA 0s")
    assert len(similarity) == 20
    # each setting's evaluation says which setting it is, not a bare "evaluation:"
    assert any(line.startswith("tuning ItemKNN: k=5 on valid: 30 / 30 users") for line in lines)
    assert any(line.startswith("tuning ItemKNN: k=10 on valid: 30 / 30 users") for line in lines)
    assert not any(line.startswith("evaluation:") for line in lines)


def test_itemknn_fit_logs_its_similarity_pass_only_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    train, _ = _data()
    with caplog.at_level(logging.INFO, logger="twotower"):
        quiet = ItemKNN(k=5).fit(train)
        assert not caplog.records
        loud = ItemKNN(k=5, log_every_s=1e-9).fit(train)
    assert caplog.records[-1].getMessage().startswith("ItemKNN similarity: 20 / 20 item rows")
    assert (quiet.similarity != loud.similarity).nnz == 0


def test_kept_neighbours_are_stored_in_16_bytes_an_entry() -> None:
    # int64 rows/columns/ranks and float64 values held 32 bytes an entry: a k=500 grid over 299k items grew
    # the process past 6 GB before any evaluation
    from twotower.evaluation.baselines import _top_similar

    train, _ = _data()
    rows, cols, vals, rank = _top_similar(train, 10.0, 500)
    assert [a.dtype for a in (rows, cols, vals, rank)] == [np.int32, np.int32, np.float32, np.int32]
    assert rows.size > 0


def test_the_tuned_models_equal_fresh_fits_of_the_chosen_settings() -> None:
    from twotower.evaluation.baselines import EASE

    train, valid = _data()
    keep: dict = {}
    k, _ = tune_itemknn(train, valid, ks=(3, 5, 10), keep=keep)
    tuned, fresh = ItemKNN.from_tuning(keep, k), ItemKNN(k=k).fit(train)
    assert (tuned.similarity != fresh.similarity).nnz == 0 and tuned.n_items == 20
    with pytest.raises(ConfigError, match="above the largest k tuned"):
        ItemKNN.from_tuning(keep, 11)
    keep = {}
    lam, _ = tune_ease(train, valid, lambdas=(10, 100), keep=keep)
    assert np.array_equal(EASE.from_tuning(keep, lam).weights, EASE(l2=lam).fit(train).weights)
