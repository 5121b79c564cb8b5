"""The part of a recommender step that depends on its batch's ids only, done with the batch on the prefetch thread.

A step of the default recommender (pooled history, in-batch softmax with hit masking and logQ) spends part of its
time on structures built from ids alone, before and after the weights come in: the pools' weights and their sums,
the CSR structure of the pooling's backward (a counting sort of the window's entries), the accidental hits of
the in-batch loss and the candidates' logQ -- and its dropout masks, which depend on seeds drawn in order
(models/dropout_plan.py). :func:`plan_batch` builds them where the epoch's prefetch thread
builds the batch (training/epoch.py), a step ahead on the spare core; the model and the loss read them from the
:class:`BatchPlan` instead of computing them again. They are the same numbers either way (the same operations on
the same ids), so a prefetched run trains bit for bit as one that builds its batches in the step, which passes
a plan of the tensors alone (``ahead=False``) and leaves that work to the model and the loss. The prefetch
thread builds them several batches a call (training/plan_chunk.py: the same plans, in fewer, larger pieces).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from twotower.losses.base import LossBatch
from twotower.losses.corrections import accidental_hit_pairs
from twotower.losses.softmax import InBatchSoftmax
from twotower.models.dropout import Dropout, draw_mask
from twotower.models.towers import PoolPlan
from twotower.training.step import RecStep

__all__ = ["BatchPlan", "plan_batch", "pools_planned", "batch_planned", "loss_batch"]


@dataclass(frozen=True)
class BatchPlan:
    """One step's inputs as tensors (this rank's users ``[B]``, histories ``[B, L]`` or None, targets ``[B]``,
    the global batch size) and the id-only work done on them ahead (None: left to the step)."""

    users: Tensor
    history: Tensor | None
    targets: Tensor
    n_global: int
    pools: PoolPlan | None = None  # the user tower's pools (UserTower.plan_pools) of ``history``
    loss_batch: LossBatch | None = None  # the loss's batch: candidates, their logQ and accidental hits
    masks: tuple[tuple[Dropout, Tensor], ...] | None = None  # the forward pass's dropout masks, in call order


def plan_batch(step: RecStep, users: np.ndarray, history: np.ndarray | None, targets: np.ndarray, n_global: int,
               *, ahead: bool) -> BatchPlan:
    """The :class:`BatchPlan` of these inputs for ``step``; ``ahead``: with the id-only work, where the step
    can read it (the towers in float32 on the CPU; the loss's batch when its candidates are the targets, with
    nothing drawn at random; the dropout masks with that batch, when the towers' calls can be listed). Plans
    built ahead must be built in the order the steps run, and nothing else may draw from torch's default
    generator meanwhile: the masks take their seeds from it, as the forward pass would."""
    u, h, t = torch.as_tensor(users), torch.as_tensor(history) if history is not None else None, torch.as_tensor(targets)
    if not ahead or step.bf16 or step._device().type != "cpu":
        return BatchPlan(u, h, t, n_global)
    pools = step.model.user_tower.plan_pools(h) if h is not None and pools_planned(step) else None
    batch = loss_batch(step, t, step.log_q[t] if step.log_q is not None else None) if batch_planned(step) else None
    masks = None
    if batch is not None and step.model.training and (step.chunk is None or not step.loss.gradcache):
        calls = step.dropout_calls(len(u), len(t))
        masks = tuple((layer, draw_mask(layer.p, shape)) for layer, shape in calls) if calls else None
    return BatchPlan(u, h, t, n_global, pools, batch, masks)


def pools_planned(step: RecStep) -> bool:
    """Whether a plan holds the user tower's pools (:meth:`UserTower.plan_pools`): a pooled history, read whole
    (GradCache's chunks pool their own rows)."""
    tower = step.model.user_tower
    return tower.uses_history and not tower.is_sequence and (step.chunk is None or not step.loss.gradcache)


def batch_planned(step: RecStep) -> bool:
    """Whether a plan holds the loss's batch: its candidates are the targets (RecStep.candidates), nothing drawn."""
    return step.loss.needs == "batch" and not step.n_uniform and not step.dedup


def loss_batch(step: RecStep, targets: Tensor, log_q: Tensor | None) -> LossBatch:
    """The loss's batch of a plan (:func:`batch_planned`): the targets as candidates, their ``log_q``, and the
    accidental hits only where the loss's kernel reads them (the plain in-batch softmax: RecStep's world of one)."""
    loss = step.loss
    hits = accidental_hit_pairs(targets, targets) if type(loss) is InBatchSoftmax and loss.mask_accidental_hits else None
    return LossBatch(positive_ids=targets, candidate_ids=targets, log_q=log_q, hits=hits)
