"""The trainer's hooks: the check that the data gives a batch, checkpoint/resume, distributed start-up, stopping and
finishing (the epoch's log line is in :mod:`twotower.training.epoch_line`)."""
from __future__ import annotations

import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
import torch
from safetensors.torch import load_file

from twotower import distributed as tdist
from twotower.errors import ConfigError, DataError
from twotower.models.item_item import is_item_item_key
from twotower.training.averaging import WeightAverage
from twotower.training.checkpoint import (load_checkpoint, load_weights, optimizer_steps, save_checkpoint, save_weights,
                                         take_back_resume_best)
from twotower.training.epoch_line import format_seconds
from twotower.training.loop import EarlyStopping
from twotower.training.measure import TRAIN_LOSS, checkpoint_measure, drawn_users, validation_measure
from twotower.training.rank_checks import checkpoint_digest
from twotower.training.schedule import budget_horizon
from twotower.utils.atomic import atomic_write_text, signals_deferred
from twotower.utils.wording import plural

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["averaged", "check_enough_examples", "validation_users", "resume_state", "start_ranks", "finish_fit",
           "schedule_horizon"]

log = logging.getLogger("twotower.training.trainer")


def check_enough_examples(tr: "Trainer") -> None:
    """Refuse data that gives no batch: every epoch skipped all of it, logged loss 0.0 and kept the untrained
    weights as the best epoch (e.g. sequence examples where no user has two training interactions)."""
    need, n = max(2, tr.world), tr._units_per_epoch()  # train_epoch skips a batch smaller than this
    if n >= need:
        return
    ranks = f" ({tr.world} ranks each need one)" if tr.world > 2 else ""
    if n < len(tr.examples):
        raise ConfigError(f"train.max_examples_per_epoch={tr.cfg.max_examples_per_epoch} leaves {plural(n, 'example')} "
                          f"an epoch, fewer than one batch needs ({need}{ranks}); raise it or set it to null")
    if tr.sequence:
        raise DataError(f"train.examples=sequence: {plural(n, 'user')} {'has' if n == 1 else 'have'} two or more training interactions (an input "
                        f"item and the next one to predict), fewer than one batch needs ({need}{ranks}), so no "
                        f"epoch would train anything; use train.examples=causal, which learns from every "
                        f"interaction, or more data")
    raise DataError(f"{plural(n, 'training example')} ({tr.cfg.examples}), fewer than one batch needs ({need}{ranks}), "
                    f"so no epoch would train anything; the training data is too small")


#: Validation scores (users x items) an epoch above which the trainer suggests train.valid_max_users: 10^10 is
#: minutes an epoch on one core (ML-1M's 6,040 x 3,416 is 2·10^7; 176k users over 1M items took ~35 min)
LARGE_VALIDATION_SCORES = 10**10


def validation_users(valid: sp.csr_matrix | None, max_users: int | None, seed: int) -> sp.csr_matrix | None:
    """``valid`` with the relevant items of at most ``max_users`` users kept, drawn once with ``seed``; the other
    rows emptied, so the protocol skips them. Full-catalogue validation of every user took ~35 minutes an epoch
    at 1M items: without a cap a validation that large is warned about, naming the setting."""
    if valid is None:
        return None
    users = np.flatnonzero(np.diff(valid.indptr) > 0)  # [V] users the protocol would evaluate
    if max_users is None or users.size <= max_users:
        if max_users is None and users.size * valid.shape[1] > LARGE_VALIDATION_SCORES:
            log.warning("validation scores all %d validation users over %d items every validated epoch (%.1e "
                        "scores); set train.valid_max_users (e.g. 10000) to validate on a sample of them, or "
                        "train.eval_every to validate less often", users.size, valid.shape[1],
                        users.size * valid.shape[1])
        return valid
    keep = np.zeros(valid.shape[0], dtype=bool)
    keep[drawn_users(valid, max_users, seed)] = True
    log.info("validation: %d of the %d validation users, drawn once (train.valid_max_users)", max_users, users.size)
    counts = np.diff(valid.indptr) * keep  # [U] relevant items kept per user
    stored = np.repeat(keep, np.diff(valid.indptr))  # [nnz] which stored entries stay
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_matrix((valid.data[stored], valid.indices[stored], indptr), shape=valid.shape)


