"""train.seed takes every integer the config accepts (0 .. 2**64 - 1, config.MAX_SEED) through a whole fit."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.config import MAX_SEED, EvalConfig, LossConfig, TrainConfig
from tests.training.tiny_trainer import tiny_mean_model
from twotower.training.trainer import Trainer


@pytest.mark.parametrize("seed", [2**63 - 1, MAX_SEED])
def test_a_64_bit_seed_trains(seed: int) -> None:
    """A seed above ~1.8e16 (a 64-bit random seed, secrets.randbits(64)) passed the config and then failed the first
    epoch with "ValueError: Overflow when unpacking long long": each epoch's torch seed was seed * 1000 + epoch."""
    _, users, seqs, model = tiny_mean_model()
    train = sp.csr_matrix((np.ones(users.size, np.float32), (users, seqs.items)), shape=(8, 30))
    train.data[:] = 1.0
    cfg = TrainConfig(epochs=2, batch_size=8, progress=False, checkpoint=False, seed=seed, diagnostics=False)
    trainer = Trainer(model, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=(), ks=(10,)),
                      valid_relevant=None, train_matrix=train, out_dir=None)
    result = trainer.fit()
    assert result.epochs_run == 2
