"""EASE on the Gram matrix's leading eigenpairs: the dense EASE when every eigenpair is kept, close to it
when most of the spectrum is, seeded, and tuned on validation like EASE."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from twotower.errors import ConfigError
from twotower.evaluation.baselines import EASE, tune_ease
from twotower.evaluation.low_rank_ease import LowRankEASE, gram_eigenpairs, tune_low_rank_ease
from twotower.evaluation.protocol import topk_excluding


def _interactions(users: int, items: int, per_user: int, seed: int = 0) -> sp.csr_matrix:
    """Users drawn from a few taste groups, so item-item structure exists to be found."""
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 4, size=items)
    rows, cols = [], []
    for u in range(users):
        liked = np.flatnonzero(groups == u % 4)
        pool = liked if rng.random() < 0.8 else np.arange(items)
        picks = rng.choice(pool, size=min(per_user, pool.size), replace=False)
        rows += [u] * picks.size
        cols += picks.tolist()
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(users, items))


def _train_valid() -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """500 users' interactions, 15% of them held out (seeded) as validation."""
    x = _interactions(500, 60, 8, seed=4)
    coo = x.tocoo()
    held = np.random.default_rng(0).random(coo.nnz) < 0.15
    train = sp.csr_matrix((coo.data[~held], (coo.row[~held], coo.col[~held])), shape=x.shape)
    valid = sp.csr_matrix((coo.data[held], (coo.row[held], coo.col[held])), shape=x.shape)
    return train, valid


def test_with_every_eigenpair_kept_it_is_ease_off_the_diagonal() -> None:
    x = _interactions(300, 40, 6)
    dense = EASE(l2=20.0).fit(x).weights
    a, c = LowRankEASE(l2=20.0, k=40, seed=1).fit(x).factors()
    low = a @ c.T
    off = ~np.eye(40, dtype=bool)
    assert np.allclose(low[off], dense[off], atol=1e-5 * np.abs(dense).max())
    # so the scores of every item outside a history are EASE's
    history = x[:5].toarray()
    scores = LowRankEASE(l2=20.0, k=40, seed=1).fit(x).score(np.arange(5))
    expected = history @ dense
    assert np.allclose(scores[history == 0], expected[history == 0], atol=1e-4)


def test_with_every_eigenpair_kept_the_history_items_score_as_in_ease_too() -> None:
    # ranked without excluding the history (`evaluate --no-exclude-seen`), the product's diagonal (up to
    # 1/(λ d_j), where EASE's B has zeros) put every history item first: ML-100K's low-rank row had Recall@10 0
    x = _interactions(300, 40, 6)
    dense = EASE(l2=20.0).fit(x)
    low = LowRankEASE(l2=20.0, k=40, seed=1).fit(x)
    users = np.arange(5)
    assert np.allclose(low.score(users), dense.score(users), atol=1e-4)
    assert np.array_equal(topk_excluding(low.score(users), 10), topk_excluding(dense.score(users), 10))
    history = sp.csr_matrix(x[:5].toarray() * 3.0)  # any stored value is one interaction, as fit reads it
    assert np.allclose(low.score_history(history), dense.score_history(history), atol=1e-4)


def test_the_leading_eigenpairs_are_those_of_the_gram_matrix_and_the_seed_fixes_them() -> None:
    x = _interactions(400, 120, 10, seed=2)
    v, s2 = gram_eigenpairs(x, 8, seed=5)
    exact = np.linalg.eigvalsh((x.T @ x).toarray().astype(np.float64))[::-1][:8]
    # the four taste groups' directions stand out and are found to the float; the flat rest of the spectrum
    # (an eigenvalue every ~1% there) is what a randomized solver approximates
    assert np.allclose(s2[:4], exact[:4], rtol=1e-6)
    assert np.allclose(s2[4:], exact[4:], rtol=0.05) and np.all(s2 <= exact * (1 + 1e-9))
    assert np.allclose(v.T @ v, np.eye(8), atol=1e-8)
    again, _ = gram_eigenpairs(x, 8, seed=5)
    assert np.array_equal(v, again)
    assert gram_eigenpairs(x[:3], 8, seed=0)[0].shape == (120, 3)  # no more than the matrix's rank allows


def test_a_truncated_spectrum_ranks_like_ease_where_the_spectrum_is_concentrated() -> None:
    x = _interactions(600, 200, 12, seed=3)
    users = np.arange(50)
    dense = EASE(l2=50.0).fit(x).score(users)
    low = LowRankEASE(l2=50.0, k=60, seed=0).fit(x).score(users)
    seen = x[users].toarray() > 0
    top_dense = np.argsort(-np.where(seen, -np.inf, dense), axis=1)[:, :10]
    top_low = np.argsort(-np.where(seen, -np.inf, low), axis=1)[:, :10]
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top_dense, top_low)])
    assert overlap > 0.6


