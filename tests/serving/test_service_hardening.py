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


@pytest.mark.parametrize(("path", "body", "where", "said"), [
    ("/recommend", b'{"user_id": "\\udfff"}', "body.user_id", "an id must be valid Unicode text (it holds the lone "
                                                              "surrogate \\udfff)"),
    ("/recommend", b'{"user_id": "u1", "filters": {"genres": ["x\\udc00"]}}', "body.filters.genres[0]",
     "a filter value must be valid Unicode text (it holds the lone surrogate \\udc00)"),
    ("/recommend", b'{"user_id": "u1", "filters": {"\\ud800": ["x"]}}', "body.filters",
     "a field name must be valid Unicode text (it holds the lone surrogate \\ud800)"),
    ("/recommend", b'{"history": ["i1"], "user_features": {"a\\udbff": 1}}', "body.user_features",
     "a column name must be valid Unicode text (it holds the lone surrogate \\udbff)"),
    ("/recommend", b'{"user_id": "u1", "\\ud800": 1}', "body",
     "a field name must be valid Unicode text (it holds the lone surrogate \\ud800)"),
    ("/recommend/batch", b'{"requests": [{"user_id": "u1", "\\ud800": 1}]}', "body.requests[0]",
     "a field name must be valid Unicode text (it holds the lone surrogate \\ud800)"),
])
def test_a_lone_surrogate_is_named_as_sent_and_where(client, path, body, where, said):
    """A key holding one was answered 'body.filters.<the key, garbled>.[key]: Input should be a valid string, unable
    to parse raw data as a unicode string' (the key itself in the path, which UTF-8 cannot carry), and an id's
    refusal said "such as \\ud800" whatever was sent (\\udfff too)."""
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["message"] == f"{where}: {said}"


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


# ------------------------------------------------------------------ Host header (DNS rebinding)
# A page of another site can point its own name at 127.0.0.1: the browser then sends it this service's answers
# (users' histories included) as same-origin ones. `twotower serve` bound to loopback answered any Host.

def test_serve_bound_to_loopback_answers_the_loopback_names_only():
    from twotower.cli.main import build_parser
    from twotower.cli.serve_cmd import _settings

    def hosts(*flags: str):
        return _settings(build_parser().parse_args(["serve", "--run", "r", *flags])).allowed_hosts

    assert hosts() == ("localhost", "127.0.0.1", "::1")
    assert hosts("--host", "localhost") == ("localhost", "127.0.0.1", "::1")
    assert hosts("--allow-host", "Recs.Example.com.") == ("localhost", "127.0.0.1", "::1", "recs.example.com")
    assert hosts("--host", "0.0.0.0") is None  # exposed on purpose: any name (it warns about the exposure)
    assert "recs.example.com" in hosts("--host", "0.0.0.0", "--allow-host", "recs.example.com")


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1", "LOCALHOST", "[::1]:8000", "recs.example.com"])
def test_a_loopback_name_or_an_allowed_one_is_answered(make_client, host):
    client = make_client(allowed_hosts=("localhost", "127.0.0.1", "::1", "recs.example.com"))
    r = client.get("/items/i1", headers={"host": host})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path", ["/users/u1", "/", "/healthz"])
def test_another_host_name_is_refused_before_any_work(make_client, path):
    client = make_client(allowed_hosts=("localhost", "127.0.0.1", "::1"))
    r = client.get(path, headers={"host": "attacker.example:8000"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["type"] == "host_not_allowed" and "u1" not in r.text
    assert err["message"] == (
        "Host 'attacker.example:8000' is not a name this server answers to (localhost, 127.0.0.1, ::1): it is bound "
        "to this machine, and a web page could point another name at it (DNS rebinding); to reach it under that "
        "name, restart it with --allow-host attacker.example")
    r = client.post("/recommend", json={"user_id": "u1"}, headers={"host": "attacker.example"})
    assert r.status_code == 400 and "items" not in r.json()


def test_allowed_hosts_travel_to_workers_as_json_and_are_checked():
    import json
    from dataclasses import asdict

    from twotower.errors import ConfigError
    from twotower.serving import ServiceSettings

    s = ServiceSettings(allowed_hosts=("localhost", "[::1]"))
    assert ServiceSettings(**json.loads(json.dumps(asdict(s)))).allowed_hosts == ("localhost", "::1")
    assert ServiceSettings().allowed_hosts is None  # create_app from Python: no check unless asked
    for bad in ("localhost", [], [""], [1]):
        with pytest.raises(ConfigError, match="allowed_hosts must be a non-empty list of host names"):
            ServiceSettings(allowed_hosts=bad)


# ------------------------------------------------------------------ a key sent twice
# Python's JSON reader keeps a repeated key's last value: {"k": 5, "k": 500} was answered with 500 items and no word
# about the 5, where the config files refuse a repeated key.

@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/recommend", b'{"user_id": "u1", "k": 5, "k": 500}', "'k'"),
        ("/recommend/batch", b'{"requests": [{"user_id": "u1", "user_id": "u2"}]}', "'user_id'"),
        ("/similar-items", b'{"item_id": "i1", "k": 3, "item_id": "i2"}', "'item_id'"),
    ],
)
def test_a_key_sent_twice_is_refused_naming_it(client, path, body, key):
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert f"key {key} twice in one object" in message and "send each field once" in message
    assert r.json()["error"]["type"] == "unreadable_body"  # one a client can branch on (it was "http_error")


def test_keys_once_each_are_still_read(client):
    r = client.post("/recommend", content=b'{"user_id": "u1", "k": 2, "filters": {}}',
                    headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert len(r.json()["items"]) == 2


def test_the_openapi_document_declares_the_answers_the_service_sends(client):
    """/openapi.json declared FastAPI's default 422 body ({"detail": [...]}, never sent) and no other error code, ids
    as strings only (the service takes integers too), and no `shortfall` on the lists: a client generated from it
    mishandled real answers."""
    doc = client.get("/openapi.json").json()
    responses = doc["paths"]["/recommend"]["post"]["responses"]
    assert {"400", "404", "413", "415", "422", "429", "503"} <= set(responses)
    assert responses["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    refused = client.post("/recommend", json={"user_id": "u1", "k": 0}).json()
    assert set(refused) == {"error"} and {"code", "type", "message"} <= set(refused["error"])
    user_id = doc["components"]["schemas"]["RecommendRequest"]["properties"]["user_id"]
    assert {"type": "integer"} in user_id["anyOf"][0]["anyOf"]
    for name in ("RecommendResponse", "SimilarResponse"):
        assert "shortfall" in doc["components"]["schemas"][name]["properties"]
