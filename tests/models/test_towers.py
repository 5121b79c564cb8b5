from __future__ import annotations

import numpy as np
import pytest
import torch

from twotower.config import ModelConfig, TowerConfig
from twotower.models import FeatureArrays, TwoTowerModel, UserSequences, pad_histories, windows_before


def _features(n: int) -> FeatureArrays:
    rng = np.random.default_rng(0)
    return FeatureArrays(
        categorical=rng.integers(0, 4, size=(n, 2)),
        categorical_sizes=(4, 4),
        multi=(np.array([[1, 2, 0]] * n),),
        multi_sizes=(3,),
        numeric=rng.normal(size=(n, 2)).astype(np.float32),
    )


def _model(history="recency", use_id=False, dual=False) -> TwoTowerModel:
    torch.manual_seed(0)
    cfg = ModelConfig(
        user=TowerConfig(use_id=use_id, history=history, history_len=4, hidden=(16,), out_dim=8, dropout=0.0),
        item=TowerConfig(hidden=(16,), out_dim=8, dropout=0.0, dual_head=dual),
    )
    text = np.random.default_rng(1).normal(size=(6, 5)).astype(np.float32) if dual else None
    return TwoTowerModel(cfg, 5, 6, user_features=_features(5), item_features=_features(6), item_text=text).eval()


def test_outputs_are_unit_vectors():
    m = _model()
    items = m.all_item_embeddings()
    assert items.shape == (6, 8)
    assert torch.allclose(items.norm(dim=1), torch.ones(6), atol=1e-5)
    users = m.user_embeddings(np.arange(5), np.array([[6, 6, 0, 1]] * 5))
    assert torch.allclose(users.norm(dim=1), torch.ones(5), atol=1e-5)


def test_recency_pooling_matches_hand_computation():
    m = _model()
    ut = m.user_tower
    hist = torch.tensor([[6, 2, 3, 4]])  # 6 = padding (n_items); newest item is 4
    w = ut.history_weights(hist)
    d = ut.config.recency_decay
    # ages from the right: item 4 -> 0, item 3 -> 1, item 2 -> 2, pad -> weight 0
    assert torch.allclose(w, torch.tensor([[0.0, d**2, d, 1.0]]))
    emb = ut.history_emb.weight
    expected = (d**2 * emb[2] + d * emb[3] + emb[4]) / (d**2 + d + 1)
    assert torch.allclose(ut.pooled_histories(hist), expected.unsqueeze(0), atol=1e-6)


def test_padding_and_empty_history():
    m = _model(history="mean")
    ut = m.user_tower
    empty = torch.full((1, 4), 6)
    assert torch.allclose(ut.pooled_histories(empty), torch.zeros(1, ut.config.history_dim))
    # the same items with more left padding pool identically
    a = ut.pooled_histories(torch.tensor([[6, 6, 1, 2]]))
    b = ut.pooled_histories(torch.tensor([[6, 6, 6, 1]]))
    c = ut.pooled_histories(torch.tensor([[6, 1, 2, 6]]).roll(1, dims=1))  # [6, 6, 1, 2]
    assert torch.allclose(a, c)
    assert not torch.allclose(a, b)


def test_new_user_from_history_equals_known_user_without_id_and_features():
    torch.manual_seed(0)
    cfg = ModelConfig(
        user=TowerConfig(use_id=False, use_features=False, history="recency", history_len=4, hidden=(16,), out_dim=8, dropout=0.0),
        item=TowerConfig(hidden=(16,), out_dim=8, dropout=0.0),
    )
    m = TwoTowerModel(cfg, 5, 6).eval()
    hist = np.array([[6, 0, 1, 2]])
    known = m.user_embeddings(np.array([3]), hist)
    new = m.user_embeddings(None, hist)
    assert torch.allclose(known, new)


def test_id_tower_refuses_a_user_without_id():
    m = _model(use_id=True)
    with pytest.raises(ValueError, match="ID embedding"):
        m.user_tower(None, torch.tensor([[6, 6, 0, 1]]))


