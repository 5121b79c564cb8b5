"""L2 normalisation of tower outputs with a two-pass backward.

``y = x / max(||x||, eps)`` row-wise, the same values as ``F.normalize``.
Its backward, ``dx = (g - y * <g, y>) / max(||x||, eps)`` (the projection of
the upstream gradient onto the tangent space of the sphere, scaled by the
inverse norm), is computed here in one row-wise dot product and one fused
expression. ``F.normalize`` expands the norm to the input's shape before
dividing, so autograd's division backward runs five full-size passes: on a
full-softmax step over a 33.5K-item catalogue the item table's normalisation
took 33-47 ms forward and backward against 18-20 ms here (one core).

Exporters and no-grad callers get ``F.normalize`` itself (identical values).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["l2_normalize"]

_EPS = 1e-12  # F.normalize's default


class _L2Normalize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, eps: float) -> Tensor:  # type: ignore[override]
        n = torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min_(eps)  # [..., 1]
        y = x / n
        ctx.save_for_backward(y, n)
        return y

    @staticmethod
    def backward(ctx, g: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        y, n = ctx.saved_tensors
        dot = (g * y).sum(dim=-1, keepdim=True)  # [..., 1]
        return (g - y * dot).div_(n), None


def l2_normalize(x: Tensor, eps: float = _EPS) -> Tensor:
    """``F.normalize(x, dim=-1, eps=eps)`` with the cheaper backward of the module docstring."""
    if not (torch.is_grad_enabled() and x.requires_grad) or torch.jit.is_tracing() or torch.onnx.is_in_onnx_export():
        return F.normalize(x, dim=-1, eps=eps)
    return _L2Normalize.apply(x, eps)
