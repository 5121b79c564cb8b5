"""Process-group helpers for data-parallel training launched by ``torchrun``.

Every helper works without a process group (single process): ``rank() == 0``,
``world_size() == 1``, ``barrier()`` and ``cleanup()`` do nothing and
``all_reduce_mean`` returns its input. Environment variables are read only in
:func:`init_from_env`, the edge.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import torch
import torch.distributed as dist

from twotower.errors import ConfigError

__all__ = ["init_from_env", "is_initialized", "is_main", "rank", "world_size", "barrier", "all_reduce_mean", "cleanup"]

logger = logging.getLogger(__name__)

_BACKENDS = ("gloo", "nccl")


def is_initialized() -> bool:
    """Whether a default process group exists."""
    return dist.is_available() and dist.is_initialized()


def init_from_env(backend: str | None = None) -> bool:
    """Join the process group described by torchrun's environment variables.

    Reads ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
    ``MASTER_PORT``. ``backend`` defaults to ``"nccl"`` when CUDA is available
    (and then pins this process to ``cuda:LOCAL_RANK``), else ``"gloo"``.
    Returns True when a process group is (already or now) initialised, False
    when ``WORLD_SIZE`` is unset or 1 -- plain single-process training.
    """
    if is_initialized():
        return True
    world = int(os.environ.get("WORLD_SIZE", "1") or "1")
    if world <= 1:
        return False
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not os.environ.get(k)]
    if missing:
        raise ConfigError(
            f"WORLD_SIZE={world} but {', '.join(missing)} not set; launch with "
            "`torchrun --nproc_per_node=N ...`, which sets them"
        )
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in _BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(_BACKENDS)} (or None to choose), got {backend!r}")
    if backend == "nccl":
        if not torch.cuda.is_available():
            raise ConfigError("backend 'nccl' needs CUDA; use 'gloo' on CPU")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend=backend, init_method="env://")
    logger.info("joined process group: backend=%s rank=%d world_size=%d", backend, dist.get_rank(), world)
    return True


def rank() -> int:
    """This process's global rank (0 without a process group)."""
    return dist.get_rank() if is_initialized() else 0


def world_size() -> int:
    """Number of processes (1 without a process group)."""
    return dist.get_world_size() if is_initialized() else 1


def is_main() -> bool:
    """True on rank 0: the process that logs, evaluates and writes artefacts."""
    return rank() == 0


def barrier() -> None:
    """Wait for every rank (no-op without a process group)."""
    if is_initialized():
        dist.barrier()


def all_reduce_mean(values: Mapping[str, float]) -> dict[str, float]:
    """Average a dict of floats over ranks; every rank must pass the same keys.

    Keys are sorted so that every rank packs them in the same order; the values
    travel in one float64 tensor (on the current CUDA device under NCCL).
    """
    out = {k: float(v) for k, v in values.items()}
    if not is_initialized() or world_size() == 1 or not out:
        return out
    keys = sorted(out)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    packed = torch.tensor([out[k] for k in keys], dtype=torch.float64, device=device)
    dist.all_reduce(packed, op=dist.ReduceOp.SUM)
    packed /= world_size()
    return dict(zip(keys, packed.tolist()))


def cleanup() -> None:
    """Leave the process group, if any."""
    if is_initialized():
        dist.destroy_process_group()
