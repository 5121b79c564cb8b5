"""Per-epoch diagnostics read the model as it scores, whatever the catalogue's size."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from twotower.config import ModelConfig, TowerConfig
from twotower.models.two_tower import TwoTowerModel
from twotower.training.diagnostics import embedding_diagnostics, embedding_spread, model_diagnostics, uniformity


def test_a_sampled_catalogue_is_measured_without_dropout_like_a_whole_one():
    # above max_items the diagnostics embed a sample of items; mid-training the towers were in train mode, so the
    # sample took dropout and its noise read as spread, unlike the whole catalogue below max_items (eval mode)
    torch.manual_seed(0)
    tower = dict(out_dim=8, hidden=(16,), dropout=0.5)
    model = TwoTowerModel(ModelConfig(user=TowerConfig(history="mean", **tower), item=TowerConfig(**tower)), 5, 40)
    model.train()
    whole = model_diagnostics(model, np.random.default_rng(0), None)
    state = torch.get_rng_state()
    sampled = model_diagnostics(model, np.random.default_rng(0), None, max_items=10, sample=40)  # every item, shuffled
    assert sampled["item_std"] == pytest.approx(whole["item_std"], rel=1e-5)
    with torch.no_grad():
        model.eval()
        assert whole["item_std"] == pytest.approx(embedding_spread(model.all_item_embeddings()), rel=1e-6)
        model.train()
    assert model.training  # left as the training loop had it
    assert torch.equal(torch.get_rng_state(), state)  # no dropout masks drawn from the training's stream


def test_a_sampled_catalogues_diagnostics_leave_the_training_as_it_is(monkeypatch):
    # above max_items the epoch's diagnostics sample their items: drawn from the trainer's own numpy stream, they
    # moved the next epochs' history dropout, so train.diagnostics=false trained another model (losses 6.51, 3.13
    # with them, 6.73, 3.45 without)
    import functools

    import twotower.training.epoch as epoch_mod
    from twotower.config import EvalConfig, LossConfig, TrainConfig
    from twotower.training.trainer import Trainer

    from tests.training.tiny_trainer import tiny_mean_model

    monkeypatch.setattr(epoch_mod, "model_diagnostics",
                        functools.partial(epoch_mod.model_diagnostics, max_items=10, sample=5))  # 30 items: sampled
    losses = {}
    for diagnostics in (True, False):
        seqs, model = tiny_mean_model()[2:]
        train = TrainConfig(epochs=3, batch_size=8, lr=0.01, history_dropout=0.3, diagnostics=diagnostics,
                            progress=False, checkpoint=False)
        history = Trainer(model, seqs, loss=LossConfig(), train=train, eval=EvalConfig(baselines=())).fit().history
        assert ("item_std" in history[-1]) == diagnostics
        losses[diagnostics] = [row["loss"] for row in history]
    assert losses[True] == losses[False]


def test_uniformity_of_far_apart_vectors_is_finite():
    # unnormalised towers (model.*.normalize=false) whose vectors lie ~11 apart: every exp(-2 d^2) underflowed in
    # float32, and log.jsonl logged item_uniformity -Infinity (not JSON to most readers) where the value is -107.3
    x = torch.randn(1000, 64, generator=torch.Generator().manual_seed(0))
    sq = torch.pdist(x.double()).pow(2)
    want = float(torch.logsumexp(-2.0 * sq, 0)) - math.log(sq.numel())  # log E exp(-2 d^2), Wang & Isola (2020)
    assert uniformity(x) == pytest.approx(want, rel=1e-6)
    assert uniformity(x / 8) == pytest.approx(float(torch.logsumexp(-2.0 * sq / 64, 0)) - math.log(sq.numel()), rel=1e-6)


def _tight(std: float, n: int = 200, d: int = 8) -> torch.Tensor:
    """Embeddings of about ``std`` spread per dimension (an untrained tower's are close together)."""
    return 1.0 + std * torch.randn(n, d, generator=torch.Generator().manual_seed(1))


def test_a_low_spread_after_a_first_epoch_is_a_watch_point_not_a_collapse(caplog):
    # a short first epoch at 1M items drew "embedding collapse ...; lower the learning rate" and a COLLAPSE on the
    # epoch line: an untrained model's embeddings start close together, and a lower rate would only slow it down
    items, users = _tight(0.02), _tight(0.005)
    with caplog.at_level("INFO", logger="twotower.training.diagnostics"):
        first = embedding_diagnostics(items, users)
    assert first["collapse_alarm"] is False
    assert [r.levelname for r in caplog.records] == ["INFO"]
    line = caplog.records[0].getMessage()
    assert line.startswith("embedding spread low: std item=0.02") and "a first epoch's dip" in line
    assert "learning rate" not in line
    caplog.clear()
    with caplog.at_level("INFO", logger="twotower.training.diagnostics"):
        growing = embedding_diagnostics(items, users, earlier=[{"item_std": 0.01, "user_std": 0.001}])
        shrunk = embedding_diagnostics(items, users, earlier=[first, {"epoch": 2, "item_std": 0.03, "user_std": 0.02}])
        fine = embedding_diagnostics(_tight(0.2), _tight(0.2), earlier=[first])
    assert (growing["collapse_alarm"], shrunk["collapse_alarm"], fine["collapse_alarm"]) == (False, True, False)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert len(lines) == 2 and "but growing since the epoch before" in lines[0][1]
    assert lines[1][0] == "WARNING" and lines[1][1].startswith("embedding collapse: std item=0.02")
    assert "lower the learning rate" in lines[1][1]
    # the settings named, and the temperature the right way: scores are divided by it, so a high one collapses
    # (loss.temperature=100 on MovieLens-100K; the advice said "raise the temperature")
    assert lines[1][1].endswith("lower the learning rate (train.lr) or the temperature (loss.temperature)")
    assert {k: v for k, v in first.items() if k != "collapse_alarm"} == {
        k: v for k, v in shrunk.items() if k != "collapse_alarm"}  # the figures themselves are unchanged


def test_the_epoch_line_names_the_user_tower_when_it_is_the_one_that_collapsed(caplog):
    # "item_std 0.102 COLLAPSE" blamed the items when the user tower had collapsed (loss.temperature=100:
    # user std 0.0047)
    from types import SimpleNamespace

    from twotower.config import LossConfig, TrainConfig
    from twotower.training.epoch_line import log_epoch
    from twotower.training.loop import EarlyStopping

    tr = SimpleNamespace(cfg=TrainConfig(epochs=3), loss_cfg=LossConfig(), sequence=False, history=[{"seconds": 1.0}],
                         valid_relevant=None)
    row = {"epoch": 2, "loss": 5.0, "inbatch_accuracy": 0.1, "item_std": 0.102, "user_std": 0.0047,
           "collapse_alarm": True, "seconds": 1.0, "examples_per_s": 100.0}
    with caplog.at_level("INFO", logger="twotower.training.trainer"):
        log_epoch(tr, row, "NDCG@10", EarlyStopping(5), horizon=3)
        log_epoch(tr, {**row, "user_std": 0.05, "item_std": 0.004}, "NDCG@10", EarlyStopping(5), horizon=3)
    lines = [r.getMessage() for r in caplog.records]
    assert "item_std 0.102 COLLAPSE (user_std 0.0047)" in lines[0]
    assert "item_std 0.004 COLLAPSE " in lines[1] and "user_std" not in lines[1]


def test_a_low_temperature_lowers_the_line_and_is_not_told_to_go_lower(caplog):
    # loss.temperature=0.0001 on MovieLens-100K: items 0.0013, users 0.0051 while validation rose every epoch, and
    # the alarm said "collapse ... lower ... the temperature (loss.temperature)"
    from twotower.training.diagnostics import GENERIC_ADVICE, collapse_advice, temperature_line_scale

    assert temperature_line_scale(0.02) == 1.0 and temperature_line_scale(5.0) == 1.0
    assert temperature_line_scale(0.0001) == pytest.approx((0.0001 / 0.02) ** 0.5)
    advice = collapse_advice(0.002, 1e-4, 0.0001)
    assert advice.startswith("loss.temperature=0.0001 is below its default (0.02)") and "raise it" in advice
    assert collapse_advice(0.002, 1e-4, 0.02) == GENERIC_ADVICE
    items, users = _tight(0.0013), _tight(0.0051)
    before = [{"epoch": 1, "item_std": 0.0012, "user_std": 0.006}]
    assert embedding_diagnostics(items, users, earlier=before)["collapse_alarm"] is True  # at the default's line
    scaled = embedding_diagnostics(items, users, earlier=before, line_scale=temperature_line_scale(0.0001))
    from twotower.training.diagnostics import collapse_std

    assert scaled["collapse_alarm"] is False
    assert scaled["collapse_std"] == pytest.approx(collapse_std(8) * (0.0001 / 0.02) ** 0.5)
    # the spread that did not grow is named: the items' grew (0.0012 -> 0.0013), the users' did not
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower.training.diagnostics"):
        embedding_diagnostics(items, users, earlier=before, advice=advice)
    (line,) = [r.getMessage() for r in caplog.records]
    assert "and the user spread not growing since the epoch before" in line
