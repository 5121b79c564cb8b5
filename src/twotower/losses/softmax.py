"""Softmax retrieval losses: in-batch, sampled and full softmax.

The objective for query ``b`` with candidates ``n = 0..N-1`` and positive
column ``p_b`` is the cross-entropy

    loss_b = -log( exp(z[b, p_b]) / sum_n exp(z[b, n]) ),
    z[b, n] = s(q_b, c_n) / temperature - log_q[n]      (logQ correction)
    z[b, n] = masked value   where c_n is q_b's positive again (accidental hit)

with ``s`` the dot product (pass L2-normalised embeddings for cosine; that is
the towers' choice, not the loss's). The three losses differ only in their
candidates (:attr:`~twotower.losses.base.RetrievalLoss.needs`); the logits all
come from :func:`~twotower.losses.base.corrected_logits`.

Example::

    >>> import torch
    >>> from twotower.losses import InBatchSoftmax, LossBatch
    >>> q, c = torch.eye(3), torch.eye(3)               # [B, D], [N, D]: each query matches its own column
    >>> ids = torch.tensor([4, 7, 9])
    >>> loss, stats = InBatchSoftmax(0.1)(q, c, LossBatch(positive_ids=ids, candidate_ids=ids))
    >>> round(float(loss), 4), stats["accuracy"]
    (0.0001, 1.0)

Shape legend: ``B`` batch, ``D`` dim, ``N`` candidates, ``M`` sampled negatives, ``I`` catalogue items.
"""
from __future__ import annotations

import torch
from torch import Tensor

from twotower.config import LossConfig, TrainConfig
from twotower.errors import DataError
from twotower.losses.base import (
    LossBatch,
    LossOutput,
    RetrievalLoss,
    check_embeddings,
    check_log_q_finite,
    check_temperature,
    corrected_logits,
    loss_from_logits,
    top_is_positive,
)
from twotower.losses.fused_xent import fused_softmax_xent, fused_xent_applies, kernel_precision
from twotower.losses.inbatch_kernel import inbatch_kernel_loss
from twotower.utils.reductions import row_argmax

__all__ = ["check_temperature", "corrected_logits", "loss_from_logits", "loss_from_scores",
           "InBatchSoftmax", "SampledSoftmax", "FullSoftmax"]


def loss_from_scores(
    scores: Tensor,
    *,
    positive_cols: Tensor,
    temperature: float,
    positive_ids: Tensor | None = None,
    candidate_ids: Tensor | None = None,
    log_q: Tensor | None = None,
    mask_hits: bool = True,
    weights: Tensor | None = None,
) -> Tensor:
    """Softmax loss from a raw score matrix ``scores[B, N]`` (tests feed hand-made tensors).

    ``score -> / temperature -> - log_q -> mask accidental hits -> cross-entropy``.
    Raises ConfigError for ``temperature <= 0`` and DataError for bad shapes or missing ids.
    """
    logits = corrected_logits(scores, positive_cols=positive_cols, temperature=temperature, positive_ids=positive_ids,
                              candidate_ids=candidate_ids, log_q=log_q, mask_hits=mask_hits)
    return loss_from_logits(logits, positive_cols, weights)


def _accuracy(correct: int, rows: int) -> float:
    """``correct / rows``: the share of rows whose top raw score is their positive, the figure training logs.

    It read the logQ-corrected logits, where the trainer's ``correct`` reads raw scores: on the first in-batch
    batch of MovieLens-100K the loss said accuracy 0.0 and the log 4/512."""
    return correct / rows if rows else float("nan")


