"""Several batches' plans built in one call: the prefetch thread's work in fewer, larger pieces.

The prefetch thread (training/prefetch.py) builds each batch's inputs and :class:`~twotower.training.batch_plan.BatchPlan`
beside the steps. Built one batch at a time that is some fifty small numpy and torch calls a batch, and each call
lets go of the interpreter lock and takes it back: the step's thread, which lets go of it at each of its own ~190
torch ops, then finds it held at its next op about ten more times a step, and on a virtual machine every such wait
is a sleep and a wake-up (bench/step_threads.py measures it: steps 7-11% shorter with no planning beside them).
:func:`plan_chunk` builds the plans of ``len(idxs)`` consecutive batches at once where it can -- their histories
in one gather and one dropout draw, their pools' weights and sums in one pass, the pools' backward structure in one
counting sort keyed by batch, their candidates' logQ in one gather, their dropout masks' seeds in one draw -- and
keeps per batch only what differs by batch (the accidental hits, each mask's random bits).

They are the same plans, bit for bit, as one :func:`~twotower.training.batch_plan.plan_batch` per batch in order:
the random streams are drawn in the same order and amounts (``rng.random((B1 + B2, L))`` gives the numbers of
``rng.random((B1, L))`` then ``rng.random((B2, L))``; ``torch.randint(0, 2**62, (n,))`` the seeds of ``n`` draws
of one), and everything else is row by row or sorted per batch (``tests/training/test_plan_chunk.py`` compares
every tensor). Where a batch's inputs are not built row by row -- denoising examples, which draw per row, or a
rank's share of a global batch under torchrun -- or the step takes no plan of pools, each batch is planned alone.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from twotower.models.dropout import draw_mask
from twotower.training.batch_plan import BatchPlan, batch_planned, loss_batch, plan_batch, pools_planned
from twotower.training.examples import make_histories
from twotower.training.step import RecStep

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["PLAN_CHUNK", "chunk_size", "plan_chunk"]

#: batches planned per call on the prefetch thread (fewer calls, each larger; see the module docstring)
PLAN_CHUNK = 8


def chunk_size(n_items: int) -> int:
    """Batches per :func:`plan_chunk` call for a catalogue of ``n_items``: :data:`PLAN_CHUNK`, fewer where the
    chunk's backward structure (a row pointer per item and batch) would pass 4M entries."""
    return max(1, min(PLAN_CHUNK, (1 << 22) // max(n_items, 1)))


def plan_chunk(tr: "Trainer", idxs: list[np.ndarray]) -> list[tuple[np.ndarray, BatchPlan]]:
    """``(idx, plan)`` for each global batch ``idx`` of ``idxs``, in order: what ``(idx, plan_batch(tr.step_fn,
    *tr._inputs(idx), ahead=True))`` gives batch by batch (module docstring), built a chunk at a time."""
    step = tr.step_fn
    if len(idxs) < 2 or not _chunk_applies(tr, step, idxs):
        return [(idx, plan_batch(step, *tr._inputs(idx), ahead=True)) for idx in idxs]
    sizes = [len(idx) for idx in idxs]
    ends = np.cumsum(sizes).tolist()
    spans = list(zip([0, *ends[:-1]], ends))
    every = np.concatenate(idxs)
    m, ex = tr.model, tr.examples
    users, positions = ex.users[every], ex.positions[every]
    hist = make_histories(tr.seqs, users, positions, ex.denoise[every], m.history_len, m.pad_item, tr.rng,
                          tr.cfg.denoise_keep, tr.cfg.history_dropout)  # no denoising rows: one gather, one draw
    targets = tr.seqs.items[positions]
    u_all, h_all, t_all = torch.as_tensor(users), torch.as_tensor(hist), torch.as_tensor(targets)
    pools = m.user_tower.plan_pools_chunk(h_all, sizes)
    log_q = step.log_q[t_all] if step.log_q is not None else None
    calls = [step.dropout_calls(b, b) if step.model.training else None for b in sizes]
    n_seeds = sum(len(c) for c in calls if c)
    seeds = iter(torch.randint(0, 2**62, (n_seeds,)).tolist() if n_seeds else [])  # the forward passes' draws, in order
    out = []
    for idx, (a, b), pool, call in zip(idxs, spans, pools, calls):
        t = t_all[a:b]
        batch = loss_batch(step, t, log_q[a:b] if log_q is not None else None)
        masks = tuple((layer, draw_mask(layer.p, shape, next(seeds))) for layer, shape in call) if call else None
        out.append((idx, BatchPlan(u_all[a:b], pool.history, t, b - a, pool, batch, masks)))
    return out


def _chunk_applies(tr: "Trainer", step: RecStep, idxs: list[np.ndarray]) -> bool:
    """Whether :func:`plan_chunk` may build these batches together: one process (a rank plans its share of each
    batch), causal inputs only (denoising rows draw one by one), and a step whose plans have every part
    (:func:`~twotower.training.batch_plan.plan_batch`'s conditions: pooled history, CPU float32, in-batch
    candidates with nothing drawn at random)."""
    return (tr.world == 1 and not step.bf16 and step._device().type == "cpu"
            and pools_planned(step) and step.model.user_tower.history_emb is not None and batch_planned(step)
            and not any(tr.examples.denoise[idx].any() for idx in idxs))
