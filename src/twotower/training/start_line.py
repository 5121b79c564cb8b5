"""The trainer's line before the first epoch: ``training: N examples/epoch (causal), batch B, loss ..., P parameters``."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from twotower.losses.factory import describe_loss
from twotower.training.examples import unused_history_dropout
from twotower.training.loop import describe_optimizer

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["log_start"]

log = logging.getLogger("twotower.training.trainer")


def log_start(tr: "Trainer", batch: int) -> None:
    """What the fit will run (rank 0 calls it): the units an epoch, the batch (``batch``: the one the steps take,
    which sizes the loss's candidates), the loss, the optimizer, the parameters, the users and items; then a
    history dropout set for a tower that reads no history."""
    train, loss, model = tr.cfg, tr.loss_cfg, tr.model
    n_params = sum(p.numel() for p in model.parameters())
    log.info("training: %d %s/epoch (%s), batch %d%s%s, loss %s, %s%s, %d parameters (%.1f MB), %d users, %d items",
             tr._units_per_epoch(), "sequences" if tr.sequence else "examples", train.examples,
             train.batch_size, f" across {tr.world} ranks" if tr.world > 1 else "", f", GradCache chunks of {train.gradcache_chunk}" if train.gradcache_chunk else "",
             describe_loss(loss, model.n_items, per="target" if tr.sequence else "example", batch=batch, world=tr.world),
             describe_optimizer(train.optimizer, train.ema_decay, len(tr._sparse_ids)), ", bf16 matrix products" if tr.bf16 else "", n_params, n_params * 4 / 1e6, model.n_users, model.n_items)
    unused = unused_history_dropout(train, model.user_tower.uses_history)
    if unused:
        log.info("%s", unused)
