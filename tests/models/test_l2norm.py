"""The towers' L2 normalisation: F.normalize's values, its gradient, and the plain function where exporters look."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from twotower.models.l2norm import l2_normalize


def test_values_are_f_normalize_and_the_gradient_matches_autograd() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, 24, generator=gen, dtype=torch.float64)
    x[5] = 0.0  # a zero row: the eps clamp, as F.normalize
    x.requires_grad_()
    g = torch.randn(300, 24, generator=gen, dtype=torch.float64)
    got = l2_normalize(x)
    assert torch.equal(got, F.normalize(x, dim=-1))
    (gx,) = torch.autograd.grad(got, x, g)
    (want,) = torch.autograd.grad(F.normalize(x, dim=-1), x, g)
    assert torch.allclose(gx, want, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(l2_normalize, (torch.randn(4, 3, dtype=torch.float64, requires_grad=True),))


def test_no_grad_and_batched_shapes() -> None:
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        assert torch.equal(l2_normalize(x), F.normalize(x, dim=-1))
    y = l2_normalize(x.requires_grad_())
    assert y.shape == (2, 5, 8) and torch.allclose(y.norm(dim=-1), torch.ones(2, 5))
