"""One epoch of the recommender trainer (:class:`~twotower.training.trainer.Trainer`): the epoch's permutation cut
into global batches, each an optimisation step on the trainer's :class:`~twotower.training.loop.TrainLoop`, and the
epoch's row of the training log (loss, in-batch accuracy, throughput, diagnostics)."""
from __future__ import annotations

import math
import time
from collections.abc import Iterable
from itertools import chain
from concurrent.futures import Future
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from twotower import distributed as tdist
from twotower.training.diagnostics import collapse_advice, model_diagnostics, temperature_line_scale
from twotower.training.epoch_line import ACCURACY_KIND
from twotower.training.plan_chunk import chunk_size, plan_chunk
from twotower.training.prefetch import Prefetcher
from twotower.training.side_worker import SideWorker
from twotower.utils.runtime import spare_core

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["train_epoch", "PREFETCH_DEPTH"]

#: chunks of batches built ahead of the step (one is in the step's hands, the next waits ready)
PREFETCH_DEPTH = 2


def train_epoch(tr: "Trainer", epoch: int) -> dict[str, Any]:
    """One training epoch of ``tr`` (``Trainer._run_epoch``'s body): its batches through ``tr._step`` on the
    loop, the epoch's loss, accuracy and throughput reduced over ranks, and on rank 0 the diagnostics; the row."""
    tr.model.train()
    n = tr._units_per_epoch()
    # same permutation on every rank and on resume: it depends on (seed, epoch) only
    epoch_rng = np.random.default_rng([tr.cfg.seed, epoch])
    order = epoch_rng.permutation(len(tr.examples))[:n]
    B = tr.cfg.batch_size  # global batch
    if tr.sequence:  # similar lengths together, so trimmed windows skip most padding
        order = tr.examples.bucketed(order, B, epoch_rng)
    n_batches = math.ceil(n / B)
    t0 = time.perf_counter()
    # sequence mode counts users' windows: its progress lines said "examples/s" where the epoch line says seq/s
    unit = "sequences" if tr.sequence else "examples"
    # the batches that train (every rank needs an example, every query company); causal/denoising inputs, and the
    # step's work on their ids alone, are built on a second thread, a step ahead, in the same order
    # (training/prefetch.py, training/batch_plan.py)
    batches = [idx for idx in (order[b * B : (b + 1) * B] for b in range(n_batches)) if len(idx) >= max(2, tr.world)]
    # only where a core is left beside torch's threads: on a busy core the helper threads stall every OpenMP op
    side = spare_core(torch.get_num_threads())
    # planned a few batches a call (training/plan_chunk.py): the same plans, in fewer hand-overs of the GIL
    k = chunk_size(tr.model.n_items)
    source = (nullcontext([[(idx, None) for idx in batches]]) if tr.sequence or not side  # built in the step
              else Prefetcher(lambda chunk: plan_chunk(tr, chunk), [batches[i : i + k] for i in range(0, len(batches), k)],
                              depth=PREFETCH_DEPTH))
    # the weight average of step k runs on a second thread beside step k+1's forward and backward, which only read
    # the weights; the closure waits for it before returning, so before the optimizer changes them
    # the thread starts on entry, and a stop landing in its start waits for it (training/side_worker.py)
    # the same thread runs each step's item tower beside its user tower (training/tower_overlap.py): one spare core
    overlap = side and tr.cfg.overlap_towers and tr.step_fn.blocker is None and tr.device.type == "cpu"
    worker = SideWorker("twotower-side") if side and (tr.average is not None or overlap) else nullcontext()
    with tr.loop.epoch(epoch, n_batches=n_batches, n_examples=n, unit=unit) as run, source as ready, worker as pool:
        tr.step_fn.side = pool if overlap else None
        try:
            acc_sum, positions, last = _steps(tr, run, chain.from_iterable(ready), pool)
        finally:
            tr.step_fn.side = None
    seconds = time.perf_counter() - t0
    # every step's loss and accuracy are the global batch's already (summed over ranks in the step's all-reduce)
    total_loss, total_acc = run.loss_sum, acc_sum
    if tr.world > 1:  # each rank counted its own target positions
        positions = tdist.all_reduce_mean({"pos": positions})["pos"] * tr.world
    # means over the steps taken: a last batch too small to train (one example, no in-batch company) is skipped,
    # and counting it read the epoch's loss and accuracy low (by a third with 17 examples in batches of 8)
    steps = max(run.batches, 1)
    row: dict[str, Any] = {"epoch": epoch, "loss": total_loss / steps, "inbatch_accuracy": total_acc / steps,
                           "accuracy_kind": ACCURACY_KIND[tr.loss_cfg.kind],  # what that key holds, per loss
                           "examples_per_s": n / max(seconds, 1e-9), "world_size": tr.world}  # a resume may change it
    if tr.sequence:
        row["positions_per_s"] = positions / max(seconds, 1e-9)
    if tr.world > 1 and tr.cfg.diagnostics and last is not None:
        # the whole last global batch, not rank 0's share of it: the user spread, alignment and collapse
        # alarm one process logs (every rank joins the gather; only rank 0 reads it)
        last = (tdist.gather_no_grad(last[0].detach()), tdist.gather_no_grad(last[1].detach()))
    if not tdist.is_main():
        return row
    from twotower.training.hooks import averaged

    # the model validated and saved (the weight average under train.ema_decay): item_std, item_uniformity and
    # alpha described the live weights, which are neither; the last batch's user vectors (user_std, alignment)
    # are the training step's own
    with averaged(tr):
        if tr.cfg.diagnostics:
            # a stream of its own for the sample of a large catalogue: drawn from tr.rng, it moved the next epochs'
            # denoising subsets and history dropout, so train.diagnostics=false trained another model (and in
            # sequence mode rank 0 alone drew from the window stream every rank shares)
            rng = np.random.default_rng([tr.cfg.seed, epoch, 1])
            advice = collapse_advice(tr.cfg.lr, tr.cfg.weight_decay, tr.loss_cfg.temperature)
            row.update(model_diagnostics(tr.model, rng, last, earlier=tr.history, advice=advice,  # history: epochs before
                                         line_scale=temperature_line_scale(tr.loss_cfg.temperature)))
        alpha = tr.model.item_tower.alpha
    if alpha is not None:
        row["alpha"] = alpha
    return row


