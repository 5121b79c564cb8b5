"""eval.select_metric: early stopping follows that validation metric, or the run is refused before training."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.errors import ConfigError
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def _trainer(select_metric: str) -> Trainer:
    rng, users, seqs, model = tiny_mean_model()
    valid = sp.csr_matrix((np.ones(8, np.float32), (np.arange(8), rng.integers(0, 30, size=8))), shape=(8, 30))
    train = sp.csr_matrix((np.ones(users.size, np.float32), (users, seqs.items)), shape=(8, 30))
    train.data[:] = 1.0
    return Trainer(model, seqs, loss=LossConfig(), train=TrainConfig(epochs=2, batch_size=8, progress=False,
                   checkpoint=False), eval=EvalConfig(baselines=(), select_metric=select_metric),
                   valid_relevant=valid, train_matrix=train)


@pytest.mark.parametrize("name", ["ndcg@10", "AUC", "NDCG"])
def test_a_metric_validation_does_not_compute_is_refused_before_training(name):
    # it used to train and keep the epoch with the lowest loss, logging "valid ndcg@10 nan"
    with pytest.raises(ConfigError, match=rf"eval.select_metric: metric '{name}' is not of the form NAME@K"):
        _trainer(name)


def test_a_cut_off_outside_eval_ks_is_computed_and_selects_the_epoch():
    res = _trainer("Recall@7").fit()  # 7 is not among eval.ks (10, 20, 50, 100)
    assert all("valid_Recall@7" in row for row in res.history)
    best = max(res.history, key=lambda row: row["valid_Recall@7"])
    assert res.best_metric == best["valid_Recall@7"]  # not minus the loss
