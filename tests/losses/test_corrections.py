"""Each logit correction against a brute-force loop or a hand-worked example."""
from __future__ import annotations

import math

import pytest
import torch

from twotower.errors import ConfigError, DataError
from twotower.losses import (
    accidental_hit_mask,
    accidental_hit_pairs,
    log_q_from_counts,
    logq_correction,
    mask_accidental_hits,
    masked_logit_value,
    mixture_log_q,
    sample_uniform_negatives,
)


def test_logq_correction_subtracts_per_column() -> None:
    scores = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    log_q = torch.tensor([0.5, -1.0])
    # row 0: [1 - 0.5, 2 + 1] = [0.5, 3]; row 1: [3 - 0.5, 4 + 1] = [2.5, 5]
    assert torch.equal(logq_correction(scores, log_q), torch.tensor([[0.5, 3.0], [2.5, 5.0]]))


def test_logq_correction_gradient_is_identity_on_scores_and_minus_on_log_q() -> None:
    scores = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    log_q = torch.randn(4, dtype=torch.float64, requires_grad=True)
    out = logq_correction(scores, log_q)
    out.sum().backward()
    assert torch.equal(scores.grad, torch.ones(3, 4, dtype=torch.float64))
    # each log_q[n] is subtracted once per row: d/dlog_q = -B = -3
    assert torch.equal(log_q.grad, torch.full((4,), -3.0, dtype=torch.float64))


@pytest.mark.parametrize("shape", [(3,), (2, 2), (2,)])
def test_logq_correction_rejects_wrong_shape(shape: tuple[int, ...]) -> None:
    if shape == (2,):
        with pytest.raises(DataError, match="2-D"):
            logq_correction(torch.zeros(4), torch.zeros(2))
        return
    with pytest.raises(DataError, match="one entry per candidate"):
        logq_correction(torch.zeros(2, 2), torch.zeros(shape))


def test_mask_matches_brute_force_loop() -> None:
    gen = torch.Generator().manual_seed(0)
    positive_ids = torch.tensor([4, 7, 4, 2])
    candidate_ids = torch.tensor([4, 7, 4, 2, 7, 9, 4])  # 3 positives + 3 extras
    logits = torch.randn(4, 7, generator=gen)
    out = mask_accidental_hits(logits, positive_ids, candidate_ids)
    fill = torch.finfo(torch.float32).min / 2
    expected = logits.clone()
    for b in range(4):
        for n in range(7):
            if candidate_ids[n] == positive_ids[b] and n != b:
                expected[b, n] = fill
    assert torch.equal(out, expected)
    # row 0 (id 4) masks columns 2 and 6; row 2 (id 4) masks 0 and 6; row 1 (id 7) masks 4
    assert accidental_hit_mask(positive_ids, candidate_ids).sum() == 5
    assert not torch.equal(out, logits)  # not in place on the input
    assert torch.isfinite(out).all()


def test_mask_with_explicit_positive_cols() -> None:
    positive_ids = torch.tensor([5, 6])
    candidate_ids = torch.tensor([6, 5, 5, 6])
    cols = torch.tensor([1, 3])  # row 0's positive is column 1, row 1's is column 3
    mask = accidental_hit_mask(positive_ids, candidate_ids, cols)
    assert mask.tolist() == [[False, False, True, False], [True, False, False, False]]


@pytest.mark.parametrize("dedup", [False, True])
def test_hit_pairs_are_the_mask_of_a_brute_force_comparison(dedup: bool) -> None:
    g = torch.Generator().manual_seed(3)
    for trial in range(20):
        b = int(torch.randint(1, 40, (1,), generator=g))
        positive_ids = torch.randint(0, 12, (b,), generator=g)  # few ids: many repeats
        if dedup:  # the sequence objective's form: distinct candidates, each positive's column given
            candidate_ids, cols = torch.unique(torch.cat([positive_ids, torch.randint(0, 12, (5,), generator=g)]),
                                               return_inverse=True)
            cols = cols[:b]
        else:  # in-batch: the positives first, then uniform extras
            candidate_ids = torch.cat([positive_ids, torch.randint(0, 12, (7,), generator=g)])
            cols = torch.arange(b)
        want = (candidate_ids.unsqueeze(0) == positive_ids.unsqueeze(1))
        want[torch.arange(b), cols] = False
        rows, hit_cols = accidental_hit_pairs(positive_ids, candidate_ids, cols)
        got = torch.zeros_like(want)
        got[rows, hit_cols] = True
        assert torch.equal(got, want), trial
        assert len(rows) == int(want.sum())  # each hit once
        assert torch.equal(accidental_hit_mask(positive_ids, candidate_ids, cols), want)


def test_masked_value_is_finite_and_gives_zero_probability() -> None:
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        v = masked_logit_value(dtype)
        assert math.isfinite(v)
        logits = torch.tensor([[0.0, v, v]], dtype=dtype)
        assert torch.softmax(logits.float(), dim=1)[0, 0] == 1.0


