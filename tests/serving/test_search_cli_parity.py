"""``twotower search query --json`` prints POST /search's answer, field for field, because both build it with
:meth:`twotower.serving.search_service.SearchService.search`.

Before: the CLI assembled its own copy and printed unrounded scores (1.9275052547454834 where /search answered
1.927505), so the two disagreed on every hit.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.extras import needs_text
from tests.search.search_data import write_beir
from twotower.cli.main import main
from twotower.serving import ServiceSettings, create_app

pytestmark = needs_text

#: a query past the 64 word pieces the dense query tower reads (query_cut), a BM25 miss (shortfall), plain ones
LONG = " ".join(["coffee intake and liver cancer risk in adults"] * 12)
CASES = [
    ("bm25", "coffee and liver cancer"), ("bm25", "sleep"), ("bm25", "the of and"),
    ("dense", "vitamin D fractures"), ("dense", LONG),
    ("hybrid", "coffee and liver cancer"), ("hybrid", "aspirin prevents heart attack"), ("hybrid", LONG),
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    from twotower.search import SearchIndex
    from twotower.search.beir import load_corpus

    root = tmp_path_factory.mktemp("parity")
    SearchIndex.build(load_corpus(write_beir(root / "beir") / "corpus.jsonl"), max_length=32).save(root / "index")
    return root / "index"


@pytest.fixture(scope="module")
def client(index_dir):
    with TestClient(create_app(search_index_dir=index_dir, settings=ServiceSettings(max_k=20))) as c:
        yield c


def _cli_json(capsys, index_dir, *argv: str):
    assert main(["search", "query", "--index", str(index_dir), "--json", *argv]) == 0
    got = json.loads(capsys.readouterr().out)
    for block in got if isinstance(got, list) else [got]:
        assert block.pop("hits") == block["items"]  # the list's older name (README), the same list
    return got


@pytest.mark.parametrize("mode, query", CASES)
def test_cli_json_equals_post_search(client, index_dir, capsys, mode, query):
    http = client.post("/search", json={"query": query, "k": 3, "mode": mode})
    assert http.status_code == 200, http.text
    assert _cli_json(capsys, index_dir, "--mode", mode, "--k", "3", query) == http.json()


def test_the_checked_cases_carry_the_optional_fields(client):
    """The cases above reach a shortfall and a query_cut, so those fields are compared too, not only the hits."""
    answers = [client.post("/search", json={"query": q, "k": 3, "mode": m}).json() for m, q in CASES]
    assert any("shortfall" in a for a in answers) and any("query_cut" in a for a in answers)
    assert any(a["items"] and a["items"][0]["score"] != round(a["items"][0]["score"], 4) for a in answers)


def test_several_queries_and_the_text_output_rank_as_post_search(client, index_dir, capsys):
    queries = ["coffee and liver cancer", "vitamin D fractures", "sleep"]
    http = [client.post("/search", json={"query": q, "k": 4}).json() for q in queries]
    assert _cli_json(capsys, index_dir, "--k", "4", *queries) == http
    assert main(["search", "query", "--index", str(index_dir), "--k", "4", *queries]) == 0
    lines = capsys.readouterr().out.splitlines()
    want = []
    for answer in http:
        want.append(f"query: {answer['query']}")
        want += [f"  {h['rank']:2d}. {h['doc_id']:>10}  {h['score']:10.6f}  {h['title'][:90]}" for h in answer["items"]]
    assert lines == want


def test_a_reranked_answer_is_the_same_too(index_dir, tmp_path, monkeypatch, capsys):
    """rerank_top < k: the hits past it carry "reranked": false, and the backend is named, in both answers."""
    from twotower.search import rerank as rerank_module
    from twotower.search.rerank import CrossEncoderReranker

    class Double:  # a deterministic cross-encoder with scores of many decimals
        def predict(self, pairs, **kwargs):
            return np.asarray([len(d) / (len(q) + 7.0) for q, d in pairs], dtype=np.float32)

    monkeypatch.setattr(rerank_module, "CrossEncoderReranker",
                        lambda path, **kw: CrossEncoderReranker.from_model(Double(), **kw))
    ce = tmp_path / "ce"
    ce.mkdir()
    (ce / "twotower_cross_encoder.json").write_text(json.dumps({"kind": "cross_encoder"}))
    body = {"query": "coffee and liver cancer", "k": 4, "rerank": True, "rerank_top": 2}
    with TestClient(create_app(search_index_dir=index_dir, rerank_dir=ce,
                               settings=ServiceSettings(max_k=20))) as c:
        http = c.post("/search", json=body)
    assert http.status_code == 200, http.text
    got = _cli_json(capsys, index_dir, "--rerank", str(ce), "--k", "4", "--rerank-top", "2", body["query"])
    assert got == http.json()
    assert got["rerank_backend"] == "torch" and [h.get("reranked") for h in got["items"]] == [None, None, False, False]