class _Softmax(RetrievalLoss):
    """Shared forward of the softmax losses; subclasses choose the columns (``_columns``)."""

    uses_log_q = True

    def __init__(self, temperature: float = LossConfig.temperature, *, logq: bool = True,
                 mask_accidental_hits: bool = True) -> None:
        super().__init__(temperature, logq=logq, mask_accidental_hits=mask_accidental_hits)
        self.last_accuracy: float | None = None

    def _columns(self, queries: Tensor, candidates: Tensor, batch: LossBatch) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
        """(candidates[N', D], candidate_ids[N'], log_q[N'] | None, positive_cols[B]); the distributed hook."""
        raise NotImplementedError

    def _column_mask(self, candidate_ids: Tensor | None, batch: LossBatch, cols: Tensor) -> Tensor | None:
        """``[B, N]`` columns to drop besides accidental hits (None: none); the cross-rank de-duplication hook."""
        return None

    def forward(self, queries: Tensor, candidates: Tensor, batch: LossBatch | None = None,
                **legacy: Tensor | None) -> Tensor | LossOutput:
        """``(loss, stats)`` for ``batch``; the keyword form ``(q, c, positive_ids=..., ...)`` returns the loss only."""
        if batch is None:  # the pre-contract keyword call: loss only
            loss, stats = self.forward(queries, candidates, LossBatch(**legacy))
            self.last_accuracy = stats["accuracy"]
            return loss
        check_embeddings(queries, candidates)
        if batch.log_q is not None and batch.log_q.shape != (candidates.shape[0],):
            raise DataError(f"log_q must be [N]={candidates.shape[0]} (one per candidate), got {tuple(batch.log_q.shape)}")
        cands, cand_ids, log_q, cols = self._columns(queries, candidates, batch)
        scores = queries @ cands.T  # [B, D] @ [D, N] -> [B, N]
        drop = self._column_mask(cand_ids, batch, cols)
        if batch.column_mask is not None:  # the caller's own columns to drop (LossBatch.column_mask)
            if batch.column_mask.shape != scores.shape:
                raise DataError(f"column_mask must be [B, N]={tuple(scores.shape)}, got {tuple(batch.column_mask.shape)}")
            drop = batch.column_mask if drop is None else drop | batch.column_mask
        logits, hits = corrected_logits(
            scores, positive_cols=cols, temperature=self.temperature, positive_ids=batch.positive_ids,
            candidate_ids=cand_ids, log_q=log_q if self.logq else None,
            mask_hits=self.mask_accidental_hits, return_hits=True, column_mask=drop, feeds_softmax=True,
        )
        loss = loss_from_logits(logits, cols, batch.weights)
        correct = top_is_positive(scores, batch.positive_ids if batch.positive_ids is not None else cols,
                                  cand_ids if batch.positive_ids is not None else None)
        stats = {"accuracy": _accuracy(correct, scores.shape[0]), "correct": float(correct),
                 "accidental_hits": hits}
        return loss, stats

    def forward_with_stats(self, queries: Tensor, candidates: Tensor, **legacy: Tensor | None) -> LossOutput:
        """The keyword form of :meth:`forward` returning ``(loss, stats)``."""
        return self.forward(queries, candidates, LossBatch(**legacy))


def _refuse_column_mask(batch: LossBatch, kind: str) -> None:
    """LossBatch.column_mask is the in-batch softmax's: a loss that would ignore it says so instead."""
    if batch.column_mask is not None:
        raise DataError(f"column_mask applies to the in-batch softmax; the {kind} softmax does not read it")


