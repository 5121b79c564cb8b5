"""BPR loss against the formula, by hand and by loop."""
from __future__ import annotations

import math

import pytest
import torch

from twotower.errors import DataError
from twotower.losses import BPRLoss, LossBatch, bpr_from_scores


def test_hand_value() -> None:
    q = torch.tensor([[1.0, 0.0]])
    pos = torch.tensor([[1.0, 0.0]])  # s = 1
    neg = torch.tensor([[0.0, 5.0]])  # s = 0
    # -log sigmoid(1 - 0) = log(1 + e^-1)
    assert BPRLoss(1.0)(q, pos, neg).item() == pytest.approx(math.log(1 + math.exp(-1)), abs=1e-6)


def test_many_negatives_equals_loop_values_and_gradients() -> None:
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    pos = torch.randn(3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    neg = torch.randn(3, 2, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    got = BPRLoss(1.0)(q, pos, neg)
    want = q.new_zeros(())
    for b in range(3):
        for m in range(2):
            want = want - torch.log(torch.sigmoid(q[b] @ pos[b] - q[b] @ neg[b, m]))
    want = want / 6  # mean over B * M = 6 pairs
    assert torch.allclose(got, want, atol=1e-12)
    for a, b in zip(torch.autograd.grad(got, (q, pos, neg)), torch.autograd.grad(want, (q, pos, neg))):
        assert torch.allclose(a, b, atol=1e-12)


def test_single_negative_shapes_agree_and_large_margins_stay_finite() -> None:
    q = torch.tensor([[100.0], [-100.0]])
    pos = torch.tensor([[1.0], [1.0]])
    neg = torch.tensor([[-1.0], [1.0]])
    assert torch.equal(BPRLoss(1.0)(q, pos, neg), BPRLoss(1.0)(q, pos, neg.unsqueeze(1)))
    # margins +200 and 0: (softplus(-200) + log 2) / 2, no overflow
    assert BPRLoss(1.0)(q, pos, neg).item() == pytest.approx(math.log(2) / 2, abs=1e-6)
    assert bpr_from_scores(torch.tensor([-1e4]), torch.tensor([[1e4]])).item() == pytest.approx(2e4)


def test_shape_errors() -> None:
    with pytest.raises(DataError):
        BPRLoss()(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2, 3))
    with pytest.raises(DataError):
        BPRLoss()(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3, 1, 3))


def test_temperature_scales_the_scores():
    import torch

    from twotower.losses import BPRLoss

    g = torch.Generator().manual_seed(0)
    q, p, n = (torch.randn(4, 3, generator=g) for _ in range(3))
    # s/T with T=0.5 is the same as doubling the query
    assert torch.allclose(BPRLoss(0.5)(q, p, n), BPRLoss(1.0)(2 * q, p, n))


@pytest.mark.parametrize("weights, why", [
    (torch.tensor([2.0]), r"weights must have shape \(3,\)"),  # broadcast: the sum of the three rows, not their mean
    (torch.zeros(3), "not all zero"),  # a loss of NaN
    (torch.tensor([1.0, -1.0, 1.0]), "non-negative"),
    (torch.tensor([1.0, float("nan"), 1.0]), "finite"),
])
def test_weights_are_refused_as_the_softmax_losses_refuse_them(weights, why) -> None:
    pos, neg = torch.tensor([1.0, 0.0, -1.0]), torch.zeros(3, 2)
    with pytest.raises(DataError, match=why):
        bpr_from_scores(pos, neg, weights)
    q = torch.eye(3)
    with pytest.raises(DataError, match=why):
        BPRLoss(1.0)(q, torch.cat([q, q.flip(0), q.flip(0)]), LossBatch(weights=weights))


def test_equal_weights_give_the_plain_mean() -> None:
    pos, neg = torch.tensor([1.0, 0.0, -1.0]), torch.randn(3, 2, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(bpr_from_scores(pos, neg, torch.full((3,), 2.0)), bpr_from_scores(pos, neg))
