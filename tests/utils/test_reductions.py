"""row_argmax / row_max: the same answers as torch's argmax / max over rows (utils/reductions.py)."""
from __future__ import annotations

import pytest
import torch

from twotower.utils.reductions import row_argmax, row_max


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_first_maximum_of_each_row_as_torch(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 5, (64, 37), generator=g).to(dtype)  # small integers: many tied maxima
    x[3, 10] = float("nan")
    x[4, 2], x[4, 30] = float("nan"), float("nan")  # rows with NaN: the first NaN, as torch says
    assert torch.equal(row_argmax(x), x.argmax(dim=1))
    values, cols = row_max(x)
    want = x.max(dim=1)
    assert torch.equal(cols, want.indices)
    assert torch.allclose(values.float(), want.values.float(), equal_nan=True)  # NaN rows: NaN
    assert row_argmax(x).dtype == torch.long


def test_strided_and_transposed_rows() -> None:
    x = torch.randn(20, 30)
    assert torch.equal(row_argmax(x.T), x.T.argmax(dim=1))
    assert torch.equal(row_argmax(x[:, ::3]), x[:, ::3].argmax(dim=1))
    assert torch.equal(row_argmax(x[5:9]), x[5:9].argmax(dim=1))


def test_gradient_free_and_shape_checked() -> None:
    x = torch.randn(4, 6, requires_grad=True)
    assert torch.equal(row_argmax(x * 2), (x * 2).argmax(dim=1))
    assert row_argmax(torch.empty(0, 5)).shape == (0,)
    with pytest.raises(ValueError, match="2-D"):
        row_argmax(torch.randn(3))
