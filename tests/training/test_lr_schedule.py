"""train.lr_schedule: the rate each epoch trains at, for every optimizer (dense AdamW and sparse tables)."""
from __future__ import annotations

import math

import pytest
import torch

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.errors import ConfigError
from twotower.models.two_tower import TwoTowerModel
from twotower.training.loop import epoch_lr_factor
from twotower.training.trainer import Trainer

from tests.training.tiny_trainer import tiny_mean_model


def test_factors_start_at_one_and_decay_towards_zero() -> None:
    assert [epoch_lr_factor(e, 4, "constant") for e in (1, 4)] == [1.0, 1.0]
    assert [epoch_lr_factor(e, 4, "linear") for e in (1, 2, 3, 4)] == [1.0, 0.75, 0.5, 0.25]
    cos = [epoch_lr_factor(e, 4, "cosine") for e in (1, 2, 3, 4)]
    assert cos[0] == 1.0 and cos[2] == pytest.approx(0.5) and cos[3] == pytest.approx(0.5 * (1 - math.cos(math.pi / 4)))
    assert all(a > b for a, b in zip(cos, cos[1:]))


def test_unknown_schedule_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="train.lr_schedule"):
        TrainConfig(lr_schedule="step")


@pytest.mark.parametrize("optimizer", ["adamw", "sparse_adam"])
def test_each_epoch_trains_at_the_scheduled_rate(optimizer: str) -> None:
    seqs = tiny_mean_model()[2]  # its data; this test's model has the tables' sparse flag
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_len=4, out_dim=8, hidden=()),
                                      item=TowerConfig(out_dim=8, hidden=())), 8, 30,
                          sparse=optimizer == "sparse_adam")
    train = TrainConfig(epochs=4, lr=0.01, lr_schedule="cosine", optimizer=optimizer, batch_size=8,
                        progress=False, checkpoint=False, eval_every=10)
    tr = Trainer(model, seqs, loss=LossConfig(), train=train, eval=EvalConfig(baselines=()))
    seen: list[list[float]] = []
    original = tr._run_epoch

    def spy(epoch: int) -> dict:
        seen.append([g["lr"] for opt in tr.optimizers for g in opt.param_groups])
        return original(epoch)

    tr._run_epoch = spy  # type: ignore[method-assign]
    res = tr.fit()
    want = [0.01 * epoch_lr_factor(e, 4, "cosine") for e in (1, 2, 3, 4)]
    assert [r["lr"] for r in res.history] == pytest.approx(want)
    assert len(tr.optimizers) == (2 if optimizer == "sparse_adam" else 1)
    for rates, w in zip(seen, want):  # every group of every optimizer, sparse ones included
        assert rates == pytest.approx([w] * len(rates))


def test_budget_horizon_is_where_the_budget_will_stop_the_fit() -> None:
    from twotower.training.loop import budget_horizon

    assert budget_horizon(50, 1, 0.0, 3600.0) == 50  # nothing measured yet: the configured schedule
    assert budget_horizon(50, 11, 10 * 90.0, 3600.0) == 40  # 90 s an epoch: the budget check stops after 40
    assert budget_horizon(50, 11, 10 * 30.0, 3600.0) == 50  # fast machine: train.epochs comes first
    assert budget_horizon(50, 45, 44 * 90.0, 3600.0) == 45  # never before the epoch about to run
    assert budget_horizon(50, 11, 10 * 90.0, None) == 50


def _trainer_with_epochs_of(seconds: float, train: TrainConfig, monkeypatch) -> Trainer:
    """A tiny mean-pooled model's trainer whose every epoch takes ``seconds`` on a fake clock."""
    import twotower.training.trainer as trainer_mod

    clock = [0.0]
    monkeypatch.setattr(trainer_mod.time, "perf_counter", lambda: clock[0])
    _, _, seqs, model = tiny_mean_model()
    tr = Trainer(model, seqs, loss=LossConfig(), train=train, eval=EvalConfig(baselines=()))
    original = tr._run_epoch

    def timed(epoch: int) -> dict:
        row = original(epoch)
        clock[0] += seconds
        return row

    tr._run_epoch = timed  # type: ignore[method-assign]
    return tr


@pytest.mark.parametrize("budget_schedule", [True, False])
def test_time_budget_anneals_the_schedule_before_it_ends_the_fit(monkeypatch, budget_schedule: bool) -> None:
    """60 s epochs (a fake clock) under a 3.5-minute budget: 4 epochs run, the cosine aimed at the 4th."""
    train = TrainConfig(epochs=10, lr=0.01, lr_schedule="cosine", batch_size=8, progress=False, checkpoint=False,
                        eval_every=100, time_budget_min=3.5, budget_schedule=budget_schedule, patience=50)
    tr = _trainer_with_epochs_of(60.0, train, monkeypatch)
    res = tr.fit()
    horizons = [10, 4, 4, 4] if budget_schedule else [10] * 4
    assert [r["lr"] for r in res.history] == pytest.approx(
        [0.01 * epoch_lr_factor(e, h, "cosine") for e, h in zip((1, 2, 3, 4), horizons)])
    assert res.history[-1]["lr"] < 0.002 if budget_schedule else res.history[-1]["lr"] > 0.007


def test_the_shortened_schedule_says_the_epoch_time_in_seconds(monkeypatch, caplog) -> None:
    """Epochs of seconds were logged as "at 0.0 min an epoch" (ML-100K, 2.2 s epochs, time_budget_min=0.12)."""
    import logging

    train = TrainConfig(epochs=10, lr=0.01, lr_schedule="cosine", batch_size=8, progress=False, checkpoint=False,
                        eval_every=100, time_budget_min=0.12, patience=50)
    tr = _trainer_with_epochs_of(2.2, train, monkeypatch)
    with caplog.at_level(logging.INFO, logger="twotower"):
        tr.fit()
    assert "train.time_budget_min=0.12 ends the fit there at 2.2s an epoch" in caplog.text
