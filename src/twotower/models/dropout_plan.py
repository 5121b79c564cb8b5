"""Which dropout masks a recommender step's forward pass draws, and on what shapes, known before it runs.

A step of a pooled recommender draws one mask per MLP dropout layer: the user
tower's on ``[B, width]`` (its queries), then the item tower's on ``[N, width]``
(its candidates), in layer order -- ``RecStep`` embeds the queries first. The
prefetch thread draws them a step ahead (training/batch_plan.py) and the step
hands them to its forward pass (:func:`~twotower.models.dropout.masks_ahead`),
which then spends no time on random numbers: 7% of the default ML-1M step.
Where the calls cannot be listed from the configuration alone -- a sequence
encoder (masks inside its blocks), a dual-head item tower, ``dropout_rng =
"torch"`` (PyTorch's own masks), a Dropout outside the MLP head -- there is no
list, and every Dropout draws its own mask in the forward pass as before.
"""
from __future__ import annotations

from torch import nn

from twotower.models.dropout import Dropout
from twotower.models.two_tower import TwoTowerModel

__all__ = ["DropoutCalls", "step_dropout_calls"]

#: (layer, the shape of the input it masks), in the order the forward pass calls them
DropoutCalls = list[tuple[Dropout, tuple[int, int]]]


def step_dropout_calls(model: TwoTowerModel, n_queries: int, n_candidates: int) -> DropoutCalls | None:
    """The Dropout calls of one training forward pass of ``model`` over ``n_queries`` queries and ``n_candidates``
    candidates (module docstring), or None where they cannot be listed ahead."""
    users, items = model.user_tower, model.item_tower
    if users.is_sequence or items.semantic is not None:
        return None
    calls: DropoutCalls = []
    for tower, rows in ((users, n_queries), (items, n_candidates)):
        part = _head_calls(tower, rows)
        if part is None:
            return None
        calls += part
    return calls


def _head_calls(tower: nn.Module, rows: int) -> DropoutCalls | None:
    """``tower``'s MLP head's Dropout calls on ``rows`` rows; None when the tower has a Dropout elsewhere or one
    that draws PyTorch's masks."""
    layers = getattr(getattr(tower, "mlp", None), "net", None)
    inside = {id(m) for m in layers.modules()} if isinstance(layers, nn.Sequential) else set()
    everywhere = [m for m in tower.modules() if isinstance(m, Dropout)]
    if any(id(m) not in inside or m.rng == "torch" for m in everywhere):
        return None
    calls: DropoutCalls = []
    width = None
    for layer in layers or ():
        if isinstance(layer, nn.Linear):
            width = layer.out_features
        elif isinstance(layer, Dropout):
            if width is None:
                return None
            calls.append((layer, (rows, width)))
    return calls
