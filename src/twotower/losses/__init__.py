"""Retrieval losses behind one contract, logit corrections, cross-rank negatives and samplers.

Every loss is a :class:`~twotower.losses.base.RetrievalLoss`:
``forward(queries[B, D], candidates[N, D], batch) -> (loss, stats)``, declaring
which candidates it needs. The softmax losses read like the method section of a
paper: ``score -> / temperature -> logQ correction -> accidental-hit mask ->
cross-entropy`` (:func:`corrected_logits`, the one place corrections happen);
each correction is a named function in :mod:`twotower.losses.corrections`.
:func:`make_loss` builds the loss a :class:`~twotower.config.LossConfig` describes.
"""
from __future__ import annotations

from twotower.distributed import gather_no_grad, gather_with_grad
from twotower.losses.base import LossBatch, RetrievalLoss, corrected_logits, loss_from_logits
from twotower.losses.bpr import BPRLoss, bpr_from_scores
from twotower.losses.corrections import (
    accidental_hit_mask,
    accidental_hit_pairs,
    log_q_from_counts,
    logq_correction,
    mask_accidental_hits,
    masked_logit_value,
    mixture_log_q,
)
from twotower.losses.distributed import DistributedInBatchSoftmax
from twotower.losses.factory import make_loss
from twotower.losses.listwise import ListwiseSoftmax
from twotower.losses.sampling import sample_negatives, sample_uniform_negatives
from twotower.losses.softmax import FullSoftmax, InBatchSoftmax, SampledSoftmax, loss_from_scores

__all__ = [
    # contract
    "LossBatch",
    "RetrievalLoss",
    "make_loss",
    # corrections
    "logq_correction",
    "accidental_hit_mask",
    "accidental_hit_pairs",
    "mask_accidental_hits",
    "masked_logit_value",
    "mixture_log_q",
    "log_q_from_counts",
    # softmax
    "loss_from_scores",
    "loss_from_logits",
    "corrected_logits",
    "InBatchSoftmax",
    "SampledSoftmax",
    "FullSoftmax",
    # pairwise / listwise
    "BPRLoss",
    "bpr_from_scores",
    "ListwiseSoftmax",
    # sampling
    "sample_uniform_negatives",
    "sample_negatives",
    # distributed
    "gather_with_grad",
    "gather_no_grad",
    "DistributedInBatchSoftmax",
]
