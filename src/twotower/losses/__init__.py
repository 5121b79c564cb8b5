"""Retrieval losses, logit corrections, cross-rank negatives and samplers.

The in-batch softmax reads like the method section of a paper:
``score -> / temperature -> logQ correction -> accidental-hit mask -> cross-entropy``
(:func:`loss_from_scores`); each correction is a named function in
:mod:`twotower.losses.corrections`.
"""
from __future__ import annotations

from twotower.losses.bpr import BPRLoss, bpr_from_scores
from twotower.losses.corrections import (
    accidental_hit_mask,
    log_q_from_counts,
    logq_correction,
    mask_accidental_hits,
    masked_logit_value,
    mixture_log_q,
)
from twotower.losses.distributed import DistributedInBatchSoftmax, gather_no_grad, gather_with_grad
from twotower.losses.sampling import sample_uniform_negatives
from twotower.losses.softmax import (
    FullSoftmax,
    InBatchSoftmax,
    corrected_logits,
    loss_from_logits,
    loss_from_scores,
)

__all__ = [
    # corrections
    "logq_correction",
    "accidental_hit_mask",
    "mask_accidental_hits",
    "masked_logit_value",
    "mixture_log_q",
    "log_q_from_counts",
    # softmax
    "loss_from_scores",
    "loss_from_logits",
    "corrected_logits",
    "InBatchSoftmax",
    "FullSoftmax",
    # pairwise
    "BPRLoss",
    "bpr_from_scores",
    # sampling
    "sample_uniform_negatives",
    # distributed
    "gather_with_grad",
    "gather_no_grad",
    "DistributedInBatchSoftmax",
]
