"""Every figure evaluate() reports, against a brute-force evaluator written here with plain Python loops.

The reference shares no code with the library: it sorts each user's whole catalogue by (-score, item row),
drops excluded and -inf items, and counts hits one slot at a time. The cases are small and random, with
several relevant items per user, heavy score ties, users with no held-out item, users who have seen every
item, held-out items that are also in the excluded history, and k larger than the catalogue.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.evaluation import EASE, EvalProtocol, ItemKNN, Popularity, evaluate

# ------------------------------------------------------------------------------------------ the reference


def ref_ranking(scores: list[float], excluded: set[int], k: int) -> list[int]:
    """The first ``k`` candidates by (-score, item row); excluded and -inf items are not candidates."""
    cands = [i for i in range(len(scores)) if i not in excluded and scores[i] != -math.inf]
    cands.sort(key=lambda i: (-scores[i], i))
    return cands[:k]


def ref_evaluate(scores: np.ndarray, relevant: list[set[int]], excluded: list[set[int]], ks: list[int],
                 popularity: list[float]) -> dict[str, float]:
    """Per-user metrics averaged over users with >= 1 relevant item; relevant items that are excluded stay in
    the denominators (recall, IDCG) and can never be hit."""
    n_items = scores.shape[1]
    users = [u for u in range(len(relevant)) if relevant[u]]
    out: dict[str, float] = {}
    for k in ks:
        total = {"Recall": 0.0, "Precision": 0.0, "NDCG": 0.0, "MRR": 0.0, "HitRate": 0.0}
        shown: set[int] = set()
        pop_sum, slots = 0.0, 0
        for u in users:
            top = ref_ranking(scores[u].tolist(), excluded[u], k)
            rel = relevant[u]
            n_hits, dcg, rr = 0, 0.0, 0.0
            for pos, item in enumerate(top, start=1):
                if item in rel:
                    n_hits += 1
                    dcg += 1.0 / math.log2(pos + 1)
                    if rr == 0.0:
                        rr = 1.0 / pos
            idcg = sum(1.0 / math.log2(pos + 1) for pos in range(1, min(len(rel), k) + 1))
            total["Recall"] += n_hits / len(rel)
            total["Precision"] += n_hits / k  # a list shorter than k is not rewarded for it
            total["NDCG"] += dcg / idcg
            total["MRR"] += rr
            total["HitRate"] += 1.0 if n_hits else 0.0
            shown.update(top)
            pop_sum += sum(popularity[i] for i in top)
            slots += len(top)
        for name, value in total.items():
            out[f"{name}@{k}"] = value / len(users) if users else math.nan
        out[f"Coverage@{k}"] = len(shown) / n_items
        out[f"MeanPop@{k}"] = pop_sum / slots if slots else math.nan
    out["users_evaluated"] = len(users)
    out["users_skipped"] = len(relevant) - len(users)
    return out


def as_sets(m: sp.spmatrix) -> list[set[int]]:
    m = sp.csr_matrix(m)
    return [set(m.indices[m.indptr[u]:m.indptr[u + 1]].tolist()) for u in range(m.shape[0])]


def assert_same(got: dict[str, float], want: dict[str, float]) -> None:
    assert set(got) == set(want)
    for key in want:
        assert got[key] == pytest.approx(want[key], abs=1e-12, nan_ok=True), key


class Fixed:
    def __init__(self, scores: np.ndarray) -> None:
        self.scores = scores

    def score(self, users: np.ndarray) -> np.ndarray:
        return self.scores[users]


def random_case(seed: int, n_users: int = 14, n_items: int = 11):
    """Scores with few distinct values (many ties), some -inf, and the awkward users the docstring lists."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=(n_users, n_items)).astype(np.float32)
    scores[rng.random(scores.shape) < 0.08] = -np.inf  # the scorer drops an item
    train = (rng.random((n_users, n_items)) < 0.3).astype(np.float32)
    test = (rng.random((n_users, n_items)) < 0.25).astype(np.float32)
    test[0] = 0.0  # no held-out item: skipped
    train[1] = 1.0  # has seen every item: an empty list, counted as a miss
    test[1, :2] = 1.0
    test[2] = 0.0
    test[2, np.flatnonzero(train[2])[:2]] = 1.0  # every held-out item is also a training item: never hit
    test[3] = 0.0
    test[3, :5] = 1.0  # more relevant items than small k
    return scores, sp.csr_matrix(train), sp.csr_matrix(test)