def resume_state(tr: "Trainer", stopper: EarlyStopping) -> int:
    """Restore weights, optimizers, RNG, history and early-stopping state; the last finished epoch."""
    ckpt = tr.out_dir / "checkpoint" if tr.out_dir else None
    if ckpt is None or not (ckpt / "state.json").exists():
        raise ConfigError(f"cannot resume: no checkpoint in {ckpt}; train without --resume first")
    if tr.out_dir is not None and tdist.is_main():
        take_back_resume_best(tr.out_dir)  # the best epoch's weights of a resume stopped before it sealed the run
    state = load_checkpoint(ckpt, tr.model, tr.optimizers, tr.rng)
    stopper.load(state)
    if tr.average is not None:  # the checkpoint's files were verified against their checksums above
        path = ckpt / "average.safetensors"
        if path.exists():
            tr.average.load_state_dict(load_file(str(path)))
        else:  # the run trained without one (train.ema_decay=0, or a run from before its default): the average
            # starts at the resumed weights, as a fresh run's starts at its first ones
            tr.average = WeightAverage(tr.average.params, tr.average.decay)
            if tdist.is_main():
                log.info("resume: the checkpoint holds no weight average; train.ema_decay=%g averages from the resumed "
                         "weights on (train.ema_decay=0 continues without one)", tr.average.decay)
    tr.cold_rows.settle_resumed(tr.optimizers, tr.average, say=tdist.is_main())  # older runs'
    tr.history = list(state["history"])
    # the loop's step count goes on from the checkpoint's, as in a run never stopped (it restarted at 0); a checkpoint
    # from before it was kept: the optimizer's own count, which every dense step advances
    tr.loop.global_step = int(state.get("global_step", optimizer_steps(tr.optimizers)))
    # what the ranks compare before training (rank_checks.check_resumed): a node's stale copy of the checkpoint
    tr.resumed_from = {"path": str(ckpt), "epoch": int(state["epoch"]), "step": tr.loop.global_step,
                       "digest": checkpoint_digest(state.get("files", {})),
                       "best_measure": checkpoint_measure(state, tr.out_dir)}  # read before config.json is rewritten
    if tr.out_dir is not None and tdist.is_main() and state.get("best_epoch") == state["epoch"]:
        # this epoch was the best: its weights are the run's, and a kill right after the checkpoint may have kept
        # them from model.safetensors (written next), which would then hold an earlier epoch's
        with averaged(tr):
            save_weights(tr.out_dir / "model.safetensors", tr.model)
    elif tr.out_dir is not None and tdist.is_main() and (tr.out_dir / "model.safetensors").exists():
        tr.cold_rows.settle_saved(tr.out_dir / "model.safetensors")  # an earlier best, which finish_fit reloads
    if tdist.is_main():
        # as the summary line says it: without validation data the stopper holds the negated training loss (it read
        # "best NDCG@10=-6.0215"), and before the first validated epoch (train.eval_every) nothing ("=-inf at epoch 0")
        # named by the checkpoint's measure, not this command's: eval.select_metric=Precision@10 on resume read the
        # run's NDCG@10 as "best Precision@10=0.1764" (rescore_resumed_best then scores it again, and says so)
        measure = tr.resumed_from["best_measure"] or validation_measure(tr)
        if stopper.best_epoch == 0:
            best = "no epoch validated yet"
        elif measure["metric"] == TRAIN_LOSS:
            best = f"best train loss {-stopper.best:.4f} at epoch {stopper.best_epoch}"
        else:
            best = f"best {measure['metric']}={stopper.best:.4f} at epoch {stopper.best_epoch}"
        log.info("resumed from epoch %d (%s)", state["epoch"], best)
    return int(state["epoch"])


def averaged(tr: "Trainer") -> contextlib.AbstractContextManager[None]:
    """The weight average swapped into the model (train.ema_decay), or nothing to do."""
    return tr.average.swapped() if tr.average is not None else contextlib.nullcontext()


def start_ranks(tr: "Trainer", start_epoch: int) -> None:
    """Same weights everywhere (rank 0's), distinct random streams per rank.

    After a resume every rank restored rank 0's RNG states from the
    checkpoint; ranks > 0 re-derive theirs from (seed, rank, epoch) so their
    dropout masks and denoising subsets stay independent of rank 0's. In
    sequence mode the numpy stream stays rank 0's on every rank: it draws the
    random window ends of each GLOBAL batch, which must agree across ranks.
    """
    import torch.distributed as dist

    for t in tr.model.state_dict().values():
        dist.broadcast(t, src=0)
    if tr.rank > 0:
        seq = np.random.SeedSequence([tr.cfg.seed, tr.rank, start_epoch])
        if not tr.sequence:
            tr.rng = np.random.default_rng(seq)
        torch.manual_seed(int(seq.generate_state(1, np.uint64)[0] >> 1))


def finish_fit(tr: "Trainer", best_epoch: int | None = None, *, curves: bool = True) -> None:
    """Restore the best weights for whatever comes next (evaluation, export); draw the curves (``curves``; the
    pipeline draws them itself once the item-item term is fitted, whose figure is what the run saved)."""
    if getattr(tr, "_best_state", None) is not None:
        tr.model.load_state_dict(tr._best_state)
    elif tr.out_dir and (tr.out_dir / "model.safetensors").exists():
        # a finished run's weights carry the item-item term fitted after training, which the trainer's model lacks
        # until the pipeline fits it again (a resume of such a run stopped here, and left the run unloadable)
        load_weights(tr.out_dir / "model.safetensors", tr.model, skip=is_item_item_key)
    if curves:
        draw_curves(tr, best_epoch)
    tdist.barrier()


