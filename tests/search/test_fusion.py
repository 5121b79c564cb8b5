from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.results import PAD_ID, Results
from twotower.search.fusion import FusionChoice, fuse_with_head, rrf, score_interpolation, tune_fusion


def R(ids, scores):
    return Results(np.asarray(ids, dtype=np.int64), np.asarray(scores, dtype=np.float32))


A = R([[1, 2, 3]], [[9.0, 5.0, 1.0]])
B = R([[3, 4, PAD_ID]], [[0.9, 0.8, -np.inf]])


def test_rrf_by_hand():
    out = rrf([A, B], k=60)
    # doc 3: 1/(60+3) + 1/(60+1) = 0.015873 + 0.016393 = 0.032266
    # doc 1: 1/61 = 0.016393 ; doc 2: 1/62 = 0.016129 ; doc 4: 1/62 = 0.016129 (tie -> smaller id first)
    assert out.ids[0].tolist() == [3, 1, 2]
    np.testing.assert_allclose(out.scores[0], [1 / 63 + 1 / 61, 1 / 61, 1 / 62], rtol=1e-6)
    assert rrf([A, B], k=60, top_k=5).ids[0].tolist() == [3, 1, 2, 4, PAD_ID]


def test_minmax_interpolation_by_hand():
    out = score_interpolation([A, B], [0.5, 0.5], "minmax", top_k=4)
    # A minmax: 1 -> 1.0, 2 -> 0.5, 3 -> 0.0 ; B minmax: 3 -> 1.0, 4 -> 0.0 ; missing -> 0
    # 1: 0.5*1 = 0.5 ; 2: 0.25 ; 3: 0.5*0 + 0.5*1 = 0.5 ; 4: 0
    # 1 and 3 tie but for the missing tie-break (1 is missing from B: 1e-9 below): the document both lists hold first
    assert out.ids[0].tolist() == [3, 1, 2, 4]
    np.testing.assert_allclose(out.scores[0], [0.5, 0.5, 0.25, 0.0], atol=1e-6)


def test_weight_one_reproduces_a_single_list_order():
    out = score_interpolation([A, B], [1.0, 0.0], "zscore")
    assert out.ids[0, :3].tolist() == [1, 2, 3]


@pytest.mark.parametrize("normalization", ["minmax", "zscore"])
def test_a_lists_last_hit_ranks_above_the_documents_it_did_not_retrieve(normalization):
    # --bm25-weight 1: BM25's last match (doc 7, normalised to its row minimum) tied every document BM25 did not
    # retrieve, and the tie went to the smaller corpus row (doc 2, sharing no query word)
    lexical = R([[5, 6, 7]], [[9.0, 5.0, 1.0]])
    dense = R([[2, 7, 5]], [[0.9, 0.8, 0.7]])
    out = score_interpolation([lexical, dense], [1.0, 0.0], normalization, top_k=4)
    assert out.ids[0].tolist() == [5, 6, 7, 2]
    weighted = score_interpolation([lexical, dense], [0.7, 0.3], normalization, top_k=4)  # the shown scores: as before
    if normalization == "minmax":  # doc 2: dense's best (1) and lexical's floor (0)
        want = 0.3 * 1.0 + 0.7 * 0.0
    else:  # dense's z of 0.9 and lexical's lowest z
        want = 0.3 * (0.9 - 0.8) / np.std([0.9, 0.8, 0.7]) + 0.7 * (1.0 - 5.0) / np.std([9.0, 5.0, 1.0])
    np.testing.assert_allclose(weighted.scores[0][weighted.ids[0] == 2], want, atol=1e-6)


def test_unknown_normalization_lists_choices():
    with pytest.raises(ConfigError, match="minmax"):
        score_interpolation([A, B], [0.5, 0.5], "l2")
    with pytest.raises(ConfigError, match="rrf"):
        FusionChoice(name="borda")


