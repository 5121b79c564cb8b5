from __future__ import annotations

import numpy as np
import pytest

from twotower.errors import ConfigError
from twotower.results import Results
from twotower.search.negatives import MiningConfig, mine_hard_negatives


class TableRetriever:
    """Scores from a fixed [Q, N_docs] table; search = exact top-k of the row."""

    def __init__(self, table):
        self.table = np.asarray(table, dtype=np.float32)

    def search(self, queries, k):
        ids = np.tile(np.arange(self.table.shape[1]), (len(queries), 1))
        return Results.from_scores_and_ids(self.table[: len(queries)], ids, k)

    def score(self, queries, rows):
        return [self.table[q, np.asarray(r)] for q, r in enumerate(rows)]


def test_drops_positives_and_near_positive_candidates_and_reports():
    # query 0: positive doc 0 scores 10; doc 1 scores 9.8 (> 10 * 0.95 -> too close), docs 2,3,4 = 8,7,6
    # query 1: positive doc 4 scores 5; doc 0 = 9 (ranked above the positive -> too close), docs 1,2,3 = 4,3,2
    table = [[10, 9.8, 8, 7, 6], [9, 4, 3, 2, 5]]
    negs, rep = mine_hard_negatives(["a", "b"], [np.array([0]), np.array([4])], TableRetriever(table),
                                    MiningConfig(n=2, depth=5, relative_margin=0.05))
    assert negs[0].tolist() == [2, 3] and negs[1].tolist() == [1, 2]
    assert rep.candidates == 10 and rep.dropped_positive == 2 and rep.dropped_too_close == 2
    assert rep.kept == 4 and rep.unused == 2 and rep.queries_short == 0
    assert rep.positive_scores["max"] == 10 and rep.dropped_scores["min"] == 9.0
    assert "likely false negatives" in rep.summary()


def test_absolute_margin_skip_top_and_short_queries():
    table = [[10, 9.8, 8, 7, 6]]
    negs, rep = mine_hard_negatives(["a"], [np.array([0])], TableRetriever(table),
                                    MiningConfig(n=3, depth=5, skip_top=1, relative_margin=None, margin=2.5))
    # rank 1 (doc 0) skipped; 9.8 and 8 are within 2.5 of 10 -> dropped; 7 and 6 kept, one short of n=3
    assert negs[0].tolist() == [3, 4]
    assert rep.skipped_top == 1 and rep.dropped_too_close == 2 and rep.queries_short == 1
    # the hint names settings the reader can change: the Python API's fields, or the flags a command passes
    assert ("queries got fewer than requested (raise MiningConfig.depth or lower MiningConfig.relative_margin / "
            "MiningConfig.margin to fill them)") in rep.summary()
    assert "(raise --mining-depth or lower --mining-margin to fill them)" in rep.summary(
        {"depth": "--mining-depth", "relative_margin": "--mining-margin"})


def test_queries_short_of_negatives_are_warned_of_with_the_counts(caplog):
    """Said at INFO alone, hidden under -q: a warning now says how many queries got fewer than asked and why."""
    table = [[10, 9.8, 8, 7, 6], [9, 4, 3, 2, 5]]
    with caplog.at_level("WARNING"):
        _, rep = mine_hard_negatives(["a", "b"], [np.array([0]), np.array([4])], TableRetriever(table),
                                     MiningConfig(n=3, depth=3, relative_margin=0.05),
                                     names={"depth": "--mining-depth", "relative_margin": "--mining-margin"})
    assert rep.per_query == [1, 1]
    assert ("2 of the 2 queries got fewer hard negatives than the 3 asked (1.00 per query on average, fewest 1): the "
            "top 3 candidates of each query held 6 in all, 2 of them known positives and 2 too close to the positive "
            "(likely false negatives); raise --mining-depth or lower --mining-margin to fill them") in caplog.text


def test_queries_given_every_negative_asked_are_not_warned_of(caplog):
    table = [[10, 9.8, 8, 7, 6]]
    with caplog.at_level("WARNING"):
        mine_hard_negatives(["a"], [np.array([0])], TableRetriever(table), MiningConfig(n=2, depth=5))
    assert not caplog.records


def test_a_pool_that_gives_each_epoch_its_negatives_is_not_warned_of(caplog):
    # rerank train mines --negatives x --epochs (6) and draws --negatives (2) each epoch: 4 mined a query were
    # warned of as "fewer hard negatives than the 6 asked" though every epoch got its 2 (review 2)
    table = [[10, 9, 8, 7, 6]]
    with caplog.at_level("WARNING"):
        mine_hard_negatives(["a"], [np.array([0])], TableRetriever(table), MiningConfig(n=6, depth=5), needed=2)
    assert not caplog.records
    with caplog.at_level("WARNING"):
        mine_hard_negatives(["a"], [np.array([0])], TableRetriever(table), MiningConfig(n=6, depth=5), needed=5)
    assert "1 of the 1 queries got fewer hard negatives than the 5 each epoch draws (4.00 per query" in caplog.text


def test_config_validation():
    with pytest.raises(ConfigError, match=r"^MiningConfig\.skip_top: must be below MiningConfig\.depth \(3\)"):
        MiningConfig(depth=3, skip_top=3)
    with pytest.raises(ConfigError, match=r"^MiningConfig\.relative_margin: must be in \[0, 1\) or None, got 1\.5"):
        MiningConfig(relative_margin=1.5)
