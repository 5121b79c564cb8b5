"""Softmax retrieval losses: in-batch (sampled) softmax and full softmax.

The objective for query ``b`` with candidates ``n = 0..N-1`` and positive
column ``p_b`` is the cross-entropy

    loss_b = -log( exp(z[b, p_b]) / sum_n exp(z[b, n]) ),
    z[b, n] = s(q_b, c_n) / temperature - log_q[n]      (logQ correction)
    z[b, n] = masked value   where c_n is q_b's positive again (accidental hit)

with ``s`` the dot product (pass L2-normalised embeddings for cosine; that is
the towers' choice, not the loss's). Temperature convention: ``scale =
1 / temperature``; small temperatures sharpen the softmax.

Every variant -- :class:`InBatchSoftmax`, :class:`FullSoftmax`, the
distributed loss and GradCache -- encodes, builds the score matrix, then calls
the pure :func:`loss_from_scores`, which tests can feed hand-made tensors.

Shape legend: ``B`` batch, ``D`` dim, ``N`` candidates, ``I`` catalogue items.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from twotower.errors import ConfigError, DataError
from twotower.losses.corrections import accidental_hit_mask, logq_correction, masked_logit_value

__all__ = [
    "corrected_logits",
    "loss_from_logits",
    "loss_from_scores",
    "InBatchSoftmax",
    "FullSoftmax",
]


def check_temperature(temperature: float) -> float:
    """Return ``temperature`` as a float, or raise ConfigError if it is not > 0."""
    try:
        t = float(temperature)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"temperature must be a number > 0, got {temperature!r}") from e
    if not t > 0 or t == float("inf"):
        raise ConfigError(f"temperature must be a finite number > 0 (e.g. 0.05 for cosine scores), got {temperature!r}")
    return t


def _corrected(
    scores: Tensor,
    *,
    positive_cols: Tensor,
    temperature: float,
    positive_ids: Tensor | None,
    candidate_ids: Tensor | None,
    log_q: Tensor | None,
    mask_hits: bool,
) -> tuple[Tensor, Tensor | None]:
    """Logits after temperature, logQ and masking, plus the hit mask (or None)."""
    t = check_temperature(temperature)
    if scores.dim() != 2:
        raise DataError(f"scores must be 2-D [B, N], got shape {tuple(scores.shape)}")
    b, n = scores.shape
    if positive_cols.shape != (b,) or positive_cols.is_floating_point():
        raise DataError(f"positive_cols must be integer with shape ({b},), got {tuple(positive_cols.shape)}")
    if b and (positive_cols.min() < 0 or positive_cols.max() >= n):
        raise DataError(f"positive_cols must lie in [0, {n}) (the candidate columns)")
    logits = scores / t  # [B, N]
    if log_q is not None:
        if log_q.shape == (n,) and not torch.isfinite(log_q).all():
            raise DataError(
                "log_q is not finite for some candidate: an item with zero sampling probability was "
                "sampled; estimate item probabilities from the training data or add uniform negatives"
            )
        logits = logq_correction(logits, log_q)  # [B, N]
    mask = None
    if mask_hits:
        mask = accidental_hit_mask(positive_ids, candidate_ids, positive_cols)  # [B, N]
        if mask.shape != logits.shape:
            raise DataError(
                f"scores shape {tuple(logits.shape)} does not match "
                f"[len(positive_ids), len(candidate_ids)] = {tuple(mask.shape)}"
            )
        logits = logits.masked_fill(mask.to(logits.device), masked_logit_value(logits.dtype))
    return logits, mask


def corrected_logits(
    scores: Tensor,
    *,
    positive_cols: Tensor,
    temperature: float,
    positive_ids: Tensor | None = None,
    candidate_ids: Tensor | None = None,
    log_q: Tensor | None = None,
    mask_hits: bool = True,
) -> Tensor:
    """``scores[B, N] -> / temperature -> logQ -> mask``: the logits the loss sees."""
    logits, _ = _corrected(
        scores,
        positive_cols=positive_cols,
        temperature=temperature,
        positive_ids=positive_ids,
        candidate_ids=candidate_ids,
        log_q=log_q,
        mask_hits=mask_hits,
    )
    return logits


def loss_from_logits(logits: Tensor, positive_cols: Tensor, weights: Tensor | None = None) -> Tensor:
    """Cross-entropy of ``logits[B, N]`` against ``positive_cols[B]``.

    Mean over rows, or ``sum_b w_b loss_b / sum_b w_b`` with ``weights[B]``
    (non-negative, not all zero).
    """
    per_row = F.cross_entropy(logits, positive_cols.long().to(logits.device), reduction="none")  # [B]
    if weights is None:
        return per_row.mean()
    if weights.shape != per_row.shape:
        raise DataError(f"weights must have shape ({per_row.shape[0]},) (one per query), got {tuple(weights.shape)}")
    w = weights.to(device=per_row.device, dtype=per_row.dtype)
    if not torch.isfinite(w).all() or (w < 0).any() or not (w.sum() > 0):
        raise DataError("weights must be finite, non-negative and not all zero")
    return (per_row * w).sum() / w.sum()


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
    """Sampled-softmax loss from a score matrix: the pipeline every variant reuses.

    ``scores[B, N]`` raw similarities; ``positive_cols[B]`` the column of each
    row's positive; ``log_q[N]`` optional log sampling probabilities (see
    :func:`~twotower.losses.corrections.logq_correction`);
    ``positive_ids[B]`` / ``candidate_ids[N]`` item ids, required when
    ``mask_hits`` (see :func:`~twotower.losses.corrections.mask_accidental_hits`);
    ``weights[B]`` optional per-query weights (weighted mean).

    ``score -> / temperature -> - log_q -> mask accidental hits -> cross-entropy``.
    Raises ConfigError for ``temperature <= 0`` and DataError for bad shapes or
    missing ids.
    """
    logits = corrected_logits(
        scores,
        positive_cols=positive_cols,
        temperature=temperature,
        positive_ids=positive_ids,
        candidate_ids=candidate_ids,
        log_q=log_q,
        mask_hits=mask_hits,
    )
    return loss_from_logits(logits, positive_cols, weights)


def _accuracy(logits: Tensor, positive_cols: Tensor) -> float:
    """Fraction of rows whose positive has the (possibly tied) largest logit."""
    if logits.shape[0] == 0:
        return float("nan")
    with torch.no_grad():
        pos = logits.gather(1, positive_cols.to(logits.device).unsqueeze(1)).squeeze(1)  # [B]
        return float((pos >= logits.max(dim=1).values).float().mean())


def _check_embeddings(query: Tensor, candidates: Tensor, what: str = "candidates") -> None:
    if query.dim() != 2 or candidates.dim() != 2:
        raise DataError(
            f"query and {what} must be 2-D [B, D] and [N, D], got {tuple(query.shape)} and {tuple(candidates.shape)}"
        )
    if query.shape[1] != candidates.shape[1]:
        raise DataError(f"query dim {query.shape[1]} != {what} dim {candidates.shape[1]}; the towers must agree on D")


class InBatchSoftmax(nn.Module):
    """In-batch sampled softmax with logQ correction and accidental-hit masking.

    ``forward(query[B, D], candidates[N, D], positive_ids=[B], candidate_ids=[N],
    log_q=[N] | None, weights=[B] | None)``. Convention: ``candidates[:B]`` are
    the positives -- row ``b``'s positive is column ``b`` -- and
    ``candidates[B:]`` are extra negatives (e.g. uniform samples for mixed
    negative sampling). Every row treats all other candidates as negatives.

    Objective (module docstring): ``mean_b -log softmax(z_b)[b]`` with
    ``z[b, n] = q_b . c_n / temperature - log_q[n]`` and accidental hits masked.
    The logQ correction (Yi et al. 2019, RecSys) is applied only when
    ``logq=True`` *and* ``log_q`` is passed; masking needs the ids. Unlike
    :class:`FullSoftmax` this scores a sample of the catalogue, so popular items
    are over-represented among negatives -- that is what logQ undoes.

    :meth:`forward_with_stats` also returns ``{"accuracy", "accidental_hits"}``;
    :meth:`forward` records the accuracy in ``last_accuracy``.
    """

    def __init__(self, temperature: float = 0.05, *, logq: bool = True, mask_accidental_hits: bool = True) -> None:
        super().__init__()
        self.temperature = check_temperature(temperature)
        self.logq = bool(logq)
        self.mask_accidental_hits = bool(mask_accidental_hits)
        self.last_accuracy: float | None = None

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, logq={self.logq}, mask_accidental_hits={self.mask_accidental_hits}"

    def _candidate_set(
        self, query: Tensor, candidates: Tensor, positive_ids: Tensor, candidate_ids: Tensor, log_q: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
        """(candidates[N, D], candidate_ids[N], log_q[N] | None, positive_cols[B]).

        The hook the distributed subclass overrides to gather across ranks.
        """
        return candidates, candidate_ids, log_q, torch.arange(query.shape[0], device=query.device)

    def forward_with_stats(
        self,
        query: Tensor,
        candidates: Tensor,
        *,
        positive_ids: Tensor,
        candidate_ids: Tensor,
        log_q: Tensor | None = None,
        weights: Tensor | None = None,
    ) -> tuple[Tensor, dict[str, float]]:
        """Loss plus ``{"accuracy": float, "accidental_hits": int}``.

        ``accuracy``: fraction of queries whose positive column has the
        largest logit after corrections (ties count as correct);
        ``accidental_hits``: number of masked ``(row, column)`` pairs.
        """
        _check_embeddings(query, candidates)
        b = query.shape[0]
        if candidates.shape[0] < b:
            raise DataError(
                f"candidates[:B] must be the B={b} positives, but only {candidates.shape[0]} candidates were given"
            )
        if positive_ids.shape != (b,) or candidate_ids.shape != (candidates.shape[0],):
            raise DataError(
                f"positive_ids must be [B]={b} and candidate_ids [N]={candidates.shape[0]}, got "
                f"{tuple(positive_ids.shape)} and {tuple(candidate_ids.shape)}"
            )
        if log_q is not None and log_q.shape != (candidates.shape[0],):
            raise DataError(f"log_q must be [N]={candidates.shape[0]} (one per candidate), got {tuple(log_q.shape)}")
        log_q = log_q if self.logq else None
        cands, cand_ids, lq, cols = self._candidate_set(query, candidates, positive_ids, candidate_ids, log_q)
        scores = query @ cands.T  # [B, D] @ [D, N] -> [B, N]
        logits, mask = _corrected(
            scores,
            positive_cols=cols,
            temperature=self.temperature,
            positive_ids=positive_ids,
            candidate_ids=cand_ids,
            log_q=lq,
            mask_hits=self.mask_accidental_hits,
        )
        loss = loss_from_logits(logits, cols, weights)
        stats = {
            "accuracy": _accuracy(logits, cols),
            "accidental_hits": int(mask.sum()) if mask is not None else 0,
        }
        return loss, stats

    def forward(
        self,
        query: Tensor,
        candidates: Tensor,
        *,
        positive_ids: Tensor,
        candidate_ids: Tensor,
        log_q: Tensor | None = None,
        weights: Tensor | None = None,
    ) -> Tensor:
        loss, stats = self.forward_with_stats(
            query, candidates, positive_ids=positive_ids, candidate_ids=candidate_ids, log_q=log_q, weights=weights
        )
        self.last_accuracy = stats["accuracy"]
        return loss


class FullSoftmax(nn.Module):
    """Exact softmax over the whole catalogue.

    ``forward(query[B, D], all_items[I, D], positive_ids=[B], weights=[B] | None)``
    with ``positive_ids`` the item rows ``0..I-1``:
    ``mean_b -log softmax(q_b . items^T / temperature)[positive_ids[b]]``.
    Nothing is sampled, so no logQ correction or hit masking is needed; the
    cost is ``O(B * I * D)`` per step, fine for catalogues up to ~10^5 items and
    the reference the sampled losses approximate.
    """

    def __init__(self, temperature: float = 0.05) -> None:
        super().__init__()
        self.temperature = check_temperature(temperature)
        self.last_accuracy: float | None = None

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}"

    def forward(
        self, query: Tensor, all_items: Tensor, *, positive_ids: Tensor, weights: Tensor | None = None
    ) -> Tensor:
        _check_embeddings(query, all_items, "all_items")
        b, n_items = query.shape[0], all_items.shape[0]
        if positive_ids.shape != (b,):
            raise DataError(f"positive_ids must have shape ({b},), got {tuple(positive_ids.shape)}")
        if positive_ids.is_floating_point():
            raise DataError("positive_ids must be integer item rows, got a floating-point tensor")
        if b and (positive_ids.min() < 0 or positive_ids.max() >= n_items):
            raise DataError(f"positive_ids must be item rows in [0, {n_items})")
        cols = positive_ids.long().to(query.device)
        scores = query @ all_items.T  # [B, D] @ [D, I] -> [B, I]
        logits = corrected_logits(scores, positive_cols=cols, temperature=self.temperature, mask_hits=False)
        self.last_accuracy = _accuracy(logits, cols)
        return loss_from_logits(logits, cols, weights)