def _steps(tr: "Trainer", run: Any, ready: Iterable[tuple[np.ndarray, Any]], pool: SideWorker | None
           ) -> tuple[float, float, tuple[torch.Tensor, torch.Tensor] | None]:
    """Every batch of ``ready`` through ``tr._step`` on ``run``; ``(accuracy sum, target positions, last
    (queries, positives))``. ``pool``: the side thread the weight average of each step runs on, beside the next."""
    acc_sum = positions = 0.0
    last: tuple[torch.Tensor, torch.Tensor] | None = None
    pending: Future[None] | None = None
    for idx, plan in ready:
        out: dict[str, Any] = {}

        def closure(idx: np.ndarray = idx, plan: Any = plan, out: dict[str, Any] = out,
                    pending: Future[None] | None = pending) -> tuple[float, int]:
            loss, acc, q, pos, n_pos = tr._step(idx, plan)
            if pending is not None:
                pending.result()  # raises what the average raised
            out.update(acc=acc, q=q, pos=pos, n_pos=n_pos)
            return loss, len(idx)

        run.step(closure)
        if tr.average is not None:
            if pool is None:
                tr.average.update()
            else:
                pending = pool.submit(tr.average.update)
        acc_sum += out["acc"]
        positions += out["n_pos"]
        last = (out["q"], out["pos"])
    if pending is not None:
        pending.result()
    return acc_sum, positions, last