def test_dual_head_gate_starts_at_half_and_decomposes_the_score():
    m = _model(dual=True)
    assert m.item_tower.alpha == pytest.approx(0.5)
    rows = torch.arange(6)
    emb, heads = m.item_tower.forward_heads(rows)
    u = torch.nn.functional.normalize(torch.randn(8), dim=0)
    a = heads.alpha
    recon = (a * heads.semantic @ u + (1 - a) * heads.collaborative @ u) / heads.norm
    assert torch.allclose(emb @ u, recon, atol=1e-5)


def test_windows_before_and_sequences():
    seqs = UserSequences.from_arrays(
        users=np.array([0, 0, 0, 1, 1]), items=np.array([5, 3, 4, 1, 2]), timestamps=np.array([3, 1, 2, 7, 7]), n_users=2
    )
    # user 0 sorted by time: 3 (t1), 4 (t2), 5 (t3); user 1 ties broken by item: 1, 2
    assert seqs.of(0).tolist() == [3, 4, 5] and seqs.of(1).tolist() == [1, 2]
    w = windows_before(seqs.items, np.array([0, 0, 3]), np.array([0, 2, 4]), 2, pad=9)
    assert w.tolist() == [[9, 9], [3, 4], [9, 1]]  # nothing before pos 0; two before pos 2; user 1 has one
    assert seqs.last_windows(np.array([0, 1]), 4, 9).tolist() == [[9, 3, 4, 5], [9, 9, 1, 2]]
    assert pad_histories([np.array([1, 2, 3]), np.array([])], 2, 9).tolist() == [[2, 3], [9, 9]]


def test_windows_before_edges_equal_the_masked_gather() -> None:
    """Every cell is gathered with its index clipped into range and the padding written over it: windows that
    reach before the first item, empty users at the end of the items, a start past the position (the sequence
    objective's targets of a one-item user), int32 items and no items at all give what the masked gather gives."""
    def masked(flat, starts, positions, L, pad):  # the plain definition: flat[max(start, p-L):p], right-aligned
        out = np.full((len(starts), L), pad, dtype=np.int64)
        for b, (s, p) in enumerate(zip(starts, positions)):
            row = flat[max(s, p - L):p] if p > s else flat[:0]
            out[b, L - len(row):] = row
        return out

    rng = np.random.default_rng(0)
    lens = np.array([3, 0, 1, 5, 0, 0])  # empty users between and after the others
    indptr = np.concatenate([[0], np.cumsum(lens)])
    for flat in (rng.integers(0, 50, indptr[-1]), rng.integers(0, 50, indptr[-1]).astype(np.int32)):
        s, e = indptr[:-1], indptr[1:]
        for starts, positions in ((s, e), (s, s), (s + 1, e), (s, np.maximum(e - 1, s))):
            for L in (1, 2, 7):
                got = windows_before(flat, starts, positions, L, pad=99)
                assert got.dtype == np.int64 and got.tolist() == masked(flat, starts, positions, L, 99).tolist()
    assert windows_before(np.zeros(0, np.int64), np.array([0, 0]), np.array([0, 0]), 3, pad=7).tolist() == [[7] * 3] * 2


def test_an_item_tower_without_input_is_a_config_error_naming_the_settings():
    """With model.item.use_id=false and no item features, the dual head's collaborative head had no input: `train`
    printed a ValueError traceback saying to "enable ... text", which dual_head already had on."""
    from twotower.errors import ConfigError
    from twotower.models.towers import ItemTower

    text = np.ones((6, 4), dtype=np.float32)
    with pytest.raises(ConfigError, match=r"dual_head: the collaborative head has no input .*use_id=true"):
        ItemTower(TowerConfig(use_id=False, dual_head=True, out_dim=8), 6, text=text)
    with pytest.raises(ConfigError, match=r"the item tower has no input: set model\.item\.use_id=true"):
        ItemTower(TowerConfig(use_id=False, out_dim=8), 6)
    assert ItemTower(TowerConfig(use_id=False, text_embeddings=True, out_dim=8), 6, text=text).n_items == 6
