"""corrected_logits' hit count (what the softmax losses report as ``accidental_hits``) is the hit mask's size."""
from __future__ import annotations

import pytest
import torch

from twotower.losses import InBatchSoftmax
from twotower.losses.base import LossBatch, corrected_logits


@pytest.mark.parametrize("seed", range(5))
def test_hit_count_is_the_mask_count_and_logits_agree(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 20, (64,), generator=g)  # many repeats: rows with several hits each
    scores = torch.randn(64, 64, generator=g)
    cols = torch.arange(64)
    kw = dict(positive_cols=cols, temperature=0.05, positive_ids=ids, candidate_ids=ids)
    logits_m, mask = corrected_logits(scores, return_mask=True, **kw)
    logits_h, hits = corrected_logits(scores, return_hits=True, **kw)
    assert hits == int(mask.count_nonzero()) > 0
    assert torch.equal(logits_m, logits_h)
    assert torch.equal(corrected_logits(scores, **kw), logits_h)
    _, none = corrected_logits(scores, return_hits=True, mask_hits=False, **kw)
    assert none == 0


def test_in_batch_loss_reports_the_hits_it_masks() -> None:
    g = torch.Generator().manual_seed(0)
    ids = torch.tensor([3, 5, 3, 7, 3, 5])  # hits: 3 at rows/cols 0, 2, 4 (6 pairs) and 5 at 1, 5 (2 pairs)
    q, c = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    _, stats = InBatchSoftmax(0.1, logq=False)(q, c, LossBatch(positive_ids=ids, candidate_ids=ids))
    assert stats["accidental_hits"] == 8


@pytest.mark.parametrize("seed", range(4))
def test_softmax_masking_outside_the_graph_gives_the_same_gradients(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 30, (96,), generator=g)
    base = torch.randn(96, 96, generator=g)
    log_q = torch.randn(96, generator=g)
    grads = []
    for feeds_softmax in (False, True):
        scores = base.clone().requires_grad_(True)
        logits = corrected_logits(scores, positive_cols=torch.arange(96), temperature=0.02, positive_ids=ids,
                                  candidate_ids=ids, log_q=log_q, feeds_softmax=feeds_softmax)
        torch.nn.functional.cross_entropy(logits, torch.arange(96)).backward()
        grads.append(scores.grad)
    assert torch.equal(grads[0], grads[1])


def test_recorded_mask_zeroes_any_gradient_at_the_hits() -> None:
    ids = torch.tensor([1, 2, 1, 3])
    scores = torch.randn(4, 4, requires_grad=True)
    _, mask = corrected_logits(scores, positive_cols=torch.arange(4), temperature=0.5, positive_ids=ids,
                               candidate_ids=ids, return_mask=True)
    logits = corrected_logits(scores, positive_cols=torch.arange(4), temperature=0.5, positive_ids=ids,
                              candidate_ids=ids)
    logits.sum().backward()  # not a softmax: the masked entries' gradient must still be zeroed by the graph
    assert mask.sum() == 2
    assert torch.equal(scores.grad[mask], torch.zeros(2))
    assert torch.equal(scores.grad[~mask], torch.full((14,), 2.0))
