"""A history, an exclusion list or user_features of the wrong JSON type (``"history": "i1"``, ``"exclude_items":
5``, ``"user_features": "age=3"``) are refused over HTTP and from Python in one wording after each surface's
location, as ``"filters": "genres=Comedy"`` is: HTTP said pydantic's "Input should be a valid list" ("... valid
dictionary"), Python "history is a list of item ids, oldest first, e.g. ['i1']; got a string"."""
from __future__ import annotations

import pytest

import twotower as tt
from tests.serving.refusal_words import py_refusal as _py

HISTORY = 'must be a list of item ids, oldest first, e.g. {}, got {}'
EXCLUDE = 'must be a list of item ids, e.g. {}, got {}'
FEATURES = 'must map user feature columns to values, e.g. {{"age": 25, "gender": "F"}}, got {}'


@pytest.fixture(scope="module")
def run(run_dir):
    return tt.TrainedRun.load(run_dir)


def _http(client, route: str, body: dict) -> str:
    r = client.post(route, json=body)
    assert r.status_code == 422, r.text
    return r.json()["error"]["message"]


@pytest.mark.parametrize("value, example, http_sent, py_sent", [
    ("i1", '["i1"]', "a string", "a string"),
    (5, "[5]", "a number", "an int"),
    # a comma list in one string: ["i1,i2"] was the example, one unknown id when sent
    ("i1,i2", '["i1", "i2"]', "a string", "a string"),
], ids=["a-string", "a-number", "a-comma-string"])
def test_a_history_that_is_no_list_is_refused_in_one_wording(run, client, service, value, example, http_sent,
                                                             py_sent) -> None:
    from twotower.serving import RecRequest

    http = "body.history: " + HISTORY.format(example, http_sent)
    assert _http(client, "/recommend", {"history": value}) == http
    assert _http(client, "/explain", {"history": value, "item_id": "i3"}) == http
    assert _http(client, "/recommend/batch", {"requests": [{"history": value}]}) == http.replace(
        "body.", "body.requests[0].")
    py = "history: " + HISTORY.format(example, py_sent)
    assert _py(lambda: tt.recommend(run, history=value)) == py
    assert _py(lambda: tt.explain_by_id(run, history=value, item_id="i3")) == py
    assert _py(lambda: service.recommend(RecRequest(history=value))) == py
    assert _py(lambda: service.explain(history=value, item_id="i3")) == py


def test_a_history_sent_as_an_object_is_refused_in_those_words(client) -> None:
    assert _http(client, "/recommend", {"history": {"i1": 1}}) == "body.history: " + HISTORY.format('["..."]',
                                                                                                  "an object")


@pytest.mark.parametrize("value, example, http_sent, py_sent", [
    ("i1", '["i1"]', "a string", "a string"),
    (5, "[5]", "a number", "an int"),
], ids=["a-string", "a-number"])
def test_an_exclusion_list_that_is_no_list_is_refused_in_one_wording(run, client, service, value, example, http_sent,
                                                                     py_sent) -> None:
    from twotower.serving import RecRequest

    http = "body.exclude_items: " + EXCLUDE.format(example, http_sent)
    assert _http(client, "/recommend", {"user_id": "u3", "exclude_items": value}) == http
    assert _http(client, "/similar-items", {"item_id": "i3", "exclude_items": value}) == http
    said = EXCLUDE.format(example, py_sent)
    assert _py(lambda: tt.recommend(run, ["u3"], exclude=value)) == "exclude: " + said
    assert _py(lambda: tt.similar(run, ["i3"], exclude=value)) == "exclude: " + said
    assert _py(lambda: service.recommend(RecRequest(user_id="u3", exclude_items=value))) == "exclude_items: " + said
    assert _py(lambda: service.similar_items("i3", 5, exclude_items=value)) == "exclude_items: " + said


@pytest.mark.parametrize("value, http_sent, py_sent", [
    ("age=3", "a string", "a string"),
    (["age"], "an array", "a list"),
], ids=["a-string", "a-list"])
def test_user_features_that_are_no_mapping_are_refused_in_one_wording(run, client, service, value, http_sent,
                                                                      py_sent) -> None:
    from twotower.serving import RecRequest

    http = "body.user_features: " + FEATURES.format(http_sent)
    assert _http(client, "/recommend", {"history": ["i1"], "user_features": value}) == http
    assert _http(client, "/explain", {"history": ["i1"], "item_id": "i3", "user_features": value}) == http
    py = "user_features: " + FEATURES.format(py_sent)
    assert _py(lambda: tt.recommend(run, history=["i1"], user_features=value)) == py
    assert _py(lambda: tt.explain_by_id(run, history=["i1"], item_id="i3", user_features=value)) == py
    assert _py(lambda: service.recommend(RecRequest(history=("i1",), user_features=value))) == py
    assert _py(lambda: service.explain(history=["i1"], item_id="i3", user_features=value)) == py


def test_a_boolean_is_said_to_be_one(client) -> None:
    """`--user-features true` says "got a boolean"; HTTP said "got a number" of "user_features": true."""
    assert _http(client, "/recommend", {"history": ["i1"], "user_features": True}) == (
        "body.user_features: " + FEATURES.format("a boolean"))
    assert _http(client, "/recommend", {"history": True}) == "body.history: " + HISTORY.format('["..."]', "a boolean")


def test_a_filter_field_named_history_keeps_the_words_of_filter_values(client) -> None:
    """A metadata field may be named "history": its values that are no list are a filter's, not a history's."""
    msg = _http(client, "/recommend", {"user_id": "u3", "filters": {"history": "x"}})
    assert msg == 'body.filters.history: must be a list of values, e.g. {"history": ["x"]}, got a string'
