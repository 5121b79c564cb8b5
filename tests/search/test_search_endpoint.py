"""POST /search on the real app over a tiny saved search index (zero-shot MiniLM + BM25)."""
from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient
from search_data import write_beir

from twotower.search import SearchIndex
from twotower.search.beir import load_corpus
from twotower.serving import ServiceSettings, create_app

from tests.extras import needs_text

pytestmark = needs_text


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("search")
    beir = write_beir(root / "beir")
    index = SearchIndex.build(load_corpus(beir / "corpus.jsonl"))
    index.save(root / "index")
    app = create_app(search_index_dir=root / "index", settings=ServiceSettings(max_k=20))
    with TestClient(app) as c:
        yield c


def test_search_hybrid_finds_the_relevant_document(client):
    r = client.post("/search", json={"query": "coffee and liver cancer", "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["mode"] == "hybrid" and not body["reranked"]
    assert body["items"][0]["doc_id"] == "d4"
    assert [h["rank"] for h in body["items"]] == [1, 2, 3]
    assert {"doc_id", "score", "title", "text"} <= set(body["items"][0])


@pytest.mark.parametrize("mode", ["bm25", "dense"])
def test_each_retriever_alone(client, mode):
    r = client.post("/search", json={"query": "vitamin D fractures", "k": 2, "mode": mode})
    assert r.status_code == 200 and r.json()["items"][0]["doc_id"] == "d2"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"query": "", "k": 3}, "query"),
        ({"query": "x" * 2001, "k": 3}, "query"),
        ({"query": "sleep", "k": 21}, "k"),
        ({"query": "sleep", "k": 0}, "k"),
        ({"query": "sleep", "mode": "sparse"}, "mode"),
        ({"k": 3}, "query"),
    ],
)
def test_bad_requests_name_the_field(client, body, field):
    r = client.post("/search", json=body)
    assert r.status_code == 422
    assert field in r.text


def test_limits_inclusive_and_rerank_without_model(client):
    assert client.post("/search", json={"query": "sleep", "k": 20}).status_code == 200
    r = client.post("/search", json={"query": "sleep", "rerank": True})
    assert r.status_code == 422 and "cross-encoder" in r.text


def test_search_only_service_has_health_and_no_recommender_routes(client):
    assert client.get("/healthz").json() == {"status": "ok", "pid": os.getpid()}
    paths = client.get("/openapi.json").json()["paths"]
    assert "/search" in paths and "/recommend" not in paths


def test_search_index_cli_stores_the_chosen_fusion(tmp_path, capsys):
    import json

    from twotower.cli.main import main

    beir = write_beir(tmp_path / "beir")
    out = tmp_path / "idx"
    assert main(["-q", "search", "index", "--beir", str(beir), "--out", str(out), "--fusion", "minmax",
                 "--bm25-weight", "0.7", "--cache", str(tmp_path / "cache")]) == 0
    fusion = json.loads((out / "meta.json").read_text())["fusion"]
    assert fusion["name"] == "interpolation" and fusion["params"]["normalization"] == "minmax"
    assert fusion["params"]["weights"][0] == pytest.approx(0.7)
    # and the corpus it was built from (meta.json said which model and fusion, not which data)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["source"] == {"beir": str(beir.resolve())} and meta["documents"] == 5
    assert SearchIndex.load(out).source == meta["source"]
    assert main(["-q", "search", "index", "--beir", str(beir), "--out", str(out), "--fusion", "zscore",
                 "--bm25-weight", "2"]) == 2
    assert "--bm25-weight" in capsys.readouterr().err


def test_search_index_files_are_verified_like_every_other_artefact(tmp_path):
    from twotower.errors import IntegrityError
    from twotower.serving.search_service import SearchService

    beir = write_beir(tmp_path / "beir")
    SearchIndex.build(load_corpus(beir / "corpus.jsonl")).save(tmp_path / "idx")
    service = SearchService.load(tmp_path / "idx")
    assert service.reranker is None and service.index_dir == tmp_path / "idx"
    assert service.search("vitamin", 3, "bm25", False, 20)["items"]
    docs = tmp_path / "idx" / "docs.json"
    docs.write_text(docs.read_text().replace('"ids"', '"ids" ', 1))  # one byte more: not the saved file
    with pytest.raises(IntegrityError, match=r"docs\.json: sha256 mismatch.*twotower search index"):
        SearchService.load(tmp_path / "idx")
    bm25_file = next(p for p in sorted((tmp_path / "idx" / "bm25").rglob("*")) if p.is_file())
    bm25_file.unlink()
    with pytest.raises(IntegrityError, match="missing"):
        SearchIndex.load(tmp_path / "idx")


def test_create_app_passes_the_rerank_backend_to_the_search_service(tmp_path, monkeypatch):
    """``create_app(rerank_settings=...)`` reaches the reranker, as ``serve --rerank-backend`` does: the Python
    API had no way to choose the cross-encoder's forward pass."""
    from twotower.serving.search_service import SearchService
    from twotower.text.encoder import RerankSettings

    seen: dict = {}

    def fake_load(cls, index_dir, rerank_dir=None, *, rerank_settings=None):
        seen.update(index_dir=index_dir, rerank_dir=rerank_dir, settings=rerank_settings)
        return SearchService(index=None, reranker=None, index_dir=tmp_path)

    monkeypatch.setattr(SearchService, "load", classmethod(fake_load))
    wanted = RerankSettings(backend="torch-bf16")
    app = create_app(search_index_dir=tmp_path / "index", rerank_dir=tmp_path / "ce", rerank_settings=wanted)
    with TestClient(app):
        pass
    assert seen == {"index_dir": tmp_path / "index", "rerank_dir": tmp_path / "ce", "settings": wanted}


def test_a_key_sent_twice_is_refused(client):
    """{"query": "a", "query": "b"} was answered for "b" without a word (Python's JSON reader keeps the last)."""
    r = client.post("/search", content=b'{"query": "vitamin D", "k": 2, "query": "coffee"}',
                    headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert "key 'query' twice in one object" in r.json()["error"]["message"]
