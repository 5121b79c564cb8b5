"""Regressions and missing bounds found while fuzzing the service (issue 7)."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/recommend", b'{"user_id": "\\ud800"}'),
        ("/recommend", b'{"history": ["i1", "\\udfff"]}'),
        ("/similar-items", b'{"item_id": "\\ud800x"}'),
        ("/explain", b'{"user_id": "u1", "item_id": "\\udc00"}'),
    ],
)
def test_lone_surrogate_id_is_422_naming_the_field_not_500(client, path, body):
    """Regression: an unknown id holding a lone surrogate made the 404 body unencodable -> 500."""
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert "surrogate" in err["message"] and err["details"][0]["loc"][0] == "body"


def test_error_bodies_stay_valid_json_for_unencodable_text():
    from twotower.errors import NotFoundError
    from twotower.serving.errors import error_response

    r = error_response(NotFoundError("user", "\ud800"))
    assert r.status_code == 404 and b"\\ud800" in r.body  # escaped, not a UnicodeEncodeError


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"user_id": "u" * 257}, "user_id"),
        ({"user_id": "u1", "k": 10**30}, "k"),
        ({"user_id": "u1", "k": -(10**30)}, "k"),
        ({"user_id": "u1", "filters": {f"f{i}": ["x"] for i in range(17)}}, "filters"),
        ({"user_id": "u1", "filters": {"genres": ["x"] * 1001}}, "filters"),
        ({"user_id": "u1", "filters": {"g" * 65: ["x"]}}, "filters"),
        ({"user_id": "u1", "filters": {"genres": ["x" * 257]}}, "filters"),
        ({"history": ["i1"] * 501}, "history"),
    ],
)
def test_every_request_part_is_bounded(client, body, field):
    r = client.post("/recommend", json=body)
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["loc"][:2] == ["body", field]


def test_deeply_nested_json_is_a_clean_4xx(client):
    body = b'{"user_id": "u1", "user_features": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    r = client.post("/recommend", content=body, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.json()["error"]["message"]
