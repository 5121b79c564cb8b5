"""Fine-tuning never trains a query away from a document it is judged relevant to.

The in-batch loss masked a candidate only when it was the row's own positive: a query with two relevant documents
(pairs (A, d0) and (A, d1)), in a batch where d1 came in as another query's positive or hard negative (or as a corpus
row with corpus_negatives), had d1 in the denominator of its softmax as a negative.
"""
from __future__ import annotations

import numpy as np
import torch

from twotower.losses import InBatchSoftmax, LossBatch
from twotower.search.finetune import _other_known_positives


def test_a_rows_other_relevant_documents_are_masked_and_its_own_positive_kept():
    known = {"A": {0, 1}, "B": {1}, "C": {2}}
    # batch rows: (A, d0), (B, d1), (C, d2); then hard negatives d1 (mined for C) and d3
    cand = np.array([0, 1, 2, 1, 3])
    mask = _other_known_positives(["A", "B", "C"], cand, known)
    assert mask.tolist() == [
        [False, True, False, True, False],  # A: its own positive (column 0) is kept, both copies of d1 dropped
        [False, False, False, True, False],  # B: d1 is its positive; the second copy is not a negative either
        [False, False, False, False, False],  # C: nothing else is relevant to it
    ]
    assert not _other_known_positives(["unknown"], np.array([5, 6]), known).any()


def test_the_loss_leaves_the_masked_documents_out_of_the_softmax():
    torch.manual_seed(0)
    q = torch.nn.functional.normalize(torch.randn(2, 4), dim=-1)
    c = torch.nn.functional.normalize(torch.randn(3, 4), dim=-1)
    cand = np.array([0, 1, 2])  # row 0: (A, d0), row 1: (B, d1), hard negative d2
    known = {"A": {0, 1}, "B": {1}}
    loss_fn = InBatchSoftmax(0.05, logq=False, mask_accidental_hits=True)  # as finetune_bi_encoder builds it
    others = torch.from_numpy(_other_known_positives(["A", "B"], cand, known))
    loss, _ = loss_fn(q, c, LossBatch(positive_ids=torch.tensor([0, 1]), candidate_ids=torch.from_numpy(cand),
                                      column_mask=others))
    logits = q @ c.T / 0.05
    # row 0 (A) sees d0 (its positive) and d2 only: d1 is judged relevant to A too
    expected = torch.stack([torch.logsumexp(logits[0, [0, 2]], 0) - logits[0, 0],
                            torch.logsumexp(logits[1], 0) - logits[1, 1]]).mean()
    torch.testing.assert_close(loss, expected)


def test_a_column_mask_is_refused_by_the_losses_that_would_ignore_it():
    import pytest

    from twotower.errors import DataError
    from twotower.losses import FullSoftmax, SampledSoftmax

    q, c = torch.randn(2, 4), torch.randn(5, 4)
    drop = torch.zeros(2, 5, dtype=torch.bool)
    with pytest.raises(DataError, match="column_mask applies to the in-batch softmax"):
        SampledSoftmax(0.05)(q, c, LossBatch(candidate_ids=torch.arange(5), column_mask=drop))
    with pytest.raises(DataError, match="column_mask applies to the in-batch softmax"):
        FullSoftmax(0.05)(q, c, LossBatch(positive_ids=torch.tensor([0, 1]), column_mask=drop))
    with pytest.raises(DataError, match=r"column_mask must be \[B, N\]=\(2, 5\)"):
        InBatchSoftmax(0.05)(q, c, LossBatch(column_mask=torch.zeros(2, 3, dtype=torch.bool)))
