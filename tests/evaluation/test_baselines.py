"""Baselines against dense closed forms and a checkerboard with a known right answer."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.errors import ConfigError, DataError
from twotower.evaluation import EASE, EvalProtocol, ItemKNN, Popularity, evaluate, topk_excluding, tune_ease, tune_itemknn


def random_interactions(n_users: int = 40, n_items: int = 25, density: float = 0.2, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    return sp.csr_matrix((rng.random((n_users, n_items)) < density).astype(np.float32))


def checkerboard(group: int = 4) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Two groups of ``group`` users and items; users like every item of their own group.

    User u's own diagonal item (item u) is held out: ``train`` has the rest of the group,
    ``held_out`` has item u. Returns ``(train, held_out)``, both [2·group, 2·group].
    """
    n = 2 * group
    same_group = np.equal.outer(np.arange(n) // group, np.arange(n) // group)
    full = same_group.astype(np.float32)
    held_out = np.eye(n, dtype=np.float32)
    return sp.csr_matrix(full - held_out), sp.csr_matrix(held_out)


def dense_ease(x: np.ndarray, l2: float) -> np.ndarray:
    """Steck (2019), Eq. 8, written out densely: B = I - P diagMat(1/diag(P)), diag(B) = 0."""
    p = np.linalg.inv(x.T @ x + l2 * np.eye(x.shape[1]))
    b = np.eye(x.shape[1]) - p @ np.diag(1.0 / np.diag(p))
    np.fill_diagonal(b, 0.0)
    return b


def test_ease_equals_dense_closed_form() -> None:
    x = random_interactions()
    model = EASE(l2=3.0).fit(x)
    np.testing.assert_allclose(model.weights, dense_ease(x.toarray().astype(np.float64), 3.0), atol=1e-5)
    assert np.all(np.diag(model.weights) == 0)
    assert model.weights.dtype == np.float32
    users = np.array([3, 0, 7])
    np.testing.assert_allclose(model.score(users), x[users].toarray() @ model.weights, rtol=1e-5, atol=1e-6)
    assert model.fit_seconds is not None and model.fit_seconds >= 0


def test_ease_checkerboard_hand_computed() -> None:
    train, held_out = checkerboard(group=4)
    model = EASE(l2=1.0).fit(train)
    scores = model.score(np.arange(8))
    # Within a group the Gram matrix is G = I + 2J (each item has 3 users, each pair shares 2), so
    # P = (G + λI)^-1 gives B_ij = 2 / (7 + λ) off the diagonal, and 0 across groups.
    # User 0 (train items 1, 2, 3) scores its held-out item 0 as 3 · 2/(7 + 1) = 0.75; items 4..7 score 0.
    assert scores[0, 0] == pytest.approx(0.75, rel=1e-5)
    np.testing.assert_allclose(scores[0, 4:], 0.0, atol=1e-6)
    # With training items excluded, every user's held-out diagonal item ranks first.
    ranked = topk_excluding(scores, 1, train)
    assert ranked[:, 0].tolist() == list(range(8))
    out = evaluate(model, held_out, train, EvalProtocol(ks=(1,)))
    assert out["Recall@1"] == 1.0 and out["NDCG@1"] == 1.0


def test_itemknn_checkerboard_hand_computed() -> None:
    train, held_out = checkerboard(group=4)
    model = ItemKNN(k=10, shrink=0.0).fit(train)
    scores = model.score(np.arange(8))
    # Items 0 and j in group 0 share 2 of their 3 users: cosine = 2 / (sqrt 3 · sqrt 3) = 2/3.
    # User 0's history {1, 2, 3} gives item 0 the score 3 · 2/3 = 2.0; other-group items get 0.
    assert scores[0, 0] == pytest.approx(2.0, rel=1e-5)
    np.testing.assert_allclose(scores[0, 4:], 0.0)
    assert topk_excluding(scores, 1, train)[:, 0].tolist() == list(range(8))
    assert evaluate(model, held_out, train, EvalProtocol(ks=(1,)))["Recall@1"] == 1.0


def dense_itemknn(x: np.ndarray, k: int, shrink: float) -> np.ndarray:
    co = x.T @ x
    norms = np.sqrt(np.diag(co))
    s = co / (np.outer(norms, norms) + shrink)
    np.fill_diagonal(s, 0.0)
    out = np.zeros_like(s)
    for i in range(s.shape[0]):
        order = np.lexsort((np.arange(s.shape[1]), -s[i]))  # best first, ties -> smaller column
        keep = [j for j in order if s[i, j] != 0][:k]
        out[i, keep] = s[i, keep]
    return out


@pytest.mark.parametrize("k", [1, 3, 100])
def test_itemknn_equals_dense_reference(k: int) -> None:
    x = random_interactions(seed=2)
    model = ItemKNN(k=k, shrink=5.0).fit(x)
    expected = dense_itemknn(x.toarray().astype(np.float64), k, 5.0)
    np.testing.assert_allclose(model.similarity.toarray(), expected, rtol=1e-6)
    assert np.all(np.diff(model.similarity.indptr) <= k)


@pytest.mark.parametrize("block", [1, 50])
def test_itemknn_in_small_blocks_equals_the_dense_reference(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # the similarity is computed and cut to k a block of item rows at a time: the whole [I, I] matrix, sorted
    # at once, took 12.5 GB and 194 s on Book-Crossing's 38k items; blocks of any size give the same neighbours
    import twotower.evaluation.baselines as baselines

    monkeypatch.setattr(baselines, "_SIMILARITY_BLOCK", block)
    x = random_interactions(seed=3)
    for k in (1, 4):
        model = ItemKNN(k=k, shrink=5.0).fit(x)
        expected = dense_itemknn(x.toarray().astype(np.float64), k, 5.0)
        np.testing.assert_allclose(model.similarity.toarray(), expected, rtol=1e-6)
    ties = sp.csr_matrix(np.kron(np.eye(3), np.ones((2, 4))).astype(np.float32))  # equal similarities in blocks
    np.testing.assert_allclose(ItemKNN(k=2, shrink=0.0).fit(ties).similarity.toarray(),
                               dense_itemknn(ties.toarray().astype(np.float64), 2, 0.0), rtol=1e-6)
    valid = random_interactions(seed=4)
    small = tune_itemknn(x, valid, ks=(1, 3, 20), metric="NDCG@10")
    monkeypatch.setattr(baselines, "_SIMILARITY_BLOCK", 2**24)
    whole = tune_itemknn(x, valid, ks=(1, 3, 20), metric="NDCG@10")
    assert small[0] == whole[0] and [r["NDCG@10"] for r in small[1]] == [r["NDCG@10"] for r in whole[1]]


def test_popularity_counts_distinct_users() -> None:
    x = sp.csr_matrix(np.array([[1, 0, 2], [1, 0, 0], [0, 0, 1]], dtype=np.float32))  # a 2 counts once
    model = Popularity().fit(x)
    assert model.counts.tolist() == [2, 0, 2]
    assert model.score(np.array([0, 1])).tolist() == [[2, 0, 2], [2, 0, 2]]


@pytest.mark.parametrize("k", [1, 5, 40])
def test_popularity_rank_equals_the_generic_top_k(k: int) -> None:
    # the shortcut evaluate() takes: the same lists as partitioning each user's score row
    rng = np.random.default_rng(4)
    train = sp.csr_matrix((rng.random((60, 30)) < rng.random(30) * 0.5).astype(np.float32))  # many tied counts
    _assert_rank_is_the_generic_top_k(Popularity().fit(train), train, rng.permutation(60)[:25], k)


def _assert_rank_is_the_generic_top_k(model, train: sp.csr_matrix, users: np.ndarray, k: int) -> None:
    """``model.rank`` gives the lists of partitioning its dense score rows, with and without exclusions, and
    refuses what the generic path refuses."""
    exclude = train[users].tolil()
    exclude[3, :] = 1.0  # a user who has seen everything: no list
    exclude[4, :27] = 1.0  # three items left: the rest of the list is padding
    exclude[5, 2] = 0.0  # an explicitly stored zero still excludes (topk_excluding's rule)
    exclude = exclude.tocsr()
    assert np.array_equal(model.rank(users, k, exclude), topk_excluding(model.score(users), k, exclude))
    assert np.array_equal(model.rank(users, k, None), topk_excluding(model.score(users), k, None))
    assert (model.rank(users, k, exclude)[3] == -1).all()
    assert model.rank(np.empty(0, np.int64), k, None).shape == (0, k)
    with pytest.raises(ConfigError, match="positive integer"):
        model.rank(users, 0, None)
    with pytest.raises(DataError, match="shape"):
        model.rank(users, k, train)


def test_popularity_evaluates_through_its_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    train = sp.csr_matrix((rng.random((80, 50)) < 0.2).astype(np.float32))
    test = sp.csr_matrix((rng.random((80, 50)) < 0.05).astype(np.float32))
    pop = Popularity().fit(train)
    fast = evaluate(pop, test, train, EvalProtocol(ks=(5, 10)))
    monkeypatch.delattr(Popularity, "rank")  # the generic path: score rows, partition each
    assert evaluate(pop, test, train, EvalProtocol(ks=(5, 10))) == fast


@pytest.mark.parametrize("k", [1, 5, 40])
def test_itemknn_rank_equals_the_generic_top_k(k: int) -> None:
    # evaluate()'s shortcut over the neighbours of each history: the lists of partitioning a dense score row.
    # Without it a 1M-item catalogue evaluated ItemKNN at ~60 users/s (hours for its tuning on validation).
    rng = np.random.default_rng(6)
    train = sp.csr_matrix((rng.random((60, 30)) < rng.random(30) * 0.3).astype(np.float32))
    knn = ItemKNN(k=3, shrink=0.0).fit(train)  # few neighbours: most scores tie at 0, ranked by item row
    _assert_rank_is_the_generic_top_k(knn, train, rng.permutation(60)[:25], k)


def test_itemknn_evaluates_through_its_ranking(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    train = sp.csr_matrix((rng.random((80, 50)) < 0.2).astype(np.float32))
    test = sp.csr_matrix((rng.random((80, 50)) < 0.05).astype(np.float32))
    knn = ItemKNN(k=4).fit(train)
    with monkeypatch.context() as m:
        m.setattr(ItemKNN, "score", lambda self, users: pytest.fail("a dense score row per user"))
        fast = evaluate(knn, test, train, EvalProtocol(ks=(5, 10)))
    monkeypatch.delattr(ItemKNN, "rank")  # the generic path: score rows, partition each
    assert evaluate(knn, test, train, EvalProtocol(ks=(5, 10))) == fast


@pytest.mark.parametrize("model", [Popularity(), EASE(l2=10.0), ItemKNN(k=5)], ids=lambda m: m.name)
def test_score_history_matches_score_on_training_rows(model) -> None:
    x = random_interactions(seed=3)
    model.fit(x)
    users = np.array([5, 1, 1, 30])
    np.testing.assert_allclose(model.score_history(x[users]), model.score(users), rtol=1e-6)
    assert model.score(users).dtype == np.float32
    with pytest.raises(DataError, match="item columns"):
        model.score_history(x[:, :5])
    with pytest.raises(DataError, match="user rows"):
        model.score(np.array([40]))


def test_unfitted_and_bad_config() -> None:
    with pytest.raises(RuntimeError, match="call .fit"):
        EASE().score(np.array([0]))
    for bad in (0, -1.0, "500"):
        with pytest.raises(ConfigError, match="l2"):
            EASE(l2=bad)
    with pytest.raises(ConfigError, match="k"):
        ItemKNN(k=0)
    with pytest.raises(ConfigError, match="shrink"):
        ItemKNN(shrink=-1)
    with pytest.raises(DataError, match="scipy.sparse"):
        Popularity().fit(np.ones((2, 2)))


def _split(x: sp.csr_matrix, seed: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Hold one random item per user (with >= 2 items) out as validation."""
    rng = np.random.default_rng(seed)
    train = x.tolil(copy=True)
    valid = sp.lil_matrix(x.shape, dtype=np.float32)
    for u in range(x.shape[0]):
        items = x[u].indices
        if items.size >= 2:
            i = rng.choice(items)
            train[u, i] = 0
            valid[u, i] = 1
    return sp.csr_matrix(train), sp.csr_matrix(valid)


def test_tune_ease_selects_best_validation_lambda() -> None:
    train, valid = _split(random_interactions(n_users=60, n_items=30, density=0.25, seed=4))
    best, table = tune_ease(train, valid, lambdas=(1.0, 10.0, 100.0), metric="Recall@5")
    assert [row["l2"] for row in table] == [1.0, 10.0, 100.0]
    values = [row["Recall@5"] for row in table]
    assert best == table[int(np.argmax(values))]["l2"]
    # Each row is exactly what a fresh fit + evaluate gives.
    direct = evaluate(EASE(l2=10.0).fit(train), valid, train, EvalProtocol(ks=(5,)))
    assert table[1]["Recall@5"] == pytest.approx(direct["Recall@5"])
    with pytest.raises(ConfigError, match="tuning metric"):
        tune_ease(train, valid, metric="Coverage@5")
    with pytest.raises(DataError, match="valid_relevant has shape"):
        tune_ease(train, valid[:, :3])


def test_the_chosen_lambda_comes_from_tuning_without_a_second_dense_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    # each λ is an I x I solve, minutes at 20,000 items: the tuned model is handed on, not solved again
    import twotower.evaluation.baselines as baselines

    train, valid = _split(random_interactions(n_users=60, n_items=30, density=0.25, seed=4))
    solved: list[float] = []
    real = baselines._ease_weights
    monkeypatch.setattr(baselines, "_ease_weights", lambda gram, l2: (solved.append(l2), real(gram, l2))[1])
    keep: dict = {}
    best, table = tune_ease(train, valid, lambdas=(1.0, 10.0, 100.0), metric="Recall@5", keep=keep)
    model = EASE.from_tuning(keep, best)
    assert solved == [1.0, 10.0, 100.0] and model.l2 == best
    assert np.array_equal(model.score(np.arange(5)), EASE(l2=best).fit(train).score(np.arange(5)))
    other = next(lam for lam in (1.0, 10.0, 100.0) if lam != best)
    assert EASE.from_tuning(keep, other).l2 == other and solved[-1] == other  # another λ is solved afresh


def test_tune_itemknn_selects_best_validation_k() -> None:
    train, valid = _split(random_interactions(n_users=60, n_items=30, density=0.25, seed=5))
    best, table = tune_itemknn(train, valid, ks=(2, 5, 20), metric="NDCG@10")
    assert [row["k"] for row in table] == [2, 5, 20]
    assert best == table[int(np.argmax([row["NDCG@10"] for row in table]))]["k"]
    direct = evaluate(ItemKNN(k=5).fit(train), valid, train, EvalProtocol(ks=(10,)))
    assert table[1]["NDCG@10"] == pytest.approx(direct["NDCG@10"])


def test_ease_weights_from_the_factored_inverse_match_a_plain_solve() -> None:
    """The in-place Cholesky inverse (potrf + potri, lower triangle mirrored a block at a time) gives the
    weights of the textbook solve, across block edges."""
    from twotower.evaluation import baselines as bl

    rng = np.random.default_rng(3)
    x = sp.csr_matrix((rng.random((60, 37)) < 0.3).astype(np.float32))
    gram = bl._gram(x)
    want = dense_ease(x.toarray().astype(np.float64), 2.0)
    np.testing.assert_allclose(bl._ease_weights(gram, 2.0), want, atol=1e-6)
    a = rng.random((37, 37))
    full = np.tril(a) + np.tril(a, -1).T
    bl._mirror_lower(a, block=5)
    np.testing.assert_array_equal(a, full)


def test_ease_skip_reason_names_the_limit_and_the_memory() -> None:
    from twotower.evaluation.baselines import ease_memory_bytes, ease_skip_reason

    assert ease_skip_reason(1_000, 20_000, available_bytes=2**34) is None
    assert ease_skip_reason(1_000, 20_000, available_bytes=None) is None
    assert "eval.ease_max_items=20,000" in ease_skip_reason(30_000, 20_000, available_bytes=2**40)
    # the flops in a power of ten that fits: below 10¹² they read "~0·10¹² flops" (`evaluate --ease-max-items 100`)
    assert "~2.7·10¹³ flops per λ tried" in ease_skip_reason(30_000, 20_000, available_bytes=2**40)
    assert "~4.8·10⁹ flops per λ tried" in ease_skip_reason(1_682, 100, available_bytes=None)
    reason = ease_skip_reason(10_000, 20_000, available_bytes=ease_memory_bytes(10_000) - 1)
    assert reason is not None and "GiB" in reason


@pytest.mark.parametrize("model", [Popularity(), ItemKNN(k=3, shrink=0.0)], ids=lambda m: m.name)
def test_history_scorer_ranks_without_dense_rows_and_gives_the_same_lists(model, monkeypatch) -> None:
    # evaluate --history-from scored ItemKNN and Popularity through a dense [I] row per user (1M items:
    # ~12 users/s) where plain evaluate ranks them; the same lists as partitioning score_history's rows
    from twotower.pipeline.histories import HistoryBaselineScorer

    rng = np.random.default_rng(8)
    train = sp.csr_matrix((rng.random((60, 30)) < rng.random(30) * 0.3).astype(np.float32))
    inputs = sp.csr_matrix((rng.random((60, 30)) < 0.15).astype(np.float32))  # other histories than train
    test = sp.csr_matrix((rng.random((60, 30)) < 0.1).astype(np.float32))
    model.fit(train)

    class Histories:
        def matrix(self) -> sp.csr_matrix:
            return inputs

    scorer = HistoryBaselineScorer(model, Histories())
    users = rng.permutation(60)[:25]
    exclude = (train[users] + inputs[users]).tolil()
    exclude[3, :] = 1.0  # nothing left: no list
    exclude[4, :27] = 1.0  # three items left: the rest is padding
    exclude = exclude.tocsr()
    for k in (1, 5, 40):
        want = topk_excluding(model.score_history(inputs[users]), k, exclude)
        assert np.array_equal(scorer.rank(users, k, exclude), want)
        assert np.array_equal(scorer.rank(users, k, None), topk_excluding(model.score_history(inputs[users]), k, None))
    with pytest.raises(DataError, match="item columns"):
        model.rank_history(inputs[:, :5], 5, None)
    ex_all = (train + inputs).tocsr()
    with monkeypatch.context() as m:
        m.setattr(type(model), "score_history", lambda self, h: pytest.fail("a dense score row per user"))
        fast = evaluate(scorer, test, ex_all, EvalProtocol(ks=(5, 10)))
    del scorer.rank  # the generic path: score rows, partition each
    assert evaluate(scorer, test, ex_all, EvalProtocol(ks=(5, 10))) == fast


def test_tune_itemknn_scores_a_seeded_sample_of_at_most_max_users() -> None:
    """Each k scores every validation user over the catalogue (63-167 s a k at 30,000 users x 40,000 items):
    ``max_users`` scores a sample drawn by ``seed`` instead, the same one for the same seed; more than there are
    is all of them, as before."""
    train, valid = _split(random_interactions(n_users=60, n_items=30, density=0.25, seed=5))
    with_valid = int((np.diff(valid.indptr) > 0).sum())
    _, everyone = tune_itemknn(train, valid, ks=(2, 5), metric="NDCG@10")
    _, big = tune_itemknn(train, valid, ks=(2, 5), metric="NDCG@10", max_users=with_valid, seed=0)
    _, sample = tune_itemknn(train, valid, ks=(2, 5), metric="NDCG@10", max_users=20, seed=0)
    _, again = tune_itemknn(train, valid, ks=(2, 5), metric="NDCG@10", max_users=20, seed=0)
    _, other = tune_itemknn(train, valid, ks=(2, 5), metric="NDCG@10", max_users=20, seed=1)
    assert [row["NDCG@10"] for row in everyone] == [row["NDCG@10"] for row in big]
    assert [row["users_evaluated"] for row in everyone] == [with_valid] * 2 == [row["users_evaluated"] for row in big]
    assert [row["users_evaluated"] for row in sample] == [20, 20]
    ndcg = [[row["NDCG@10"] for row in t] for t in (sample, again, other)]
    assert ndcg[0] == ndcg[1] != ndcg[2]
    with pytest.raises(ConfigError, match="max_users"):
        tune_itemknn(train, valid, ks=(2,), max_users=0)


def test_tune_itemknn_extends_the_grid_below_a_winning_smallest_k() -> None:
    # ML-1M chose k=10, the grid's smallest, while k=5 scored better on valid: a best value at the grid's edge is
    # followed by halving until the edge stops winning, so the baseline is not under-tuned by its grid
    train, valid = _split(random_interactions(n_users=60, n_items=30, density=0.25, seed=5))
    best, table = tune_itemknn(train, valid, ks=(20,), metric="NDCG@10")
    tried = [row["k"] for row in table]
    assert tried[:2] == [20, 10]
    scores = [row["NDCG@10"] for row in table]
    assert best == tried[int(np.argmax(scores))]
    for i in range(1, len(tried)):
        # each extra k was tried only because the smallest before it was the best so far
        assert tried[i] == max(1, tried[i - 1] // 2)
        assert int(np.argmax(scores[:i])) == i - 1
    assert tried[-1] == 1 or int(np.argmax(scores)) != len(tried) - 1
