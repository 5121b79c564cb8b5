"""Dropout with a cheap mask, for every tower (MLP heads and sequence encoders).

``y = x * m``, ``m_i = 1 / (1 - p)`` with probability ``1 - p`` and ``0``
otherwise (Srivastava et al., "Dropout", JMLR 2014) -- the same function as
``F.dropout``; only the random numbers come from elsewhere. PyTorch's CPU
``bernoulli_`` draws its mask at ~5-9 ns an element, which on a sequence
encoder (seven masks of [B, L, H] a step) was 8% of an ML-1M training step;
on the default recommender's two MLP masks ([512, 256] each) it was
18% of a step; numpy's PCG64 gives 16 random bits an element at ~1.5 ns, and ``bits >= k``
with ``k = round(p * 65536)`` keeps an element with probability
``1 - k / 65536`` (``p`` rounded to a multiple of 1/65536, at most 65535/65536; the scale uses the
rounded value, so ``E[y] = x`` exactly).

Each call seeds its own numpy generator from one draw of torch's default
generator, so ``torch.manual_seed`` and a checkpoint's saved torch RNG state
still fix every mask. Inputs off the CPU or in other dtypes than float32 and
bfloat16 use ``F.dropout``, and so does ``rng="torch"`` (a tower's
``dropout_rng``): PyTorch's own masks, bit for bit those of runs made before
the MLP heads took the cheap mask (the golden test of the training loop uses it).

A mask depends on its seed and shape only, so a step's masks can be drawn before
its forward pass, on another thread (training/batch_plan.py, a step ahead on the
spare core): :func:`draw_mask` draws one as :func:`dropout` would, and inside
``with masks_ahead(masks)`` each :class:`Dropout` takes the next of ``masks``
instead of drawing. Drawn in the order the forward would draw them, and with
nothing else drawing from torch's default generator meanwhile, they are the
same masks, bit for bit.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from twotower.config import DROPOUT_RNGS, TowerConfig

__all__ = ["DROPOUT_RNGS", "Dropout", "dropout", "draw_mask", "masks_ahead"]

_LEVELS = 1 << 16  # the mask's resolution: p is rounded to a multiple of 1/65536
_DEFAULT_RNG = TowerConfig.dropout_rng  # declared once, in the config
_LITTLE_ENDIAN = np.little_endian  # raw PCG64 outputs read as uint16 give numpy's bounded draws only here


def _check_args(p: float, rng: str) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if rng not in DROPOUT_RNGS:
        raise ValueError(f"unknown dropout rng {rng!r}; choose one of {', '.join(DROPOUT_RNGS)}")


def dropout(x: Tensor, p: float, training: bool = True, rng: str = _DEFAULT_RNG) -> Tensor:
    """``F.dropout(x, p, training)`` with the mask drawn as in the module docstring (``rng``: one of DROPOUT_RNGS)."""
    if not training or p == 0.0:
        return x
    _check_args(p, rng)
    if rng == "torch" or x.device.type != "cpu" or x.dtype not in (torch.float32, torch.bfloat16):
        return F.dropout(x, p, training)
    # a bfloat16 input (a layer under autocast) comes back in float32, where the residual stream is added
    return x * draw_mask(p, tuple(x.shape))


def draw_mask(p: float, shape: tuple[int, ...], seed: int | None = None) -> Tensor:
    """The float32 mask :func:`dropout` multiplies an input of ``shape`` by (``0`` or ``1 / (1 - p)``), drawn from
    one seed of torch's default generator as :func:`dropout` draws it. ``seed``: that draw, made by the caller
    (``torch.randint(0, 2**62, (n,))`` gives the seeds of ``n`` masks in one call, the same numbers as ``n`` calls
    of one)."""
    k = _dropped_levels(p)
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)))
    bits = _uint16_bits(seed, math.prod(shape))  # [prod(shape)]
    mask = (bits >= k).astype(np.float32)
    mask *= _LEVELS / (_LEVELS - k)
    return torch.from_numpy(mask).view(shape)


def _dropped_levels(p: float) -> int:
    """``k``: of the 65536 levels of a mask's random bits, how many drop an element (``p`` rounded to 1/65536)."""
    # at most all levels but one: a rate the config takes (any p < 1) from 1 - 2**-17 on rounded to all of them,
    # and the kept values' scale 65536 / (65536 - k) was a ZeroDivisionError in the first training step
    return min(round(p * _LEVELS), _LEVELS - 1)


# the masks drawn ahead for the forward pass running in this context, in call order (None: each Dropout draws)
_AHEAD: ContextVar[Iterator[tuple["Dropout", Tensor]] | None] = ContextVar("twotower_masks_ahead", default=None)


@contextmanager
def masks_ahead(masks: Sequence[tuple["Dropout", Tensor]]) -> Iterator[None]:
    """Inside, each :class:`Dropout` call in training mode takes the next ``(module, mask)`` of ``masks`` (the module
    docstring says when those are the masks it would draw). A call by another module or on another shape than
    listed, or masks left over, is a bug in the list's maker: it raises rather than train on other masks."""
    left = iter(masks)
    token = _AHEAD.set(left)
    try:
        yield
    finally:
        _AHEAD.reset(token)
    if next(left, None) is not None:
        raise RuntimeError("dropout masks drawn ahead were left unused: the forward pass called fewer Dropout "
                           "layers than listed")


def _uint16_bits(seed: int, n: int) -> np.ndarray:
    """``np.random.default_rng(seed).integers(0, 65536, n, dtype=np.uint16)``, bit for bit, at 0.6x the time.

    For the full 16-bit range numpy's bounded draw takes each 64-bit PCG64 output as four 16-bit
    values, lowest first; reading the raw outputs as little-endian uint16 gives the same stream
    without the per-value bookkeeping (83 us against 143 us for a [512, 256] mask).
    """
    if not _LITTLE_ENDIAN:
        return np.random.default_rng(seed).integers(0, _LEVELS, n, dtype=np.uint16)
    return np.random.PCG64(seed).random_raw((n + 3) // 4).view(np.uint16)[:n]


class Dropout(nn.Module):
    """``nn.Dropout`` with the cheap mask of :func:`dropout` (identity in eval mode, as ``nn.Dropout``)."""

    def __init__(self, p: float, rng: str = _DEFAULT_RNG) -> None:
        super().__init__()
        _check_args(p, rng)
        self.p = p
        self.rng = rng

    def forward(self, x: Tensor) -> Tensor:
        ahead = _AHEAD.get()
        if ahead is None or not self.training:
            return dropout(x, self.p, self.training, self.rng)
        module, mask = next(ahead, (None, None))
        if module is not self or mask is None or mask.shape != x.shape:
            raise RuntimeError(f"dropout masks drawn ahead do not match the forward pass: {self!r} on "
                               f"{tuple(x.shape)} got the mask of {module!r}"
                               f"{'' if mask is None else f' on {tuple(mask.shape)}'}")
        return x * mask

    def extra_repr(self) -> str:
        return f"p={self.p}, rng={self.rng}"
