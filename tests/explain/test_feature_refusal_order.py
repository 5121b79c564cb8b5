"""A new user's request breaking two rules on a run with user features is refused for the same one by every surface:
POST /recommend's order (the empty-history rule, then the filters and exclusions, then the features' values and the
history's ids), which `twotower recommend`, tt.recommend and RecommenderService follow."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.serving.refusal_words import cli_refusal as _cli
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


@pytest.mark.parametrize("history, features", [
    (["i1", "i2"], {"age": "x"}),
    (["i1", "i2"], {"nope": 3}),
    ([], {"age": "x"}),
    ([], {"nope": 3}),
], ids=["bad-value", "unknown-column", "empty-history-bad-value", "empty-history-unknown-column"])
@pytest.mark.parametrize("cli_extra, extra, cli_at, http_at, status", [
    (["--filter", "colour=red"], {"filters": {"colour": ["red"]}}, "--filter colour", "filters.colour", 422),
    (["--exclude-items", "nope2"], {"exclude_items": ["nope2"]}, "--exclude-items: item 1 of 1", "exclude_items[0]",
     404),
], ids=["unknown-filter", "unknown-exclude-item"])
def test_the_filters_and_exclusions_are_looked_up_before_the_features(
        feature_run, client, capsys, history, features, cli_extra, extra, cli_at, http_at, status) -> None:
    """A bad --user-features value (or column) with an unknown filter field (or exclude id), with a history or with an
    empty one: POST /recommend named the filter (its service looks the filters and exclusions up, then the features),
    `twotower recommend` the features."""
    import json

    http = _http(client, {"history": history, "user_features": features, **extra}, status)
    assert http.startswith(http_at), http
    cli = _cli(capsys, "recommend", "--run", str(feature_run.dir), "--history", ",".join(history),
               "--user-features", json.dumps(features), *cli_extra)
    assert cli == cli_at + http.removeprefix(http_at)


@pytest.mark.parametrize("history, features, extra, tt_extra, at", [
    ([], {"nope": 3}, {"filters": {"colour": ["red"]}}, {"filters": {"colour": ["red"]}}, "filters.colour"),
    ([], {"nope": 3}, {"exclude_items": ["nope2"]}, {"exclude": ["nope2"]}, "exclude"),
    (["i1", "nope"], {"age": "x"}, {}, {}, "user_features.age"),
], ids=["empty-history-unknown-column-unknown-filter", "empty-history-unknown-column-unknown-exclude-id",
        "bad-value-unknown-history-id"])
def test_python_recommend_names_what_post_recommend_names(feature_run, client, history, features, extra, tt_extra,
                                                          at) -> None:
    """tt.recommend named an empty history's unknown feature column before an unknown filter field (or exclude id),
    and an unknown history id before a bad feature value: POST /recommend the other way round."""
    import twotower as tt

    http = _http(client, {"history": history, "user_features": features, **extra}, 404 if "exclude_items" in extra
                 else 422)
    said = _py(lambda: tt.recommend(feature_run, history=history, user_features=features, **tt_extra))
    assert said.startswith(at), said
    assert said.split(": ", 1)[1] == http.split(": ", 1)[1]


def test_python_explain_names_a_bad_feature_value_before_an_unknown_history_id(feature_run, client, service) -> None:
    """tt.explain_by_id named the unknown history id; POST /explain, RecommenderService.explain and `twotower explain`
    the feature value."""
    import twotower as tt

    r = client.post("/explain", json={"history": ["i1", "nope"], "user_features": {"age": "x"}, "item_id": "i0"})
    assert r.status_code == 422, r.text
    said = r.json()["error"]["message"]
    assert said.startswith("user_features.age: "), said
    assert _py(lambda: service.explain(history=["i1", "nope"], user_features={"age": "x"}, item_id="i0")) == said
    assert _py(lambda: tt.explain_by_id(feature_run, history=["i1", "nope"], user_features={"age": "x"},
                                        item_id="i0")) == said
