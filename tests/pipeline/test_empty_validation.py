"""A validation split with no usable row (every row names an item unseen in training) stops on the loss.

Before: validation over no user gave NaN, no epoch was ever the best, and after training the run ended in
"model.safetensors missing; the run did not finish an epoch" (one user's file: its one validation item was new).
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from twotower.config import load_config
from twotower.pipeline.run import train_run

FAST = ["train.epochs=1", "train.progress=false", "train.threads=1", "train.checkpoint=false", "eval.baselines=[]",
        "model.user.hidden=[16]", "model.item.hidden=[16]", "model.user.out_dim=8", "model.item.out_dim=8"]


def test_a_validation_split_of_cold_items_only_falls_back_to_the_training_loss(tmp_path, caplog):
    train = pd.DataFrame({"user_id": ["u1"] * 6 + ["u2"] * 6, "item_id": [f"i{j}" for j in range(6)] * 2,
                          "timestamp": list(range(12))})
    valid = pd.DataFrame({"user_id": ["u1"], "item_id": ["never-trained"], "timestamp": [99]})
    with caplog.at_level(logging.WARNING):
        run, result, _ = train_run(load_config(overrides=FAST), tmp_path / "run", frames={"train": train, "valid": valid})
    np.random.seed(None)
    assert (tmp_path / "run" / "model.safetensors").is_file() and result.best_epoch == 1
    assert "validation: none of its 1 rows is usable" in caplog.text
