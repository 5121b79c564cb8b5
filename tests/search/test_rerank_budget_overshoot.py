"""Cross-encoder scoring under a time budget runs past the deadline by about one pair, not one whole batch.

Before: ``check()`` ran before each batch of ``batch_size`` pairs, so a batch begun just before the deadline was
scored whole (a POST /search with its default rerank_top=20 is one batch: nothing checked during reranking)."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.search.rerank import FIRST_BUDGETED_BATCH, CrossEncoderReranker
from twotower.serving.budget import BudgetExceeded, WorkBudget

SECONDS_PER_PAIR = 0.1


class _Clock:
    now = 0.0


class _SlowModel:
    """Each pair scored moves the fake clock on by SECONDS_PER_PAIR."""

    def __init__(self, clock: _Clock) -> None:
        self.clock, self.pairs, self.calls = clock, 0, []

    def predict(self, pairs, **kwargs):
        self.clock.now += SECONDS_PER_PAIR * len(pairs)
        self.pairs += len(pairs)
        self.calls.append(len(pairs))
        return np.zeros(len(pairs), dtype=np.float32)


@pytest.fixture()
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr("twotower.serving.budget.monotonic", lambda: c.now)
    return c


def _budgeted(clock, seconds):
    model = _SlowModel(clock)
    reranker = CrossEncoderReranker.from_model(model, batch_size=32)
    return model, reranker, WorkBudget(seconds).start()


def test_scoring_stops_about_one_pair_past_the_deadline(clock):
    model, reranker, budget = _budgeted(clock, 1.05)
    pairs = [("q", f"doc {i}") for i in range(64)]
    with pytest.raises(BudgetExceeded):
        reranker.score(pairs, check=budget.check, remaining=budget.remaining)
    # the deadline fell after pair 10.5; a whole first batch took it to 32 pairs, 2.15 s past
    assert model.pairs <= 11 and clock.now - budget.deadline <= SECONDS_PER_PAIR + 1e-9
    assert model.calls[0] == FIRST_BUDGETED_BATCH


def test_far_from_the_deadline_batches_are_whole_and_scores_complete(clock):
    model, reranker, budget = _budgeted(clock, 1e6)
    pairs = [("q", f"doc {i}") for i in range(100)]
    assert reranker.score(pairs, check=budget.check, remaining=budget.remaining).shape == (100,)
    assert model.calls == [FIRST_BUDGETED_BATCH, 32, 32, 32]  # 4 timed, then whole batches
    # a reranker that has scored pairs before starts from that rate: the first batch is whole
    reranker.last_pairs, reranker.last_seconds = 10, 1.0
    model.calls.clear()
    reranker.score(pairs[:40], check=budget.check, remaining=budget.remaining)
    assert model.calls == [32, 8]


def test_without_a_budget_the_batches_are_unchanged(clock):
    model, reranker, _ = _budgeted(clock, 1.0)
    reranker.score([("q", "d")] * 40, check=lambda: None)
    assert model.calls == [32, 8]
    unstarted = WorkBudget(1.0)  # no deadline yet: remaining() is inf, nothing to size against
    model.calls.clear()
    reranker.score([("q", "d")] * 40, check=unstarted.check, remaining=unstarted.remaining)
    assert model.calls == [32, 8]