class InBatchSoftmax(_Softmax):
    """In-batch softmax with logQ correction and accidental-hit masking (needs ``"batch"``).

    ``candidates[:B]`` are the batch's positives (row ``b``'s positive is
    column ``b``; or ``batch.positive_cols[b]`` when the caller de-duplicated
    the candidates) and the rest optional extra negatives, e.g. uniform
    samples for mixed negative sampling; every row treats all other candidates
    as negatives. Popular items are over-represented among in-batch negatives,
    which the logQ correction undoes (Yi et al. 2019, RecSys; the mixture
    ``log(B p_i + M / I)`` of Yang et al. 2020, WWW, with uniform extras). Masking
    needs ``positive_ids[B]`` and ``candidate_ids[N]``.
    """

    needs = "batch"

    def _columns(self, queries, candidates, batch):
        b = queries.shape[0]
        if batch.positive_cols is None and candidates.shape[0] < b:
            raise DataError(f"candidates[:B] must be the B={b} positives, but only {candidates.shape[0]} candidates were given")
        ids = batch.candidate_ids
        if batch.positive_ids is not None and batch.positive_ids.shape != (b,):
            raise DataError(f"positive_ids must be [B]={b}, got {tuple(batch.positive_ids.shape)}")
        if ids is not None and ids.shape != (candidates.shape[0],):
            raise DataError(f"candidate_ids must be [N]={candidates.shape[0]}, got {tuple(ids.shape)}")
        cols = batch.positive_cols  # e.g. de-duplicated candidates: each positive's column in the unique set
        return candidates, ids, batch.log_q, torch.arange(b, device=queries.device) if cols is None else cols.long()

    def forward(self, queries: Tensor, candidates: Tensor, batch: LossBatch | None = None,
                **legacy: Tensor | None) -> Tensor | LossOutput:
        if batch is not None and self._kernel_applies(queries, candidates, batch):
            # the same corrections on the CPU kernel of FullSoftmax: logQ as a column bias, the accidental hits
            # and column_mask as dropped (row, column) pairs; the [B, N] logits never leave the kernel's block
            _, ids, log_q, cols = self._columns(queries, candidates, batch)
            return inbatch_kernel_loss(queries, candidates, batch, ids, cols, log_q if self.logq else None,
                                       self.temperature, self.mask_accidental_hits)
        return super().forward(queries, candidates, batch, **legacy)

    def _kernel_applies(self, queries: Tensor, candidates: Tensor, batch: LossBatch) -> bool:
        """The plain in-batch loss (not a cross-rank subclass) on CPU float32, unweighted, with candidate ids;
        anything the PyTorch path would refuse stays there, to be named."""
        cls = type(self)
        if cls._columns is not InBatchSoftmax._columns or cls._column_mask is not _Softmax._column_mask:
            return False
        ids, b, n = batch.candidate_ids, queries.shape[0], candidates.shape[0]
        if batch.weights is not None or ids is None or not fused_xent_applies(queries, candidates):
            return False
        pos, cols, drop = batch.positive_ids, batch.positive_cols, batch.column_mask
        if ids.shape != (n,) or self.mask_accidental_hits and pos is None or queries.shape[1] != candidates.shape[1]:
            return False
        if (n < b if cols is None else cols.shape != (b,) or cols.is_floating_point()):
            return False
        if pos is not None and pos.shape != (b,) or batch.log_q is not None and batch.log_q.shape != ids.shape:
            return False
        return drop is None or drop.shape == (b, n) and drop.dtype == torch.bool


class SampledSoftmax(_Softmax):
    """Sampled softmax: each query's positive against ``M`` sampled negatives (needs ``"sampled"``).

    ``candidates = [positives (B); negatives (M)]``; row ``b`` scores its own
    positive (column ``b``) and the ``M`` shared negatives -- not the other
    rows' positives. With negatives drawn from ``q`` (uniform, popularity or a
    mixture) the logits get ``- log q`` (``log_q[B + M]``, positives included)
    so that the sampled softmax estimates the full one (Bengio & Senecal 2008;
    Jean et al. 2015); a negative equal to the row's positive is masked.
    """

    needs = "sampled"

    def _columns(self, queries, candidates, batch):
        b, n = queries.shape[0], candidates.shape[0]
        if n <= b:
            raise DataError(f"sampled softmax needs candidates [B + M] = B={b} positives plus negatives, got {n}")
        # row b keeps column b (its positive) and the shared negatives: gather a [B, 1 + M] view
        cols = torch.zeros(b, dtype=torch.long, device=queries.device)
        return candidates, batch.candidate_ids, batch.log_q, cols

    def forward(self, queries: Tensor, candidates: Tensor, batch: LossBatch | None = None,
                **legacy: Tensor | None) -> Tensor | LossOutput:
        if batch is None:
            return super().forward(queries, candidates, batch, **legacy)
        _refuse_column_mask(batch, "sampled")
        check_embeddings(queries, candidates)
        b, n = queries.shape[0], candidates.shape[0]
        if n <= b:
            raise DataError(f"sampled softmax needs candidates [B + M] = B={b} positives plus negatives, got {n}")
        if batch.log_q is not None and batch.log_q.shape != (n,):  # refused as the other softmax losses refuse it
            raise DataError(f"log_q must be [N]={n} (one per candidate), got {tuple(batch.log_q.shape)}")
        for name, ids, dim, size in (("positive_ids", batch.positive_ids, "B", b), ("candidate_ids", batch.candidate_ids, "N", n)):
            if ids is not None and ids.shape != (size,):  # positive_ids [1] masked row 0's positive in every row
                raise DataError(f"{name} must be [{dim}]={size}, got {tuple(ids.shape)}")
        pos = (queries * candidates[:b]).sum(1, keepdim=True)  # [B, 1]
        neg = queries @ candidates[b:].T  # [B, M]
        scores = torch.cat([pos, neg], dim=1)  # [B, 1 + M]: the positive is column 0
        cols = torch.zeros(b, dtype=torch.long, device=queries.device)
        lq = None
        if self.logq and batch.log_q is not None:
            check_log_q_finite(batch.log_q)  # a -inf (an item of probability 0) made the loss NaN without a word
            lq = torch.cat([batch.log_q[:b].unsqueeze(1).expand(b, 1), batch.log_q[b:].unsqueeze(0).expand(b, n - b)], 1)
        logits = scores / self.temperature
        if lq is not None:
            logits = logits - lq.to(logits.dtype)  # per-row logQ: row b's positive has its own q
        hits = None
        if self.mask_accidental_hits and batch.positive_ids is not None and batch.candidate_ids is not None:
            hits = batch.candidate_ids[b:].unsqueeze(0) == batch.positive_ids.unsqueeze(1)  # [B, M]
            from twotower.losses.corrections import masked_logit_value

            logits = torch.cat([logits[:, :1], logits[:, 1:].masked_fill(hits, masked_logit_value(logits.dtype))], 1)
        loss = loss_from_logits(logits, cols, batch.weights)
        with torch.no_grad():
            s = scores if hits is None else torch.cat([scores[:, :1], scores[:, 1:].masked_fill(hits, -torch.inf)], 1)
            correct = int((row_argmax(s) == 0).sum())
        stats = {"accuracy": _accuracy(correct, b), "correct": float(correct),
                 "accidental_hits": int(hits.sum()) if hits is not None else 0}
        return loss, stats


