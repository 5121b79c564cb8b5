"""Validation's MeanPop@k popularity counts each item's distinct training users: a user's repeats count once."""
from __future__ import annotations

import numpy as np

from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def test_item_users_counts_each_user_of_an_item_once() -> None:
    _, users, seqs, model = tiny_mean_model()
    tr = Trainer(model, seqs, loss=LossConfig(), eval=EvalConfig(baselines=()),
                 train=TrainConfig(epochs=1, progress=False, checkpoint=False))
    rows = np.repeat(np.arange(seqs.n_users), seqs.lengths())
    assert len(set(zip(rows.tolist(), seqs.items.tolist()))) < len(rows)  # the data has repeats to collapse
    expected = [len({u for u, i in zip(rows.tolist(), seqs.items.tolist()) if i == item}) for item in range(30)]
    assert tr.item_users.tolist() == expected
    assert tr.item_users.dtype == np.float64
