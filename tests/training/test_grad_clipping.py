"""The loop's gradient clipping gives ``torch.nn.utils.clip_grad_norm_``'s gradients and norm, bit for bit."""
from __future__ import annotations

import math

import pytest
import torch

from twotower.training.clipping import clip_grad_norm


def _params(scale: float, seed: int = 0) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.zeros(s)) for s in ((64, 32), (32,), (7, 3, 5), (1,))]
    for p in params:
        p.grad = torch.randn(p.shape, generator=g) * scale
    params.append(torch.nn.Parameter(torch.zeros(3)))  # no gradient: skipped by both
    return params


@pytest.mark.parametrize("scale", [1e-4, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("max_norm", [0.5, 5.0])
def test_same_gradients_and_norm_as_torch(scale: float, max_norm: float) -> None:
    ours, ref = _params(scale), _params(scale)
    got = clip_grad_norm(ours, max_norm)
    want = torch.nn.utils.clip_grad_norm_(ref, max_norm)
    assert torch.equal(got, want)
    for a, b in zip(ours, ref):
        assert (a.grad is None and b.grad is None) or torch.equal(a.grad, b.grad)


def test_clips_when_over_the_norm() -> None:
    params = _params(10.0)
    norm = clip_grad_norm(params, 1.0)
    assert float(norm) > 1.0
    after = math.sqrt(sum(float(p.grad.square().sum()) for p in params if p.grad is not None))
    assert after == pytest.approx(1.0, rel=1e-5)


def test_non_finite_norm_scales_like_torch() -> None:
    ours, ref = _params(1.0), _params(1.0)
    for ps in (ours, ref):
        ps[0].grad[0, 0] = float("nan")
    assert torch.isnan(clip_grad_norm(ours, 5.0))
    torch.nn.utils.clip_grad_norm_(ref, 5.0)
    for a, b in zip(ours, ref):
        if a.grad is not None:
            assert torch.equal(a.grad.isnan(), b.grad.isnan())
            assert torch.equal(a.grad.nan_to_num(), b.grad.nan_to_num())
