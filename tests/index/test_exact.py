"""ExactIndex: the reference. Block-wise top-k must equal a full argsort, ties included."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.index import ExactIndex

from index_data import brute_force, canonical_top
from index_contract import IndexContract


class TestExactIndex(IndexContract):
    def make_index(self) -> ExactIndex:
        return ExactIndex(max_block_elems=700)  # tiny blocks: 1 query x 700 vectors at a time

    def test_is_exact(self, catalogue):
        assert self.built(catalogue).is_exact


@pytest.mark.parametrize("max_block_elems", [1, 64, 1000, 1 << 24])
def test_ties_broken_by_smaller_id_across_blocks(max_block_elems):
    # 6 distinct directions, each repeated 50 times: every score is tied 50 ways.
    rng = np.random.default_rng(3)
    base = rng.standard_normal((6, 8)).astype(np.float32)
    x = np.repeat(base, 50, axis=0)  # [300, 8]
    ids = rng.permutation(300).astype(np.int64) * 10
    q = rng.standard_normal((4, 8)).astype(np.float32)
    res = ExactIndex(max_block_elems=max_block_elems).build(x, ids).search(q, 75)
    ref_ids, ref_s = brute_force(x, ids, q, 75)
    np.testing.assert_array_equal(res.ids, ref_ids)  # the 50 tied best, smallest ids first, then 25 more
    np.testing.assert_allclose(res.scores, ref_s, rtol=1e-5, atol=1e-6)


def _tied_catalogue(n=600, tie=300, dim=8, seed=5):
    """``n`` unit vectors whose first ``tie`` rows are one vector, caller ids shuffled; queries along that vector."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x[:tie] = x[0]  # a block of identical vectors: every query below ties them at the top
    ids = (rng.permutation(n) * 3 + 1).astype(np.int64)
    q = np.repeat(x[:1], 6, axis=0) + 0.01 * rng.standard_normal((6, dim)).astype(np.float32)
    return x, ids, q



def test_a_tie_at_the_cut_keeps_rescoring_within_max_block_elems(monkeypatch):
    # a tie straddling the cut deepens the fetch until the whole tied block is in (here 300 -> 576 candidates);
    # the query block was sized for the first depth only, so 6 queries x 576 x 8 = 27,648 values were gathered in
    # one piece against max_block_elems=2048 (at 100k tied items of dim 64, 64 queries: 4.6 GiB against 128 MiB)
    import twotower.index.exact as exact_mod

    x, ids, q = _tied_catalogue()
    gathered = []
    real = exact_mod.canonical_scores

    def spy(queries, vectors, rows):
        gathered.append(rows.size * queries.shape[1])
        return real(queries, vectors, rows)

    monkeypatch.setattr(exact_mod, "canonical_scores", spy)
    index = ExactIndex(max_block_elems=2048).build(x, ids)
    res = index.search(q, 10)
    assert max(gathered) <= 2048
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, 10))  # the 10 smallest tied ids
    gathered.clear()
    allowed = np.sort(ids)[::2]  # an allow-list scored exactly: one query's rows rescored in chunks too
    res = index.search(q[:1], 10, allow=allowed, exact_subset_max=len(ids))
    assert max(gathered) <= 2048
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q[:1], 10, allow=allowed))


@pytest.mark.parametrize("k", [1, 9, 10, 11, 12, 20])
@pytest.mark.parametrize("exact_subset_max", [0, None])
def test_ties_with_exclusions_and_allow_lists_return_each_eligible_id_once(k, exact_subset_max):
    # exclusions take ids out of the tied block, so the cut falls inside it after the filtered search deepens:
    # every row must be the reference's (no id twice, no eligible tied id dropped for a larger one)
    x, ids, q = _tied_catalogue(n=120, tie=40)
    tied = np.sort(ids[:40])
    exclude = [tied[: 30 - 3 * r] for r in range(len(q))]  # 30, 27, ... of the smallest tied ids
    index = ExactIndex(max_block_elems=64).build(x, ids)
    res = index.search(q, k, exclude=exclude)
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, k, exclude))
    allowed = np.concatenate([tied[::3], ids[40::2]])  # a third of the tied block, half the rest
    res = index.search(q, k, exclude=exclude, allow=allowed, exact_subset_max=exact_subset_max)
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, k, exclude, allowed))
    for row in res.ids:
        hits = row[row != -1]
        assert np.unique(hits).size == hits.size


