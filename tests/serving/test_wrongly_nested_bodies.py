"""A body nested wrongly (an object or an array where a string, a number or one of a few words is expected, a field
wrapped under another name) is refused naming the field's path, what it takes and what was sent, in the service's
error shape (``{"error": {"message": "body.query: ...", "details": [...]}}``).

Most fields had their own words; the rest kept pydantic's or Python's: ``"query": {"text": ...}`` read "Input should
be a valid string" (not what was sent), ``"mode": ["bm25"]`` "Input should be 'bm25', 'dense' or 'hybrid'", ``"k":
{"n": 5}`` "got a JSON dict" (Python's word for a JSON object) and ``{"item": {"id": "50"}}`` "body.item_id: Field
required" (no body that has it).
"""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from twotower.serving import create_app
from twotower.serving.search_service import SearchService

SIMILAR = 'such as {"item_id": "50", "k": 10}'


def _refused(client: TestClient, path: str, body: object) -> tuple[str, list[dict]]:
    r = client.post(path, json=body)
    assert r.status_code == 422, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["type"] == "invalid_request" and err["code"] == 422
    return err["message"], err["details"]


@pytest.mark.parametrize("path, body, said", [
    ("/recommend", {"user_id": "u1", "k": {"n": 5}}, "body.k: must be an integer from 1 to 1000, got an object"),
    ("/recommend", {"user_id": "u1", "k": [5]}, "body.k: must be an integer from 1 to 1000, got an array"),
    ("/recommend/batch", {"requests": [{"user_id": "u1", "k": [5]}]},
     "body.requests[0].k: must be an integer from 1 to 1000, got an array"),
    ("/explain", {"user_id": "u1", "item_id": "i1", "top": {"n": 5}},
     "body.top: must be a JSON integer such as 5, got an object"),
    ("/explain", {"user_id": "u1", "item_id": "i1", "method": ["loo"]},
     "body.method: must be 'loo' or 'gradxinput', got an array"),
    # the string sent is named (it said "got another string", which did not show the value refused)
    ("/explain", {"user_id": "u1", "item_id": "i1", "method": "lo"},
     "body.method: must be 'loo' or 'gradxinput', got 'lo'; did you mean 'loo'?"),
    ("/explain", {"user_id": "u1", "item_id": "i1", "method": "shap"},
     "body.method: must be 'loo' or 'gradxinput', got 'shap'"),
    ("/explain", {"user_id": "u1", "item_id": "i1", "method": "x" * 300},
     f"body.method: must be 'loo' or 'gradxinput', got {'x' * 40 + '...'!r}"),
    # the id wrapped in an object under another name: the field left out is named, with a body that has it
    ("/similar-items", {"item": {"id": "i1"}}, f"body.item_id: is missing; send it, {SIMILAR}"),
    ("/explain", {"user_id": "u1"}, 'body.item_id: is missing; send it, such as {"user_id": "42", "item_id": "50"}'),
    # the words these had already, kept
    ("/recommend", {"user": {"id": "u1"}},
     "body.user: not a field of this request; did you mean 'user_id'? (the fields: user_id, history, user_features, "
     "k, exclude_seen, exclude_items, filters, explain, explain_k)"),
    ("/recommend", {"user_id": ["u1"]}, "body.user_id: an id must be a string or an integer, got an array"),
    ("/recommend", [{"user_id": "u1"}],
     'body: must be a JSON object {...}, got an array; send one, such as {"user_id": "42", "k": 10}'),
])
def test_a_wrongly_nested_recommender_body_names_the_field_and_what_it_takes(client, path, body, said) -> None:
    message, details = _refused(client, path, body)
    assert message == said
    assert details[0]["msg"] == said.split(": ", 1)[1]  # the same words in details, with the loc as a list


def test_the_unknown_wrapper_is_named_beside_the_missing_field(client) -> None:
    _, details = _refused(client, "/similar-items", {"item": {"id": "i1"}})
    assert [d["loc"] for d in details] == [["body", "item_id"], ["body", "item"]]
    assert details[1]["msg"].startswith("not a field of this request")


@pytest.mark.parametrize("body, said", [
    ({"query": {"text": "x"}}, "body.query: must be a JSON string, got an object"),
    ({"query": ["x"]}, "body.query: must be a JSON string, got an array"),
    ({"query": None}, "body.query: must be a JSON string, got null"),
    ({"query": "x", "mode": ["bm25"]}, "body.mode: must be 'bm25', 'dense' or 'hybrid', got an array"),
    ({"query": "x", "mode": "hybird"}, "body.mode: must be 'bm25', 'dense' or 'hybrid', got 'hybird'; "
                                       "did you mean 'hybrid'?"),
    ({"query": "x", "k": {"n": 5}}, "body.k: must be an integer from 1 to 1000, got an object"),
    ({"search": {"query": "x"}}, 'body.query: is missing; send it, such as {"query": "vitamin D and bone density", '
                                 '"k": 10}'),
])
def test_a_wrongly_nested_search_body_names_the_field_and_what_it_takes(tmp_path, body, said) -> None:
    # refused by the request model, before the (absent) index is read
    app = create_app(search_service=SearchService(index=None, reranker=None, index_dir=tmp_path))
    with TestClient(app) as client:
        message, _ = _refused(client, "/search", body)
    assert message == said
