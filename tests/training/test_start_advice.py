"""What the start of training says about the settings on this data (training/start_line.py).

A newcomer's walk on 1,500 ML-1M users: train.examples=sequence kept batch 512, 3 optimizer steps an epoch, and
validated at NDCG@10 0.0007 without a word; a transformer on causal examples ran 15x the pooled tower's epoch
without a word of the all-positions objective; and history_len 50 read under half of the median history, silently.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from twotower.config import EvalConfig, LossConfig, ModelConfig, TowerConfig, TrainConfig
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.trainer import Trainer

N_ITEMS = 30


def _seqs(n_users: int, length: int) -> UserSequences:
    users = np.repeat(np.arange(n_users), length)
    items = np.random.default_rng(0).integers(0, N_ITEMS, size=users.size)
    return UserSequences.from_arrays(users, items, np.arange(users.size), n_users)


def _trainer(caplog: pytest.LogCaptureFixture, *, history: str = "mean", examples: str = "causal",
             n_users: int = 40, length: int = 10, history_len: int = 20, batch_size: int = 64,
             epochs: int = 1, loss: LossConfig | None = None) -> list[logging.LogRecord]:
    torch.manual_seed(0)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(use_id=history == "none", history=history, history_len=history_len,
                                                       history_dim=8, out_dim=8, hidden=()),
                                      item=TowerConfig(id_dim=8, out_dim=8, hidden=())), n_users, N_ITEMS)
    train = TrainConfig(examples=examples, epochs=epochs, batch_size=batch_size, progress=False, checkpoint=False,
                        history_dropout=0.0)
    with caplog.at_level(logging.INFO, logger="twotower.training.trainer"):
        Trainer(model, _seqs(n_users, length), loss=loss or LossConfig(), train=train, eval=EvalConfig())
    return [r for r in caplog.records if r.name == "twotower.training.trainer"]


def _said(records: list[logging.LogRecord], start: str) -> list[logging.LogRecord]:
    return [r for r in records if r.getMessage().startswith(start)]


def test_few_optimizer_steps_an_epoch_are_warned_with_the_numbers_and_the_settings(caplog) -> None:
    # 1,500 users of sequence windows in batches of 512: 3 steps an epoch, as in the walk
    records = _trainer(caplog, history="gru", examples="sequence", n_users=1500, length=3, batch_size=512)
    (line,) = _said(records, "1,500 sequences an epoch")
    assert line.levelno == logging.WARNING
    assert line.getMessage() == (
        "1,500 sequences an epoch (train.examples=sequence) in batches of 512 make 3 optimizer steps an epoch, 3 "
        "over train.epochs=1: too few updates for the towers to learn much (the ML-1M recipes take 15,000-30,000); "
        "a smaller train.batch_size (e.g. 16: 94 steps an epoch) or more epochs (train.epochs) give more")


def test_enough_steps_an_epoch_or_over_the_epochs_say_nothing(caplog) -> None:
    # 40 users x 10 = 400 examples in batches of 8: 50 steps an epoch
    assert not [r for r in _trainer(caplog, batch_size=8) if r.levelno >= logging.WARNING]
    caplog.clear()
    # 7 steps an epoch, but 150 epochs make 1,050 in all
    assert not [r for r in _trainer(caplog, epochs=150) if r.levelno >= logging.WARNING]
    caplog.clear()
    # too few examples for any batch to reach 50 steps: more epochs is the one way named
    (line,) = _said(_trainer(caplog, n_users=4, length=10), "40 examples an epoch")
    assert line.getMessage().endswith("the ML-1M recipes take 15,000-30,000); more epochs (train.epochs) give more")


@pytest.mark.parametrize("history", ["transformer", "gru"])
def test_a_sequence_tower_on_causal_examples_is_told_the_all_positions_objective(caplog, history) -> None:
    (line,) = _said(_trainer(caplog, history=history), f"model.user.history={history} with train.examples=causal")
    assert line.levelno == logging.INFO
    assert line.getMessage() == (
        f"model.user.history={history} with train.examples=causal runs the {history} once per training example: "
        "400 forward passes an epoch over windows of up to 20 items; train.examples=sequence, the all-positions "
        "objective, runs it once per user (40 windows an epoch) with a target at every position "
        "(examples/sasrec.toml is the ML-1M recipe)")


@pytest.mark.parametrize(("history", "examples"), [("mean", "causal"), ("transformer", "sequence"),
                                                   ("transformer", "denoising")])
def test_the_cost_line_is_for_sequence_towers_on_causal_examples_only(caplog, history, examples) -> None:
    assert not _said(_trainer(caplog, history=history, examples=examples), "model.user.history=")


def test_histories_longer_than_history_len_are_said_once_as_information(caplog) -> None:
    records = _trainer(caplog, history_len=4, length=10)
    (line,) = _said(records, "the user tower reads the last")
    assert line.levelno == logging.INFO
    assert line.getMessage() == ("the user tower reads the last 4 items of each history; the median history here "
                                 "is 10 (mean 10): model.user.history_len sets it")
    caplog.clear()
    assert not _said(_trainer(caplog, history_len=10, length=10), "the user tower reads the last")
    caplog.clear()
    assert not _said(_trainer(caplog, history="none", history_len=4, length=10), "the user tower reads the last")


@pytest.mark.parametrize("optimizer", ["adamw", "sparse_adam"])
def test_a_big_id_table_under_adamw_points_at_sparse_adam(monkeypatch, optimizer):
    """A 373,000-item catalogue trained at 4,400 examples/s under the default AdamW, 21,700 with sparse_adam, and
    the start line said nothing of it (the README's paragraph on big ID tables was the only place that did)."""
    from types import SimpleNamespace

    from twotower.training import start_line

    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", history_dim=8, out_dim=8, hidden=()),
                                      item=TowerConfig(id_dim=8, out_dim=8, hidden=())), 10, N_ITEMS)
    tr = SimpleNamespace(cfg=TrainConfig(optimizer=optimizer), model=model)
    assert start_line.big_tables_note(tr) is None  # 30 rows
    monkeypatch.setattr(start_line, "BIG_TABLE_ROWS", N_ITEMS)
    said = start_line.big_tables_note(tr)
    if optimizer == "sparse_adam":
        assert said is None
    else:
        assert said is not None and said.startswith("train.optimizer=adamw steps every row of the ID tables")
        assert "train.optimizer=sparse_adam steps only the rows a batch touches" in said


