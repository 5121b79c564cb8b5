"""The loss contract every retrieval loss implements, and the one place corrections are applied.

A loss declares which candidates it needs (:attr:`RetrievalLoss.needs`) and
implements ``forward(queries[B, D], candidates[N, D], batch) -> (loss, stats)``:

* ``"batch"``     -- the batch's own positives ``candidates[:B]`` (row ``b``'s positive
  is column ``b``), optionally followed by extra negatives (in-batch softmax);
* ``"sampled"``   -- the ``B`` positives followed by ``M`` negatives drawn from a
  sampler (sampled softmax; the positives of other rows are NOT negatives);
* ``"catalogue"`` -- every item ``[I, D]``, the positive column is the item id (full softmax);
* ``"pairs"``     -- the ``B`` positives followed by ``B * M`` negatives, row-major ``[B, M]`` (BPR);
* ``"list"``      -- no embeddings: ``queries`` holds precomputed scores ``[P, 1]`` of
  groups ``[positive, negatives...]`` (the listwise cross-encoder loss).

The trainer reads ``needs`` to build the candidates; nothing else branches on
the loss kind. Every softmax variant turns raw scores into logits in
:func:`corrected_logits` -- ``score / temperature - log_q`` then accidental hits
masked -- so temperature, logQ (Yi et al. 2019), the mixture logQ of mixed
negative sampling (Yang et al. 2020) and hit masking live in one function.

``stats`` holds plain floats for logging: ``correct`` (queries whose top *raw*
score is a copy of their positive -- a duplicate counts, so ties between equal
columns do not matter), ``accuracy`` (= correct / B) and ``accidental_hits``.

Shape legend: ``B`` queries, ``D`` dim, ``N`` candidates, ``M`` negatives, ``I`` items.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from twotower.errors import ConfigError, DataError
from twotower.losses.corrections import (accidental_hit_pairs, columns_in_range, logq_correction, masked_logit_value,
                                         refuse_dropped_positives)
from twotower.utils.reductions import row_argmax

if TYPE_CHECKING:
    from twotower.losses.side_gradient import SideGradient

__all__ = ["LossBatch", "RetrievalLoss", "TINY_TEMPERATURE", "check_temperature", "corrected_logits", "loss_from_logits",
           "USEFUL_TEMPERATURES", "temperature_suspect", "temperature_warning", "top_is_positive", "weighted_mean"]

NEEDS = ("batch", "sampled", "catalogue", "pairs", "list")
#: What a loss's ``forward`` returns: the scalar loss and the batch's statistics (accuracy, correct, accidental_hits).
LossOutput = tuple[Tensor, dict[str, float]]


@dataclass
class LossBatch:
    """Everything a loss needs besides the embeddings.

    ``positive_ids[B]`` item id of each query's positive; ``candidate_ids[N]``
    id of each candidate row (hit masking, accuracy); ``log_q[N]`` log
    sampling probability (or expected count) of each candidate; ``weights[B]``
    per-query weights (weighted mean); ``positive_cols[B]`` column of each
    positive when it is not the loss's default; ``group_sizes[G]`` sizes of the
    score groups of the listwise loss; ``column_mask[B, N]`` (in-batch softmax)
    further candidates to leave out of each row's softmax, True = dropped: e.g.
    documents judged relevant to the row's query besides its positive, which
    the id-based hit mask cannot know (search fine-tuning); ``hits`` the
    accidental hits ``accidental_hit_pairs(positive_ids, candidate_ids,
    positive_cols)`` found ahead of the step (training/batch_plan.py), which
    the in-batch CPU kernel then reads rather than finding them again;
    ``side_gradient`` where the candidates' gradient may be computed on the
    step's side thread (:class:`~twotower.losses.side_gradient.SideGradient`).
    """

    positive_ids: Tensor | None = None
    candidate_ids: Tensor | None = None
    log_q: Tensor | None = None
    weights: Tensor | None = None
    positive_cols: Tensor | None = None
    group_sizes: list[int] | None = None
    column_mask: Tensor | None = None
    hits: tuple[Tensor, Tensor] | None = None
    side_gradient: "SideGradient | None" = None


def check_temperature(temperature: float) -> float:
    """Return ``temperature`` as a float, or raise ConfigError if it is not a finite number > 0."""
    try:
        t = float(temperature)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"temperature must be a number > 0, got {temperature!r}") from e
    if not t > 0 or t == float("inf"):
        raise ConfigError(f"temperature must be a finite number > 0 (e.g. 0.05 for cosine scores), got {temperature!r}")
    return t


#: A ``loss.temperature`` below this multiplies the scores more than a thousand-fold: a loss gone NaN (1/t past
#: float32's range below about 3e-39) or weights blown up are then as likely its doing as the learning rate's.
TINY_TEMPERATURE = 1e-3


def temperature_suspect(temperature: float, setting: str = "loss.temperature", default: float | None = None) -> str | None:
    """What a divergence's error says of a tiny temperature ("Raise loss.temperature=1e-08 ..."), or None.

    The error named the learning rate alone, and a lower one does not help a 1e-40 temperature: its 1/t is
    infinite in float32, so the very first loss is NaN whatever the rate.
    """
    if not temperature < TINY_TEMPERATURE:
        return None
    usual = f"; the default is {default:g}" if default is not None else ""
    return f"Raise {setting}={temperature:g} (it multiplies the scores by {1 / temperature:.0e}{usual})"


#: ``loss.temperature``'s useful range: outside it the towers learn little. MovieLens-100K, towers alone, valid NDCG@10
#: after 1 / 3 epochs: 1e-8 0.010 / 0.022, 1e-5 0.031 / 0.129, 1e-4 0.097 / 0.174, 0.02 (default) 0.137 / 0.176,
#: 0.2 0.140 / 0.176, 0.5 0.113 / 0.138, 1 0.073 / 0.103, 10 0.043 / 0.059. The upper bound holds for cosine scores
#: (both towers L2-normalised, in [-1, 1]); raw inner products can be any size.
USEFUL_TEMPERATURES = (1e-4, 0.5)


def temperature_warning(temperature: float, *, cosine: bool = True, setting: str = "loss.temperature",
                        default: float | None = None) -> str | None:
    """A start-up warning for a temperature far outside :data:`USEFUL_TEMPERATURES`, or None.

    ``loss.temperature=1e-8`` trained without a word to a model ranking little better than chance (valid NDCG@10
    0.010 after one epoch, 0.137 at the default): a warning, not a refusal, as the range is measured on one dataset.
    """
    low, high = USEFUL_TEMPERATURES
    usual = f"; the default is {default:g}" if default is not None else ""
    if temperature < low:
        return (f"{setting}={temperature:g} is far below its useful range ({low:g} to {high:g}{usual}): it multiplies "
                "the scores by so much that the softmax sees only the top candidate, and the towers learn little "
                "(MovieLens-100K: valid NDCG@10 0.03 after 1 epoch at 1e-05, 0.14 at 0.02)")
    if cosine and temperature > high:
        return (f"{setting}={temperature:g} is far above its useful range ({low:g} to {high:g}{usual}): the scores "
                "are cosines in [-1, 1], so the softmax over them is nearly flat and the towers learn little "
                "(MovieLens-100K: valid NDCG@10 0.07 after 1 epoch at 1, 0.14 at 0.02)")
    return None


def check_log_q_finite(log_q: Tensor) -> None:
    """DataError when a candidate's ``log_q`` is not finite (an item sampled with probability 0).

    ``abs().amax()`` (NaN propagates, -inf becomes inf) is one small op fewer per step than ``isfinite().all()``,
    which runs as four; integer tables are always finite.
    """
    if log_q.numel() == 0 or not (log_q.is_floating_point() or log_q.is_complex()):
        return
    if not math.isfinite(float(log_q.detach().abs().amax())):  # detached: a log_q with a gradient warned
        raise DataError(
            "log_q is not finite for some candidate: an item with zero sampling probability was "
            "sampled; estimate item probabilities from the training data or add uniform negatives"
        )


def corrected_logits(
    scores: Tensor,
    *,
    positive_cols: Tensor,
    temperature: float,
    positive_ids: Tensor | None = None,
    candidate_ids: Tensor | None = None,
    log_q: Tensor | None = None,
    mask_hits: bool = True,
    return_mask: bool = False,
    column_mask: Tensor | None = None,
    return_hits: bool = False,
    feeds_softmax: bool = False,
) -> Tensor | tuple[Tensor, Tensor | None] | tuple[Tensor, int]:
    """``scores[B, N] -> / temperature -> - log_q[N] -> mask accidental hits``: the logits a softmax loss sees.

    The only place the corrections are applied. ``positive_cols[B]`` is each
    row's positive column (never masked); masking compares ``candidate_ids``
    with ``positive_ids`` (see :func:`~twotower.losses.corrections.accidental_hit_mask`).
    ``column_mask[B, N]`` removes further columns whatever ``mask_hits`` says
    (the second copy of an id gathered from two ranks). With ``return_mask``
    also returns the ``[B, N]`` hit mask (or None; ``column_mask`` not included); with ``return_hits``
    instead, how many entries that mask holds (what a loss reports, without building the ``[B, N]`` mask
    and counting it: ~0.2 ms of a default training step). ``feeds_softmax``: the caller takes a softmax
    (cross-entropy) over each row, where a masked entry's probability, and so its gradient, is exactly 0;
    the hits are then masked outside the autograd graph, whose backward would zero those entries again in a
    ``[B, N]`` copy of the gradient (the same gradients, bit for bit; other callers keep the recorded mask).
    """
    t = check_temperature(temperature)
    if scores.dim() != 2:
        raise DataError(f"scores must be 2-D [B, N], got shape {tuple(scores.shape)}")
    b, n = scores.shape
    if positive_cols.shape != (b,) or positive_cols.is_floating_point():
        raise DataError(f"positive_cols must be integer with shape ({b},), got {tuple(positive_cols.shape)}")
    if b and not columns_in_range(positive_cols, n):
        raise DataError(f"positive_cols must lie in [0, {n}) (the candidate columns)")
    logits = scores / t  # [B, N]
    if log_q is not None:
        if log_q.shape == (n,):
            check_log_q_finite(log_q)
        logits = logq_correction(logits, log_q, inplace=True)  # [B, N], into the fresh ``scores / t``
    mask, hits = None, 0
    if mask_hits:
        rows, cols = accidental_hit_pairs(positive_ids, candidate_ids, positive_cols)  # [H] each
        assert positive_ids is not None and candidate_ids is not None  # checked by accidental_hit_pairs
        if (positive_ids.shape[0], candidate_ids.shape[0]) != (b, n):
            raise DataError(
                f"scores shape {(b, n)} does not match "
                f"[len(positive_ids), len(candidate_ids)] = {(positive_ids.shape[0], candidate_ids.shape[0])}"
            )
        rows, cols = rows.to(logits.device), cols.to(logits.device)
        # in place: ``logits`` is a fresh tensor (scores / t [- log_q]) whose backward needs no saved value,
        # so this skips a [B, N] copy per step; the backward zeroes the same few entries (feeds_softmax: the
        # softmax's backward gives them exactly 0 already, so the graph leaves the masking out)
        with torch.no_grad() if feeds_softmax else contextlib.nullcontext():
            logits.index_put_((rows, cols), logits.new_tensor(masked_logit_value(logits.dtype)))
        hits = int(rows.shape[0])  # the pairs are distinct: one per (row, column) the mask would hold
        if return_mask:
            mask = torch.zeros((b, n), dtype=torch.bool, device=logits.device)
            mask[rows, cols] = True
    if column_mask is not None:
        if column_mask.shape != logits.shape:
            raise DataError(f"column_mask must have the logits' shape {tuple(logits.shape)}, got {tuple(column_mask.shape)}")
        refuse_dropped_positives(column_mask, positive_cols)
        logits.masked_fill_(column_mask.to(logits.device), masked_logit_value(logits.dtype))
    if return_hits:
        return logits, hits
    return (logits, mask) if return_mask else logits


def loss_from_logits(logits: Tensor, positive_cols: Tensor, weights: Tensor | None = None) -> Tensor:
    """Cross-entropy of ``logits[B, N]`` against ``positive_cols[B]``: mean, or weighted mean with ``weights[B]``."""
    per_row = F.cross_entropy(logits, positive_cols.long().to(logits.device), reduction="none")  # [B]
    return weighted_mean(per_row, weights)


def weighted_mean(per_row: Tensor, weights: Tensor | None) -> Tensor:
    """The mean of ``per_row[B]``, or its mean weighted by ``weights[B]``: DataError for another shape (it would
    broadcast) or weights not finite, negative or all zero (a loss of NaN, or no longer a mean)."""
    if weights is None:
        return per_row.mean()
    if weights.shape != per_row.shape:
        raise DataError(f"weights must have shape ({per_row.shape[0]},) (one per query), got {tuple(weights.shape)}")
    w = weights.to(device=per_row.device, dtype=per_row.dtype)
    if not torch.isfinite(w).all() or (w < 0).any() or not (w.sum() > 0):
        raise DataError("weights must be finite, non-negative and not all zero")
    return (per_row * w).sum() / w.sum()


@torch.no_grad()
def top_is_positive(scores: Tensor, positive_ids: Tensor, candidate_ids: Tensor | None) -> int:
    """How many rows of raw ``scores[B, N]`` rank a copy of their positive first (ids compared)."""
    if scores.shape[0] == 0:
        return 0
    top = row_argmax(scores)  # [B]
    ids = candidate_ids[top] if candidate_ids is not None else top
    return int((ids == positive_ids.to(ids.device)).sum())


def check_embeddings(queries: Tensor, candidates: Tensor, what: str = "candidates") -> None:
    """DataError unless ``queries[B, D]`` and ``candidates[N, D]`` are 2-D with the same ``D``."""
    if queries.dim() != 2 or candidates.dim() != 2:
        raise DataError(
            f"queries and {what} must be 2-D [B, D] and [N, D], got {tuple(queries.shape)} and {tuple(candidates.shape)}"
        )
    if queries.shape[1] != candidates.shape[1]:
        raise DataError(f"query dim {queries.shape[1]} != {what} dim {candidates.shape[1]}; the towers must agree on D")


class RetrievalLoss(nn.Module):
    """Base class: ``forward(queries[B, D], candidates[N, D], batch: LossBatch) -> (loss, stats)``.

    Subclasses set :attr:`needs` (module docstring) and :attr:`gradcache`
    (True when the loss depends on the towers only through the two embedding
    matrices, so :func:`~twotower.training.gradcache.gradcache_step` can run
    the towers chunk by chunk with exact gradients), and implement ``forward``.
    """

    needs: ClassVar[str] = "batch"
    gradcache: ClassVar[bool] = True
    uses_log_q: ClassVar[bool] = False  # whether the trainer should compute log_q for the candidates

    def __init__(self, temperature: float, *, logq: bool = False, mask_accidental_hits: bool = False) -> None:
        super().__init__()
        self.temperature = check_temperature(temperature)
        self.logq = bool(logq)
        self.mask_accidental_hits = bool(mask_accidental_hits)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, logq={self.logq}, mask_accidental_hits={self.mask_accidental_hits}"

    def forward(self, queries: Tensor, candidates: Tensor, batch: LossBatch) -> LossOutput:  # pragma: no cover
        raise NotImplementedError
