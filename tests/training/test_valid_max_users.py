"""train.valid_max_users: per-epoch validation on a seeded sample of validation users.

Full-catalogue validation scores every validation user against every item each epoch: 176k users over a
1M-item catalogue took ~35 minutes an epoch on one core (for a 10-second epoch of training), with no setting
to make it smaller.
"""
from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.errors import ConfigError
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training import hooks
from twotower.training.trainer import Trainer


def _trainer(valid_max_users: int | None, n_users: int = 40, n_items: int = 30, *, epochs: int = 1,
             out: Path | None = None) -> Trainer:
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(n_users), 4)
    items = rng.integers(0, n_items, users.size)
    seqs = UserSequences.from_arrays(users, items, np.arange(users.size), n_users)
    train = sp.csr_matrix((np.ones(users.size, np.float32), (users, items)), shape=(n_users, n_items))
    train.data[:] = 1.0
    valid_users = np.arange(0, n_users, 2)  # every other user has a validation item
    valid = sp.csr_matrix((np.ones(valid_users.size, np.float32), (valid_users, valid_users % n_items)),
                          shape=(n_users, n_items))
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_len=4, out_dim=8, hidden=()),
                                      item=TowerConfig(out_dim=8, hidden=())), n_users, n_items)
    cfg = TrainConfig(epochs=epochs, batch_size=8, progress=False, checkpoint=out is not None, patience=10,
                      valid_max_users=valid_max_users)
    return Trainer(model, seqs, loss=LossConfig(), train=cfg, eval=EvalConfig(baselines=(), ks=(10,)),
                   valid_relevant=valid, train_matrix=train, out_dir=out)


def test_validation_scores_the_sampled_users_only() -> None:
    full = _trainer(None).validate()
    assert full["users_evaluated"] == 20
    got = _trainer(5).validate()
    assert got["users_evaluated"] == 5 and got["users_skipped"] == 35
    again = _trainer(5)
    assert np.array_equal(again.valid_relevant.indptr, _trainer(5).valid_relevant.indptr)  # drawn once, seeded
    assert set(np.flatnonzero(np.diff(again.valid_relevant.indptr))) <= set(range(0, 40, 2))
    assert _trainer(100).validate() == full  # a cap above the validation users changes nothing


def test_large_validation_is_warned_about(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(hooks, "LARGE_VALIDATION_SCORES", 100)  # 20 users x 30 items = 600 scores
    with caplog.at_level(logging.WARNING):
        _trainer(None)
    assert "train.valid_max_users" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _trainer(5)
    assert "train.valid_max_users" not in caplog.text


def test_valid_max_users_is_checked() -> None:
    with pytest.raises(ConfigError, match="train.valid_max_users"):
        TrainConfig(valid_max_users=0)


def test_a_resume_on_a_sample_scores_the_best_epoch_again_on_it(tmp_path, caplog) -> None:
    """train.valid_max_users set on resume: the best measured on every validation user was compared with the
    sample's scores, so the resumed epochs could not win on a sample that scores lower (ML-100K: 0.1764 on all
    943 users against 0.14-0.15 on 50, and the epoch-3 weights were kept though later epochs scored higher)."""
    from twotower.training.checkpoint import load_weights

    out = tmp_path / "run"
    first = _trainer(None, epochs=2, out=out).fit()
    shutil.copy(out / "model.safetensors", tmp_path / "best.safetensors")
    judge = _trainer(14)  # the sample the resume validates on
    load_weights(tmp_path / "best.safetensors", judge.model)
    kept = judge.validate()["NDCG@10"]  # the old best epoch on that sample
    assert kept != pytest.approx(first.best_metric)  # another figure than on every user
    with caplog.at_level(logging.INFO, logger="twotower.training"):
        res = _trainer(14, epochs=3, out=out).fit(resume=True)
    scored = {first.best_epoch: kept, **{r["epoch"]: r["valid_NDCG@10"] for r in res.history if r["epoch"] > 2}}
    best = max(scored, key=lambda e: (scored[e], -e))
    assert (res.best_epoch, res.best_metric) == (best, pytest.approx(scored[best]))
    # here epoch 3 beats epoch 2 on the sample, though not epoch 2's figure on every user: it was thrown away
    assert res.best_epoch == 3 and scored[3] < first.best_metric
    assert "train.valid_max_users: all 20 validation users in the run, 14 of the 20 now" in caplog.text
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert state["best"] == pytest.approx(res.best_metric) and state["best_measure"]["valid_max_users"] == 14