@pytest.mark.parametrize(("loss", "setting", "negatives"),
                         [(LossConfig(uniform_negatives=1000), "loss.uniform_negatives=1,000", "1,063 negatives a query"),
                          (LossConfig(kind="sampled", sampled_negatives=31), "loss.sampled_negatives=31", "31 negatives a query")])
def test_more_negatives_a_batch_than_items_point_at_the_full_softmax(caplog, loss, setting, negatives) -> None:
    """loss.uniform_negatives=100000 on ML-100K's 1,615 items trained at 133 examples/s against ~9,000, the start
    line saying only "100511 negatives a query": the full softmax scores each item once, exactly, for less."""
    (line,) = _said(_trainer(caplog, batch_size=64, loss=loss), setting)
    assert line.levelno == logging.WARNING
    assert f"draws more negatives a batch than the {N_ITEMS} items of the catalogue" in line.getMessage()
    assert negatives in line.getMessage() and "loss.kind=full" in line.getMessage()


@pytest.mark.parametrize("loss", [LossConfig(uniform_negatives=N_ITEMS), LossConfig(kind="sampled", sampled_negatives=N_ITEMS),
                                  LossConfig(kind="full", sampled_negatives=1000)])
def test_negatives_up_to_the_catalogue_say_nothing_of_it(caplog, loss) -> None:
    assert not [r for r in _trainer(caplog, batch_size=8, loss=loss) if "draws more negatives" in r.getMessage()]
