"""A loss's stats ``accuracy`` is the figure training logs (``correct / B``, from raw scores), not the corrected logits'."""
import math

import pytest
import torch

from twotower.losses import InBatchSoftmax, LossBatch, SampledSoftmax


def _logq_flips_the_top() -> tuple[torch.Tensor, torch.Tensor, LossBatch]:
    """Row 0's positive (column 0) scores first raw (1.0 against 0.9), but column 1 is rare (log q = -3), so its
    logQ-corrected logit (0.9 + 3 at T=1) ranks above the positive's: 2 of 2 rows right raw, 1 after correction."""
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    c = torch.tensor([[1.0, 0.0], [0.9, 0.2]])
    ids = torch.tensor([3, 8])
    return q, c, LossBatch(positive_ids=ids, candidate_ids=ids, log_q=torch.tensor([0.0, -3.0]),
                           positive_cols=torch.tensor([0, 1]))


@pytest.mark.parametrize("weighted", [False, True])  # unweighted CPU float32 runs on the fused kernel, weighted not
def test_in_batch_accuracy_is_correct_over_rows(weighted: bool) -> None:
    q, c, batch = _logq_flips_the_top()
    if weighted:
        batch = LossBatch(positive_ids=batch.positive_ids, candidate_ids=batch.candidate_ids, log_q=batch.log_q,
                          positive_cols=batch.positive_cols, weights=torch.ones(2))
    loss_fn = InBatchSoftmax(1.0)
    assert loss_fn._kernel_applies(q, c, batch) == (not weighted)
    _, stats = loss_fn(q, c, batch)
    assert stats["correct"] == 2.0
    assert stats["accuracy"] == pytest.approx(1.0)  # was 0.5: read from the logQ-corrected logits


def test_sampled_accuracy_is_correct_over_rows() -> None:
    q = torch.tensor([[1.0, 0.0]])
    c = torch.tensor([[1.0, 0.0], [0.9, 0.2]])  # [positive; one negative]
    batch = LossBatch(positive_ids=torch.tensor([3]), candidate_ids=torch.tensor([3, 8]), log_q=torch.tensor([0.0, -3.0]))
    _, stats = SampledSoftmax(1.0)(q, c, batch)
    assert stats["correct"] == 1.0
    assert stats["accuracy"] == pytest.approx(1.0)  # was 0.0


def test_empty_batch_accuracy_is_nan() -> None:
    _, stats = InBatchSoftmax(1.0, logq=False, mask_accidental_hits=False)(torch.zeros(0, 2), torch.zeros(0, 2), LossBatch())
    assert math.isnan(stats["accuracy"])