def draw_curves(tr: "Trainer", best_epoch: int | None = None, *, stopped: str | None = None,
                item_item: dict[str, Any] | None = None) -> None:
    """``curves.png`` of the epochs in ``tr.history`` (rank 0); also for a fit that diverged, whose finished
    epochs were in log.jsonl alone (the curves are where a rising loss before the NaN is seen). ``stopped``: what
    ended the fit early ("DIVERGED in epoch 3"), for the title; ``item_item``: the term fitted after training."""
    if not (tr.out_dir and tr.history and tdist.is_main()):
        return
    from twotower.training.plots import plot_training_curves
    from twotower.utils.extras import plotting_missing

    why = plotting_missing()  # imports matplotlib with a Ctrl-C held back (a second one used to abort the interpreter)
    if why is not None:
        log.warning("could not draw training curves: %s", why)
        return

    try:
        plot_training_curves(tr.history, tr.out_dir / "curves.png", metric=tr.eval_cfg.select_metric,
                             best_epoch=best_epoch, loss_kind=tr.loss_cfg.kind, stopped=stopped, item_item=item_item)
    except Exception as e:  # a plot must never fail a training run
        log.warning("could not draw training curves: %s", e)


def schedule_horizon(tr: "Trainer", epoch: int, spent_s: float) -> int:
    """The epoch the learning-rate schedule aims at before ``epoch`` (:func:`budget_horizon`; rank 0's clock decides)."""
    cfg = tr.cfg
    if not cfg.budget_schedule or cfg.lr_schedule == "constant" or cfg.time_budget_min is None:
        return cfg.epochs
    horizon = budget_horizon(cfg.epochs, epoch, spent_s, cfg.time_budget_min * 60.0)
    horizon = int(tdist.broadcast_value(float(horizon), tr.device))
    if tdist.is_main() and horizon < cfg.epochs and horizon != tr._horizon:
        log.info("learning-rate schedule aimed at epoch %d of %d: train.time_budget_min=%g ends the fit there "
                 "at %.1fs an epoch", horizon, cfg.epochs, cfg.time_budget_min, spent_s / max(epoch - 1, 1))
    tr._horizon = horizon
    return horizon


def stop_reason(tr: "Trainer", stopper: EarlyStopping, spent: float, epoch: int, *, resumed: bool = False) -> str | None:
    """Why the fit ends before ``epoch`` (early stopping, or the time budget spent), logged; None: go on.

    Said, not only done: the epoch lines alone do not tell an early stop from a crash, and the summary
    read "4 epochs" as a finished schedule. Rank 0's clock decides the budget, so every rank stops after
    the same epoch. ``resumed``: ``epoch`` is the first of a resumed fit, whose log line adds the setting to raise.
    """
    cfg = tr.cfg
    why = None
    if stopper.stop:
        # without validation data the stopper watches the training loss (negated), not the metric
        what = (f"valid {tr.eval_cfg.select_metric} not improved" if tr.valid_relevant is not None
                else "train loss not lowered")
        why = (f"early stopping: {what} for {stopper.bad} evaluations since epoch {stopper.best_epoch} "
               f"(train.patience={cfg.patience})")
    elif cfg.time_budget_min is not None and tdist.broadcast_value(
            float(spent >= cfg.time_budget_min * 60.0), tr.device) > 0.5:
        # seconds below a minute: "0.1 min of training reached train.time_budget_min=0.05" (4 s) read as rounding
        took = f"{spent:.2g}s" if spent < 60 else format_seconds(spent)
        why = f"time budget: {took} of training reached train.time_budget_min={cfg.time_budget_min:g}"
    if why and tdist.is_main():
        # a resume of a stopped run stopped again at once: "stopping after epoch 7" did not say how to go on
        more = f"; nothing is trained (raise {'train.patience' if stopper.stop else 'train.time_budget_min'} to continue)"
        log.info("stopping after epoch %d of %d: %s%s", epoch - 1, cfg.epochs, why, more if resumed else "")
    return why


def save_epoch(tr: "Trainer", epoch: int, stopper: EarlyStopping, new_best: bool) -> None:
    """Rank 0 after each epoch: log.jsonl, the checkpoint, and the best weights when this epoch is the best."""
    if not tr.out_dir:
        return
    text = "".join(json.dumps(r, default=float) + "\n" for r in tr.history)
    # a Ctrl-C or SIGTERM lands after the epoch is saved: it cut the checkpoint write, and the epoch log.jsonl
    # showed was lost ("no epoch was checkpointed") or the checkpoint left one epoch behind the log
    with signals_deferred():
        atomic_write_text(tr.out_dir / "log.jsonl", text)
        if tr.cfg.checkpoint:
            state = {"epoch": epoch, **stopper.state(), "best_measure": validation_measure(tr), "history": tr.history,
                     "global_step": tr.loop.global_step}
            extra = {"average.safetensors": tr.average.state_dict()} if tr.average is not None else None
            save_checkpoint(tr.out_dir / "checkpoint", tr.model, tr.optimizers, state, tr.rng, extra)
        if new_best:  # after the checkpoint naming it the best: a kill in between is repaired by resume_state
            save_weights(tr.out_dir / "model.safetensors", tr._best_state)