class FullSoftmax(_Softmax):
    """Exact softmax over the whole catalogue (needs ``"catalogue"``).

    ``candidates`` are all ``I`` items and row ``b``'s positive column is its
    item id: ``mean_b -log softmax(q_b . items^T / temperature)[positive_ids[b]]``.
    Nothing is sampled, so no logQ correction or hit masking; the cost is
    ``O(B I D)`` per step and the reference the sampled losses approximate.
    """

    needs = "catalogue"
    uses_log_q = False

    def __init__(self, temperature: float = LossConfig.temperature, *, precision: str = TrainConfig.precision) -> None:
        super().__init__(temperature, logq=False, mask_accidental_hits=False)
        # the CPU kernel's GEMMs, fp32 | bf16 (auto resolved here); the PyTorch path is always fp32
        self.precision = kernel_precision(precision)

    def _columns(self, queries, candidates, batch):
        b, n_items = queries.shape[0], candidates.shape[0]
        pos = batch.positive_ids
        if pos is None or pos.shape != (b,):
            raise DataError(f"positive_ids must have shape ({b},), got {None if pos is None else tuple(pos.shape)}")
        if pos.is_floating_point():
            raise DataError("positive_ids must be integer item rows, got a floating-point tensor")
        if b and (pos.min() < 0 or pos.max() >= n_items):
            raise DataError(f"positive_ids must be item rows in [0, {n_items})")
        return candidates, None, None, pos.long().to(queries.device)

    def forward(self, queries: Tensor, all_items: Tensor, batch: LossBatch | None = None,
                **legacy: Tensor | None) -> Tensor | LossOutput:
        if batch is None:
            legacy.setdefault("candidate_ids", None)
            return super().forward(queries, all_items, batch, **legacy)
        _refuse_column_mask(batch, "full")
        if batch.weights is None and fused_xent_applies(queries, all_items):
            # the same cross-entropy, computed by the CPU kernel that keeps the [B, I] logits in one buffer
            check_embeddings(queries, all_items)
            _, _, _, cols = self._columns(queries, all_items, batch)
            loss, st = fused_softmax_xent(queries, all_items, cols, 1.0 / check_temperature(self.temperature),
                                          precision=self.precision)
            return loss, {"accuracy": st["accuracy"], "correct": st["correct"], "accidental_hits": 0}
        return super().forward(queries, all_items, batch, **legacy)
