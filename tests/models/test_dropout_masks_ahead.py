"""Dropout masks drawn before the forward pass (models/dropout_plan.py, masks_ahead): the masks the forward would
draw itself, the calls of a step listed in its order, and a list that does not fit the forward refused."""
from __future__ import annotations

import pytest
import torch

from twotower.config import ModelConfig, TowerConfig
from twotower.models.dropout import Dropout, draw_mask, masks_ahead
from twotower.models.dropout_plan import step_dropout_calls
from twotower.models.two_tower import TwoTowerModel


def _model(**item: object) -> TwoTowerModel:
    torch.manual_seed(0)
    user = TowerConfig(history="recency", history_len=4, out_dim=8, hidden=(16, 12), dropout=0.2)
    return TwoTowerModel(ModelConfig(user=user, item=TowerConfig(**{"out_dim": 8, "hidden": (10,), "dropout": 0.3,
                                                                    **item})), 6, 20)


def test_a_mask_drawn_ahead_is_the_one_the_layer_draws_from_the_same_seed() -> None:
    layer = Dropout(0.25).train()
    x = torch.randn(32, 24)
    torch.manual_seed(7)
    drawn = layer(x)
    torch.manual_seed(7)
    mask = draw_mask(0.25, (32, 24))
    with masks_ahead([(layer, mask)]):
        given = layer(x)
    assert torch.equal(drawn, given)
    assert 0 < int((mask == 0).sum()) < mask.numel()


def test_a_steps_calls_are_listed_in_the_order_its_forward_pass_makes_them() -> None:
    model = _model().train()
    calls = step_dropout_calls(model, 5, 7)
    assert [shape for _, shape in calls] == [(5, 16), (5, 12), (7, 10)]
    users, items = model.user_tower, model.item_tower
    assert [layer for layer, _ in calls] == [m for m in users.modules() if isinstance(m, Dropout)] + [
        m for m in items.modules() if isinstance(m, Dropout)]
    history = torch.tensor([[20, 1, 2, 3]] * 5)  # 20: the padding item
    ids = torch.arange(7)
    torch.manual_seed(3)
    q, c = model.user_tower(torch.arange(5), history), model.item_tower(ids)
    torch.manual_seed(3)
    masks = [(layer, draw_mask(layer.p, shape)) for layer, shape in calls]
    with masks_ahead(masks):
        q_ahead, c_ahead = model.user_tower(torch.arange(5), history), model.item_tower(ids)
    assert torch.equal(q, q_ahead) and torch.equal(c, c_ahead)


@pytest.mark.parametrize("change", ["torch_rng", "sequence", "dual_head"])
def test_no_list_where_the_calls_are_not_known_ahead(change: str) -> None:
    if change == "torch_rng":
        model = _model(dropout_rng="torch")
    elif change == "sequence":
        torch.manual_seed(0)
        model = TwoTowerModel(ModelConfig(user=TowerConfig(use_id=False, history="gru", history_len=4, history_dim=8,
                                                           out_dim=8, hidden=(16,), dropout=0.2),
                                          item=TowerConfig(id_dim=8, out_dim=8, hidden=(16,), dropout=0.2),
                                          share_item_embeddings=False), 6, 20)
    else:
        torch.manual_seed(0)
        text = torch.randn(20, 12).numpy()
        model = TwoTowerModel(ModelConfig(user=TowerConfig(history="recency", history_len=4, out_dim=8, hidden=(16,)),
                                          item=TowerConfig(out_dim=8, hidden=(16,), dual_head=True)), 6, 20,
                              item_text=text)
    assert step_dropout_calls(model, 5, 7) is None


def test_masks_that_do_not_fit_the_forward_pass_are_refused() -> None:
    a, b = Dropout(0.2).train(), Dropout(0.2).train()
    x = torch.randn(4, 6)
    with pytest.raises(RuntimeError, match="do not match the forward pass"):
        with masks_ahead([(b, draw_mask(0.2, (4, 6)))]):
            a(x)  # another layer's mask
    with pytest.raises(RuntimeError, match="do not match the forward pass"):
        with masks_ahead([(a, draw_mask(0.2, (4, 5)))]):
            a(x)  # another shape
    with pytest.raises(RuntimeError, match="left unused"):
        with masks_ahead([(a, draw_mask(0.2, (4, 6))), (b, draw_mask(0.2, (4, 6)))]):
            a(x)
    with masks_ahead([]):  # eval mode draws nothing and takes nothing
        assert torch.equal(a.eval()(x), x)
