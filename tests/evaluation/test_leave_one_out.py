"""The leave-one-out protocol of bench/ml1m.py on a tiny SASRec-format file, with hand-computed HR and NDCG.

Sequences (file order = time order; item ids deliberately not in time order):

    u1: 1 2 3 4 5 | 6 7     train 1..5, valid 6, test 7
    u2: 1 2 3 | 4 5         train 1 2 3, valid 4, test 5
    u3: 1 2 | 6 3           train 1 2,   valid 6, test 3
    u4: 1 6 7 | 2 5         train 1 6 7, valid 2, test 5

Most popular in train: 1 (4 users), 2 (3), 3 (2), then 4 5 6 7 (1 each; ties go to the smaller item).
Validation ranks with the train items excluded; test with train + valid (the input history) excluded:

    valid ranks of the target: u1 6 -> 1, u2 4 -> 1, u3 6 -> 4 (3 4 5 6 ...), u4 2 -> 1
    test ranks of the target:  u1 7 -> 1, u2 5 -> 1, u3 3 -> 1, u4 5 -> 3 (3 4 5; 2 is now input)
"""
from __future__ import annotations

import math

import pytest

from twotower.config import DataConfig
from twotower.data import leave_last_n_out, read_interactions
from twotower.evaluation import EvalProtocol, Popularity, evaluate
from twotower.pipeline.histories import (
    HistoryBaselineScorer,
    exclude_histories,
    read_input_histories,
)
from twotower.pipeline.prepare import prepare
from twotower.pipeline.sources import load_sources

SEQS = {1: [1, 2, 3, 4, 5, 6, 7], 2: [1, 2, 3, 4, 5], 3: [1, 2, 6, 3], 4: [1, 6, 7, 2, 5]}


@pytest.fixture()
def loo(tmp_path):
    lines = [f"{u} {i}" for u, items in SEQS.items() for i in items]
    (tmp_path / "seq.txt").write_text("\n".join(lines) + "\n")
    split = leave_last_n_out(read_interactions(tmp_path / "seq.txt"), 1)
    paths = {}
    for name, part in zip(("train", "valid", "test"), split):
        paths[name] = tmp_path / f"{name}.csv"
        part.to_csv(paths[name], index=False)
    prep = prepare(load_sources(DataConfig(train=str(paths["train"]), valid=str(paths["valid"]), test=str(paths["test"]))))
    return paths, prep


def test_split_targets_follow_file_order(loo):
    paths, _ = loo
    valid = read_interactions(paths["valid"]).set_index("user_id")["item_id"].to_dict()
    test = read_interactions(paths["test"]).set_index("user_id")["item_id"].to_dict()
    assert valid == {"1": "6", "2": "4", "3": "6", "4": "2"}
    assert test == {"1": "7", "2": "5", "3": "3", "4": "5"}


def test_most_popular_hr_ndcg_by_hand(loo):
    paths, prep = loo
    train = prep.matrix("train")
    pop = Popularity().fit(train)
    protocol = EvalProtocol(ks=(2, 3, 5))
    valid = evaluate(pop, prep.matrix("valid"), train, protocol)
    # target ranks 1, 1, 4, 1
    assert valid["users_evaluated"] == 4
    assert valid["HitRate@2"] == pytest.approx(3 / 4)
    assert valid["HitRate@5"] == pytest.approx(1.0)
    assert valid["NDCG@3"] == pytest.approx(3 / 4)
    assert valid["NDCG@5"] == pytest.approx((3 + 1 / math.log2(5)) / 4)

    hist = read_input_histories(prep, [paths["train"], paths["valid"]])
    test = evaluate(HistoryBaselineScorer(pop, hist), prep.matrix("test"), exclude_histories(None, hist), protocol)
    # target ranks 1, 1, 1, 3
    assert test["HitRate@2"] == pytest.approx(3 / 4)
    assert test["HitRate@3"] == pytest.approx(1.0)
    assert test["NDCG@2"] == pytest.approx(3 / 4)
    assert test["NDCG@3"] == pytest.approx((3 + 1 / math.log2(4)) / 4)
    assert test["Recall@3"] == test["HitRate@3"]  # one relevant item per user

    # without the valid item excluded, u4's input item 2 would be recommended first and push 5 to rank 4
    leaky = evaluate(pop, prep.matrix("test"), train, protocol)
    assert leaky["HitRate@3"] == pytest.approx(3 / 4)