def test_all_zero_scores_return_smallest_ids():
    x = np.zeros((20, 4), np.float32)
    ids = np.arange(20)[::-1].astype(np.int64)
    res = ExactIndex(max_block_elems=8).build(x, ids).search(np.ones((1, 4), np.float32), 3)
    assert res.ids.tolist() == [[0, 1, 2]]


def test_config_and_empty_index():
    with pytest.raises(ConfigError, match="^max_block_elems: must be a positive integer, got 0$"):
        ExactIndex(max_block_elems=0)
    with pytest.raises(ConfigError, match="build"):
        ExactIndex().dim
    with pytest.raises(ConfigError, match="^k: must be"):
        ExactIndex().build(np.eye(3, dtype=np.float32), np.arange(3)).search(np.eye(3, dtype=np.float32), 0)


def test_a_large_tie_at_the_cut_is_settled_by_one_more_scan_not_by_fetching_deeper(monkeypatch):
    # 3,000 identical vectors, k=10: fetching twice as deep per retry took 9 FAISS fetches (18 -> 3,000) over the
    # catalogue (100,000 x 64, 64 queries: 14 s); the cut's score settles it in one scan of the blocks
    import twotower.index.exact as exact_mod

    x, ids, q = _tied_catalogue(n=3200, tie=3000)
    fetched = []
    real = exact_mod._faiss_knn

    def spy(queries, vectors, f):
        fetched.append(f)
        return real(queries, vectors, f)

    monkeypatch.setattr(exact_mod, "_faiss_knn", spy)
    res = ExactIndex(max_block_elems=4096).build(x, ids).search(q, 10)
    assert fetched == [18] * len(fetched), fetched  # k + the margin, never deeper
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, 10))


def _quantised(n, dim, seed, levels=2):
    """Vectors and queries on a coarse grid (many exact ties, zero and negative scores), caller ids shuffled."""
    rng = np.random.default_rng(seed)
    x = (rng.integers(-levels, levels + 1, (n, dim)) / levels).astype(np.float32)
    x[n // 3 : n // 3 + n // 4] = x[n // 3]  # a run of identical rows that straddles blocks
    x[-5:] = 0  # zero vectors: score exactly 0 for every query
    ids = (rng.permutation(4 * n)[:n]).astype(np.int64)
    q = (rng.integers(-2, 3, (40, dim)) / 2).astype(np.float32)
    q[:10] = x[n // 3]  # queries along the identical run: it ties at the top
    q[10:15] = -x[n // 3]  # and at the bottom, with negative scores
    return x, ids, q


@pytest.mark.parametrize("max_block_elems", [1, 100, 5000, 1 << 24])
@pytest.mark.parametrize("k", [1, 7, 64, 500])
def test_heavy_ties_match_the_full_canonical_sort(max_block_elems, k):
    x, ids, q = _quantised(400, 5, seed=k)
    index = ExactIndex(max_block_elems=max_block_elems).build(x, ids)
    res = index.search(q, k)
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, k))
    rng = np.random.default_rng(k)
    exclude = [rng.choice(ids, int(rng.integers(0, 380)), replace=False) for _ in range(len(q))]
    res = index.search(q, k, exclude=exclude)
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, k, exclude))  # k > what is left: padded
    for r, row in enumerate(res.ids):
        hits = row[row != -1]
        assert np.unique(hits).size == hits.size
        assert not np.isin(hits, exclude[r]).any()