def test_tune_fusion_prefers_the_list_that_ranks_the_relevant_doc_first():
    good = R([[5, 1, 2], [6, 1, 2]], [[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]])
    bad = R([[1, 2, 5], [1, 2, 6]], [[3.0, 2.0, 1.0], [3.0, 2.0, 1.0]])
    rel = [np.array([5]), np.array([6])]
    choice = tune_fusion([bad, good], rel)
    fused = choice.apply([bad, good], top_k=3)
    assert fused.ids[:, 0].tolist() == [5, 6]
    assert choice.valid_ndcg10 == pytest.approx(1.0)


def test_minmax_a_single_lexical_hit_keeps_its_weight():
    """BM25 matching one document (a rare word) min-max-normalises to a constant row of 1, and documents missing from
    it were credited that row minimum, 1, too: BM25's 0.7 went to every dense hit and the sole lexical match ranked
    3rd of 4 (with a second, weaker BM25 hit it ranked 1st). Missing documents get the min-max floor, 0."""
    bm25 = R([[7, PAD_ID, PAD_ID, PAD_ID]], [[5.0, -np.inf, -np.inf, -np.inf]])
    dense = R([[1, 2, 7, 3]], [[0.9, 0.8, 0.7, 0.1]])
    out = score_interpolation([bm25, dense], [0.7, 0.3], "minmax", top_k=4)
    # dense minmax: 1 -> 1.0, 2 -> 0.875, 7 -> 0.75, 3 -> 0.0 ; 7: 0.7*1 + 0.3*0.75 = 0.925 ; 1: 0.3 ; 2: 0.2625
    assert out.ids[0].tolist() == [7, 1, 2, 3]
    np.testing.assert_allclose(out.scores[0], [0.925, 0.3, 0.2625, 0.0], atol=1e-6)
    tied = R([[7, 9, PAD_ID, PAD_ID]], [[5.0, 5.0, -np.inf, -np.inf]])  # tied hits: the same constant row
    assert score_interpolation([tied, dense], [0.7, 0.3], "minmax", top_k=2).ids[0].tolist() == [7, 9]


def test_zscore_a_list_without_spread_keeps_its_vote():
    """One BM25 hit (or tied hits) has std 0: its z is 0, and documents missing from it were credited 0 as well, so
    the lone lexical match lost BM25's whole weight and ranked by dense alone (3rd here). Now missing documents get
    ZSCORE_FLAT_MISSING (-1): never NaN, never dropped, and the match keeps its vote."""
    from twotower.search.fusion import ZSCORE_FLAT_MISSING

    bm25 = R([[7, PAD_ID, PAD_ID, PAD_ID]], [[5.0, -np.inf, -np.inf, -np.inf]])
    dense = R([[1, 2, 7, 3]], [[0.9, 0.8, 0.7, 0.1]])
    out = score_interpolation([bm25, dense], [0.5, 0.5], "zscore", top_k=4)
    assert np.all(np.isfinite(out.scores[0]))
    assert out.ids[0, 0] == 7 and sorted(out.ids[0].tolist()) == [1, 2, 3, 7]
    z = (np.array([0.9, 0.8, 0.7, 0.1]) - 0.625) / np.std([0.9, 0.8, 0.7, 0.1])
    expected = {1: 0.5 * (ZSCORE_FLAT_MISSING + z[0]), 2: 0.5 * (ZSCORE_FLAT_MISSING + z[1]), 7: 0.5 * z[2],
                3: 0.5 * (ZSCORE_FLAT_MISSING + z[3])}
    np.testing.assert_allclose(out.scores[0], [expected[int(i)] for i in out.ids[0]], atol=1e-6)
    tied = R([[7, 9, PAD_ID, PAD_ID]], [[5.0, 5.0, -np.inf, -np.inf]])
    tied_out = score_interpolation([tied, dense], [0.5, 0.5], "zscore", top_k=5)
    assert tied_out.ids[0, 0] == 7 and 9 in tied_out.ids[0] and np.all(np.isfinite(tied_out.scores[0]))
    # both lists flat: every score finite, hits of both lists kept
    flat = score_interpolation([bm25, R([[3]], [[0.4]])], [0.5, 0.5], "zscore", top_k=3)
    assert flat.ids[0].tolist() == [3, 7, PAD_ID] and np.all(np.isfinite(flat.scores[0, :2]))


