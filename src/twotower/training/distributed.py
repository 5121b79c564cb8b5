"""Moved to :mod:`twotower.distributed` (one ground-floor module for every distributed helper).

Kept so that ``from twotower.training import distributed`` keeps working.
"""
from __future__ import annotations

from twotower.distributed import (  # noqa: F401  (re-exports)
    all_reduce_mean,
    barrier,
    cleanup,
    init_from_env,
    is_initialized,
    is_main,
    rank,
    world_size,
)

__all__ = ["init_from_env", "is_initialized", "is_main", "rank", "world_size", "barrier", "all_reduce_mean", "cleanup"]
