"""Row-wise maximum and its first column, at the speed of a plain pass over the rows.

PyTorch's CPU ``argmax(dim=1)`` and ``max(dim=1)`` (values and indices) run a
scalar loop over each row: on one Zen 3 core a [512, 512] float32 matrix took
0.35-0.77 ms and a [153, 3416] block 1.3 ms, while ``amax(dim=1)`` (values
only) takes 0.03-0.07 ms and NumPy's ``argmax(axis=1)`` 0.03-0.07 ms. Every
training step reads one or two such reductions for its statistics (in-batch
accuracy, first-top-is-positive), so on the default ML-1M step they cost more
than the loss's forward matrix product.

:func:`row_argmax` gives the same answer as ``x.argmax(dim=1)``: the first
column holding the row's maximum (NumPy and PyTorch both return the first of
tied maxima, and the first NaN of a row with NaNs).
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["row_argmax", "row_max"]

_NUMPY_DTYPES = (torch.float32, torch.float64)


@torch.no_grad()
def row_argmax(x: Tensor) -> Tensor:
    """``x.argmax(dim=1)`` of a 2-D tensor ``[R, C]`` -> ``[R]`` (int64), the first maximum of each row."""
    if x.dim() != 2:
        raise ValueError(f"row_argmax takes a 2-D tensor, got shape {tuple(x.shape)}")
    if x.device.type != "cpu" or x.dtype not in _NUMPY_DTYPES or x.shape[1] == 0 or not x.is_contiguous():
        # other devices and dtypes (bfloat16: NumPy has none), and strided rows (no faster in NumPy)
        return x.argmax(dim=1)
    return torch.from_numpy(x.detach().numpy().argmax(axis=1))


@torch.no_grad()
def row_max(x: Tensor) -> tuple[Tensor, Tensor]:
    """``x.max(dim=1)`` of ``[R, C]`` as ``(values[R], first columns[R])``."""
    return x.amax(dim=1), row_argmax(x)