def test_zscore_a_non_finite_score_gives_no_nan():
    row = np.array([1.0, np.inf, 2.0])
    from twotower.search.fusion import zscore

    assert not np.any(np.isnan(zscore(row)))


def test_rrf_ties_and_k_bounds():
    """Rank 1 in one list each: a tie, broken by the smaller corpus row; k = 0 is allowed (1/rank), k < 0 refused."""
    one = R([[8]], [[1.0]])
    other = R([[4]], [[1.0]])
    assert rrf([one, other], k=60, top_k=2).ids[0].tolist() == [4, 8]
    np.testing.assert_allclose(rrf([A, B], k=0, top_k=1).scores[0], [1 / 3 + 1 / 1])
    with pytest.raises(ConfigError, match=r"in \[0, "):
        rrf([A, B], k=-1)


class _Ranked:
    """A retriever stub: every query gets the first ``k`` of one fixed ranked list of corpus rows."""

    def __init__(self, rows: np.ndarray, scores: np.ndarray) -> None:
        self.rows, self.scores = rows, scores

    def search(self, queries, k):
        return R([self.rows[:k]] * len(queries), [self.scores[:k]] * len(queries))


@pytest.mark.parametrize("fusion", [{"name": "rrf", "params": {"k": 60}},
                                    {"name": "interpolation", "params": {"weights": [0.7, 0.3], "normalization": "minmax"}},
                                    {"name": "interpolation", "params": {"weights": [0.5, 0.5], "normalization": "zscore"}}])
def test_a_longer_hybrid_list_keeps_the_shorter_ones_head(fusion):
    """A hybrid search for k=250 fused the lists at depth 250 and answered another top 10 than k=10 (fused at the
    100 `search evaluate` measures): min-max moved each list's floor, RRF added the deep ranks' votes (SciFact: 88 of
    104 test queries with min-max 0.7/0.3). The head is now fused at that depth whatever k; the rest follows."""
    from twotower.config import SearchConfig
    from twotower.search.beir import Corpus
    from twotower.search.pipeline import SearchIndex

    n = 300
    rng = np.random.default_rng(0)
    ids = [str(i) for i in range(n)]
    corpus = Corpus(ids, [""] * n, ["text"] * n, {d: i for i, d in enumerate(ids)})
    lexical = _Ranked(np.arange(n), np.sort(rng.gamma(2.0, 3.0, n))[::-1].astype(np.float32))
    dense = _Ranked(rng.permutation(n), np.sort(rng.uniform(0.1, 0.9, n))[::-1].astype(np.float32))
    index = SearchIndex(corpus, lexical, dense, model=None, fusion=fusion)
    short = index.search(["q"], 10)
    long = index.search(["q"], 250)
    assert long.ids[0, :10].tolist() == short.ids[0].tolist()
    np.testing.assert_array_equal(long.scores[0, :10], short.scores[0])
    assert len(set(long.ids[0].tolist())) == 250 and PAD_ID not in long.ids[0]  # a full list, no document twice
    assert (np.diff(long.scores[0]) <= 0).all()  # past the heads' documents: the floor, never above the head
    head = fuse_with_head(FusionChoice(**fusion), [lexical.search(["q"], 250), dense.search(["q"], 250)], top_k=250)
    np.testing.assert_array_equal(head.ids, long.ids)
    assert SearchConfig.depth == 100  # the depth the head is fused at (what `search evaluate` measures)
