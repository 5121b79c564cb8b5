"""Bayesian Personalised Ranking: a pairwise loss over (positive, negative) pairs.

Shape legend: ``B`` batch, ``D`` dim, ``M`` negatives per query.
"""
from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from twotower.errors import DataError

__all__ = ["bpr_from_scores", "BPRLoss"]


def bpr_from_scores(positive_scores: Tensor, negative_scores: Tensor) -> Tensor:
    """``mean_{b,m} -log sigmoid(pos[b] - neg[b, m])`` for ``pos[B]``, ``neg[B, M]``.

    Computed as ``softplus(neg - pos)``, which equals ``-log sigmoid(pos - neg)``
    without overflow for large margins.
    """
    if positive_scores.dim() != 1 or negative_scores.dim() != 2 or negative_scores.shape[0] != positive_scores.shape[0]:
        raise DataError(
            f"expected positive_scores [B] and negative_scores [B, M], got {tuple(positive_scores.shape)} "
            f"and {tuple(negative_scores.shape)}"
        )
    margin = positive_scores.unsqueeze(1) - negative_scores  # [B, 1] - [B, M] -> [B, M]
    return F.softplus(-margin).mean()


class BPRLoss(nn.Module):
    """BPR: ``mean -log sigmoid(s(q, pos) - s(q, neg))`` -- Rendle et al. 2009,
    "BPR: Bayesian Personalized Ranking from Implicit Feedback" (UAI).

    ``forward(query[B, D], positive[B, D], negative[B, M, D] or [B, D])`` with
    ``s`` the dot product; the mean runs over all ``B * M`` pairs. Unlike the
    softmax losses it compares each positive with its own negatives only and
    needs no logQ correction or hit masking -- the caller picks the negatives.
    ``temperature`` divides the scores (``scale = 1/temperature``): with
    L2-normalised towers the raw margin lies in [-2, 2], where the sigmoid is
    nearly linear, so a temperature below 1 is what makes BPR train well there.
    """

    def __init__(self, temperature: float = 1.0) -> None:
        super().__init__()
        from twotower.losses.softmax import check_temperature

        self.temperature = check_temperature(temperature)

    def forward(self, query: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        if query.dim() != 2 or positive.shape != query.shape:
            raise DataError(
                f"query and positive must both be [B, D], got {tuple(query.shape)} and {tuple(positive.shape)}"
            )
        if negative.dim() == 2:
            negative = negative.unsqueeze(1)  # [B, D] -> [B, 1, D]
        b, d = query.shape
        if negative.dim() != 3 or negative.shape[0] != b or negative.shape[2] != d:
            raise DataError(f"negative must be [B, M, D] or [B, D] with B={b}, D={d}, got {tuple(negative.shape)}")
        pos = (query * positive).sum(dim=-1)  # [B]
        neg = (negative @ query.unsqueeze(2)).squeeze(2)  # [B, M, D] @ [B, D, 1] -> [B, M]
        return bpr_from_scores(pos / self.temperature, neg / self.temperature)