def test_scores_on_a_float32_rounding_midpoint_are_ranked_by_their_canonical_float32():
    # 1 + m * 2**-24 is exact in float64 and, for odd m, halfway between two float32 values: it rounds to even, so
    # m = 1 ties with m = 0 and m = 3 with m = 4. A float64 GEMM cannot tell which side such a score rounds to
    # (its last bit may differ from the canonical sum's), so those rows are re-scored the canonical way.
    rng = np.random.default_rng(7)
    m = rng.integers(0, 6, 900)
    x = np.stack([np.ones(900), m * 2.0**-24, np.zeros(900)], axis=1).astype(np.float32)
    ids = (rng.permutation(900) * 5).astype(np.int64)
    q = np.array([[1, 1, 0], [1, 1, 1], [-1, -1, 0.5]], dtype=np.float32)
    for max_block_elems in (64, 1 << 24):
        res = ExactIndex(max_block_elems=max_block_elems).build(x, ids).search(q, 200)
        np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, 200))


@pytest.mark.parametrize("max_block_elems", [64, 1 << 24])
def test_an_all_tie_query_is_answered_without_rescoring_the_catalogue(monkeypatch, max_block_elems):
    # a zero query ties every item at score 0: the cut's scan re-scored all 5,000 items pair by pair (a 1e-30 floor
    # on the float64 error bound put each exact 0 across a float32 rounding boundary); 40,000 x 128: 70-100 ms
    # against 1 ms. The answer stays the reference's: the k smallest ids, every score 0
    import twotower.index.exact as exact_mod

    rng = np.random.default_rng(3)
    x = rng.standard_normal((5000, 16)).astype(np.float32)
    ids = rng.permutation(20000)[:5000].astype(np.int64)
    q = rng.standard_normal((4, 16)).astype(np.float32)
    q[[0, 2]] = 0  # zero rows between non-zero ones: each row keeps its own answer
    rescored = []
    real = exact_mod.canonical_scores

    def spy(queries, vectors, rows):
        rescored.append(rows.size)
        return real(queries, vectors, rows)

    monkeypatch.setattr(exact_mod, "canonical_scores", spy)
    index = ExactIndex(max_block_elems=max_block_elems).build(x, ids)
    res = index.search(q[[0]], 10)
    assert sum(rescored) <= 10 + exact_mod._MARGIN, sum(rescored)  # the fetched candidates only
    res = index.search(q, 10)
    np.testing.assert_array_equal(res.ids, canonical_top(x, ids, q, 10))
    assert (res.scores[[0, 2]] == 0).all()
    exclude = [np.sort(ids)[:7]] * 4  # the smallest tied ids excluded: the next ones come up
    np.testing.assert_array_equal(index.search(q, 10, exclude=exclude).ids, canonical_top(x, ids, q, 10, exclude))
    zeros = ExactIndex(max_block_elems=max_block_elems).build(np.zeros_like(x), ids)  # a zero catalogue ties too
    np.testing.assert_array_equal(zeros.search(q, 10).ids, canonical_top(np.zeros_like(x), ids, q, 10))


def test_canonical_scores_in_blocks_are_the_one_pass_scores():
    """canonical_scores gathers in blocks of queries (one [Q, F, D] float64 gather of a 256-request batch was 134 MB
    of first-touched memory, 0.65 s of the first POST /recommend/batch); each score is the same float either way."""
    from twotower.index.exact import canonical_scores
    from twotower.results import PAD_ID

    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((5000, 64)).astype(np.float32)
    queries = rng.standard_normal((300, 64)).astype(np.float32)
    rows = rng.integers(0, 5000, (300, 700))
    rows[::7, -3:] = PAD_ID
    gathered = vectors[np.maximum(rows, 0)].astype(np.float64)
    one_pass = (gathered * queries.astype(np.float64)[:, None, :]).sum(axis=2).astype(np.float32)
    want = np.where(rows == PAD_ID, np.float32(-np.inf), one_pass)
    assert np.array_equal(canonical_scores(queries, vectors, rows), want)
