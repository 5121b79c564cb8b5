"""Per-epoch diagnostics read the model as it scores, whatever the catalogue's size."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from twotower.config import ModelConfig, TowerConfig
from twotower.models.two_tower import TwoTowerModel
from twotower.training.diagnostics import embedding_spread, model_diagnostics


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
