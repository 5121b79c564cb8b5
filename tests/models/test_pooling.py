"""The pooled towers' fused weighted sum of history embeddings (models/pooling.py)."""
from __future__ import annotations

import pytest
import torch

from twotower.config import TowerConfig
from twotower.models import pooling
from twotower.models.pooling import weighted_bags
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

    [out] = weighted_bags(table.weight, h, [w], sparse=sparse, padding_idx=padding_idx)
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
    got = tower.pooled_histories(h)  # the one pool of a tower without extra_pools
    assert torch.allclose(got, want, atol=1e-6)
    assert torch.equal(got[2], torch.zeros(tower.config.history_dim))  # an empty history pools to zeros


def test_shape_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="one shape"):
        weighted_bags(torch.zeros(4, 2), torch.zeros(2, 3, dtype=torch.long), [torch.ones(2, 3), torch.ones(2, 2)])


def test_extra_pools_sort_the_window_once_and_keep_the_table_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both pools of the default tower read one window: the backward builds its CSR structure once for both
    (it sorted the entries once per pool), and the table's gradient is the two separate pools' sum, bit for bit."""
    torch.manual_seed(2)
    tower = UserTower(TowerConfig(use_id=False, use_features=False, history="recency", history_len=6, extra_pools=[1.0],
                                  hidden=(), out_dim=8, dropout=0.0), n_users=3, n_items=20)
    h = torch.randint(0, 20, (7, 6))
    h[:2, :3] = 20  # padding
    h[3, 0] = h[3, 4] = 5  # an item twice in one window
    g = torch.randn(7, 2 * tower.config.history_dim)
    table = tower.history_emb
    w1, w2 = tower.history_weights(h), (h != 20).float()
    sep = [weighted_bags(table.weight, h, [w], padding_idx=table.padding_idx)[0] / w.sum(1, keepdim=True).clamp_min(1e-12)
           for w in (w1, w2)]  # one call per pool
    (torch.cat(sep, -1) * g).sum().backward()
    want, want_out = table.weight.grad.clone(), torch.cat(sep, -1).detach()
    table.weight.grad = None
    calls = []
    real = pooling._coo_tocsr
    monkeypatch.setattr(pooling, "_coo_tocsr", lambda *a: (calls.append(1), real(*a))[1])
    out = tower.pooled_histories(h)
    (out * g).sum().backward()
    assert len(calls) == 1
    assert torch.equal(out.detach(), want_out)
    assert torch.equal(table.weight.grad, want)


def test_weighted_bags_give_each_weight_set_its_gradient() -> None:
    torch.manual_seed(3)
    table = torch.nn.Embedding(9, 4)
    h = torch.randint(0, 9, (5, 3))
    ws = [torch.rand(5, 3, requires_grad=True) for _ in range(3)]
    gs = [torch.randn(5, 4) for _ in ws]
    sum((_reference(table, h, w) * g).sum() for w, g in zip(ws, gs)).backward()
    want = [w.grad.clone() for w in ws]
    want_table = table.weight.grad.clone()
    table.zero_grad()
    for w in ws:
        w.grad = None
    outs = pooling.weighted_bags(table.weight, h, ws)
    sum((o * g).sum() for o, g in zip(outs, gs)).backward()
    assert torch.allclose(table.weight.grad, want_table, atol=1e-6)  # three sets: list order, last bit may differ
    for w, wg in zip(ws, want):
        assert torch.allclose(w.grad, wg, atol=1e-6)
