"""pairs_from_qrels gives the pairs in the order search train / rerank train train on: the qrels file's."""

from __future__ import annotations

import argparse

from search_data import write_beir

from twotower.cli.search_cmd import _train_pairs
from twotower.search import load_beir, pairs_from_qrels

# query 3 first, its documents d2 then d1; query 1's first row judges d5 not relevant
QRELS = "query-id\tcorpus-id\tscore\n3\td2\t1\n3\td1\t1\n1\td5\t0\n2\td4\t1\n1\td3\t1\n"


def test_pairs_from_qrels_keeps_the_file_order_as_the_commands_do(tmp_path):
    beir = write_beir(tmp_path / "beir", qrels={"train": QRELS})
    data = load_beir(beir, "train")
    pairs = [(p.query, p.positive_id) for p in pairs_from_qrels(data.queries, data.qrels)]
    q = data.queries
    # sorted by id it was (q1, d3), (q2, d4), (q3, d1), (q3, d2): other batches than `search train` drew
    assert pairs == [(q["3"], "d2"), (q["3"], "d1"), (q["1"], "d3"), (q["2"], "d4")]
    _, qs, pos, _ = _train_pairs(argparse.Namespace(beir=str(beir), split="train"))
    assert list(zip(qs, [data.corpus.ids[r] for r in pos])) == pairs
