"""Listwise softmax over groups of precomputed scores (the cross-encoder reranker's loss).

A cross-encoder scores each (query, document) pair jointly, so there are no
separate embeddings: ``queries`` holds the scores ``[P, 1]`` of ``G`` groups
laid end to end (``batch.group_sizes``), each group ``[positive, negatives...]``,
and ``candidates`` is ignored (pass ``None``). The loss is

    mean_g -log softmax(scores_g / temperature)[0]

(the ListNet top-one / "localised contrastive" loss; Cao et al. 2007, Gao et al. 2021).
GradCache does not apply: the score is not a product of two embeddings.

Example::

    >>> import torch
    >>> from twotower.losses import ListwiseSoftmax, LossBatch
    >>> s = torch.tensor([[2.0], [0.0], [1.0], [1.0]])          # groups [2, 0] and [1, 1]
    >>> loss, _ = ListwiseSoftmax(1.0)(s, None, LossBatch(group_sizes=[2, 2]))
    >>> round(float(loss), 4)                                   # (log(1 + e^-2) + log 2) / 2
    0.41

Shape legend: ``P`` scored pairs, ``G`` groups.
"""
from __future__ import annotations

import torch
from torch import Tensor

from twotower.config import RerankTrainConfig
from twotower.errors import DataError
from twotower.losses.base import LossBatch, RetrievalLoss, loss_from_logits
from twotower.losses.corrections import masked_logit_value
from twotower.utils.reductions import row_argmax

__all__ = ["ListwiseSoftmax"]


class ListwiseSoftmax(RetrievalLoss):
    """Listwise cross-entropy over score groups (needs ``"list"``); the positive is each group's first entry."""

    needs = "list"
    gradcache = False

    def __init__(self, temperature: float = RerankTrainConfig.temperature) -> None:
        super().__init__(temperature)

    def forward(self, queries: Tensor, candidates: Tensor | None, batch: LossBatch) -> tuple[Tensor, dict[str, float]]:
        sizes = batch.group_sizes
        scores = queries.reshape(-1)  # [P]
        if not sizes or min(sizes) < 1 or sum(sizes) != scores.shape[0]:
            raise DataError(f"group_sizes must be positive and sum to the {scores.shape[0]} scores, got {sizes}")
        width = max(sizes)
        # [G, width] padded with a finite very negative value (zero probability, no NaN)
        padded = scores.new_full((len(sizes), width), masked_logit_value(scores.dtype))
        rows = torch.repeat_interleave(torch.arange(len(sizes)), torch.as_tensor(sizes))  # [P]
        starts = torch.cumsum(torch.as_tensor([0, *sizes[:-1]]), 0)
        cols = torch.arange(scores.shape[0]) - starts[rows]
        padded = padded.index_put((rows, cols), scores / self.temperature)
        target = torch.zeros(len(sizes), dtype=torch.long)
        loss = loss_from_logits(padded, target, batch.weights)
        with torch.no_grad():
            correct = float((row_argmax(padded) == 0).sum())
        return loss, {"accuracy": correct / len(sizes), "correct": correct, "accidental_hits": 0}
