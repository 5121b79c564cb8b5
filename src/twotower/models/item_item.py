"""A closed-form item-item term of the two-tower score: EASE's weights, factorised into the two towers.

EASE (Steck 2019, "Embarrassingly Shallow Autoencoders for Sparse Data") scores item ``i`` for a user with
history ``x`` (0/1 over the catalogue) as ``(x B)_i``, with ``B`` the ridge solution of ``X ~ X B``,
``diag(B) = 0``. Factorised to rank ``r`` (``B ~ P Q^T``, ``Q`` with orthonormal columns), that score is a dot
product of a user vector and an item vector, so it can ride in the two towers:

    user(u) = [ t(u) ;  sqrt(w) * z / ||z|| ],   z = sum over the history window of P[j]  (user side, [D + r])
    item(i) = [ v(i) ;  sqrt(w) * Q[i] ]                                                 (item side, [D + r])
    score   = <t(u), v(i)> + w * <z, Q[i]> / ||z||

``t`` and ``v`` are the trained towers' unit vectors. Because ``Q``'s columns are orthonormal, the item-item
part has unit length over the catalogue for every user, so ``w`` weighs it against the cosine alike for all
users. The weight is split evenly between the sides so that an item-to-item score (``/similar-items``:
``<v(i), v(j)> + w * <Q[i], Q[j]>``) weighs the term as a user's score does. The factors are fitted after training (:mod:`twotower.pipeline.item_item`) and ``w`` is chosen on
validation; training never sees them. Everything that scores through the towers (index, service, explanations,
ONNX export) scores with the sum. Items without training interactions have zero factors.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["ItemItemItemPart", "ItemItemUserPart", "is_item_item_key"]


def is_item_item_key(name: str) -> bool:
    """Whether a state-dict key is one of the term's buffers (``user_tower.item_item.factors`` ...)."""
    return ".item_item." in f".{name}"


class ItemItemUserPart(nn.Module):
    """The user side: ``sqrt(w) * normalize(sum_l f_l * P[history_l])``, [B, r] (zeros for an empty history).

    ``factors[n_items]`` is the padding row (zero). ``item_factors`` [B, L] scale each history item (1 keeps it,
    0 drops it: leave-one-out explanations re-run the tower with one item's factor at 0). ``fixed_norm``: the norm
    held out of autograd (the same values), so ``f_l`` times the gradient on ``item_factors`` is item ``l``'s share
    of the normalised sum (gradient x input attribution; through the norm those shares summed to 0).
    """

    def __init__(self, n_items: int, rank: int) -> None:
        super().__init__()
        self.register_buffer("factors", torch.zeros(n_items + 1, rank))
        self.register_buffer("weight", torch.zeros(()))

    def set(self, factors: Tensor, weight: float) -> None:
        with torch.no_grad():
            self.factors.copy_(factors)
            self.factors[-1].zero_()
            self.weight.fill_(weight)

    def forward(self, history: Tensor, item_factors: Tensor, *, fixed_norm: bool = False) -> Tensor:
        rows = self.factors[history]  # [B, L, r]; padding gathers the zero row
        z = torch.einsum("bl,blr->br", item_factors.to(rows.dtype), rows)  # [B, r]
        norm = z.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        return self.weight.sqrt() * z / (norm.detach() if fixed_norm else norm)


class ItemItemItemPart(nn.Module):
    """The item side: ``sqrt(w) * Q[rows]``, [B, r]."""

    def __init__(self, n_items: int, rank: int) -> None:
        super().__init__()
        self.register_buffer("factors", torch.zeros(n_items, rank))
        self.register_buffer("weight", torch.zeros(()))

    def set(self, factors: Tensor, weight: float) -> None:
        with torch.no_grad():
            self.factors.copy_(factors)
            self.weight.fill_(weight)

    def forward(self, rows: Tensor) -> Tensor:
        return self.weight.sqrt() * self.factors[rows]
