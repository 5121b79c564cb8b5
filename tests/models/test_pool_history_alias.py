"""UserTower.pool_history, removed in favour of pooled_histories, stays as a deprecated alias so that outside code
calling it keeps working: it warns and gives what it gave before, the first pool alone ([B, H])."""
from __future__ import annotations

import pytest
import torch

from twotower.config import TowerConfig
from twotower.models.towers import UserTower

PAD = 20


def _tower(**kw) -> UserTower:
    torch.manual_seed(5)
    cfg = dict(use_id=False, use_features=False, history="recency", history_len=6, history_dim=4, hidden=(),
               out_dim=8, dropout=0.0)
    return UserTower(TowerConfig(**{**cfg, **kw}), n_users=3, n_items=PAD)


@pytest.mark.parametrize("extra_pools", [(), (1.0,), (1.0, 0.5)])
def test_pool_history_warns_and_gives_the_first_pool_of_pooled_histories(extra_pools) -> None:
    tower = _tower(extra_pools=extra_pools)
    h = torch.tensor([[PAD, PAD, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [PAD] * 6])
    with pytest.warns(DeprecationWarning, match="pooled_histories"):
        got = tower.pool_history(h)
    assert got.shape == (3, 4)
    emb = tower.history_emb.weight
    w = tower.history_weights(h)
    want = (emb[h] * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clamp_min(1e-12)
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.allclose(got, tower.pooled_histories(h)[:, :4])
    assert torch.equal(got[2], torch.zeros(4))


def test_pool_history_takes_weights_as_before() -> None:
    tower = _tower(extra_pools=(1.0,))
    h = torch.tensor([[PAD, 7, 3, 4, 5, 6]])
    w = torch.tensor([[0.0, 1.0, 0.0, 2.0, 1.0, 1.0]])
    with pytest.warns(DeprecationWarning):
        got = tower.pool_history(h, w)
    emb = tower.history_emb.weight
    want = (emb[h] * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True)
    assert torch.allclose(got, want, atol=1e-6)