# ------------------------------------------------------------------------------------------ the protocol


@pytest.mark.parametrize("seed", range(6))
def test_evaluate_equals_the_brute_force_reference(seed: int) -> None:
    scores, train, test = random_case(seed)
    ks = [1, 3, 5, 11, 15]  # 11 = the catalogue, 15 beyond it
    pop = np.asarray(train.sum(axis=0)).ravel()
    want = ref_evaluate(scores, as_sets(test), as_sets(train), ks, pop.tolist())
    for batch in (1, 4, 1024):  # chunking changes nothing
        got = evaluate(Fixed(scores), test, train, EvalProtocol(ks=tuple(ks), batch_users=batch), pop)
        assert_same(got, want)
    # no exclusion: training items compete like any other
    assert_same(evaluate(Fixed(scores), test, None, EvalProtocol(ks=tuple(ks)), pop),
                ref_evaluate(scores, as_sets(test), [set()] * scores.shape[0], ks, pop.tolist()))


def test_held_out_items_also_in_the_excluded_history_count_but_are_never_hit() -> None:
    """The documented rule (protocol step 3): an excluded item is never ranked, even when it is also held out;
    it stays in the user's relevant set, so recall and NDCG cannot reach 1 (twotower evaluate warns)."""
    scores = np.array([[3.0, 2.0, 1.0, 0.0]], dtype=np.float32)
    train = sp.csr_matrix(np.array([[1, 0, 0, 0]], dtype=np.float32))
    test = sp.csr_matrix(np.array([[1, 1, 0, 0]], dtype=np.float32))  # item 0 held out and seen
    got = evaluate(Fixed(scores), test, train, EvalProtocol(ks=(1, 4)))
    # list [1, 2, 3]: item 1 at rank 1; item 0 never listed
    assert got["Recall@4"] == pytest.approx(0.5)
    assert got["NDCG@1"] == pytest.approx(1.0)  # IDCG@1 has one slot
    assert got["NDCG@4"] == pytest.approx(1.0 / (1.0 + 1.0 / math.log2(3)))
    assert got["HitRate@1"] == 1.0 and got["MRR@4"] == 1.0


def test_leave_one_out_ndcg_is_one_over_log2_of_rank_plus_one() -> None:
    """One held-out item per user: HR@k = [rank <= k], NDCG@k = 1 / log2(rank + 1), MRR@k = 1 / rank, where
    rank = 1 + (candidates scoring higher) + (tied candidates with a smaller row)."""
    rng = np.random.default_rng(7)
    n_users, n_items = 40, 30
    scores = rng.integers(0, 6, size=(n_users, n_items)).astype(np.float32)
    train = sp.csr_matrix((rng.random((n_users, n_items)) < 0.3).astype(np.float32))
    seen = as_sets(train)
    target = [int(rng.choice([i for i in range(n_items) if i not in seen[u]])) for u in range(n_users)]
    test = sp.csr_matrix((np.ones(n_users, np.float32), (np.arange(n_users), target)), shape=(n_users, n_items))
    ranks = []
    for u, t in enumerate(target):
        s = scores[u]
        ranks.append(1 + sum(1 for j in range(n_items) if j not in seen[u]
                             and (s[j] > s[t] or (s[j] == s[t] and j < t))))
    got = evaluate(Fixed(scores), test, train, EvalProtocol(ks=(1, 5, 10)))
    for k in (1, 5, 10):
        assert got[f"HitRate@{k}"] == pytest.approx(np.mean([r <= k for r in ranks]))
        assert got[f"Recall@{k}"] == got[f"HitRate@{k}"]
        assert got[f"NDCG@{k}"] == pytest.approx(np.mean([1 / math.log2(r + 1) if r <= k else 0.0 for r in ranks]))
        assert got[f"MRR@{k}"] == pytest.approx(np.mean([1 / r if r <= k else 0.0 for r in ranks]))
        assert got[f"Precision@{k}"] == pytest.approx(got[f"HitRate@{k}"] / k)


