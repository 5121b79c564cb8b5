"""The tiny mean-pooled model several trainer tests train: 8 users x 6 random items of 30, seeded."""
from __future__ import annotations

import numpy as np
import torch

from twotower.config import ModelConfig, TowerConfig
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel


def tiny_mean_model() -> tuple[np.random.Generator, np.ndarray, UserSequences, TwoTowerModel]:
    """``(rng, users, seqs, model)``: ``users`` each row's user; ``rng`` (seed 0) has drawn the items and goes on
    for a test's own draws."""
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(8), 6)
    seqs = UserSequences.from_arrays(users, rng.integers(0, 30, size=users.size), np.arange(users.size), 8)
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_len=4, out_dim=8, hidden=()),
                                      item=TowerConfig(out_dim=8, hidden=())), 8, 30)
    return rng, users, seqs, model
