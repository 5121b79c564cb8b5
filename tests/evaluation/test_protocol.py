"""topk_excluding against a full stable sort, and evaluate() on a hand-worked example."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from twotower.errors import ConfigError, DataError
from twotower.evaluation import EvalProtocol, Scorer, evaluate, ndcg_at_k, parse_metric, recall_at_k, topk_excluding


def reference_topk(scores: np.ndarray, k: int, exclude: sp.csr_matrix | None) -> np.ndarray:
    """Full sort by (-score, item row); excluded and -inf items dropped; pad with -1."""
    s = np.array(scores, dtype=np.float64)
    if exclude is not None:
        s[exclude.toarray() != 0] = -np.inf
    out = np.full((s.shape[0], k), -1, dtype=np.int64)
    for u in range(s.shape[0]):
        order = np.lexsort((np.arange(s.shape[1]), -s[u]))
        order = [i for i in order if s[u, i] > -np.inf][:k]
        out[u, : len(order)] = order
    return out


def test_topk_matches_full_sort_with_many_ties() -> None:
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(50, 40)).astype(np.float32)  # 4 distinct values -> heavy ties
    exclude = sp.random(50, 40, density=0.3, random_state=1, format="csr")
    for k in (1, 5, 17, 40, 45):
        np.testing.assert_array_equal(topk_excluding(scores, k, exclude), reference_topk(scores, k, exclude))
        np.testing.assert_array_equal(topk_excluding(scores, k, None), reference_topk(scores, k, None))


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 9),
    st.integers(1, 12),
    st.integers(0, 2**31 - 1),
)
def test_topk_property(n_users: int, n_items: int, k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(-2, 3, size=(n_users, n_items)).astype(np.float32)
    scores[rng.random(scores.shape) < 0.15] = -np.inf  # scorer-side drops
    exclude = sp.csr_matrix(rng.random((n_users, n_items)) < 0.3)
    np.testing.assert_array_equal(topk_excluding(scores, k, exclude), reference_topk(scores, k, exclude))


def test_topk_pads_rows_with_too_few_candidates() -> None:
    scores = np.array([[0.5, 0.1, 0.9]], dtype=np.float32)
    exclude = sp.csr_matrix(np.array([[0, 0, 1]]))
    # item 2 excluded -> candidates 0 (0.5), 1 (0.1); k = 4 -> two pads
    assert topk_excluding(scores, 4, exclude).tolist() == [[0, 1, -1, -1]]


def test_topk_does_not_modify_scores_and_rejects_nan() -> None:
    scores = np.ones((2, 3), dtype=np.float32)
    topk_excluding(scores, 2, sp.csr_matrix(np.eye(2, 3)))
    assert np.all(scores == 1)
    scores[0, 1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        topk_excluding(scores, 2)
    with pytest.raises(DataError, match="exclude has shape"):
        topk_excluding(np.ones((2, 3)), 2, sp.csr_matrix((2, 4)))


class FixedScorer:
    """Returns rows of a fixed [U, I] score matrix; records the users it was asked for."""

    def __init__(self, scores: np.ndarray) -> None:
        self.scores = np.asarray(scores, dtype=np.float32)
        self.calls: list[list[int]] = []

    def score(self, users: np.ndarray) -> np.ndarray:
        self.calls.append(users.tolist())
        return self.scores[users]


def test_evaluate_hand_worked_example() -> None:
    scores = np.array(
        [
            [0.9, 0.8, 0.7, 0.6, 0.5],
            [0.5, 0.4, 0.3, 0.2, 0.1],
            [0.1, 0.2, 0.3, 0.4, 0.5],
        ]
    )
    relevant = sp.csr_matrix(np.array([[0, 0, 1, 0, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 1]]))
    exclude = sp.csr_matrix(np.array([[1, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]))
    popularity = np.array([10.0, 20.0, 30.0, 40.0, 50.0])
    scorer = FixedScorer(scores)
    assert isinstance(scorer, Scorer)
    out = evaluate(scorer, relevant, exclude, EvalProtocol(ks=(2, 1)), item_popularity=popularity)
    # user 0: item 0 excluded -> ranked [1, 2, 3, 4]; relevant {2, 4}; top-2 [1, 2]: one hit at rank 2
    #   Recall@2 1/2, Precision@2 1/2, NDCG@2 (1/log2 3) / (1 + 1/log2 3), MRR@2 1/2, top-1 [1] misses
    # user 1: no relevant items -> skipped, never scored
    # user 2: ranked [4, 3, ...]; relevant {4}: hit at rank 1 -> 1, 1/2, 1, 1, 1 (and all @1 metrics 1)
    l3 = math.log2(3)
    assert out["users_evaluated"] == 2 and out["users_skipped"] == 1
    assert scorer.calls == [[0, 2]]
    assert out["Recall@2"] == pytest.approx((0.5 + 1.0) / 2)
    assert out["Precision@2"] == pytest.approx(0.5)
    assert out["NDCG@2"] == pytest.approx(((1 / l3) / (1 + 1 / l3) + 1.0) / 2)
    assert out["MRR@2"] == pytest.approx(0.75)
    assert out["HitRate@2"] == pytest.approx(1.0)
    assert out["Recall@1"] == pytest.approx(0.5)
    assert out["HitRate@1"] == pytest.approx(0.5)
    # top-2 lists of evaluated users: {1, 2} and {4, 3} -> 4 of 5 items; popularity 20 30 50 40 -> 35
    assert out["Coverage@2"] == pytest.approx(0.8)
    assert out["MeanPop@2"] == pytest.approx(35.0)
    # top-1: items 1 and 4 -> 2/5 coverage, (20 + 50) / 2 popularity
    assert out["Coverage@1"] == pytest.approx(0.4)
    assert out["MeanPop@1"] == pytest.approx(35.0)


def _random_case(seed: int = 0, n_users: int = 37, n_items: int = 60):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(n_users, n_items)).astype(np.float32)
    relevant = sp.random(n_users, n_items, density=0.05, random_state=seed, format="csr")
    exclude = sp.random(n_users, n_items, density=0.2, random_state=seed + 1, format="csr")
    return scores, relevant, exclude


def test_evaluate_is_independent_of_chunking_and_matches_pure_metrics() -> None:
    scores, relevant, exclude = _random_case()
    runs = [evaluate(FixedScorer(scores), relevant, exclude, EvalProtocol(ks=(5, 10), batch_users=b)) for b in (1, 7, 1000)]
    for other in runs[1:]:
        assert other.keys() == runs[0].keys()
        for key in runs[0]:
            assert other[key] == pytest.approx(runs[0][key], rel=1e-12)
    # Reference: rank every user at once, average the pure metrics over users with relevant items.
    ranked = topk_excluding(scores, 10, exclude)
    assert runs[0]["Recall@10"] == pytest.approx(np.nanmean(recall_at_k(ranked, relevant, 10)))
    assert runs[0]["NDCG@5"] == pytest.approx(np.nanmean(ndcg_at_k(ranked, relevant, 5)))
    assert runs[0]["users_evaluated"] + runs[0]["users_skipped"] == 37
    assert "MeanPop@5" not in runs[0]


def test_a_ranking_scorer_gets_whole_batches() -> None:
    # max_chunk_scores bounds a dense score block; a scorer with rank() (an exact index scanning the whole
    # catalogue per call) got the same 33-user chunks at 1M items, ~4x the catalogue scans of 1,024-user ones
    scores, relevant, exclude = _random_case()  # 37 users x 60 items
    calls: list[int] = []

    class Ranking(FixedScorer):
        def rank(self, users, k, excl):
            calls.append(len(users))
            return topk_excluding(self.score(users), k, excl)

    out = evaluate(Ranking(scores), relevant, exclude, EvalProtocol(ks=(5, 10), batch_users=1024, max_chunk_scores=600))
    assert calls == [out["users_evaluated"]]
    assert out == pytest.approx(evaluate(FixedScorer(scores), relevant, exclude, EvalProtocol(ks=(5, 10))), rel=1e-12)


def test_a_ranking_scorer_must_list_distinct_catalogue_items() -> None:
    # a rank() listing an item twice read Recall@5 5.0 and NDCG@5 2.95; one past the catalogue was counted as a miss
    scores, relevant, exclude = _random_case()  # 37 users x 60 items

    class Repeating(FixedScorer):
        def rank(self, users, k, excl):
            return np.tile(np.array([2] * k), (len(users), 1))

    class Outside(FixedScorer):
        def rank(self, users, k, excl):
            return np.full((len(users), k), 60)

    with pytest.raises(DataError, match="scorer.rank's lists list item 2 twice"):
        evaluate(Repeating(scores), relevant, exclude, EvalProtocol(ks=(5,)))
    with pytest.raises(DataError, match="item row 60, past the catalogue's 60 items"):
        evaluate(Outside(scores), relevant, exclude, EvalProtocol(ks=(5,)))


def test_a_ranking_scorers_lists_are_checked_once_a_batch(monkeypatch) -> None:
    """The lists of scorer.rank were sorted by check_rows in the loop, then again by hits_at_k for the whole set and
    once more for each segment: one check a batch now, with the same figures."""
    from twotower.evaluation import metrics
    from twotower.evaluation.protocol import evaluate_segments

    scores, relevant, exclude = _random_case()  # 37 users x 60 items
    half = relevant.copy()
    half.data[: half.nnz // 2] = 0
    half.eliminate_zeros()
    segments = {"first": (relevant - half).tocsr(), "second": half}

    class Ranking(FixedScorer):
        def rank(self, users, k, excl):
            return topk_excluding(self.score(users), k, excl)

    checked = []
    real = metrics.check_rows
    monkeypatch.setattr(metrics, "check_rows", lambda top, name: (checked.append(name), real(top, name))[1])
    out, parts = evaluate_segments(Ranking(scores), relevant, exclude, EvalProtocol(ks=(5, 10), batch_users=16),
                                   segments=segments)
    assert checked == ["scorer.rank's lists"] * 3  # 37 users in batches of 16
    ranked = topk_excluding(scores, 10, exclude)
    for got, rel in ((out, relevant), *((parts[n], segments[n]) for n in segments)):
        assert got["Recall@10"] == pytest.approx(np.nanmean(recall_at_k(ranked, rel, 10)), rel=1e-12)
        assert got["NDCG@5"] == pytest.approx(np.nanmean(ndcg_at_k(ranked, rel, 5)), rel=1e-12)


def test_chunks_shrink_on_a_large_catalogue_and_give_the_same_figures() -> None:
    # 1,024 users a chunk over 330k items peaked at 4.6 GB in the top-k alone: a chunk now holds at most
    # max_chunk_scores scores, however many users batch_users allows
    scores, relevant, exclude = _random_case()  # 37 users x 60 items
    capped = FixedScorer(scores)
    out = evaluate(capped, relevant, exclude, EvalProtocol(ks=(5, 10), batch_users=1024, max_chunk_scores=600))
    assert max(len(c) for c in capped.calls) == 10 and sum(len(c) for c in capped.calls) == out["users_evaluated"]
    whole = evaluate(FixedScorer(scores), relevant, exclude, EvalProtocol(ks=(5, 10)))
    assert out == pytest.approx(whole, rel=1e-12)
    assert EvalProtocol().chunk_users(3_416) == 1024 and EvalProtocol().chunk_users(330_000) == 101
    assert EvalProtocol(max_chunk_scores=10).chunk_users(1_000) == 1  # never no user at all
    with pytest.raises(ConfigError, match="max_chunk_scores"):
        EvalProtocol(max_chunk_scores=0)


def test_evaluate_rejects_mismatched_inputs() -> None:
    scores, relevant, exclude = _random_case()
    with pytest.raises(DataError, match="exclude has shape"):
        evaluate(FixedScorer(scores), relevant, exclude[:, :10], EvalProtocol())
    with pytest.raises(DataError, match="scorer.score returned shape"):
        evaluate(FixedScorer(scores[:, :10]), relevant, None, EvalProtocol())
    with pytest.raises(DataError, match="item_popularity"):
        evaluate(FixedScorer(scores), relevant, None, EvalProtocol(), item_popularity=np.ones(3))
    with pytest.raises(DataError, match="scipy.sparse"):
        evaluate(FixedScorer(scores), relevant.toarray(), None, EvalProtocol())


def test_eval_protocol_validation() -> None:
    assert EvalProtocol(ks=(20, 10)).ks == (10, 20)
    for bad in [dict(ks=()), dict(ks=(0,)), dict(ks=(5, 5)), dict(batch_users=0), dict(ks=(1.5,))]:
        with pytest.raises(ConfigError):
            EvalProtocol(**bad)
    with pytest.raises(TypeError):
        EvalProtocol((10,))  # keyword-only


def test_parse_metric() -> None:
    assert parse_metric("NDCG@10") == ("NDCG", 10)
    for bad in ("ndcg@10", "NDCG", "NDCG@x", "Foo@5", "Recall@0"):
        with pytest.raises(ConfigError, match="NAME@K"):
            parse_metric(bad)
