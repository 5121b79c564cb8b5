"""The item-item term in the towers: the score it adds, padding, dropped items, and sequence towers' trimming."""
from __future__ import annotations

import numpy as np
import torch

from twotower.config import ModelConfig, TowerConfig
from twotower.models.two_tower import TwoTowerModel

N_ITEMS, RANK = 12, 5


def _model(history: str = "recency") -> TwoTowerModel:
    torch.manual_seed(0)
    user = TowerConfig(use_id=False, use_features=False, history=history, history_len=6, history_dim=8, hidden=(16,),
                       out_dim=8, dropout=0.0, extra_pools=(1.0,) if history == "recency" else ())
    item = TowerConfig(use_features=False, id_dim=8, hidden=(16,), out_dim=8, dropout=0.0)
    model = TwoTowerModel(ModelConfig(user=user, item=item), n_users=3, n_items=N_ITEMS).eval()
    rng = np.random.default_rng(1)
    p = torch.as_tensor(rng.normal(size=(N_ITEMS, RANK)), dtype=torch.float32)
    q, _ = torch.linalg.qr(torch.as_tensor(rng.normal(size=(N_ITEMS, RANK)), dtype=torch.float32))
    model.set_item_item(p, q, 0.3)
    return model


def test_the_score_is_the_cosine_plus_the_weighted_normalised_item_item_score() -> None:
    model = _model()
    hist = torch.tensor([[N_ITEMS, N_ITEMS, 3, 7, 7, 1]])  # right-aligned, padded; item 7 twice
    with torch.no_grad():
        u = model.encode_users(None, hist)[0]
        items = model.all_item_embeddings()
        model_alone = _model()
        model_alone.detach_item_item()
        t = model_alone.encode_users(None, hist)[0]
        v = model_alone.all_item_embeddings()
    p = model.user_tower.item_item.factors[:N_ITEMS]
    q = model.item_tower.item_item.factors
    z = p[3] + 2 * p[7] + p[1]  # each occurrence counts, padding none
    want = t @ v.T + 0.3 * (z / z.norm()) @ q.T
    assert u.shape == (8 + RANK,) and items.shape == (N_ITEMS, 8 + RANK)
    assert torch.allclose(u @ items.T, want, atol=1e-5)
    # item to item (/similar-items) the term weighs w too, as in a user's score
    assert torch.allclose(items @ items.T, v @ v.T + 0.3 * q @ q.T, atol=1e-5)


def test_an_empty_history_adds_nothing_and_a_dropped_item_is_as_if_never_read() -> None:
    model = _model()
    with torch.no_grad():
        empty = model.encode_users(None, torch.full((1, 6), N_ITEMS))[0]
        assert torch.all(empty[8:] == 0)
        hist = torch.tensor([[N_ITEMS, 2, 5, 9, 4, 1]])
        w = model.user_tower.history_weights(hist).clone()
        w[0, 3] = 0.0  # explanations' leave-one-out: item 9's weight to 0
        dropped = model.user_tower(None, hist, history_weights=w)[0]
        without = model.user_tower(None, torch.tensor([[N_ITEMS, N_ITEMS, 2, 5, 4, 1]]))[0]
    # the pools read each item's age from its column, so compare the item-item part, which does not
    assert torch.allclose(dropped[8:], without[8:], atol=1e-6)


def test_a_sequence_tower_gives_the_same_user_vectors_from_trimmed_windows() -> None:
    model = _model("gru")
    hist = np.full((3, 6), N_ITEMS, np.int64)
    hist[0, -2:] = [1, 2]
    hist[1, :] = [3, 4, 5, 6, 7, 8]
    with torch.no_grad():
        batched = model.user_embeddings(None, hist)  # sorted by length, each batch's padding columns trimmed
        one_by_one = torch.stack([model.user_tower(None, torch.as_tensor(h[None]))[0] for h in hist])
    assert batched.shape == (3, 8 + RANK)
    assert torch.allclose(batched, one_by_one, atol=1e-5)
    assert torch.all(batched[2, 8:] == 0)  # the empty history
