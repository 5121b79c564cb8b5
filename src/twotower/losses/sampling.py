"""Negative samplers for the losses (uniform, for mixed negative sampling)."""
from __future__ import annotations

import torch
from torch import Tensor

from twotower.errors import ConfigError

__all__ = ["sample_uniform_negatives", "sample_negatives"]


def sample_uniform_negatives(n: int, n_items: int, generator: torch.Generator) -> Tensor:
    """``n`` item rows drawn uniformly with replacement from ``0..n_items-1``: LongTensor[n].

    All randomness comes from ``generator`` (on the CPU), so a seeded generator
    gives the same negatives on every run. Their sampling distribution is the
    ``M / I`` term of :func:`~twotower.losses.corrections.mixture_log_q`; they may
    coincide with a positive, which accidental-hit masking handles.
    """
    if int(n) != n or n < 0:
        raise ConfigError(f"n: must be an integer >= 0 (uniform negatives to draw), got {n!r}")
    if int(n_items) != n_items or n_items < 1:
        raise ConfigError(f"n_items: must be an integer >= 1, got {n_items!r}")
    if not isinstance(generator, torch.Generator):
        raise ConfigError("pass a torch.Generator (e.g. torch.Generator().manual_seed(seed)) so sampling is seeded")
    return torch.randint(0, int(n_items), (int(n),), generator=generator, device=generator.device, dtype=torch.long)


def sample_negatives(n: int, probs: Tensor | None, n_items: int, generator: torch.Generator) -> Tensor:
    """``n`` item rows with replacement: uniform when ``probs`` is None, else from ``probs[I]`` (e.g. popularity).

    The sampler's log-probabilities are the logQ correction of
    :class:`~twotower.losses.softmax.SampledSoftmax`.
    """
    if probs is None:
        return sample_uniform_negatives(n, n_items, generator)
    return torch.multinomial(probs, int(n), replacement=True, generator=generator)
