"""Logit corrections for sampled softmax: each one a small, pure, named function.

The retrieval loss in :mod:`twotower.losses.softmax` reads like a method
section: ``score -> / temperature -> logQ correction -> accidental-hit mask ->
cross-entropy``. The steps after the temperature live here so that each can be
tested on its own against a brute-force loop.

Shape legend: ``B`` batch (queries), ``N`` candidates, ``I`` catalogue items.
"""
from __future__ import annotations

import torch
from torch import Tensor

from twotower.errors import ConfigError, DataError

__all__ = [
    "logq_correction",
    "accidental_hit_mask",
    "accidental_hit_pairs",
    "check_positive_columns",
    "columns_in_range",
    "mask_accidental_hits",
    "masked_logit_value",
    "mixture_log_q",
    "log_q_from_counts",
]


def logq_correction(scores: Tensor, log_q: Tensor, *, inplace: bool = False) -> Tensor:
    """Subtract each candidate's log sampling probability from its logit.

    ``out[b, n] = scores[b, n] - log_q[n]``  (``scores[B, N]``, ``log_q[N]``).

    In-batch negatives are drawn from the data, so popular items show up as
    negatives far more often than under the full softmax, and the model learns
    to push them down. Subtracting ``log q_n`` (the log of how often candidate
    ``n`` is expected among the candidates) makes the sampled softmax an
    unbiased estimate of the full one -- Yi et al. 2019, "Sampling-bias-corrected
    neural modeling for large corpus item recommendations" (RecSys), eq. 3.

    Convention (as in TFRS ``Retrieval``): apply it to the *temperature-scaled*
    logits, i.e. ``scores / temperature - log_q``; the correction is in units of
    logits, not of raw similarities. The positive column is corrected too.
    Only the differences between candidates matter, so ``log_q`` may carry any
    additive constant (e.g. expected counts instead of probabilities).
    ``inplace``: subtract into ``scores`` itself (a fresh tensor of the caller's, such as ``scores / t``).
    """
    if scores.dim() != 2:
        raise DataError(f"scores must be 2-D [B, N], got shape {tuple(scores.shape)}")
    if log_q.dim() != 1 or log_q.shape[0] != scores.shape[1]:
        raise DataError(
            f"log_q must be 1-D with one entry per candidate column ({scores.shape[1]}), "
            f"got shape {tuple(log_q.shape)}; index your per-item log_q table by candidate id"
        )
    if inplace:
        return scores.sub_(log_q.to(scores.dtype).unsqueeze(0))
    return scores - log_q.to(scores.dtype).unsqueeze(0)  # [B, N] - [1, N]


def masked_logit_value(dtype: torch.dtype) -> float:
    """The finite logit given to masked candidates: half the most negative float.

    Finite (unlike ``-inf``) so that a fully masked row cannot produce NaN in
    the forward or backward pass; halved so that adding a moderate logit to it
    cannot overflow to ``-inf``. ``exp`` of it underflows to exactly zero, so a
    masked column gets zero probability and zero gradient.
    """
    return torch.finfo(dtype).min / 2


def accidental_hit_mask(
    positive_ids: Tensor | None,
    candidate_ids: Tensor | None,
    positive_cols: Tensor | None = None,
) -> Tensor:
    """Boolean ``[B, N]`` mask of accidental hits.

    ``mask[b, n] = candidate_ids[n] == positive_ids[b] and n != positive_cols[b]``;
    ``positive_cols`` defaults to ``arange(B)`` (row ``b``'s positive is column
    ``b``, the in-batch convention). Raises :class:`~twotower.errors.DataError`
    (a ``ValueError``) when ids are missing or shapes disagree, or when the
    candidate at a positive column does not carry that row's positive id (the
    ids are misaligned with the embeddings).
    """
    rows, cols = accidental_hit_pairs(positive_ids, candidate_ids, positive_cols)
    assert positive_ids is not None and candidate_ids is not None  # checked by accidental_hit_pairs
    mask = torch.zeros((positive_ids.shape[0], candidate_ids.shape[0]), dtype=torch.bool, device=candidate_ids.device)
    mask[rows, cols] = True
    return mask


