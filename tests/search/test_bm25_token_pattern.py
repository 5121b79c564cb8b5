"""BM25 indexes one-letter words and single digits ("vitamin D", "type 2 diabetes"), on every path that builds or
queries it; an index saved before the pattern was recorded is still searched with the pattern it was built with.

Before: bm25s' default pattern ``\\w\\w+`` dropped them, so "vitamin D" searched "vitamin" alone and ranked "Fat-soluble
vitamins A and E" above the vitamin D abstract (SciFact test NDCG@10 0.6791; with one-letter words 0.6857).
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.extras import needs_text
from tests.search.search_data import VITAMIN_DOCS, VITAMIN_IDS, write_beir
from twotower.errors import ConfigError
from twotower.search.bm25 import LEGACY_TOKEN_PATTERN, BM25Config, BM25Retriever

pytestmark = needs_text

DOCS, IDS = VITAMIN_DOCS, VITAMIN_IDS

#: written by BM25Retriever(...).fit(DOCS, IDS).save() of the code before token_pattern (commit 6a79d81)
OLD_INDEX = Path(__file__).resolve().parent / "bm25_index_v1"


def _top(retriever, query, k=5):
    res = retriever.search([query], k)
    return [retriever.doc_ids[i] for i in res.ids[0] if i >= 0], [float(s) for s in res.scores[0] if s > -1e30]


def test_a_one_letter_word_and_a_digit_are_searched():
    r = BM25Retriever().fit(DOCS, IDS)
    assert _top(r, "vitamin D")[0] == ["d", "ae"]  # was ["ae", "d"]: "D" was not a word
    ids, scores = _top(r, "type 2 diabetes")
    assert ids == ["t2", "t1"] and scores[0] > scores[1]  # was a tie: "2" was not a word
    # "a" is an English stop word (as in Lucene's list), so "vitamin A" is still "vitamin" alone; "en_plus" adds "d"
    assert BM25Config().stopwords == "en"
    assert _top(BM25Retriever(BM25Config(stopwords="en_plus")).fit(DOCS, IDS), "vitamin D")[0] == ["ae", "d"]


def test_the_pattern_is_checked_when_the_config_is_built():
    for bad, why in (("(?u)\\b\\w+", None), ("[a-", "not a valid regular expression"),
                     ("(\\w+)", "capturing group"), ("\\w*", "empty string"), ("\\b\\w*\\b", "empty string")):
        if why is None:
            BM25Config(token_pattern=bad)  # a valid one
            continue
        with pytest.raises(ConfigError, match=why):
            BM25Config(token_pattern=bad)
    with pytest.raises(ConfigError, match="token_pattern"):
        BM25Config(token_pattern=3)


def test_an_index_saved_before_the_pattern_was_recorded_keeps_its_scores(caplog):
    assert "token_pattern" not in json.loads((OLD_INDEX / "meta.json").read_text())["config"]
    with caplog.at_level(logging.WARNING, logger="twotower.search.bm25"):
        old = BM25Retriever.load(OLD_INDEX)
    assert "rebuild it" in caplog.text
    assert old.config.token_pattern == LEGACY_TOKEN_PATTERN
    # the scores that code gave, to float32 precision
    ids, scores = _top(old, "vitamin D")
    assert ids == ["ae", "d"] and scores == pytest.approx([0.48637152, 0.39200091], rel=1e-6)
    ids, scores = _top(old, "type 2 diabetes")
    assert ids == ["t1", "t2"] and scores == pytest.approx([0.89030719, 0.89030719], rel=1e-6)


def test_a_saved_index_records_its_pattern_and_is_queried_with_it(tmp_path, caplog):
    BM25Retriever().fit(DOCS, IDS).save(tmp_path / "new")
    assert json.loads((tmp_path / "new" / "meta.json").read_text())["config"]["token_pattern"] == \
        BM25Config.token_pattern
    legacy = BM25Config(token_pattern=LEGACY_TOKEN_PATTERN)
    BM25Retriever(legacy).fit(DOCS, IDS).save(tmp_path / "legacy")
    caplog.clear()  # the fits' own lines: bm25s logs at DEBUG where the process's levels let it (a suite's earlier test)
    with caplog.at_level(logging.WARNING, logger="twotower.search.bm25"):
        new, old = BM25Retriever.load(tmp_path / "new"), BM25Retriever.load(tmp_path / "legacy")
    assert caplog.text == ""  # a recorded pattern, whichever it is, is no old index
    assert asdict(old.config) == asdict(legacy) and _top(old, "vitamin D")[0] == ["ae", "d"]
    assert _top(new, "vitamin D") == _top(BM25Retriever().fit(DOCS, IDS), "vitamin D")


def test_cli_http_and_python_give_the_same_bm25_hits(tmp_path, capsys):
    from fastapi.testclient import TestClient

    from twotower.cli.main import main
    from twotower.search import SearchIndex
    from twotower.serving import ServiceSettings, create_app

    beir = write_beir(tmp_path / "beir", docs=[{"_id": i, "title": "", "text": t} for i, t in zip(IDS, DOCS)])
    assert main(["search", "index", "--beir", str(beir), "--out", str(tmp_path / "index"), "--max-length", "32",
                 "--threads", "1"]) == 0
    capsys.readouterr()
    assert main(["search", "query", "--index", str(tmp_path / "index"), "--mode", "bm25", "--json", "--k", "3",
                 "vitamin D"]) == 0
    cli = [(h["doc_id"], h["score"]) for h in json.loads(capsys.readouterr().out)["items"]]
    with TestClient(create_app(search_index_dir=tmp_path / "index", settings=ServiceSettings(max_k=20))) as c:
        http = c.post("/search", json={"query": "vitamin D", "k": 3, "mode": "bm25"})
    assert http.status_code == 200, http.text
    assert [(h["doc_id"], h["score"]) for h in http.json()["items"]] == cli
    index = SearchIndex.load(tmp_path / "index")
    hits = index.hits(index.search(["vitamin D"], 3, mode="bm25"), 0)
    assert [h.doc_id for h in hits] == [d for d, _ in cli] == ["d", "ae"]
    # the Python API's retriever built with its defaults ranks as the saved index does
    ids, scores = _top(BM25Retriever().fit(DOCS, IDS), "vitamin D", 3)
    assert ids == [d for d, _ in cli] and [round(s, 6) for s in scores] == [s for _, s in cli]
