"""autotune warns when its tuning queries are mostly repeats of a few vectors.

Walk: ML-100K with 1,500 more users whose one training interaction is item 50 (no user id embedding, the default:
one vector for all of them); `twotower index build --index ivf` sampled 1,000 tuning queries holding 376 distinct
vectors and reported recall@10 0.9962 as if measured on 1,000 users, without a word.
"""
from __future__ import annotations

import logging

import numpy as np
from index_data import clustered

from twotower.index import FaissIndex, IndexPolicy, autotune
from twotower.index.autotune import distinct_queries, tune_index

POLICY = IndexPolicy(target_recall=0.9, latency_queries=5)


def _data():
    x, _ = clustered(800, 16, 8, seed=3)
    ids = np.arange(800, dtype=np.int64)
    q, _ = clustered(200, 16, 8, seed=4)
    return x, ids, q


def test_repeated_tuning_queries_are_counted_and_named(caplog):
    x, ids, q = _data()
    repeated = np.concatenate([q[:30], np.repeat(q[30:31], 170, axis=0) * 2.0])  # a scaled copy is the same query
    repeated[-1] += 1e-6  # a near-duplicate too
    assert distinct_queries(repeated) == 31
    with caplog.at_level(logging.WARNING, logger="twotower.index.autotune"):
        autotune(x, ids, repeated, index="ivf", policy=POLICY)
    said = [r.getMessage() for r in caplog.records if "hold only" in r.getMessage()]
    assert said == [said[0]] and "the 200 tuning queries hold only 31 distinct vectors" in said[0]
    assert "rests on 31 queries, not 200" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="twotower.index.autotune"):  # an index built elsewhere (torchrun)
        tune_index(FaissIndex("ivf").build(x, ids), x, ids, repeated, policy=POLICY)
    assert any("only 31 distinct vectors" in r.getMessage() for r in caplog.records)


def test_varied_tuning_queries_draw_no_warning(caplog):
    x, ids, q = _data()
    assert distinct_queries(q) == 200
    with caplog.at_level(logging.WARNING, logger="twotower.index.autotune"):
        autotune(x, ids, q, index="ivf", policy=POLICY)
    assert not [r for r in caplog.records if "hold only" in r.getMessage()]


def test_the_report_records_how_many_distinct_queries_the_recall_rests_on():
    # tune.json said n_queries 200 alone, while the warning said the recall rested on 31 of them
    x, ids, q = _data()
    repeated = np.concatenate([q[:30], np.repeat(q[30:31], 170, axis=0)])
    for report in (autotune(x, ids, repeated, index="ivf", policy=POLICY),
                   tune_index(FaissIndex("ivf").build(x, ids), x, ids, repeated, policy=POLICY)):
        record = report.to_dict()
        assert (record["n_queries"], record["n_distinct_queries"]) == (200, 31)
    exact = autotune(x, ids, q, index="auto", policy=IndexPolicy(exact_p99_ms=1e6, latency_queries=5))
    assert exact.chosen.factory == "exact" and exact.to_dict()["n_distinct_queries"] == 200
