"""A new user's request breaking two rules on a run with user features is refused for the same one by every surface:
POST /recommend's order (the empty-history rule, then the filters and exclusions, then the features' values and the
history's ids), which `twotower recommend`, tt.recommend and RecommenderService follow."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.serving.refusal_words import py_refusal as _py


@pytest.fixture(scope="module")
def service(feature_run):
    from twotower.serving import RecommenderService

    return RecommenderService.load(feature_run.dir)


@pytest.fixture(scope="module")
def client(service):
    from twotower.serving import create_app

    with TestClient(create_app(service=service)) as c:
        yield c


def _http(client, body: dict, status: int = 422) -> str:
    r = client.post("/recommend", json=body)
    assert r.status_code == status, r.text
    return r.json()["error"]["message"]


def test_an_empty_history_with_blank_features_is_said_before_an_unknown_filter(client, service) -> None:
    """"history": [] with {"age": null} (which describes no one) and an unknown filter field: POST /recommend named
    the history (its route's rule, before the service), RecommenderService the filter."""
    from twotower.serving import RecRequest

    body = {"history": [], "user_features": {"age": None}, "filters": {"colour": ["red"]}}
    http = _http(client, body)
    assert http.startswith("body.history: no item ids given"), http
    req = RecRequest(history=(), user_features={"age": None}, filters={"colour": ["red"]})
    assert _py(lambda: service.recommend(req)) == http.removeprefix("body.")
