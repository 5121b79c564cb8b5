"""Checks the ranks of a torchrun training make before their first collective, each refusing on every rank at once.

* ``train.batch_size`` is the global batch, cut into one share per rank: below the number of ranks every batch
  was skipped (a rank without an example), and the run logged loss 0.0 for each epoch and kept untrained weights.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from twotower.errors import ConfigError

if TYPE_CHECKING:
    from twotower.training.trainer import Trainer

__all__ = ["check_ranks"]


def check_ranks(tr: "Trainer") -> None:
    """Refuse a global batch smaller than the number of ranks; nothing in one process."""
    if tr.world < 2:
        return
    if tr.cfg.batch_size < tr.world:
        raise ConfigError(f"train.batch_size={tr.cfg.batch_size} is the global batch, split over the {tr.world} "
                          f"ranks, and each rank needs an example of every batch: set it to at least {tr.world}")
