"""The towers' dropout: F.dropout's function with a cheaper mask, or torch's own masks on request."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from twotower.config import TowerConfig
from twotower.errors import ConfigError
from twotower.models.dropout import Dropout, _uint16_bits, dropout
from twotower.models.mlp import MLP
from twotower.models.sequence import CausalTransformer


def test_drops_at_the_rate_asked_and_keeps_the_expectation() -> None:
    torch.manual_seed(0)
    x = torch.ones(400_000)
    y = dropout(x, 0.2)
    kept = y != 0
    # 400k Bernoulli(0.8) draws: the share kept is within 5 standard deviations (~0.0032) of 0.8
    assert abs(float(kept.float().mean()) - 0.8) < 0.0032
    # kept values are scaled by 1 / (1 - p) with p rounded to 1/65536 (0.2 -> 13107/65536)
    assert torch.allclose(y[kept], torch.full_like(y[kept], 65536 / (65536 - 13107)))
    assert abs(float(y.mean()) - 1.0) < 0.005


@pytest.mark.parametrize("p", [0.999995, 1 - 2**-17, np.nextafter(1.0, 0.0)])
def test_a_rate_that_rounds_to_one_keeps_one_level(p: float) -> None:
    # the config takes any rate below 1; rounded to 1/65536 such a rate was 65536/65536, and the mask's scale a
    # ZeroDivisionError in the first training step. It keeps 1 of the 65536 levels (kept values scaled by 65536)
    torch.manual_seed(0)
    x = torch.ones(2_000_000)
    y = dropout(x, p)
    layer = Dropout(p)
    assert torch.isfinite(y).all() and torch.isfinite(layer(x)).all()
    assert set(y.unique().tolist()) <= {0.0, 65536.0}
    assert 0 < int((y != 0).sum()) < 100  # about 2,000,000 / 65536 = 31 kept


def test_masks_follow_torch_seed() -> None:
    x = torch.randn(8, 50, 16)
    torch.manual_seed(3)
    a = dropout(x, 0.3)
    torch.manual_seed(3)
    b = dropout(x, 0.3)
    c = dropout(x, 0.3)
    assert torch.equal(a, b)
    assert not torch.equal(b, c)


@pytest.mark.parametrize("n", [1, 3, 4, 5, 7, 512 * 256, 512 * 256 + 3])
def test_mask_bits_are_numpys_bounded_uint16_draws(n: int) -> None:
    # the masks of runs made since the MLP heads took the cheap mask: the raw-output reading must not move them
    want = np.random.default_rng(987654321).integers(0, 1 << 16, n, dtype=np.uint16)
    assert np.array_equal(_uint16_bits(987654321, n), want)


def test_gradient_is_the_mask() -> None:
    torch.manual_seed(1)
    x = torch.randn(6, 10, requires_grad=True)
    y = dropout(x, 0.5)
    y.sum().backward()
    mask = (y.detach() / x.detach())  # 0 or 2 where x != 0
    assert torch.allclose(x.grad, mask)
    assert set(torch.unique(x.grad).tolist()) <= {0.0, 2.0}


def test_eval_mode_and_zero_rate_are_the_identity() -> None:
    x = torch.randn(4, 5)
    m = Dropout(0.4).eval()
    assert m(x) is x
    assert dropout(x, 0.0) is x
    assert dropout(x, 0.4, training=False) is x


def test_other_dtypes_use_torch_dropout_and_bad_rates_are_refused() -> None:
    torch.manual_seed(0)
    y = dropout(torch.ones(1000, dtype=torch.float64), 0.5)
    assert y.dtype == torch.float64 and 0.35 < float((y == 0).double().mean()) < 0.65
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        Dropout(1.0)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        dropout(torch.ones(3), -0.1)


def test_torch_rng_gives_torch_masks_bit_for_bit() -> None:
    """``dropout_rng = "torch"`` reproduces runs made with nn.Dropout (the golden training test relies on it)."""
    x = torch.randn(64, 32)
    torch.manual_seed(5)
    want = torch.nn.functional.dropout(x, 0.1, True)
    torch.manual_seed(5)
    assert torch.equal(dropout(x, 0.1, rng="torch"), want)
    torch.manual_seed(5)
    assert not torch.equal(dropout(x, 0.1), want)  # the default draws its mask elsewhere


def test_towers_take_their_configured_rng_and_unknown_ones_are_refused() -> None:
    assert TowerConfig().dropout_rng == "pcg64"
    with pytest.raises(ConfigError, match="tower.dropout_rng.*'torhc'.*did you mean 'torch'"):
        TowerConfig(dropout_rng="torhc")
    with pytest.raises(ValueError, match="unknown dropout rng"):
        dropout(torch.ones(3), 0.1, rng="mt")
    mlp = MLP(8, (16,), 4, dropout=0.1, layernorm=True, dropout_rng="torch")
    assert [m.rng for m in mlp.modules() if isinstance(m, Dropout)] == ["torch"]
    enc = CausalTransformer(16, 10, layers=2, heads=1, dropout=0.1, rng="torch")
    assert {m.rng for m in enc.modules() if isinstance(m, Dropout)} == {"torch"}
    assert {b.rng for b in enc.blocks} == {"torch"}
    # an MLP with torch's masks computes what nn.Dropout's would, mask for mask
    ref = torch.nn.Sequential(*[torch.nn.Dropout(0.1) if isinstance(m, Dropout) else m for m in mlp.net])
    x = torch.randn(32, 8)
    torch.manual_seed(2)
    a = mlp(x)
    torch.manual_seed(2)
    assert torch.equal(a, ref(x))
