"""The pooled towers' fused weighted sum of history embeddings (models/pooling.py)."""
from __future__ import annotations

import pytest
import torch

from twotower.config import TowerConfig
from twotower.models import pooling
from twotower.models.pooling import weighted_bag
from twotower.models.towers import UserTower


def _reference(table: torch.nn.Embedding, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (table(h) * w.unsqueeze(-1)).sum(dim=1)


@pytest.mark.parametrize("csr", [True, False], ids=["csr", "index_add"])
@pytest.mark.parametrize("padding_idx", [12, None])
@pytest.mark.parametrize("sparse", [False, True])
def test_values_and_gradients_equal_the_obvious_form(sparse: bool, padding_idx: int | None, csr: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if not csr:  # the path a SciPy without the CSR kernels takes, and every non-float32 / non-CPU table
        monkeypatch.setattr(pooling, "_coo_tocsr", None)
    torch.manual_seed(0)
    table = torch.nn.Embedding(13, 6, padding_idx=padding_idx, sparse=sparse)
    h = torch.randint(0, 13, (9, 7))
    h[:3, :4] = 12  # left padding on some rows
    h[5, 1] = h[5, 6] = h[6, 2] = 4  # an item twice in one history (re-watched) and in another row
    w = torch.rand(9, 7, requires_grad=True)  # nonzero even on padding: the padding row must still get no gradient
    g = torch.randn(9, 6)

    (_reference(table, h, w) * g).sum().backward()
    want_table, want_w = table.weight.grad.to_dense().clone(), w.grad.clone()
    table.zero_grad()
    w.grad = None

    out = weighted_bag(table.weight, h, w, sparse=sparse, padding_idx=padding_idx)
    assert torch.allclose(out, _reference(table, h, w), atol=1e-6)
    (out * g).sum().backward()
    assert table.weight.grad.is_sparse == sparse  # SparseAdam needs the sparse layout nn.Embedding(sparse=True) gives
    got = table.weight.grad.to_dense()
    assert torch.equal(got, want_table)  # the same additions in the same order: bit-identical
    assert torch.equal(got[12], torch.zeros(6)) == (padding_idx is not None)
    assert torch.allclose(w.grad, want_w, atol=1e-6)


def test_pooled_user_tower_uses_it_and_keeps_the_weighted_mean() -> None:
    torch.manual_seed(1)
    tower = UserTower(TowerConfig(use_id=False, use_features=False, history="recency", history_len=5,
                                  hidden=(), out_dim=8, dropout=0.0), n_users=3, n_items=20)
    h = torch.tensor([[20, 20, 3, 4, 5], [1, 2, 3, 4, 5], [20, 20, 20, 20, 20]])
    w = tower.history_weights(h)
    want = (tower.history_emb(h) * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clamp_min(1e-12)
    got = tower.pool_history(h)
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.equal(got[2], torch.zeros(tower.config.history_dim))  # an empty history pools to zeros


def test_shape_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="one shape"):
        weighted_bag(torch.zeros(4, 2), torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 2))
