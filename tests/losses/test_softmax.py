"""Softmax losses against hand-coded formulas (values and autograd gradients)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from twotower.errors import ConfigError, DataError
from twotower.losses import FullSoftmax, InBatchSoftmax, corrected_logits, loss_from_scores

f64 = torch.float64


def _brute_force_loss(scores: torch.Tensor, log_q: torch.Tensor, t: float, skip=lambda b, n: False) -> torch.Tensor:
    """mean_b -log( exp(s_bb/t - lq_b) / sum_{n not skipped} exp(s_bn/t - lq_n) ), one scalar at a time."""
    b_size, n_size = scores.shape
    total = scores.new_zeros(())
    for b in range(b_size):
        num = torch.exp(scores[b, b] / t - log_q[b])
        den = scores.new_zeros(())
        for n in range(n_size):
            if not skip(b, n):
                den = den + torch.exp(scores[b, n] / t - log_q[n])
        total = total - torch.log(num / den)
    return total / b_size


def test_loss_with_logq_equals_hand_coded_formula_values_and_gradients() -> None:
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 5, generator=gen, dtype=f64).requires_grad_()
    log_q = torch.randn(5, generator=gen, dtype=f64).requires_grad_()
    t = 0.5
    got = loss_from_scores(scores, positive_cols=torch.arange(3), temperature=t, log_q=log_q, mask_hits=False)
    want = _brute_force_loss(scores, log_q, t)
    assert torch.allclose(got, want, atol=1e-12)
    g_got = torch.autograd.grad(got, (scores, log_q))
    g_want = torch.autograd.grad(want, (scores, log_q))
    for a, b in zip(g_got, g_want):
        assert torch.allclose(a, b, atol=1e-12)


def test_two_by_two_by_hand() -> None:
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=f64)
    log_q = torch.tensor([0.0, math.log(2.0)], dtype=f64)
    # t=1. row 0: -log(e^1 / (e^1 + e^0/2)); row 1: -log((e/2) / (1 + e/2))
    row0 = -math.log(math.e / (math.e + 0.5))
    row1 = -math.log((math.e / 2) / (1 + math.e / 2))
    got = loss_from_scores(scores, positive_cols=torch.arange(2), temperature=1.0, log_q=log_q, mask_hits=False)
    assert got.item() == pytest.approx((row0 + row1) / 2, abs=1e-12)


def test_masking_a_duplicated_item_equals_removing_that_column() -> None:
    gen = torch.Generator().manual_seed(1)
    positive_ids = torch.tensor([10, 11, 10])  # rows 0 and 2 share item 10
    candidate_ids = torch.tensor([10, 11, 10, 12])
    scores = torch.randn(3, 4, generator=gen, dtype=f64).requires_grad_()
    log_q = torch.randn(4, generator=gen, dtype=f64)
    t = 0.2
    got = loss_from_scores(
        scores,
        positive_cols=torch.arange(3),
        temperature=t,
        positive_ids=positive_ids,
        candidate_ids=candidate_ids,
        log_q=log_q,
    )
    # row 0 drops column 2 and row 2 drops column 0: the other copy of item 10
    dropped = {(0, 2), (2, 0)}
    want = _brute_force_loss(scores, log_q, t, skip=lambda b, n: (b, n) in dropped)
    assert torch.allclose(got, want, atol=1e-12)
    (g_got,) = torch.autograd.grad(got, scores)
    (g_want,) = torch.autograd.grad(want, scores)
    assert torch.allclose(g_got, g_want, atol=1e-12)
    assert g_got[0, 2] == 0 and g_got[2, 0] == 0  # a removed column gets no gradient


def test_fully_masked_row_has_finite_loss_and_gradient() -> None:
    scores = torch.zeros(2, 2, requires_grad=True)
    ids = torch.tensor([3, 3])  # each row's only negative is its own item again
    loss = loss_from_scores(
        scores, positive_cols=torch.arange(2), temperature=0.05, positive_ids=ids, candidate_ids=ids
    )
    loss.backward()
    assert loss.item() == pytest.approx(0.0, abs=1e-6)  # only the positive is left: -log 1 = 0
    assert torch.isfinite(scores.grad).all()


def test_weighted_mean() -> None:
    scores = torch.tensor([[2.0, 0.0], [0.0, 0.0]], dtype=f64)
    per_row = F.cross_entropy(scores, torch.arange(2), reduction="none")  # [log(1+e^-2), log 2]
    w = torch.tensor([3.0, 1.0], dtype=f64)
    got = loss_from_scores(scores, positive_cols=torch.arange(2), temperature=1.0, mask_hits=False, weights=w)
    assert got.item() == pytest.approx(((3 * per_row[0] + per_row[1]) / 4).item(), abs=1e-12)
    with pytest.raises(DataError, match="not all zero"):
        loss_from_scores(scores, positive_cols=torch.arange(2), temperature=1.0, mask_hits=False, weights=w * 0)
    with pytest.raises(DataError, match="one per query"):
        loss_from_scores(scores, positive_cols=torch.arange(2), temperature=1.0, mask_hits=False, weights=w[:1])


@pytest.mark.parametrize("t", [0.0, -1.0, float("nan"), float("inf"), "x"])
def test_temperature_must_be_positive(t) -> None:
    with pytest.raises(ConfigError, match="temperature"):
        InBatchSoftmax(t)
    with pytest.raises(ConfigError, match="temperature"):
        FullSoftmax(t)
    with pytest.raises(ConfigError, match="temperature"):
        loss_from_scores(torch.zeros(1, 1), positive_cols=torch.zeros(1, dtype=torch.long), temperature=t)


def test_masking_without_ids_raises() -> None:
    with pytest.raises(ValueError, match="mask_hits=False"):
        loss_from_scores(torch.zeros(2, 2), positive_cols=torch.arange(2), temperature=1.0)


def test_non_finite_log_q_for_a_present_candidate_raises() -> None:
    with pytest.raises(DataError, match="zero sampling probability"):
        loss_from_scores(
            torch.zeros(2, 2),
            positive_cols=torch.arange(2),
            temperature=1.0,
            log_q=torch.tensor([0.0, -math.inf]),
            mask_hits=False,
        )


def _batch(seed: int = 2):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(4, 3, generator=gen, dtype=f64)
    c = torch.randn(6, 3, generator=gen, dtype=f64)  # 4 positives + 2 uniform negatives
    pos_ids = torch.tensor([0, 5, 0, 2])
    cand_ids = torch.tensor([0, 5, 0, 2, 5, 9])
    log_q = torch.randn(6, generator=gen, dtype=f64)
    return q, c, pos_ids, cand_ids, log_q


def test_in_batch_softmax_is_loss_from_scores_on_dot_products() -> None:
    q, c, pos_ids, cand_ids, log_q = _batch()
    q.requires_grad_()
    c.requires_grad_()
    module = InBatchSoftmax(0.1)
    got = module(q, c, positive_ids=pos_ids, candidate_ids=cand_ids, log_q=log_q)
    want = loss_from_scores(
        q @ c.T,
        positive_cols=torch.arange(4),
        temperature=0.1,
        positive_ids=pos_ids,
        candidate_ids=cand_ids,
        log_q=log_q,
    )
    assert torch.allclose(got, want, atol=1e-12)
    g_got = torch.autograd.grad(got, (q, c))
    g_want = torch.autograd.grad(want, (q, c))
    for a, b in zip(g_got, g_want):
        assert torch.allclose(a, b, atol=1e-12)


def test_in_batch_softmax_flags() -> None:
    q, c, pos_ids, cand_ids, log_q = _batch()
    kw = dict(positive_ids=pos_ids, candidate_ids=cand_ids)
    plain = loss_from_scores(q @ c.T, positive_cols=torch.arange(4), temperature=0.1, **kw)
    # logq=False: the log_q argument is not applied
    assert torch.allclose(InBatchSoftmax(0.1, logq=False)(q, c, log_q=log_q, **kw), plain)
    # logq=True without log_q: nothing to apply
    assert torch.allclose(InBatchSoftmax(0.1)(q, c, **kw), plain)
    unmasked = loss_from_scores(q @ c.T, positive_cols=torch.arange(4), temperature=0.1, mask_hits=False)
    assert torch.allclose(InBatchSoftmax(0.1, mask_accidental_hits=False)(q, c, **kw), unmasked)
    assert not torch.allclose(unmasked, plain)  # the batch does contain accidental hits


def test_in_batch_accuracy_stats() -> None:
    eye = torch.eye(3)
    q = torch.stack([eye[0], eye[1], eye[0]])  # row 2 points at item 0, but its positive is item 2
    c = torch.stack([eye[0], eye[1], eye[2]])
    ids = torch.tensor([0, 1, 2])
    module = InBatchSoftmax(0.05)
    loss, stats = module.forward_with_stats(q, c, positive_ids=ids, candidate_ids=ids)
    assert stats == {"accuracy": pytest.approx(2 / 3), "correct": 2.0, "accidental_hits": 0}
    module(q, c, positive_ids=ids, candidate_ids=ids)
    assert module.last_accuracy == pytest.approx(2 / 3)
    # duplicated id: row 0 and row 2 both have item 7; masking hides the other copy
    dup = torch.tensor([7, 1, 7])
    _, stats = module.forward_with_stats(q, c, positive_ids=dup, candidate_ids=dup)
    assert stats["accidental_hits"] == 2  # (0, 2) and (2, 0)
    # row 2's max was column 0, now masked: its positive column 2 (score 0) ties with column 1 (score 0)
    assert stats["accuracy"] == pytest.approx(1.0)


def test_in_batch_softmax_shape_errors() -> None:
    q, c, pos_ids, cand_ids, _ = _batch()
    module = InBatchSoftmax()
    with pytest.raises(DataError, match="positives"):
        module(q, c[:3], positive_ids=pos_ids, candidate_ids=cand_ids[:3])
    with pytest.raises(DataError, match="candidate_ids"):
        module(q, c, positive_ids=pos_ids, candidate_ids=cand_ids[:5])
    with pytest.raises(DataError, match="dim"):
        module(q, c[:, :2], positive_ids=pos_ids, candidate_ids=cand_ids)
    with pytest.raises(DataError, match="log_q"):
        module(q, c, positive_ids=pos_ids, candidate_ids=cand_ids, log_q=torch.zeros(4))


def test_full_softmax_equals_cross_entropy_over_all_items() -> None:
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(4, 3, generator=gen, dtype=f64).requires_grad_()
    items = torch.randn(7, 3, generator=gen, dtype=f64).requires_grad_()
    pos = torch.tensor([6, 0, 6, 3])
    got = FullSoftmax(0.25)(q, items, positive_ids=pos)
    want = F.cross_entropy(q @ items.T / 0.25, pos)
    assert torch.allclose(got, want, atol=1e-12)
    g_got = torch.autograd.grad(got, (q, items))
    g_want = torch.autograd.grad(want, (q, items))
    for a, b in zip(g_got, g_want):
        assert torch.allclose(a, b, atol=1e-12)
    with pytest.raises(DataError, match=r"\[0, 7\)"):
        FullSoftmax()(q, items, positive_ids=torch.tensor([0, 1, 2, 7]))


def test_corrected_logits_order_is_temperature_then_logq_then_mask() -> None:
    scores = torch.tensor([[1.0, 2.0, 3.0]])
    ids = torch.tensor([4, 5, 4])
    out = corrected_logits(
        scores,
        positive_cols=torch.tensor([0]),
        temperature=0.5,
        positive_ids=torch.tensor([4]),
        candidate_ids=ids,
        log_q=torch.tensor([1.0, 1.0, 1.0]),
    )
    # [1, 2, 3] / 0.5 - 1 = [1, 3, 5]; column 2 is item 4 again -> masked
    assert out[0, :2].tolist() == [1.0, 3.0]
    assert out[0, 2] == torch.finfo(torch.float32).min / 2
