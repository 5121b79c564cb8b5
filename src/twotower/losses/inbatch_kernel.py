"""The in-batch softmax on the CPU kernel of :mod:`twotower.losses.fused_xent`: the same corrections, fewer passes.

:class:`~twotower.losses.softmax.InBatchSoftmax` computes ``score / temperature
- log_q``, masks the accidental hits (and ``LossBatch.column_mask``) and takes
the cross-entropy, each step a pass over a ``[B, N]`` tensor and its backward.
Here the temperature scales the queries, ``-log_q`` is the kernel's column bias
and the masked logits are ``(row, column)`` pairs the kernel drops in its block:
the same loss, gradients and statistics to float round-off.
"""
from __future__ import annotations

import torch
from torch import Tensor

from twotower.losses.base import LossBatch, LossOutput, check_log_q_finite
from twotower.errors import DataError
from twotower.losses.corrections import (accidental_hit_pairs, check_positive_columns, columns_in_range,
                                         refuse_dropped_positives)
from twotower.losses.fused_xent import fused_softmax_xent

__all__ = ["inbatch_kernel_loss"]


def inbatch_kernel_loss(queries: Tensor, candidates: Tensor, batch: LossBatch, ids: Tensor, cols: Tensor,
                        log_q: Tensor | None, temperature: float, mask_hits: bool) -> LossOutput:
    """``(loss, stats)`` of the in-batch softmax for candidates ``ids[N]`` and positive columns ``cols[B]``.

    ``log_q[N]`` (None: no logQ correction); ``mask_hits``: drop each row's
    accidental hits (needs ``batch.positive_ids``). Raises the PyTorch path's
    DataError for misaligned ids or a non-finite ``log_q``.
    """
    pos = batch.positive_ids
    hits = (cols[:0], cols[:0])
    if mask_hits:  # checks the positive columns as the PyTorch path does (a plan's were checked when it was built)
        hits = batch.hits if batch.hits is not None else accidental_hit_pairs(pos, ids, cols)
    elif pos is not None:
        check_positive_columns(pos, ids, cols)
    elif cols.numel() and not columns_in_range(cols, candidates.shape[0]):
        raise DataError(f"positive_cols must lie in [0, {candidates.shape[0]}) (the candidate columns)")
    drop = hits
    if batch.column_mask is not None:  # further columns the caller drops (the hits' count leaves them out)
        refuse_dropped_positives(batch.column_mask, cols)  # the PyTorch path's refusal (the kernel: ~3.5e37)
        extra = batch.column_mask.to(candidates.device).nonzero().unbind(1)
        drop = (torch.cat([hits[0], extra[0]]), torch.cat([hits[1], extra[1]]))
    bias = None
    if log_q is not None:
        check_log_q_finite(log_q)
        bias = -log_q
    loss, st = fused_softmax_xent(queries, candidates, cols, 1.0 / temperature, bias=bias, drop=drop,
                                  ids=(pos, ids) if pos is not None else None, side=batch.side_gradient)
    return loss, {"accuracy": st["accuracy"], "correct": float(st["correct"]), "accidental_hits": int(hits[0].numel())}
