"""Bayesian Personalised Ranking: a pairwise loss over (positive, negative) pairs.

Rendle et al. 2009, "BPR: Bayesian Personalized Ranking from Implicit Feedback" (UAI):
``mean_{b,m} -log sigmoid((s(q_b, pos_b) - s(q_b, neg_bm)) / temperature)``.

Example::

    >>> import torch
    >>> from twotower.losses import BPRLoss, LossBatch
    >>> q = torch.tensor([[1.0, 0.0]]); pos = torch.tensor([[1.0, 0.0]]); neg = torch.tensor([[0.0, 1.0]])
    >>> loss, stats = BPRLoss(1.0)(q, torch.cat([pos, neg]), LossBatch())   # candidates [B + B*M, D]
    >>> round(float(loss), 4), stats["accuracy"]                           # log(1 + e^-1)
    (0.3133, 1.0)

Shape legend: ``B`` batch, ``D`` dim, ``M`` negatives per query.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from twotower.config import LossConfig
from twotower.errors import DataError
from twotower.losses.base import LossBatch, LossOutput, RetrievalLoss, weighted_mean

__all__ = ["bpr_from_scores", "BPRLoss"]


def bpr_from_scores(positive_scores: Tensor, negative_scores: Tensor, weights: Tensor | None = None) -> Tensor:
    """``mean_{b,m} -log sigmoid(pos[b] - neg[b, m])`` for ``pos[B]``, ``neg[B, M]``.

    Computed as ``softplus(neg - pos)``, which equals ``-log sigmoid(pos - neg)``
    without overflow for large margins. ``weights[B]`` gives a weighted mean over queries.
    """
    if positive_scores.dim() != 1 or negative_scores.dim() != 2 or negative_scores.shape[0] != positive_scores.shape[0]:
        raise DataError(
            f"expected positive_scores [B] and negative_scores [B, M], got {tuple(positive_scores.shape)} "
            f"and {tuple(negative_scores.shape)}"
        )
    per_pair = F.softplus(negative_scores - positive_scores.unsqueeze(1))  # [B, M]
    if weights is None:
        return per_pair.mean()
    # checked as the softmax losses check them: weights=[2.0] broadcast to a sum (4x the mean of four queries),
    # and all-zero weights gave NaN
    return weighted_mean(per_pair.mean(1), weights)


class BPRLoss(RetrievalLoss):
    """BPR (needs ``"pairs"``): ``candidates = [positives (B); negatives (B * M), row-major]``.

    Each positive is compared with its own negatives only, so there is no logQ
    correction or hit masking -- the caller picks the negatives. ``temperature``
    divides the scores: with L2-normalised towers the raw margin lies in
    [-2, 2], where the sigmoid is nearly linear, so a temperature below 1 is what
    makes BPR train well there (the default is ``loss.temperature``; 1.0 is textbook BPR).
    The legacy call ``BPRLoss(1.0)(q, pos[B, D],
    neg[B, M, D] or [B, D])`` returns the loss alone.
    """

    needs = "pairs"

    def __init__(self, temperature: float = LossConfig.temperature) -> None:
        super().__init__(temperature)

    def forward(self, queries: Tensor, candidates: Tensor, batch: LossBatch | Tensor) -> Tensor | LossOutput:
        if isinstance(batch, Tensor):  # legacy (query, positive, negative)
            return self._pairwise(queries, candidates, batch)[0]
        b = queries.shape[0]
        if queries.dim() != 2 or candidates.dim() != 2 or candidates.shape[0] < 2 * b or (candidates.shape[0] - b) % max(b, 1):
            raise DataError(f"BPR needs candidates [B + B*M, D] for B={b}, got {tuple(candidates.shape)}")
        neg = candidates[b:].view(b, -1, candidates.shape[1])  # [B, M, D]
        same = None  # a negative that is a copy of the positive counts as ranked correctly (ties are rounding)
        if batch.candidate_ids is not None:
            same = batch.candidate_ids[b:].view(b, -1) == batch.candidate_ids[:b].unsqueeze(1)  # [B, M]
        return self._pairwise(queries, candidates[:b], neg, batch.weights, same)

    def _pairwise(self, query: Tensor, positive: Tensor, negative: Tensor, weights: Tensor | None = None,
                  same: Tensor | None = None) -> LossOutput:
        if query.dim() != 2 or positive.shape != query.shape:
            raise DataError(f"query and positive must both be [B, D], got {tuple(query.shape)} and {tuple(positive.shape)}")
        if negative.dim() == 2:
            negative = negative.unsqueeze(1)  # [B, D] -> [B, 1, D]
        b, d = query.shape
        if negative.dim() != 3 or negative.shape[0] != b or negative.shape[2] != d:
            raise DataError(f"negative must be [B, M, D] or [B, D] with B={b}, D={d}, got {tuple(negative.shape)}")
        pos = (query * positive).sum(dim=-1)  # [B]
        neg = (negative @ query.unsqueeze(2)).squeeze(2)  # [B, M, D] @ [B, D, 1] -> [B, M]
        loss = bpr_from_scores(pos / self.temperature, neg / self.temperature, weights)
        with torch.no_grad():
            wins = pos.unsqueeze(1) > neg  # [B, M]
            correct = float((wins if same is None else wins | same).all(1).sum())
        return loss, {"accuracy": correct / max(b, 1), "correct": correct, "accidental_hits": 0}
