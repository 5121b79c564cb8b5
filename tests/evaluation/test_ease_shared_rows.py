"""EASE's tuning takes the rows an earlier tuning computed on the same matrices instead of solving them again."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import twotower.evaluation.baselines as baselines
from twotower.evaluation import EASE, tune_ease
from twotower.evaluation.baselines import ease_rows_key


def _data(seed: int = 4) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    x = (rng.random((60, 30)) < 0.25).astype(np.float32)
    valid = np.zeros_like(x)
    for u in range(x.shape[0]):
        items = np.flatnonzero(x[u])
        if items.size >= 2:
            i = rng.choice(items)
            x[u, i], valid[u, i] = 0.0, 1.0
    return sp.csr_matrix(x), sp.csr_matrix(valid)


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The λ of every dense EASE solve, in order."""
    seen: list[float] = []
    real = baselines._ease_weights
    monkeypatch.setattr(baselines, "_ease_weights", lambda gram, l2: (seen.append(l2), real(gram, l2))[1])
    return seen


def test_the_rows_of_shared_lambdas_are_taken_not_solved_and_the_table_is_unchanged(solved: list[float]) -> None:
    # the item-item term tunes (100, 500, 2000) and the EASE baseline (50 .. 5000) on the same train and valid:
    # each shared λ was solved twice, ~40 s a solve at 11,700 items
    train, valid = _data()
    earlier: dict = {}
    tune_ease(train, valid, lambdas=(10.0, 100.0), metric="Recall@5", keep=earlier)
    assert solved == [10.0, 100.0]
    fresh_best, fresh = tune_ease(train, valid, lambdas=(1.0, 10.0, 100.0), metric="Recall@5")
    del solved[:]
    keep: dict = {}
    best, table = tune_ease(train, valid, lambdas=(1.0, 10.0, 100.0), metric="Recall@5", keep=keep,
                            known=earlier["rows"])
    assert solved == [1.0]  # 10 and 100 come from the earlier tuning
    assert best == fresh_best
    drop = {"fit_seconds"}  # the time of the solve that made the row
    assert [{k: v for k, v in r.items() if k not in drop} for r in table] == \
           [{k: v for k, v in r.items() if k not in drop} for r in fresh]
    # the chosen model is the one the grid's solve gives, whichever tuning computed its row
    model = EASE.from_tuning(keep, best)
    assert np.array_equal(model.weights, EASE(l2=best).fit(train).weights)
    assert keep["rows"]["key"] == earlier["rows"]["key"] == ease_rows_key(train, valid, "Recall@5")


@pytest.mark.parametrize("change", ["valid", "train", "metric"])
def test_rows_from_other_matrices_or_another_metric_are_not_taken(solved: list[float], change: str) -> None:
    # e.g. the term tuned on train.valid_max_users' sample of the validation users: its rows are not the baseline's
    train, valid = _data()
    earlier: dict = {}
    tune_ease(train, valid, lambdas=(10.0, 100.0), metric="Recall@5", keep=earlier)
    del solved[:]
    if change == "valid":
        valid = valid.tolil()
        valid[np.flatnonzero(valid.getnnz(axis=1))[0], :] = 0
        valid = valid.tocsr()
    elif change == "train":
        train = train.tolil()
        train[0, 0] = 1.0 - train[0, 0]
        train = train.tocsr()
    metric = "NDCG@5" if change == "metric" else "Recall@5"
    tune_ease(train, valid, lambdas=(10.0, 100.0), metric=metric, known=earlier["rows"])
    assert solved == [10.0, 100.0]


def test_a_damaged_record_is_ignored_not_trusted(solved: list[float]) -> None:
    train, valid = _data()
    earlier: dict = {}
    tune_ease(train, valid, lambdas=(10.0,), metric="Recall@5", keep=earlier)
    del solved[:]
    record = {"key": earlier["rows"]["key"], "rows": [{"l2": "10", "Recall@5": 1.0}, "x", {"l2": 10.0}]}
    _, table = tune_ease(train, valid, lambdas=(10.0,), metric="Recall@5", known=record)
    assert solved == [10.0] and table[0]["Recall@5"] == earlier["rows"]["rows"][0]["Recall@5"]
    tune_ease(train, valid, lambdas=(10.0,), metric="Recall@5", known={"rows": earlier["rows"]["rows"]})
    assert solved == [10.0, 10.0]
