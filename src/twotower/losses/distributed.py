"""Cross-rank negatives: gather candidates from every data-parallel rank.

With ``W`` ranks each holding ``B`` examples, gathering the candidates gives
every query ``W * B`` in-batch negatives for the price of one all-gather.

Gradient convention. ``torch.distributed.all_gather`` returns tensors with no
autograd history, so on its own the gathered candidates carry no gradient at
all. :func:`gather_with_grad` keeps the local slice attached *and* routes the
gradient that other ranks' losses put on this rank's slice back here: its
backward all-reduces (sums) the gradient of the gathered tensor and keeps the
local slice. Merely splicing the local tensor back into the gathered list
would drop the terms ``d loss_r' / d c_r`` for ``r' != r`` (other ranks'
queries scoring this rank's candidates), so the gradients would not match
single-process training on the global batch.

Each rank's loss is the mean over its *local* queries. Summed over ranks the
backward passes give ``sum_r grad(loss_r)``; DDP averages parameter gradients
(divides by ``W``), giving ``grad( (1 / (W B)) sum_all loss_b )`` -- exactly the
gradient of the global-batch mean loss, provided every rank has the same ``B``
(with per-query weights: the same weight sum).

De-duplicated candidates (``LossBatch.positive_cols``, the sequence objective:
many positions, far fewer distinct items) are gathered as whole rank blocks
(the local block keeps its gradient) and each positive column is shifted by
its block's offset. An id present on two ranks would then be a candidate twice,
unlike in one process, where it is a candidate once: every copy after the
first (and every copy of a row's positive but its own column) is masked for
the row, so each row scores every distinct id exactly once. The masked copy
gets no gradient from that row and the kept one gets all of it; both are the
same item-tower output, so the parameter gradient is the one-process one.

Shape legend: ``B`` local batch, ``W`` world size, ``N`` candidates, ``D`` dim.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from twotower.config import LossConfig
from twotower.distributed import distributed_world, gather_no_grad, gather_with_grad
from twotower.errors import DataError
from twotower.losses.base import LossBatch
from twotower.losses.softmax import InBatchSoftmax

__all__ = ["gather_with_grad", "gather_no_grad", "DistributedInBatchSoftmax", "distributed_world"]


class DistributedInBatchSoftmax(InBatchSoftmax):
    """:class:`InBatchSoftmax` whose negatives are the candidates of *all* ranks.

    Same arguments and convention as the parent (local ``candidates[:B]`` are
    the positives). The global candidate list is every rank's positives in rank
    order, then every rank's extra negatives in rank order; this rank's
    positive columns are ``offset_r + arange(B)`` with ``offset_r`` the number of
    positives on earlier ranks. Accidental-hit masking compares against the
    gathered (global) candidate ids, and ``log_q`` is gathered with the
    candidates -- compute it with the *global* batch size and number of uniform
    negatives (:func:`~twotower.losses.corrections.mixture_log_q`). With
    ``batch.positive_cols`` (de-duplicated candidates) the global list is
    every rank's whole block in rank order instead, and later copies of an id
    are masked (module docstring).

    The loss is the mean over *local* queries; with DDP's gradient averaging
    the parameter gradient equals that of the global-batch mean loss (module
    docstring). With no process group or world size 1 it is exactly
    :class:`InBatchSoftmax`. Every rank must call forward and backward.
    """

    def __init__(
        self,
        temperature: float = LossConfig.temperature,
        *,
        logq: bool = True,
        mask_accidental_hits: bool = True,
        group: dist.ProcessGroup | None = None,
    ) -> None:
        super().__init__(temperature, logq=logq, mask_accidental_hits=mask_accidental_hits)
        self.group = group

    def _columns(self, queries: Tensor, candidates: Tensor, batch: LossBatch) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
        rank, world = distributed_world(self.group)
        if world == 1:
            return super()._columns(queries, candidates, batch)
        b, n = queries.shape[0], candidates.shape[0]
        log_q = batch.log_q if self.logq else None
        candidate_ids = batch.candidate_ids
        dedup = batch.positive_cols is not None
        # One small collective for the layout: (positives, extras, has log_q, de-duplicated) per rank.
        meta = torch.tensor([[b, n - b, int(log_q is not None), int(dedup)]], dtype=torch.long, device=candidates.device)
        meta = gather_no_grad(meta, self.group, sizes=[1] * world)  # [W, 4]
        if bool(meta[:, 2].any()) and not bool(meta[:, 2].all()):
            raise DataError("log_q was passed on some ranks but not others; pass it on every rank or on none")
        if bool(meta[:, 3].any()) and not bool(meta[:, 3].all()):
            raise DataError("positive_cols (de-duplicated candidates) was passed on some ranks but not others")
        if dedup:
            return self._gather_blocks(queries, candidates, batch, log_q, (meta[:, 0] + meta[:, 1]).tolist(), rank)
        n_pos, n_extra = meta[:, 0].tolist(), meta[:, 1].tolist()
        sizes = [p + e for p, e in zip(n_pos, n_extra)]
        # Rank r's block of the gathered rows is [its B_r positives, its M_r extras];
        # reorder to every rank's positives, then every rank's extras.
        starts = [sum(sizes[:r]) for r in range(world)]
        order = torch.cat(
            [torch.arange(s, s + p) for s, p in zip(starts, n_pos)]
            + [torch.arange(s + p, s + p + e) for s, p, e in zip(starts, n_pos, n_extra)]
        ).to(candidates.device)  # [N_global]
        cands = gather_with_grad(candidates, self.group, sizes=sizes)[order]  # [N_global, D]
        cand_ids = gather_no_grad(candidate_ids, self.group, sizes=sizes)[order]  # [N_global]
        lq_all = gather_no_grad(log_q, self.group, sizes=sizes)[order] if log_q is not None else None
        cols = sum(n_pos[:rank]) + torch.arange(b, device=queries.device)  # [B]
        return cands, cand_ids, lq_all, cols

    def _gather_blocks(self, queries: Tensor, candidates: Tensor, batch: LossBatch, log_q: Tensor | None,
                       sizes: list[int], rank: int) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
        """De-duplicated candidates: every rank's block ``[N_r, D]`` whole, in rank order; columns shifted."""
        b = queries.shape[0]
        cols, ids = batch.positive_cols, batch.candidate_ids
        if batch.positive_ids is None or ids is None:
            raise DataError("de-duplicated candidates across ranks need positive_ids and candidate_ids "
                            "(copies of an id on two ranks are found by id)")
        if cols is None or cols.shape != (b,) or cols.is_floating_point():
            raise DataError(f"positive_cols must be integer with shape ({b},), got {None if cols is None else tuple(cols.shape)}")
        if ids.shape != (candidates.shape[0],):
            raise DataError(f"candidate_ids must be [N]={candidates.shape[0]}, got {tuple(ids.shape)}")
        cands = gather_with_grad(candidates, self.group, sizes=sizes)  # [sum_r N_r, D]
        cand_ids = gather_no_grad(ids, self.group, sizes=sizes)  # [sum_r N_r]
        lq_all = gather_no_grad(log_q, self.group, sizes=sizes) if log_q is not None else None
        return cands, cand_ids, lq_all, sum(sizes[:rank]) + cols.long().to(queries.device)

    def _column_mask(self, candidate_ids: Tensor | None, batch: LossBatch, cols: Tensor) -> Tensor | None:
        """``[B, N]``: for gathered de-duplicated blocks, every copy of an id but the one each row keeps.

        A row keeps its own positive column for its positive id and the first
        copy (lowest rank) of every other id, as one process's single copy.
        """
        if batch.positive_cols is None or distributed_world(self.group)[1] == 1:
            return None
        assert candidate_ids is not None and batch.positive_ids is not None  # checked in _gather_blocks
        n = candidate_ids.shape[0]
        _, inverse = torch.unique(candidate_ids, return_inverse=True)  # [N] index of each id among the distinct ones
        arange = torch.arange(n, device=candidate_ids.device)
        first = torch.full((n,), n, dtype=torch.long, device=candidate_ids.device).scatter_reduce(
            0, inverse, arange, reduce="amin")  # first column of each distinct id (unused slots stay n)
        later = arange != first[inverse]  # [N] a copy after the first
        mask = later.unsqueeze(0) | (candidate_ids.unsqueeze(0) == batch.positive_ids.to(candidate_ids.device).unsqueeze(1))
        mask[torch.arange(cols.shape[0], device=mask.device), cols.to(mask.device)] = False  # [B, N]
        return mask
