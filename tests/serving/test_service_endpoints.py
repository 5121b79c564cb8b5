"""Happy paths of every endpoint on the real app over a tiny trained run."""
from __future__ import annotations

import os

import numpy as np
import pytest


def _ids(resp_json) -> list[str]:
    return [it["item_id"] for it in resp_json["items"]]


def _exact_top(service, query: np.ndarray, k: int, exclude=()) -> list[str]:
    """Reference: argsort of query @ items.T over the whole catalogue (ties -> smaller row)."""
    scores = service.item_vectors @ query  # [I]
    scores[list(exclude)] = -np.inf
    order = np.lexsort((np.arange(len(scores)), -scores))[:k]
    return [service.catalog.ids[r] for r in order]


def test_recommend_known_user_shape_and_metadata(client, service):
    r = client.post("/recommend", json={"user_id": "u1", "k": 5})
    assert r.status_code == 200
    body = r.json()
    assert body["user_id"] == "u1" and body["k"] == 5 and len(body["items"]) == 5
    first = body["items"][0]
    assert set(first) >= {"item_id", "score", "rank", "title", "genres", "year"}
    assert [it["rank"] for it in body["items"]] == [1, 2, 3, 4, 5]
    scores = [it["score"] for it in body["items"]]
    assert scores == sorted(scores, reverse=True)
    row = service.run.user_row("u1")
    seen = service.run.history.of(row)
    expected = _exact_top(service, service.run.user_vectors(np.array([row]))[0], 5, seen)
    assert _ids(body) == expected  # exact index: same as brute force with the seen items removed


def test_integer_user_id_is_coerced_to_string(client):
    r = client.post("/recommend", json={"user_id": 7, "k": 2})
    assert r.status_code == 404  # "7" is not a user of the tiny run, but it was accepted as an id
    assert r.json()["error"]["id"] == "7"


def test_exclude_seen_really_excludes(client, service):
    row = service.run.user_row("u3")
    seen = {service.catalog.ids[i] for i in service.run.history.of(row)}
    n = len(service.catalog)
    on = client.post("/recommend", json={"user_id": "u3", "k": n}).json()
    off = client.post("/recommend", json={"user_id": "u3", "k": n, "exclude_seen": False}).json()
    assert seen and not seen & set(_ids(on))
    assert len(on["items"]) == n - len(seen)  # everything else is still recommended
    assert seen <= set(_ids(off)) and len(off["items"]) == n


def test_history_recommend_matches_history_vectors(client, service):
    history = ["i1", "i2", "i10"]
    rows = np.array([service.catalog.row(i) for i in history])
    vec = service.run.history_vectors([rows])[0]
    r = client.post("/recommend", json={"history": history, "k": 6})
    assert r.status_code == 200 and r.json()["user_id"] is None
    assert _ids(r.json()) == _exact_top(service, vec, 6, rows)
    assert not set(history) & set(_ids(r.json()))  # the given history counts as seen
    kept = client.post("/recommend", json={"history": history, "k": 6, "exclude_seen": False}).json()
    assert _ids(kept) == _exact_top(service, vec, 6)


def test_filters_keep_only_matching_items(client):
    r = client.post("/recommend", json={"user_id": "u2", "k": 10, "filters": {"genres": ["Horror"]}})
    assert r.status_code == 200
    items = r.json()["items"]
    # Horror: j % 4 == 3 (15 items) or j % 4 == 2 and j % 3 == 0 ("Drama|Horror", 5 items); u2 saw some
    assert len(items) == 10
    assert all("Horror" in it["genres"].split("|") for it in items)
    two = client.post("/recommend", json={"user_id": "u2", "k": 50, "filters": {"genres": ["Horror"], "year": [1993]}})
    assert all(it["year"] == 1993 and "Horror" in it["genres"] for it in two.json()["items"])


def test_unknown_filter_field_is_422_listing_fields(client):
    r = client.post("/recommend", json={"user_id": "u2", "filters": {"colour": ["red"]}})
    assert r.status_code == 422
    assert "colour" in r.json()["error"]["message"] and "genres" in r.json()["error"]["message"]


