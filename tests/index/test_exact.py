"""ExactIndex: the reference. Block-wise top-k must equal a full argsort, ties included."""
from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.index import ExactIndex

from index_data import brute_force
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


def test_all_zero_scores_return_smallest_ids():
    x = np.zeros((20, 4), np.float32)
    ids = np.arange(20)[::-1].astype(np.int64)
    res = ExactIndex(max_block_elems=8).build(x, ids).search(np.ones((1, 4), np.float32), 3)
    assert res.ids.tolist() == [[0, 1, 2]]


def test_config_and_empty_index():
    with pytest.raises(ConfigError, match="max_block_elems"):
        ExactIndex(max_block_elems=0)
    with pytest.raises(ConfigError, match="build"):
        ExactIndex().dim
    with pytest.raises(ConfigError, match="k must be"):
        ExactIndex().build(np.eye(3, dtype=np.float32), np.arange(3)).search(np.eye(3, dtype=np.float32), 0)