def accidental_hit_pairs(
    positive_ids: Tensor | None,
    candidate_ids: Tensor | None,
    positive_cols: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The accidental hits of :func:`accidental_hit_mask` as ``(rows[H], columns[H])`` index tensors.

    Found by sorting the candidate ids, in ``O((B + N) log N + H)`` rather than
    comparing all ``B x N`` pairs: with a batch of 512 that comparison, the
    masked fill and the fill's backward cost more than the loss's matrix
    product. Same errors as :func:`accidental_hit_mask`.
    """
    if positive_ids is None or candidate_ids is None:
        raise DataError(
            "accidental-hit masking needs positive_ids [B] and candidate_ids [N]; "
            "pass both, or turn masking off (mask_hits=False / mask_accidental_hits=False)"
        )
    if positive_ids.dim() != 1 or candidate_ids.dim() != 1:
        raise DataError(
            f"positive_ids and candidate_ids must be 1-D, got shapes "
            f"{tuple(positive_ids.shape)} and {tuple(candidate_ids.shape)}"
        )
    b, n = positive_ids.shape[0], candidate_ids.shape[0]
    dev = candidate_ids.device
    if positive_cols is None:
        if n < b:
            raise DataError(
                f"with the default positive_cols = arange(B) there must be at least B={b} "
                f"candidates, got N={n}; pass positive_cols"
            )
        positive_cols = torch.arange(b, device=dev)
    if positive_cols.shape != (b,):
        raise DataError(
            f"positive_cols must have shape ({b},) like positive_ids, got {tuple(positive_cols.shape)}"
        )
    positive_cols = positive_cols.to(dev).long()
    positive_ids = positive_ids.to(dev)
    check_positive_columns(positive_ids, candidate_ids, positive_cols)
    ordered, order = torch.sort(candidate_ids)  # [N]
    lo = torch.searchsorted(ordered, positive_ids)  # [B] first candidate with row b's id
    count = torch.searchsorted(ordered, positive_ids, right=True) - lo  # [B] >= 1: the positive itself
    dup = (count > 1).nonzero().squeeze(1)  # rows whose id occurs in more than one column
    if dup.numel() == 0:
        empty = torch.empty(0, dtype=torch.long, device=dev)
        return empty, empty
    reps = count[dup]
    rows = dup.repeat_interleave(reps)  # [P] one entry per (row, column with its id)
    first = torch.cumsum(reps, 0) - reps  # [R] where each row's run starts in ``rows``
    within = torch.arange(rows.shape[0], device=dev) - first.repeat_interleave(reps)
    cols = order[lo[rows] + within]
    hit = cols != positive_cols[rows]  # the positive's own column is not a hit
    return rows[hit], cols[hit]


def columns_in_range(cols: Tensor, n: int) -> bool:
    """Whether every entry of the integer ``cols`` lies in ``[0, n)``: one ``aminmax`` (an empty ``cols`` is in range).

    The training step checks its positive columns with this twice a step; ``min() < 0 or max() >= n`` took six
    small ops and two host reads for the same answer.
    """
    if cols.numel() == 0:
        return True
    lo, hi = torch.aminmax(cols)
    return int(lo) >= 0 and int(hi) < n


def check_positive_columns(positive_ids: Tensor, candidate_ids: Tensor, positive_cols: Tensor) -> None:
    """DataError unless every ``positive_cols[b]`` is a column of ``candidate_ids[N]`` holding ``positive_ids[b]``."""
    b, n = positive_cols.shape[0], candidate_ids.shape[0]
    if b and not columns_in_range(positive_cols, n):
        raise DataError(f"positive_cols must lie in [0, {n}); got {positive_cols.tolist()}")
    if b and not torch.equal(candidate_ids[positive_cols], positive_ids.to(candidate_ids.device)):
        raise DataError(
            "candidate_ids at the positive columns differ from positive_ids; the ids are "
            "not aligned with the candidate embeddings"
        )


def refuse_dropped_positives(column_mask: Tensor, positive_cols: Tensor) -> None:
    """DataError naming the rows whose ``column_mask[B, N]`` drops their own positive column ``positive_cols[B]``
    (in range): such a row's softmax has no positive left, a loss of inf (the CPU kernel's ~3.5e37). One gather."""
    if positive_cols.numel() == 0:
        return
    own = column_mask.gather(1, positive_cols.long().to(column_mask.device).unsqueeze(1)).squeeze(1)  # [B]
    if bool(own.any()):
        rows = own.nonzero().squeeze(1).tolist()
        named = ", ".join(map(str, rows[:10])) + (f" and {len(rows) - 10} more" if len(rows) > 10 else "")
        raise DataError(f"column_mask drops the positive column of row(s) {named}: a row's own positive cannot be "
                        "left out of its softmax (its loss would be inf); mask only other candidates")


def mask_accidental_hits(
    logits: Tensor,
    positive_ids: Tensor | None,
    candidate_ids: Tensor | None,
    positive_cols: Tensor | None = None,
) -> Tensor:
    """Remove candidates that are the row's own positive under another column.

    With in-batch negatives the same item can be the positive of two rows; for
    each of them the other copy would be scored as a *negative* that is really
    the positive (an "accidental hit"). This sets
    ``logits[b, n] = masked_logit_value(dtype)`` wherever
    ``candidate_ids[n] == positive_ids[b]`` and ``n != positive_cols[b]``, which
    is the same as deleting that column from row ``b``'s softmax (TFRS
    ``layers.loss.RemoveAccidentalHits``). ``logits[B, N]`` is not modified in
    place; masked entries get zero gradient.

    Raises :class:`~twotower.errors.DataError` (a ``ValueError``) when ids are
    missing or shape-mismatched.
    """
    if logits.dim() != 2:
        raise DataError(f"logits must be 2-D [B, N], got shape {tuple(logits.shape)}")
    mask = accidental_hit_mask(positive_ids, candidate_ids, positive_cols)
    if mask.shape != logits.shape:
        raise DataError(
            f"logits shape {tuple(logits.shape)} does not match "
            f"[len(positive_ids), len(candidate_ids)] = {tuple(mask.shape)}"
        )
    return logits.masked_fill(mask.to(logits.device), masked_logit_value(logits.dtype))


def mixture_log_q(item_probs: Tensor, batch_size: int, n_uniform: int) -> Tensor:
    """Log expected count of each item among the candidates of one batch.

    ``log_q[i] = log(B * p_i + M / I)`` for ``item_probs = p[I]``, ``B =
    batch_size`` positives drawn with probability ``p`` (the in-batch
    negatives), and ``M = n_uniform`` extra negatives drawn uniformly over the
    ``I`` items: each positive slot holds item ``i`` with probability ``p_i`` and
    each uniform slot with probability ``1 / I``, so by linearity the expected
    number of copies of ``i`` is ``B p_i + M / I``. This is the sampling
    distribution of mixed negative sampling -- Yang et al. 2020, "Mixed Negative
    Sampling for Learning Two-tower Neural Networks in Recommendations" (WWW) --
    to be used with :func:`logq_correction`.

    Under data-parallel training with gathered candidates pass the *global*
    batch size and the *global* number of uniform negatives.

    An item with ``p_i = 0`` and ``M = 0`` gets ``-inf``: it can never be a
    candidate. The loss refuses a non-finite ``log_q`` for a candidate that does
    appear, which catches probabilities estimated from other data.
    """
    _check_counts(batch_size=batch_size, n_uniform=n_uniform)
    if item_probs.dim() != 1 or item_probs.shape[0] == 0:
        raise DataError(f"item_probs must be a non-empty 1-D tensor [I], got shape {tuple(item_probs.shape)}")
    p = item_probs.double()
    if not torch.isfinite(p).all() or (p < 0).any():
        raise DataError("item_probs must be finite and non-negative")
    total = float(p.sum())
    if abs(total - 1.0) > 1e-4:
        raise DataError(f"item_probs must sum to 1, got {total:.6g}; use log_q_from_counts for raw counts")
    n_items = p.shape[0]
    out = torch.log(batch_size * p + n_uniform / n_items)  # [I]
    dtype = item_probs.dtype if item_probs.is_floating_point() else torch.get_default_dtype()
    return out.to(dtype)


def log_q_from_counts(counts: Tensor, batch_size: int, n_uniform: int = 0) -> Tensor:
    """:func:`mixture_log_q` with ``p_i = counts[i] / sum(counts)``.

    ``counts[I]`` are how often each item is a positive in the training data
    (the frequency estimate of Yi et al. 2019 computed exactly, offline).
    """
    if counts.dim() != 1 or counts.shape[0] == 0:
        raise DataError(f"counts must be a non-empty 1-D tensor [I], got shape {tuple(counts.shape)}")
    c = counts.double()
    if not torch.isfinite(c).all() or (c < 0).any():
        raise DataError("counts must be finite and non-negative")
    total = float(c.sum())
    if total <= 0:
        raise DataError("counts sum to zero; there is no positive to estimate sampling probabilities from")
    out = mixture_log_q(c / total, batch_size, n_uniform)
    dtype = counts.dtype if counts.is_floating_point() else torch.get_default_dtype()
    return out.to(dtype)


def _check_counts(*, batch_size: int, n_uniform: int) -> None:
    if int(batch_size) != batch_size or batch_size < 1:
        raise ConfigError(f"batch_size: must be an integer >= 1, got {batch_size!r}")
    if int(n_uniform) != n_uniform or n_uniform < 0:
        raise ConfigError(f"n_uniform: must be an integer >= 0 (uniform negatives per batch), got {n_uniform!r}")
