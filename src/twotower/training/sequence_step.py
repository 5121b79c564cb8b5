"""One step of the sequence objective (``train.examples=sequence``), in one process or across ranks.

The global batch ``idx`` is a run of users from the epoch order every rank
draws alike (seeded by ``(train.seed, epoch)``, bucketed by length with the
same generator). Every rank draws the window ends of the WHOLE global batch
from the numpy stream all ranks share in sequence mode (only ``random_windows``
consumes it), takes its contiguous slice of users and trims the slice's
windows to its own longest one: the encoder aligns positions to the right
edge, so a trimmed window gives the states of the untrimmed one and the
trimming need not agree across ranks.

The unit of the loss is the target position, not the user: one all-gather of
the ranks' position counts ``P_r`` gives ``P = sum_r P_r`` and this rank's
offset. Each rank's mean loss over its positions is scaled by ``W * P_r / P``
before backward, so after the gradient average (``/ W``) the update is the
one-process update on the same global batch. In-batch candidates are the
de-duplicated positives (+ uniform extras) of each rank, gathered whole by
:class:`~twotower.losses.distributed.DistributedInBatchSoftmax`; full softmax
needs no gathering, sampled softmax draws its negatives from the generator
every rank shares, and BPR slices one global draw of ``P`` negatives at the
offset.

Shape legend: ``B`` users of this rank, ``L`` window, ``P`` target positions, ``D`` dim.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from twotower.distributed import gather_no_grad
from twotower.models.two_tower import TwoTowerModel
from twotower.training.step import share

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["sequence_step", "valid_positions", "position_span"]


def valid_positions(model: TwoTowerModel, users: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
    """User vectors at the valid (non-padding) columns of ``history[B, L]``, row-major: [P, D]."""
    states = model.user_tower.forward_all(users, history)  # [B, L, D]
    return states[history != model.pad_item]


def position_span(n_local: int, world: int, device: torch.device) -> tuple[int, int, int]:
    """``(P_global, start, stop)``: the global position count and this rank's ``[start, stop)`` among them.

    One all-gather of the ranks' counts (nothing in one process).
    """
    if world == 1:
        return n_local, 0, n_local
    import torch.distributed as dist

    counts = gather_no_grad(torch.tensor([n_local], dtype=torch.long, device=device), sizes=[1] * world).tolist()  # [W]
    start = sum(counts[: dist.get_rank()])
    return sum(counts), start, start + n_local


def sequence_step(tr: "Trainer", idx: np.ndarray) -> tuple[float, float, torch.Tensor, torch.Tensor, int]:
    """Forward and backward of the global batch of users ``idx``; ``Trainer._step``'s contract.

    Returns the global mean loss and accuracy (the ranks' shares ``P_r / P`` of
    them summed), the local query / positive embeddings and ``P_r``.
    """
    m, dev, ex = tr.model, tr.device, tr.examples
    lo, hi = share(len(idx), tr.world, tr.rank)
    ends = ex.window_ends(idx, tr.rng)[lo:hi]  # drawn for the global batch, so every rank consumes the stream alike
    users, inputs, targets = ex.windows(idx[lo:hi], ends=ends)
    h = torch.as_tensor(inputs, device=dev)  # [B, L]
    tgt = torch.as_tensor(targets, device=dev)  # [B, L]
    t = tgt[tgt != m.pad_item]  # [P_r]
    n_global, start, stop = position_span(len(t), tr.world, dev)
    frac = len(t) / n_global
    scale = frac * tr.world if tr.world > 1 else 1.0  # averaging over ranks then gives the global mean
    value, stats, q, pos = tr.step_fn(torch.as_tensor(users, device=dev), h, t, n_global, scale, span=(start, stop),
                                      queries_fn=lambda uu, hh: valid_positions(m, uu, hh))
    loss, acc = tr._sync(value * frac, stats.get("correct", 0.0) / n_global)
    return loss, acc, q, pos, len(t)
