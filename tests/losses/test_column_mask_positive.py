"""A LossBatch.column_mask that drops a row's own positive column is refused, on both in-batch paths.

Before: the PyTorch path returned a mean loss of inf and the CPU kernel ~3.5e37, with no word of which row (or
that the mask was the cause): a mask that leaves a row no positive is the caller's error.
"""
from __future__ import annotations

import pytest
import torch

from tests.losses.test_fused_xent_hits import _batch, _Plain
from twotower.errors import DataError
from twotower.losses import InBatchSoftmax, LossBatch


@pytest.mark.parametrize("plain", [False, True], ids=["kernel", "pytorch"])
def test_a_mask_over_the_positive_is_refused_naming_the_rows(plain: bool) -> None:
    q, c, batch = _batch(4, 48, 8, n_ids=30)
    mask = torch.zeros(48, 56, dtype=torch.bool)
    mask[3, 3] = mask[17, 17] = True  # rows 3 and 17: their own positive (column b)
    mask[5, 40] = True  # another row's negative: allowed
    batch.column_mask = mask
    loss_fn = _Plain(0.05) if plain else InBatchSoftmax(0.05)
    assert loss_fn._kernel_applies(q, c, batch) is not plain
    with pytest.raises(DataError, match=r"column_mask drops the positive column of row\(s\) 3, 17"):
        loss_fn(q, c, batch)
    mask[3, 3] = mask[17, 17] = False  # the same mask without them trains
    loss, _ = loss_fn(q, c, batch)
    assert torch.isfinite(loss)


@pytest.mark.parametrize("plain", [False, True], ids=["kernel", "pytorch"])
def test_positive_cols_are_where_the_mask_is_read(plain: bool) -> None:
    """De-duplicated candidates: a row's positive is the column positive_cols names, not column b."""
    torch.manual_seed(0)
    q, c = torch.randn(3, 8), torch.randn(4, 8)
    ids, cols = torch.tensor([10, 11, 12, 13]), torch.tensor([2, 0, 3])
    mask = torch.zeros(3, 4, dtype=torch.bool)
    mask[0, 0] = True  # row 0's positive is column 2: column 0 may go
    loss_fn = _Plain(0.05) if plain else InBatchSoftmax(0.05)
    batch = LossBatch(positive_ids=ids[cols], candidate_ids=ids, positive_cols=cols, column_mask=mask)
    assert torch.isfinite(loss_fn(q, c, batch)[0])
    mask[2, 3] = True
    with pytest.raises(DataError, match=r"row\(s\) 2:"):
        loss_fn(q, c, batch)
