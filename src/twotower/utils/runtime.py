"""Process-wide runtime settings: seeds and thread counts, set at the edge only."""
from __future__ import annotations

import os
import random

import numpy as np

__all__ = ["seed_everything", "set_threads", "threads_from_env"]


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch; return a NumPy Generator for local use."""
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def threads_from_env(default: int | None = None) -> int | None:
    """``TWOTOWER_THREADS`` if set, else ``default``."""
    value = os.environ.get("TWOTOWER_THREADS")
    if value is None or value == "":
        return default
    n = int(value)
    if n < 1:
        raise ValueError(f"TWOTOWER_THREADS must be >= 1, got {value}")
    return n


def set_threads(n: int | None) -> None:
    """Set torch's intra-op thread count (and FAISS's, when installed).

    Small torch ops run far slower with 2 contended threads than with 1 on
    shared cores, so the count is a setting rather than torch's guess.
    ``None`` leaves the library defaults alone.
    """
    if n is None:
        return
    import torch

    torch.set_num_threads(int(n))
    try:
        import faiss  # noqa: PLC0415

        faiss.omp_set_num_threads(int(n))
    except ImportError:
        pass
