"""The recommender trainer: examples -> towers -> loss on :class:`~twotower.training.loop.TrainLoop`.

Every epoch logs loss, in-batch accuracy, embedding spread (with the collapse
alarm), alignment/uniformity, the dual-head gate α and validation metrics to a
JSONL file and a PNG of the curves in the run folder; the best weights by
validation metric are kept, and a checkpoint (weights, optimizer, RNG) is
written atomically after each epoch so ``resume`` loses at most one epoch.

Examples (``train.examples``): ``causal`` / ``denoising`` / ``both`` give one
example per target (:mod:`twotower.training.examples`); ``sequence`` gives one
window per user with a target at every position (:mod:`twotower.training.sequence`,
sequence user towers only). The loss and its candidates come from
:mod:`twotower.training.step` and the loss contract.

Data parallelism (``torchrun``, ``WORLD_SIZE > 1``): ``train.batch_size`` is the
GLOBAL batch; every rank draws the same epoch permutation (seeded by
``(train.seed, epoch)``), cuts the same global batches and takes its contiguous
slice, so W ranks see exactly the examples one process sees (sequence mode:
users, with the loss shared by target positions, :mod:`twotower.training.sequence_step`).
The in-batch loss gathers every rank's candidates; gradients are averaged after backward (sparse
ID-table gradients gathered), so the update is the one-process update. Loss
and accuracy are reduced over ranks; validation, weights, checkpoint, log and
plot happen on rank 0, whose metric is broadcast so early stopping agrees. The
checkpoint holds no world-size-specific state, so a run may resume on any
number of processes. Denoising subsets and dropout masks come from per-rank
streams (equal in distribution to one process, not bit for bit).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from twotower import distributed as tdist
from twotower.config import EvalConfig, LossConfig, TrainConfig
from twotower.distributed import init_distributed
from twotower.errors import ConfigError, TrainingDiverged
from twotower.evaluation.protocol import EvalProtocol, evaluate
from twotower.heartbeat import rank_heartbeats
from twotower.losses.factory import make_loss
from twotower.losses.base import temperature_suspect
from twotower.losses.fused_xent import kernel_precision
from twotower.models.history import UserSequences
from twotower.models.two_tower import TwoTowerModel
from twotower.training.averaging import WeightAverage
from twotower.training.batch_plan import BatchPlan, plan_batch
from twotower.training.cold_rows import ColdRows
from twotower.training.diagnostics import check_finite_weights
from twotower.training.epoch import train_epoch
from twotower.training.epoch_line import log_epoch
from twotower.training.examples import build_examples, make_histories
from twotower.training.loop import EarlyStopping, TrainLoop, decay_groups, sparse_parameters
from twotower.training.measure import rescore_resumed_best
from twotower.training.rank_checks import check_ranks, check_resumed
from twotower.training.result import TrainResult
from twotower.training.schedule import epoch_lr_factor
from twotower.training.scorer import TwoTowerScorer
from twotower.training.select_metric import select_k
from twotower.training.sequence import SequenceExamples
from twotower.training.sequence_step import sequence_step
from twotower.training.start_line import log_start
from twotower.training.step import RecStep, loss_log_q, share, sync_grads
from twotower.utils.runtime import epoch_seed, flush_denormals, resolve_device

__all__ = ["Trainer", "TrainResult", "init_distributed", "resolve_device"]

#: what Trainer._inputs builds for a step: users [B], histories [B, L] or None, targets [B], global batch size
StepInputs = tuple[np.ndarray, np.ndarray | None, np.ndarray, int]

log = logging.getLogger(__name__)


class Trainer:
    """Trains a :class:`TwoTowerModel` on per-user training sequences (one process or under torchrun)."""

    def __init__(self, model: TwoTowerModel, train_seqs: UserSequences, *, loss: LossConfig, train: TrainConfig,
                 eval: EvalConfig, valid_relevant: sp.csr_matrix | None = None,
                 train_matrix: sp.csr_matrix | None = None, out_dir: str | Path | None = None) -> None:
        self.model, self.seqs, self.loss_cfg, self.cfg, self.eval_cfg = model, train_seqs, loss, train, eval
        from twotower.training.hooks import validation_users  # lazily, as the other hooks

        self.valid_given = valid_relevant  # every validation user: a resumed run's sample is told from it (measure.py)
        self.valid_relevant = validation_users(valid_relevant, train.valid_max_users, train.seed)
        self.train_matrix = train_matrix
        # the key early stopping reads, refused where validation lacks it or its lists fix it (training/select_metric.py)
        self._select_k = select_k(eval.select_metric, self.valid_relevant, train_matrix)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.device = resolve_device(train.device)  # a clear error before any process group is joined
        init_distributed(train)
        self.rank, self.world = tdist.rank(), tdist.world_size()
        if self.world > 1 and self.device.type == "cuda":
            self.device = torch.device("cuda", torch.cuda.current_device())  # set from LOCAL_RANK
        model.to(self.device)
        check_ranks(self)  # under torchrun: a batch every rank has a share of, the same data and settings
        self.sequence = train.examples == "sequence"
        if self.sequence and not model.user_tower.is_sequence:
            raise ConfigError("train.examples=sequence needs a sequence user tower: set model.user.history=transformer or gru")
        # bf16 matrix products (train.precision): autocast applies to CPU tensors only, so elsewhere it is fp32
        self.bf16 = kernel_precision(train.precision) == "bf16" and self.device.type == "cpu"
        self.loss_fn = make_loss(loss, world=self.world, precision="bf16" if self.bf16 else "fp32")
        # denoising subsets and history dropout (ranks > 0 reseed in fit); sequence: window ends (shared)
        self.rng = np.random.default_rng(train.seed)
        self.torch_gen = torch.Generator().manual_seed(train.seed)
        if self.sequence:
            self.examples = SequenceExamples(train_seqs, model.history_len, model.pad_item, random_windows=train.random_windows)
        else:
            self.examples = build_examples(train_seqs, train.examples)
        from twotower.training.hooks import check_enough_examples  # lazily, as the other hooks
        check_enough_examples(self)
        self.item_counts = counts = np.bincount(train_seqs.items, minlength=model.n_items).astype(np.float64)
        self.cold_rows = ColdRows(model, counts)  # before any resume: which cold rows were built as zero
        # validation's MeanPop@k popularity: each item's distinct training users, as `twotower evaluate` and the
        # Popularity baseline count it (the counts above, logQ's frequencies, count a repeated item every time)
        users = np.repeat(np.arange(train_seqs.n_users, dtype=np.int64), np.diff(train_seqs.indptr))
        pairs = np.sort(users * model.n_items + train_seqs.items)  # sorted, not np.unique: its hashing took 2 s on ML-1M
        self.item_users = np.bincount(pairs[np.diff(pairs, prepend=-1) != 0] % model.n_items, minlength=model.n_items).astype(np.float64)
        probs = torch.as_tensor(counts / max(counts.sum(), 1.0), dtype=torch.float32)  # [I]
        # the batch the steps take: train.max_examples_per_epoch below train.batch_size cuts every batch to it, and a
        # mixture logQ (uniform negatives) computed for the configured size mis-weighted the batch's own positives
        B = min(train.batch_size, max(self._units_per_epoch(), 2))
        if B < train.batch_size and tdist.is_main():  # said: the in-batch negatives are fewer than the setting reads
            log.warning("train.batch_size=%d is above the %d %s an epoch: every epoch is one batch of %d", train.batch_size,
                        self._units_per_epoch(), "sequences" if self.sequence else "examples", B)
        ex = self.examples  # sequence: the loss's de-duplicated candidates of ~B * (positions per window) draws
        draws = max(1, round(B * ex.n_positions() / max(len(ex), 1))) if self.sequence else None
        log_q = loss_log_q(loss, self.loss_fn, probs, B, dedup_draws=draws)  # [I], or None: the loss uses none
        self.step_fn = RecStep(model, self.loss_fn, n_uniform=loss.uniform_negatives, n_sampled=loss.sampled_negatives,
                               sampler_probs=probs if loss.sampler == "popularity" else None,
                               log_q=None if log_q is None else log_q.to(self.device),
                               gradcache_chunk=train.gradcache_chunk,
                               generator=self.torch_gen, world=self.world, rank=self.rank, dedup=self.sequence,
                               bf16=self.bf16)
        self._sparse_ids = {id(p) for p in sparse_parameters(model)}
        self.loop = TrainLoop(
            decay_groups([p for p in model.parameters() if id(p) not in self._sparse_ids], train.decay_1d),
            lr=train.lr, weight_decay=train.weight_decay,
            optimizer=train.optimizer, sparse_params=sparse_parameters(model), grad_clip=train.grad_clip,
            progress=train.progress and tdist.is_main(), log_every_s=train.log_every_s,
            suspect=temperature_suspect(loss.temperature, default=LossConfig.temperature),
            after_backward=self.cold_rows.mask_grads,  # items without training data keep their ID rows
        )
        self.optimizers = self.loop.optimizers
        # sparse ID tables (SparseAdam) stay out of the average: blending a million-row table each step would cost
        # more than the step, whose point is touching only the batch's rows
        averaged_params = [p for p in model.parameters() if id(p) not in self._sparse_ids]
        self.average = WeightAverage(averaged_params, train.ema_decay) if train.ema_decay else None
        self.history: list[dict[str, Any]] = []
        self._horizon: int | None = None  # the schedule's end epoch last logged (hooks.schedule_horizon)
        self._restored: tuple[int, EarlyStopping] | None = None  # (last finished epoch, stopper) once restore() ran
        #: the checkpoint restore() read: path, epoch, global step, files' digest (rank_checks.py), best_measure (measure.py)
        self.resumed_from: dict[str, Any] | None = None
        if tdist.is_main():
            log_start(self, B)  # training/start_line.py

    def _units_per_epoch(self) -> int:
        n = len(self.examples)
        return min(n, self.cfg.max_examples_per_epoch) if self.cfg.max_examples_per_epoch else n

    # ------------------------------------------------------------------ steps
    def _step(self, idx: np.ndarray, plan: BatchPlan | None = None) -> tuple[float, float, torch.Tensor, torch.Tensor, int]:
        """Forward and backward of one GLOBAL batch ``idx[B_global]``; this rank computes its slice. ``plan``:
        ``plan_batch`` of :meth:`_inputs` of ``idx`` built ahead (training/batch_plan.py), else built here. Returns
        the global batch's mean loss and accuracy (the ranks' shares summed: one process's values, on every rank),
        the local query / positive embeddings and the number of target positions.
        """
        if self.sequence:  # shares of target positions, not of users (training/sequence_step.py)
            return sequence_step(self, idx)
        p = plan if plan is not None else plan_batch(self.step_fn, *self._inputs(idx), ahead=False)
        frac = len(p.users) / p.n_global
        scale = frac * self.world if self.world > 1 else 1.0  # averaging over ranks then gives the global mean
        dev = self.device
        h = p.history.to(dev) if p.history is not None else None  # [B, L]
        value, stats, q, pos = self.step_fn(p.users.to(dev), h, p.targets.to(dev), p.n_global, scale,
                                            pools=p.pools, loss_batch=p.loss_batch, masks=p.masks)
        return (*self._sync(value * frac, stats.get("correct", 0.0) / p.n_global), q, pos, len(p.users))

    def _inputs(self, idx: np.ndarray) -> "StepInputs":
        """The numpy side of :meth:`_step` for the global batch ``idx`` (causal, denoising, both): this rank's
        users, their input histories [B, L] (None when the tower reads none), the targets and the global batch
        size. It draws from ``self.rng`` (denoising subsets, history dropout), so batches are built in order."""
        lo, hi = share(len(idx), self.world, self.rank)
        local = idx[lo:hi]  # this rank's contiguous part of the global batch
        m, ex = self.model, self.examples
        users, positions, denoise = ex.users[local], ex.positions[local], ex.denoise[local]
        drop = self.cfg.history_dropout if m.user_tower.uses_history else 0.0  # no masks for a history unread
        hist = make_histories(self.seqs, users, positions, denoise, m.history_len, m.pad_item, self.rng,
                              self.cfg.denoise_keep, drop)  # built unread too: its draws keep self.rng's stream
        return users, hist if m.user_tower.uses_history else None, self.seqs.items[positions], len(idx)

    def _sync(self, loss: float, acc: float) -> tuple[float, float]:
        """Average the gradients over ranks and sum this rank's shares of the step's ``loss`` and ``acc`` with the
        others': the global batch's values (the distributed hook; the values as given in one process)."""
        if self.world == 1:
            return loss, acc
        return tuple(sync_grads(self.model, self._sparse_ids, self.world, (loss, acc)))  # type: ignore[return-value]

    def _run_epoch(self, epoch: int) -> dict[str, Any]:
        with flush_denormals():
            return train_epoch(self, epoch)  # training/epoch.py

    def validate(self, scorer: TwoTowerScorer | None = None) -> dict[str, float]:
        """The model's metrics on the validation split (metric name -> value); empty without validation data.
        ``scorer``: one that scores as the model does (the item-item weight grid's, reusing its user vectors)."""
        if self.valid_relevant is None:
            return {}
        scorer = scorer or TwoTowerScorer(self.model, self.seqs)
        return evaluate(scorer, self.valid_relevant, self.train_matrix,
                        EvalProtocol(ks=tuple(sorted({10, self._select_k, *self.eval_cfg.ks})),
                                     log_every_s=self.cfg.log_every_s if self.cfg.progress else None), self.item_users,
                        what="validation")

    # ------------------------------------------------------------------ loop
    def restore(self) -> int:
        """Load ``out_dir``'s checkpoint (weights, optimizers, RNG, history, early stopping); the last finished
        epoch, which ``fit(resume=True)`` continues after. Called before the run folder is rewritten, so a
        checkpoint that cannot be loaded fails before anything of the run it would continue is touched."""
        from twotower.training.hooks import resume_state

        stopper = EarlyStopping(self.cfg.patience)
        self._restored = (resume_state(self, stopper), stopper)
        return self._restored[0]

    def fit(self, *, resume: bool = False, curves: bool = True) -> TrainResult:
        """Train for ``train.epochs`` (early stopping on the validation metric); see the module docstring.
        ``curves=False``: no curves.png at the end (the pipeline draws it after the item-item term).

        Under torchrun every rank calls ``fit``; rank 0 validates and writes the run folder, and every rank returns
        with the best weights loaded. Each rank beats meanwhile, so a frozen one is named (train.heartbeat_warn_s).
        """
        from twotower.training.hooks import (averaged, draw_curves, finish_fit, save_epoch, schedule_horizon,
                                             start_ranks, stop_reason)

        with rank_heartbeats(self.cfg):  # a frozen rank named (one thread a rank, also inside `twotower train`)
            if resume and self._restored is None:
                self.restore()
            done, stopper = self._restored if resume and self._restored is not None else (0, EarlyStopping(self.cfg.patience))
            self._restored = None  # used once: a later fit(resume=True) reads the checkpoint as it is then
            start_epoch = done + 1
            if self.world > 1:  # every rank from the same checkpoint (a node's stale copy), or every rank afresh
                check_resumed(self, done, self.resumed_from if resume else None)
                start_ranks(self, start_epoch)
            if resume:  # a best of another measure (eval.select_metric, train.valid_max_users) is scored again
                rescore_resumed_best(self, stopper)
            main, metric = tdist.is_main(), self.eval_cfg.select_metric
            t0 = time.perf_counter()
            epochs_run = start_epoch - 1
            stopped: str | None = None  # why the fit ended before train.epochs (hooks.stop_reason)
            budget_s = None if self.cfg.time_budget_min is None else self.cfg.time_budget_min * 60.0
            if resume and done >= self.cfg.epochs and main:  # it printed "0 in 0.4s" and nothing of why
                log.info("resume: the checkpoint holds epoch %d, and train.epochs=%d asks for no more; nothing is trained "
                         "(raise --epochs to continue)", done, self.cfg.epochs)
            for epoch in range(start_epoch, self.cfg.epochs + 1):
                spent = sum(r.get("seconds", 0.0) for r in self.history)  # includes epochs before a resume
                stopped = stop_reason(self, stopper, spent, epoch, resumed=resume and epoch == start_epoch)
                if stopped:
                    break
                self.torch_gen.manual_seed(epoch_seed(self.cfg.seed, epoch))
                horizon = schedule_horizon(self, epoch, spent)  # train.epochs, or where the time budget will end the fit
                self.loop.scale_lr(epoch_lr_factor(epoch, horizon, self.cfg.lr_schedule))
                te = time.perf_counter()
                try:
                    row = self._run_epoch(epoch)
                    check_finite_weights(self.model, epoch, self.loop.lr, self.loop.suspect)
                except (TrainingDiverged, KeyboardInterrupt) as e:  # KeyboardInterrupt: Ctrl-C, SIGTERM (cli Terminated)
                    # the epochs before the divergence or the stop, drawn, and the title says which ended the fit
                    draw_curves(self, stopper.best_epoch or None,
                                stopped=f"{'DIVERGED' if isinstance(e, TrainingDiverged) else 'stopped'} in epoch {epoch}")
                    raise
                epochs_run = epoch
                row["train_seconds"] = time.perf_counter() - te
                row["lr"] = self.loop.lr
                if horizon != self.cfg.epochs:
                    row["lr_horizon"] = horizon
                new_best = False
                # the time budget ends the fit after this epoch: validate it like a last scheduled epoch, or with
                # train.eval_every > 1 its training is thrown away unseen (rank 0's clock decides, as for the stop)
                last_in_budget = budget_s is not None and tdist.broadcast_value(
                    float(spent + row["train_seconds"] >= budget_s), self.device) > 0.5
                if epoch % self.cfg.eval_every == 0 or epoch == self.cfg.epochs or last_in_budget:
                    with averaged(self):  # validated, kept and saved: the weight average when train.ema_decay is set
                        valid = self.validate() if main else {}
                        row.update({f"valid_{k}": v for k, v in valid.items() if "@" in k})
                        value = valid.get(metric, -row["loss"]) if valid else -row["loss"]
                        new_best = stopper.update(tdist.broadcast_value(value, self.device), epoch)  # rank 0's metric decides
                        if new_best:
                            self._best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
                row["seconds"] = time.perf_counter() - te
                self.history.append(row)
                if main:
                    log_epoch(self, row, metric, stopper, horizon)
                    save_epoch(self, epoch, stopper, new_best)
                tdist.barrier()  # nobody runs ahead of rank 0's writes
            finish_fit(self, stopper.best_epoch or None, curves=curves)
            return TrainResult(stopper.best_epoch, stopper.best, epochs_run, self.history, time.perf_counter() - t0, stopped,
                               start_epoch - 1)
