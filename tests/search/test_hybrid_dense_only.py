"""A hybrid search whose query BM25 matches nowhere (Chinese on an English corpus: BM25 splits words at spaces) was
the dense retriever's list alone, passed off as a fusion without a word. Now the answer says so, one way for the
Python API (SearchIndex.dense_only), POST /search (the `dense_only` field) and `search query` (a note, and the same
field in --json), as a short list's `shortfall` is said."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from search_data import write_beir

from tests.extras import needs_text
from twotower.cli.main import main
from twotower.search import SearchIndex
from twotower.search.beir import load_corpus
from twotower.serving import ServiceSettings, create_app

pytestmark = needs_text

CHINESE = "维生素D预防骨折"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("dense-only")
    beir = write_beir(root / "beir")
    SearchIndex.build(load_corpus(beir / "corpus.jsonl"), max_length=32).save(root / "index")
    return root / "index"


def test_the_python_api_says_which_hybrid_lists_are_dense_only(index_dir):
    index = SearchIndex.load(index_dir)
    notes = index.dense_only([CHINESE, "vitamin D fractures"])
    assert notes[1] is None
    assert notes[0]["reason"].startswith("BM25 matched no document") and "dense retriever's alone" in notes[0]["reason"]
    # the other modes fuse nothing: nothing to say
    assert index.dense_only([CHINESE], "dense") == index.dense_only([CHINESE], "bm25") == [None]


def test_post_search_and_search_query_carry_the_same_note(index_dir, capsys):
    app = create_app(search_index_dir=index_dir, settings=ServiceSettings(max_k=20))
    with TestClient(app) as client:
        body = client.post("/search", json={"query": CHINESE, "k": 3}).json()
        english = client.post("/search", json={"query": "vitamin D fractures", "k": 3}).json()
        dense = client.post("/search", json={"query": CHINESE, "k": 3, "mode": "dense"}).json()
    assert len(body["items"]) == 3 and "shortfall" not in body  # a full list: only the note says what it is
    assert body["dense_only"] == SearchIndex.load(index_dir).dense_only([CHINESE])[0]
    assert "dense_only" not in english and "dense_only" not in dense
    assert main(["search", "query", "--index", str(index_dir), "--k", "3", "--json", CHINESE]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["dense_only"] == body["dense_only"]
    assert f"note: query: {body['dense_only']['reason']}" in cap.err
    assert main(["search", "query", "--index", str(index_dir), "--k", "3", "vitamin D fractures"]) == 0
    assert "note:" not in capsys.readouterr().err