# ------------------------------------------------------------------------------------------ the baselines


def ref_popularity(train: np.ndarray) -> list[float]:
    return [float(sum(1 for u in range(train.shape[0]) if train[u, i])) for i in range(train.shape[1])]


def ref_ease_scores(train: np.ndarray, l2: float) -> np.ndarray:
    """Steck (2019): P = (XᵀX + λI)⁻¹, B = I − P·diag(1/diag(P)) (so diag(B) = 0), scores = X·B."""
    x = train.astype(np.float64)
    p = np.linalg.inv(x.T @ x + l2 * np.eye(x.shape[1]))
    b = np.eye(x.shape[1]) - p @ np.diag(1.0 / np.diag(p))
    return x @ b


def ref_itemknn_scores(train: np.ndarray, k: int, shrink: float) -> np.ndarray:
    """Loops: S_ij = |U_i ∩ U_j| / (sqrt|U_i| sqrt|U_j| + shrink), i != j; row i keeps its k largest non-zero
    entries (ties: smaller column); score of item j for a user = sum over the user's items i of S_ij."""
    n_users, n_items = train.shape
    users_of = [{u for u in range(n_users) if train[u, i]} for i in range(n_items)]
    sim = [[0.0] * n_items for _ in range(n_items)]
    for i in range(n_items):
        row = []
        for j in range(n_items):
            common = len(users_of[i] & users_of[j])
            if i != j and common:
                row.append((common / (math.sqrt(len(users_of[i])) * math.sqrt(len(users_of[j])) + shrink), j))
        for value, j in sorted(row, key=lambda vj: (-vj[0], vj[1]))[:k]:
            sim[i][j] = value
    out = np.zeros((n_users, n_items))
    for u in range(n_users):
        for i in range(n_items):
            if train[u, i]:
                for j in range(n_items):
                    out[u, j] += sim[i][j]
    return out


def _float32_ties(scores: np.ndarray, model_scores: np.ndarray) -> np.ndarray:
    """The reference scores, with the model's float32 values wherever the two agree to float tolerance: the
    ranking compared is then the one the reference's exact arithmetic gives, not a float32 rounding apart."""
    np.testing.assert_allclose(model_scores, scores, rtol=1e-4, atol=1e-5)
    return model_scores.astype(np.float64)


@pytest.mark.parametrize("seed", range(3))
def test_baselines_score_and_evaluate_as_the_references(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n_users, n_items = 25, 12
    train = (rng.random((n_users, n_items)) < rng.random(n_items) * 0.6).astype(np.float32)  # tied popularities
    train[4] = 1.0  # a user who has seen everything
    test = (rng.random((n_users, n_items)) < 0.2).astype(np.float32)
    test[0] = 0.0
    x, held_out = sp.csr_matrix(train), sp.csr_matrix(test)
    seen, rel = as_sets(x), as_sets(held_out)
    ks = [1, 3, 12, 20]
    pop = ref_popularity(train)
    models = {
        "popularity": (Popularity(), np.tile(np.asarray(pop), (n_users, 1))),
        "ease": (EASE(l2=2.0), ref_ease_scores(train, 2.0)),
        "itemknn": (ItemKNN(k=3, shrink=1.0), ref_itemknn_scores(train, 3, 1.0)),
    }
    for name, (model, ref_scores) in models.items():
        model.fit(x)
        scores = _float32_ties(ref_scores, model.score(np.arange(n_users)))
        want = ref_evaluate(scores, rel, seen, ks, pop)
        got = evaluate(model, held_out, x, EvalProtocol(ks=tuple(ks), batch_users=7), np.asarray(pop))
        assert_same(got, want)
        if name == "popularity":  # no float rounding in counts: the reference's own scores give the same figures
            assert_same(got, ref_evaluate(ref_scores, rel, seen, ks, pop))