def test_tuning_picks_the_lambda_validation_prefers_and_returns_its_model() -> None:
    train, valid = _train_valid()
    model, table = tune_low_rank_ease(train, valid, lambdas=(1.0, 30.0, 3000.0), k=60, seed=0)
    assert [row["l2"] for row in table] == [1.0, 30.0, 3000.0]
    best = max(table, key=lambda row: row["NDCG@10"])
    assert model.l2 == best["l2"]
    # with every eigenpair kept the figures are the dense EASE's, λ by λ
    _, dense_table = tune_ease(train, valid, lambdas=(1.0, 30.0, 3000.0))
    assert [row["NDCG@10"] for row in table] == pytest.approx([row["NDCG@10"] for row in dense_table], abs=1e-6)


def test_tuning_keeps_only_the_best_lambdas_factors(monkeypatch) -> None:
    """Every λ's model (float64 factors and a float32 scoring copy, 2.3 GB a λ at 373,000 items) was kept to the end:
    twice the memory the check estimates, with three λ tried. Only the best so far stays alive."""
    import gc
    import weakref

    train, valid = _train_valid()
    made: list[weakref.ref] = []
    with_l2 = LowRankEASE.with_l2

    def tracked(self, l2):
        model = with_l2(self, l2)
        made.append(weakref.ref(model))
        alive = [r() for r in made[:-1] if r() is not None]
        assert len(alive) <= 1, f"{len(alive)} earlier λ models alive while λ={l2:g} is scored"
        return model

    monkeypatch.setattr(LowRankEASE, "with_l2", tracked)
    model, table = tune_low_rank_ease(train, valid, lambdas=(1.0, 30.0, 3000.0), k=60, seed=0)
    gc.collect()
    assert [r() for r in made if r() is not None] == [model]
    assert model.l2 == max(table, key=lambda row: row["NDCG@10"])["l2"]


def test_tuning_on_a_user_sample_scores_only_that_many_validation_users() -> None:
    """``max_users`` bounds the tuning's cost (every λ ranks the catalogue for each scored user): a seeded sample
    of that many validation users is scored, the same one for the same seed; more than there are is all of them."""
    train, valid = _train_valid()
    with_valid = int((np.diff(valid.indptr) > 0).sum())
    _, everyone = tune_low_rank_ease(train, valid, lambdas=(1.0, 30.0), k=60, seed=0)
    _, big = tune_low_rank_ease(train, valid, lambdas=(1.0, 30.0), k=60, seed=0, max_users=10 * with_valid)
    _, sample = tune_low_rank_ease(train, valid, lambdas=(1.0, 30.0), k=60, seed=0, max_users=100)
    _, again = tune_low_rank_ease(train, valid, lambdas=(1.0, 30.0), k=60, seed=0, max_users=100)
    _, other = tune_low_rank_ease(train, valid, lambdas=(1.0, 30.0), k=60, seed=1, max_users=100)
    assert [row["users_evaluated"] for row in everyone] == [with_valid] * 2 == [row["users_evaluated"] for row in big]
    assert [row["users_evaluated"] for row in sample] == [100, 100]
    ndcg = [[row["NDCG@10"] for row in t] for t in (sample, again, other)]
    assert ndcg[0] == ndcg[1] != ndcg[2]
    with pytest.raises(ConfigError, match="max_users"):
        tune_low_rank_ease(train, valid, lambdas=(1.0,), k=60, max_users=0)


@pytest.mark.parametrize("kwargs", [{"l2": 0.0, "k": 8}, {"l2": -1.0, "k": 8}, {"k": 0}])
def test_bad_settings_are_refused(kwargs) -> None:
    with pytest.raises(ConfigError):
        LowRankEASE(**kwargs)


def test_a_fit_says_how_many_eigenpairs_it_kept() -> None:
    # 7 users have at most 7 eigenpairs to give: the fit keeps 7 of the 256 asked for, and the baseline's row and
    # record say 7 (they said 256)
    from types import SimpleNamespace

    from twotower.pipeline.experiment import baseline_scorers

    x = _interactions(7, 30, 4)
    model = LowRankEASE(k=256).fit(x)
    assert model.k == 256 and model.eigenpairs == 7 == model.with_l2(50.0).eigenpairs
    assert LowRankEASE(k=5).fit(x).eigenpairs == 5
    with pytest.raises(RuntimeError):
        LowRankEASE(k=8).eigenpairs  # noqa: B018 - not fitted
    prep = SimpleNamespace(n_items=30, matrix=lambda part: x if part == "train" else None)
    _, _, info = baseline_scorers(prep, ("ease",), ease_solver="low_rank", ease_eigenpairs=256)["ease"]
    assert info["solver"] == "low_rank" and info["eigenpairs"] == 7