@pytest.mark.parametrize("path", ["/recommend", "/similar-items"])
def test_an_item_id_filter_is_checked_like_any_other_id(client, path):
    """filters.item_id with a mistyped id (or nothing) answered 200 with an empty list and a shortfall blaming the
    filters; a filter on any other field refuses an empty list, and an unknown id is a 404 everywhere else."""
    who = {"user_id": "u1"} if path == "/recommend" else {"item_id": "i0"}
    r = client.post(path, json={**who, "k": 3, "filters": {"item_id": ["i5", "nope"]}})
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["field"] == "filters.item_id[1]" and err["id"] == "nope" and err["kind"] == "item"
    r = client.post(path, json={**who, "k": 3, "filters": {"item_id": []}})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("filters.item_id is empty")
    ok = client.post(path, json={**who, "k": 3, "filters": {"item_id": ["i5", "i7"]}})
    assert ok.status_code == 200 and {it["item_id"] for it in ok.json()["items"]} <= {"i5", "i7"}


@pytest.mark.parametrize(
    ("bad", "status", "starts"),
    [
        ({"filters": {"genres": ["Actoin"]}}, 422, "requests[2].filters.genres: no item has the value 'Actoin'"),
        ({"filters": {"colour": ["red"]}}, 422, "requests[2].filters.colour: not an item metadata field"),
        ({"filters": {"genres": []}}, 422, "requests[2].filters.genres is empty"),
        ({"filters": {"item_id": ["nope"]}}, 404, "requests[2].filters.item_id[0]: unknown item 'nope'"),
        ({"user_features": {"age": 3}}, 422, "requests[2].user_features:"),
    ],
)
def test_a_batch_names_the_request_of_every_mistake(client, bad, status, starts):
    """Only unknown user/history ids named their request; a bad filter in request 2 of 256 said "filters.genres"."""
    reqs = [{"user_id": "u1"}, {"user_id": "u2"}, {"user_id": "u3", **bad}]
    r = client.post("/recommend/batch", json={"requests": reqs})
    assert r.status_code == status
    msg = r.json()["error"]["message"]
    assert msg.startswith(starts) and msg.endswith("the other requests were not answered"), msg
    one = client.post("/recommend", json=reqs[2]).json()["error"]["message"]  # one request: no request index
    assert one.startswith(starts.removeprefix("requests[2].")), one


def test_batch_equals_single_requests(client):
    reqs = [{"user_id": "u1", "k": 3}, {"history": ["i4", "i5"], "k": 2},
            {"user_id": "u2", "k": 4, "filters": {"genres": ["Comedy"]}}]
    r = client.post("/recommend/batch", json={"requests": reqs})
    assert r.status_code == 200
    results = r.json()["results"]
    assert len(results) == 3
    for req, got in zip(reqs, results):
        single = client.post("/recommend", json=req).json()
        assert got == single


def test_similar_items_excludes_the_item_itself(client, service):
    r = client.post("/similar-items", json={"item_id": "i0", "k": 5})
    assert r.status_code == 200
    body = r.json()
    assert body["item_id"] == "i0" and "i0" not in _ids(body)
    row = service.catalog.row("i0")
    assert _ids(body) == _exact_top(service, service.item_vectors[row], 5, [row])
    f = client.post("/similar-items", json={"item_id": "i0", "k": 3, "filters": {"genres": ["Drama"]}}).json()
    assert all("Drama" in it["genres"] for it in f["items"])


def test_get_item(client):
    r = client.get("/items/i3")
    assert r.status_code == 200
    assert r.json() == {"item_id": "i3", "title": "Movie 3", "genres": "Horror|Action", "year": 1993, "in_index": True,
                        "display_name": "Movie 3"}


def test_health_ready_metrics(client, service):
    assert client.get("/healthz").json() == {"status": "ok", "pid": os.getpid()}  # an integer, as the OS gives it
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["ready"] is True and ready.json()["model_fingerprint"] == service.fingerprint
    client.post("/recommend", json={"user_id": "u1"})
    client.post("/recommend", json={"user_id": "nobody"})
    text = client.get("/metrics").text
    assert 'twotower_requests_total{route="/recommend",method="POST",status="200"} 1' in text
    assert 'twotower_requests_total{route="/recommend",method="POST",status="404"} 1' in text
    assert 'twotower_request_duration_seconds_count{route="/recommend"} 2' in text
    assert "twotower_in_flight_requests 0" in text and "twotower_overload_rejections_total 0" in text


def test_readyz_is_503_when_the_index_belongs_to_another_model(make_client, service, monkeypatch):
    monkeypatch.setattr(service.index, "model_fingerprint", "another-model")
    r = make_client().get("/readyz")
    assert r.status_code == 503 and r.json()["fingerprint_match"] is False