@pytest.mark.parametrize(
    "positive_ids, candidate_ids, cols, match",
    [
        (None, torch.tensor([1, 2]), None, "needs positive_ids"),
        (torch.tensor([1, 2]), None, None, "needs positive_ids"),
        (torch.tensor([1, 2, 3]), torch.tensor([1, 2]), None, "at least B=3"),
        (torch.tensor([1, 2]), torch.tensor([[1, 2]]), None, "1-D"),
        (torch.tensor([1, 2]), torch.tensor([1, 2, 3]), torch.tensor([0]), "positive_cols must have shape"),
        (torch.tensor([1, 2]), torch.tensor([1, 2, 3]), torch.tensor([0, 3]), r"lie in \[0, 3\)"),
        (torch.tensor([1, 2]), torch.tensor([2, 1, 3]), None, "not aligned"),
    ],
)
def test_mask_raises_on_missing_or_mismatched_ids(positive_ids, candidate_ids, cols, match) -> None:
    with pytest.raises(ValueError, match=match):  # DataError is a ValueError (TFRS semantics)
        accidental_hit_mask(positive_ids, candidate_ids, cols)


def test_mask_rejects_logits_of_the_wrong_shape() -> None:
    with pytest.raises(DataError, match="does not match"):
        mask_accidental_hits(torch.zeros(2, 5), torch.tensor([1, 2]), torch.tensor([1, 2, 3]))


def test_mixture_log_q_hand_value() -> None:
    p = torch.tensor([0.5, 0.25, 0.25, 0.0])
    # B=4, M=2, I=4: expected counts 4*p + 2/4 = [2.5, 1.5, 1.5, 0.5]
    lq = mixture_log_q(p, batch_size=4, n_uniform=2)
    assert torch.allclose(lq, torch.log(torch.tensor([2.5, 1.5, 1.5, 0.5])))
    # no uniform negatives: an item never drawn can never be a candidate -> -inf
    assert mixture_log_q(p, batch_size=4, n_uniform=0)[3] == -math.inf


def test_mixture_log_q_equals_monte_carlo_expected_count() -> None:
    gen = torch.Generator().manual_seed(1)
    p = torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05])
    n_items, batch, n_uniform, trials = 5, 4, 3, 20_000
    positives = torch.multinomial(p.expand(trials, n_items), batch, replacement=True, generator=gen)  # [T, B]
    uniform = torch.stack([sample_uniform_negatives(n_uniform, n_items, gen) for _ in range(trials)])  # [T, M]
    counts = torch.bincount(torch.cat([positives, uniform], 1).flatten(), minlength=n_items).double()
    empirical = counts / trials  # mean copies of each item per batch
    expected = mixture_log_q(p, batch, n_uniform).double().exp()  # 4 p + 3/5 = [2.2, 1.8, 1.2, 1.0, 0.8]
    assert torch.allclose(expected, torch.tensor([2.2, 1.8, 1.2, 1.0, 0.8], dtype=torch.float64))
    # std of one batch's count <= sqrt(4*.24 + 3*.16) = 1.2, so the mean of 20k has s.e. < 0.01
    assert torch.allclose(empirical, expected, atol=0.04)


def test_log_q_from_counts_normalises_counts() -> None:
    counts = torch.tensor([6, 3, 1, 0])
    # p = [0.6, 0.3, 0.1, 0]; B=10, M=4, I=4 -> 10p + 1 = [7, 4, 2, 1]
    lq = log_q_from_counts(counts, batch_size=10, n_uniform=4)
    assert lq.dtype == torch.get_default_dtype()
    assert torch.allclose(lq, torch.log(torch.tensor([7.0, 4.0, 2.0, 1.0])))


@pytest.mark.parametrize(
    "call, err",
    [
        (lambda: mixture_log_q(torch.tensor([0.5, 0.5]), 0, 1), ConfigError),
        (lambda: mixture_log_q(torch.tensor([0.5, 0.5]), 2, -1), ConfigError),
        (lambda: mixture_log_q(torch.tensor([1.5, -0.5]), 2, 1), DataError),
        (lambda: mixture_log_q(torch.tensor([0.5, 0.2]), 2, 1), DataError),
        (lambda: log_q_from_counts(torch.tensor([0, 0]), 2), DataError),
        (lambda: sample_uniform_negatives(-1, 5, torch.Generator()), ConfigError),
        (lambda: sample_uniform_negatives(3, 0, torch.Generator()), ConfigError),
    ],
)
def test_invalid_arguments_raise(call, err) -> None:
    with pytest.raises(err):
        call()


def test_uniform_negatives_are_seeded_and_in_range() -> None:
    a = sample_uniform_negatives(1000, 7, torch.Generator().manual_seed(3))
    b = sample_uniform_negatives(1000, 7, torch.Generator().manual_seed(3))
    assert a.dtype == torch.long and a.shape == (1000,)
    assert torch.equal(a, b)
    assert a.min() == 0 and a.max() == 6
    assert sample_uniform_negatives(0, 7, torch.Generator()).shape == (0,)
