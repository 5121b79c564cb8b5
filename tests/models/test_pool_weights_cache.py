"""The pooled user tower's recency weights, computed once per window length: the same values as computing
them, and usable with autograd after a first call under inference_mode (serving, then an explanation)."""
from __future__ import annotations

import torch

from twotower.config import TowerConfig
from twotower.models.towers import UserTower

PAD = 20


def _tower(length: int) -> UserTower:
    torch.manual_seed(3)
    cfg = TowerConfig(use_id=False, use_features=False, history="recency", history_len=length, history_dim=4,
                      hidden=(), out_dim=8, dropout=0.0, recency_decay=0.85, extra_pools=(1.0, 0.5))
    return UserTower(cfg, n_users=3, n_items=PAD)


def test_weights_are_the_decay_powers_of_each_column_age() -> None:
    tower = _tower(7)
    h = torch.tensor([[PAD, PAD, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7]])
    age = torch.arange(6, -1, -1, dtype=torch.float32)
    valid = (h != PAD).float()
    assert torch.equal(tower.history_weights(h), valid * 0.85**age)
    assert torch.equal(tower.history_weights(h, valid), valid * 0.85**age)
    emb = tower.history_emb.weight.detach()
    got = tower.pooled_histories(h).detach()
    for i, w in enumerate([valid * 0.85**age, valid, valid * 0.5**age]):  # first pool, then each extra one
        want = (emb[h] * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True)
        assert torch.allclose(got[:, 4 * i: 4 * (i + 1)], want, atol=1e-6)


def test_first_call_under_inference_mode_then_a_gradient_through_the_weights() -> None:
    tower = _tower(9)  # a window length no other test asks for: the weights are made under inference_mode
    h = torch.tensor([[PAD, 1, 2, 3, 4, 5, 6, 7, 8]])
    with torch.inference_mode():
        served = tower(None, h)
    weights = tower.history_weights(h).clone().requires_grad_(True)  # what gradient x input attribution does
    out = tower(None, h, history_weights=weights)
    out.sum().backward()  # "Inference tensors cannot be saved for backward" if the cached weights were one
    assert weights.grad is not None and torch.isfinite(weights.grad).all()
    assert torch.allclose(out.detach(), served, atol=1e-6)