def test_explain_endpoint_and_inline(client):
    pytest.importorskip("twotower.explain", reason="twotower.explain not installed")
    from twotower import explain

    if not hasattr(explain, "explain_recommendation"):
        pytest.skip("twotower.explain has no explain_recommendation yet")
    r = client.post("/explain", json={"user_id": "u1", "item_id": "i0"})
    assert r.status_code == 200
    assert r.json()["item_id"] == "i0" and r.json()["user_id"] == "u1" and isinstance(r.json()["explanation"], dict)
    rec = client.post("/recommend", json={"user_id": "u1", "k": 2, "explain": True}).json()
    assert all(isinstance(it["explanation"], dict) for it in rec["items"])
    h = client.post("/explain", json={"history": ["i1", "i2"], "item_id": "i0"})
    assert h.status_code == 200


def test_explain_missing_module_is_501(client, service, monkeypatch):
    from twotower.serving.errors import FeatureUnavailable

    def missing():
        raise FeatureUnavailable("explanations need twotower.explain.explain_recommendation")

    monkeypatch.setattr(service, "_explainer", missing)
    r = client.post("/explain", json={"user_id": "u1", "item_id": "i0"})
    assert r.status_code == 501 and "twotower.explain" in r.json()["error"]["message"]


def test_static_explorer_page_when_present(client):
    from twotower.serving.app import STATIC_DIR

    if not (STATIC_DIR / "index.html").is_file():
        pytest.skip("serving/static/index.html not written yet")
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")


def test_path_ids_are_trimmed_as_body_ids_are(client):
    """`GET /items/%20i3` was looked up as " i3" (404) while {"item_id": " i3"} in a body found i3."""
    want = client.get("/items/i3").json()
    for path in ("/items/%20i3", "/items/i3%20", "/items/%09i3%20%20"):
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
        assert r.json() == want
    assert client.post("/similar-items", json={"item_id": " i3", "k": 3}).status_code == 200  # the body rule
    user = client.get("/users/%20u1%20")
    assert user.status_code == 200 and user.json() == client.get("/users/u1").json()
    # nothing but whitespace is an empty id, refused as an empty id in a body is (not looked up as " ")
    assert client.get("/items/%20").status_code == 422
    assert client.post("/similar-items", json={"item_id": " ", "k": 3}).status_code == 422


def test_get_user_history_newest_first(client, service):
    r = client.get("/users/u1")
    assert r.status_code == 200
    body = r.json()
    row = service.run.user_row("u1")
    oldest_first = [service.catalog.ids[i] for i in service.run.history.of(row)]
    assert body["n_history"] == len(oldest_first)
    assert [h["item_id"] for h in body["history"]] == oldest_first[::-1][:50]
    assert all("title" in h and "timestamp" in h for h in body["history"])
    assert client.get("/users/nobody").status_code == 404


def test_examples_are_the_users_with_the_most_history_and_work(client, service):
    """GET /examples (the explorer's start page): real ids, longest history first, each one answerable."""
    ex = client.get("/examples").json()
    lengths = service.run.history.lengths()
    assert 1 <= len(ex["users"]) <= 5
    counts = [u["n_history"] for u in ex["users"]]
    assert counts == sorted(counts, reverse=True) and counts[0] == int(lengths.max())
    assert min(counts) >= np.sort(lengths)[::-1][len(counts) - 1]  # no user with more history was left out
    for u in ex["users"]:
        assert client.get(f"/users/{u['user_id']}").json()["n_history"] == u["n_history"]
    first = client.get(f"/users/{ex['users'][0]['user_id']}").json()["history"]  # newest first
    assert ex["history"] == [h["item_id"] for h in first[:3]][::-1]  # the 3 most recent, oldest first
    r = client.post("/recommend", json={"history": ex["history"], "k": 5})
    assert r.status_code == 200 and len(r.json()["items"]) == 5


def test_bare_explorer_page_offers_the_examples(client):
    from twotower.serving.app import STATIC_DIR

    page = client.get("/").text
    assert 'id="examples"' in page and "Recommend" in page
    js = (STATIC_DIR / "app.js").read_text()
    assert '"GET", "/examples"' in js and "showExamples()" in js


def test_python_history_given_as_one_string_is_refused_not_read_letter_by_letter(service):
    # RecRequest(history="181") was the history "1", "8", "1" (recommend) and so was explain(history="181")
    from twotower.errors import ConfigError
    from twotower.serving import RecRequest

    with pytest.raises(ConfigError, match=r'^history: must be a list of item ids, oldest first, e.g. \["i5"\], got a string'):
        service.recommend(RecRequest(history="i5", k=3))
    with pytest.raises(ConfigError, match=r'^history: must be a list of item ids, oldest first, e.g. \["i5"\], got a string'):
        service.explain(item_id="i7", history="i5")
    assert service.recommend(RecRequest(history=("i5",), k=3))["items"]
