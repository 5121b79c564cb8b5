"""The loss's per-step data checks, made cheaper for the training step, refuse the same bad data as before."""
import pytest
import torch

from twotower.errors import DataError
from twotower.losses.base import LossBatch, corrected_logits
from twotower.losses.corrections import accidental_hit_pairs, columns_in_range
from twotower.losses.softmax import InBatchSoftmax, SampledSoftmax


def _qc(b=4, n=6, d=3):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, d, generator=g), torch.randn(n, d, generator=g)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_columns_in_range_matches_min_max(dtype):
    for cols in ([0, 1, 2], [2, 0], [5], [0, 6], [6, 0], [7]):
        t = torch.tensor(cols, dtype=dtype)
        assert columns_in_range(t, 6) == bool(t.min() >= 0 and t.max() < 6)
    assert columns_in_range(torch.tensor([-1, 2]), 6) is False
    assert columns_in_range(torch.empty(0, dtype=dtype), 0) is True


@pytest.mark.parametrize("bad", [-1, 6, 100])
def test_corrected_logits_refuses_a_column_outside_the_candidates(bad):
    scores = torch.zeros(3, 6)
    cols = torch.tensor([0, bad, 2])
    with pytest.raises(DataError, match=r"positive_cols must lie in \[0, 6\)"):
        corrected_logits(scores, positive_cols=cols, temperature=1.0, mask_hits=False)


@pytest.mark.parametrize("bad", [-1, 6])
def test_hit_pairs_refuse_a_column_outside_the_candidates(bad):
    ids = torch.tensor([10, 11, 12, 13, 14, 15])
    with pytest.raises(DataError, match=r"positive_cols must lie in \[0, 6\)"):
        accidental_hit_pairs(torch.tensor([10, 11]), ids, torch.tensor([0, bad]))


@pytest.mark.parametrize("distinct", [True, False])  # the CPU kernel path / the PyTorch path
@pytest.mark.parametrize("bad", [-1, 6])
def test_in_batch_softmax_refuses_a_column_outside_the_candidates(distinct, bad):
    q, c = _qc()
    ids = torch.tensor([10, 11, 12, 13, 14, 15] if distinct else [10, 11, 12, 13, 10, 15])
    batch = LossBatch(positive_ids=torch.tensor([10, 11, 12, 13]), candidate_ids=ids,
                      positive_cols=torch.tensor([0, 1, 2, bad]))
    with pytest.raises(DataError, match=r"positive_cols must lie in \[0, 6\)"):
        InBatchSoftmax(0.1)(q, c, batch)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("distinct", [True, False])
def test_in_batch_softmax_refuses_a_log_q_that_is_not_finite(bad, distinct):
    q, c = _qc()
    ids = torch.tensor([10, 11, 12, 13, 14, 15] if distinct else [10, 11, 12, 13, 10, 15])
    log_q = torch.full((6,), -3.0)
    log_q[4] = bad
    batch = LossBatch(positive_ids=torch.tensor([10, 11, 12, 13]), candidate_ids=ids,
                      positive_cols=torch.tensor([0, 1, 2, 3]), log_q=log_q)
    with pytest.raises(DataError, match="log_q is not finite"):
        InBatchSoftmax(0.1)(q, c, batch)
    batch.log_q = log_q.double()
    with pytest.raises(DataError, match="log_q is not finite"):
        InBatchSoftmax(0.1)(q, c, batch)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_sampled_softmax_refuses_a_log_q_that_is_not_finite(bad):
    """The sampled softmax read log_q without the in-batch one's checks: a -inf gave a loss of NaN, no error."""
    q, c = _qc()
    log_q = torch.full((6,), -3.0)
    log_q[5] = bad
    batch = LossBatch(positive_ids=torch.tensor([10, 11, 12, 13]), candidate_ids=torch.tensor([10, 11, 12, 13, 14, 15]),
                      log_q=log_q)
    with pytest.raises(DataError, match="log_q is not finite"):
        SampledSoftmax(0.1)(q, c, batch)
    loss, _ = SampledSoftmax(0.1, logq=False)(q, c, batch)  # a correction turned off does not read it
    assert torch.isfinite(loss)


def test_sampled_softmax_refuses_a_log_q_of_another_length():
    """A log_q of the negatives alone failed in torch.expand ("The expanded size of the tensor (2) must match ...")."""
    q, c = _qc()
    with pytest.raises(DataError, match=r"log_q must be \[N\]=6 \(one per candidate\), got \(2,\)"):
        SampledSoftmax(0.1)(q, c, LossBatch(log_q=torch.zeros(2)))


@pytest.mark.parametrize("field, ids, why", [
    ("positive_ids", torch.tensor([10]), r"positive_ids must be \[B\]=4, got \(1,\)"),  # row 0's positive masked in every row
    ("positive_ids", torch.tensor([10, 11, 12, 13, 14]), r"positive_ids must be \[B\]=4, got \(5,\)"),
    ("candidate_ids", torch.tensor([10, 11, 12, 13, 14]), r"candidate_ids must be \[N\]=6, got \(5,\)"),
])
def test_sampled_softmax_refuses_ids_of_another_length(field, ids, why):
    """As the in-batch softmax refuses them: a positive_ids of one id was read as every row's positive."""
    q, c = _qc()
    batch = LossBatch(positive_ids=torch.tensor([10, 11, 12, 13]), candidate_ids=torch.tensor([10, 11, 12, 13, 10, 15]))
    setattr(batch, field, ids)
    with pytest.raises(DataError, match=why):
        SampledSoftmax(0.1)(q, c, batch)


def test_a_finite_log_q_passes_the_check():
    from twotower.losses.base import check_log_q_finite

    check_log_q_finite(torch.tensor([-1e30, 0.0, 3.0]))
    check_log_q_finite(torch.empty(0))
    check_log_q_finite(torch.tensor([1, 2]))


def test_a_log_q_with_a_gradient_is_checked_without_a_warning():
    """A learned log_q (requires_grad) made the check warn "Converting a tensor with requires_grad=True to a scalar"."""
    import warnings

    from twotower.losses.base import check_log_q_finite

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_log_q_finite(torch.zeros(3, requires_grad=True))
    with pytest.raises(DataError, match="log_q is not finite"):
        check_log_q_finite(torch.tensor([0.0, float("nan")], requires_grad=True))
