"""Error answers a user meets first (a walkthrough with curl): each says what to change, in one body shape."""
from __future__ import annotations

import gzip
import os

import pytest

FORM = "application/x-www-form-urlencoded"  # what `curl -d` sends unless told otherwise


# ------------------------------------------------------------------ 1. a body not sent as JSON
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/recommend", b'{"user_id":"u1","k":3}'),
        ("/recommend/batch", b'{"requests":[{"user_id":"u1"}]}'),
        ("/similar-items", b'{"item_id":"i1"}'),
        ("/explain", b'{"user_id":"u1","item_id":"i1"}'),
    ],
)
@pytest.mark.parametrize("content_type", [FORM, "text/plain;charset=UTF-8", "multipart/form-data; boundary=x"])
def test_a_body_not_sent_as_json_is_415_saying_which_header_to_send(client, path, body, content_type):
    r = client.post(path, content=body, headers={"content-type": content_type})
    assert r.status_code == 415, r.text
    assert r.headers["content-type"].startswith("application/json") and r.headers["accept"] == "application/json"
    err = r.json()["error"]
    assert err["code"] == 415 and err["type"] == "unsupported_media_type"
    assert "Content-Type: application/json" in err["message"] and content_type in err["message"]
    assert "valid dictionary" not in err["message"]


def test_an_empty_form_body_is_415_too(client):
    r = client.post("/recommend", content=b"", headers={"content-type": FORM})
    assert r.status_code == 415


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "application/vnd.api+json"]
)
def test_json_bodies_are_accepted_with_a_json_type(client, content_type):
    r = client.post("/recommend", content=b'{"user_id":"u1","k":3}', headers={"content-type": content_type})
    assert r.status_code == 200, r.text
    assert len(r.json()["items"]) == 3


def test_a_body_without_content_type_is_415_too(client):
    """Not read as JSON on purpose (FastAPI's strict rule: a cross-site page may send one without a preflight)."""
    r = client.post("/recommend", content=b'{"user_id":"u1","k":3}')
    assert r.status_code == 415
    assert "no Content-Type header" in r.json()["error"]["message"]


def test_a_json_typed_body_that_is_not_json_is_still_the_422_parse_error(client):
    r = client.post("/recommend", content=b"user_id=u1", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "malformed JSON" in r.json()["error"]["message"]


def test_a_form_typed_request_to_an_unknown_route_is_still_404(client):
    assert client.post("/nope", content=b"a=1", headers={"content-type": FORM}).status_code == 404


def test_a_json_body_that_is_not_utf8_says_so(client):
    r = client.post("/recommend", content=b'{"user_id": "\xff"}', headers={"content-type": "application/json"})
    assert r.status_code == 400 and "UTF-8" in r.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"user_id": "u1", "k": ' + b"9" * 5000 + b"}", "an integer of more than 4300 digits"),
        (b'{"user_id": ' + b"1" * 5000 + b"}", "an integer of more than 4300 digits"),
        (b'{"user_id": "u1", "user_features": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nests JSON arrays or objects"),
    ],
)
def test_a_json_body_python_cannot_read_says_why(client, body, said):
    """Syntactically JSON, refused by Python's reader: FastAPI's 400 said only "There was an error parsing the body"."""
    r = client.post("/recommend", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and said in r.json()["error"]["message"], r.text


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [("GET", "/recommend", "POST"), ("PUT", "/similar-items", "POST"), ("POST", "/items/i1", "GET"),
     ("DELETE", "/healthz", "GET")],
)
def test_a_wrong_method_is_405_naming_the_method_the_route_takes(client, method, path, allowed):
    r = client.request(method, path)
    assert r.status_code == 405 and r.headers["allow"] == allowed
    assert r.json()["error"]["message"] == f"{method} {path} is not allowed; this route answers {allowed}"


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/", "/items/i1", "/users/u1", "/examples"])
def test_head_answers_wherever_get_does(client, path):
    """`curl -I /healthz` (and uptime checks sending HEAD) got 405: FastAPI routes answer only their declared methods."""
    head, get = client.head(path), client.get(path)
    assert head.status_code == get.status_code == 200
    assert head.content == b"" and head.headers["content-length"] == get.headers["content-length"]
    assert head.headers["content-type"] == get.headers["content-type"]


def test_head_is_no_way_around_a_post_route_or_an_unknown_id(client):
    assert client.head("/recommend").status_code == 405 and client.head("/items/nope").status_code == 404
    assert client.head("/metrics").status_code == 200  # its length changes with every request: not compared
    metrics = client.get("/metrics").text
    assert 'route="/recommend",method="HEAD",status="405"' in metrics
    assert 'route="/items/{item_id}",method="HEAD",status="404"' in metrics


# ------------------------------------------------------------------ 2. string limits count characters
@pytest.mark.parametrize(
    ("path", "body", "loc"),
    [
        ("/recommend", {"user_id": "u" * 300}, ["body", "user_id"]),
        ("/recommend", {"history": ["i1", "i" * 300]}, ["body", "history", "1"]),
        ("/recommend", {"user_id": "u1", "filters": {"genres": ["g" * 300]}}, ["body", "filters", "genres", "0"]),
        ("/recommend/batch", {"requests": [{"user_id": "u1"}, {"user_id": "u" * 300}]},
         ["body", "requests", "1", "user_id"]),
        ("/similar-items", {"item_id": "i" * 300}, ["body", "item_id"]),
        ("/explain", {"user_id": "u" * 300, "item_id": "i1"}, ["body", "user_id"]),
        ("/explain", {"history": ["i" * 300], "item_id": "i1"}, ["body", "history", "0"]),
        ("/explain", {"user_id": "u1", "item_id": "i" * 300}, ["body", "item_id"]),
    ],
)
def test_too_long_string_ids_are_counted_in_characters(client, path, body, loc):
    r = client.post(path, json=body)
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["details"][0]["loc"] == loc
    assert "at most 256 characters" in err["message"] and "items" not in err["message"], err["message"]
    # the message names the field as a 404 does (requests[1].user_id), list positions in brackets: it read
    # body.requests.1.user_id
    named = "".join(f"[{p}]" if p.isdigit() else f".{p}" if i else p for i, p in enumerate(loc))
    assert err["message"].startswith(f"{named}: "), err["message"]


def test_a_count_out_of_range_in_a_batch_names_the_request_as_404s_do(client):
    r = client.post("/recommend/batch", json={"requests": [{"user_id": "u1"}, {"user_id": "u1", "k": 5000}]})
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["message"] == ("body.requests[1].k: must be at most 1000 (this server's max_k: "
                              "`twotower serve --max-k` sets it, up to 10000), got 5000"), err["message"]
    assert err["details"][0]["loc"] == ["body", "requests", "1", "k"]  # the JSON shape as it was


def test_empty_ids_say_empty_and_integers_are_still_ids(client):
    r = client.post("/recommend", json={"user_id": ""})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith('body.user_id: is empty ("" or only spaces)')
    assert client.post("/recommend", json={"user_id": 7}).json()["error"]["id"] == "7"  # coerced, then unknown


def test_ids_holding_a_slash_are_reachable_in_paths(service, run_dir):
    """An id such as "shelf/50" (or a URL) is sent percent-encoded, /items/shelf%2F50; the server decodes it before
    routing, so GET /items/{id} and /users/{id} answered "no route GET /items/shelf/50" instead of the item."""
    from fastapi.testclient import TestClient

    from twotower.serving import RecommenderService, create_app
    from twotower.serving.catalog import ItemCatalog

    base = service.catalog
    shelved = ItemCatalog([f"shelf/{i}" for i in base.ids], base.columns)  # the same items, ids with a slash
    svc = RecommenderService(service.run, service.index, catalog=shelved, item_vectors=service.item_vectors,
                             user_vectors=service.user_vectors)
    with TestClient(create_app(service=svc)) as c:
        r = c.get("/items/shelf%2Fi5")
        assert r.status_code == 200 and r.json()["item_id"] == "shelf/i5" and r.json()["title"] == "Movie 5"
        missing = c.get("/items/shelf%2Fnope").json()["error"]
        assert missing["id"] == "shelf/nope" and missing["kind"] == "item"
        assert c.get("/users/a%2Fb").json()["error"]["id"] == "a/b"  # the user route reads the whole id too
        assert 'route="/items/{item_id}",method="GET",status="200"' in c.get("/metrics").text  # the label is kept


def test_path_and_body_ids_share_one_message(client):
    path = client.get("/users/" + "u" * 300).json()["error"]["details"][0]["msg"]
    body = client.post("/recommend", json={"user_id": "u" * 300}).json()["error"]["details"][0]["msg"]
    assert path == body == "must be at most 256 characters, got 300"


# ------------------------------------------------------------------ 3. unknown history ids name their position
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/recommend", {"history": ["i1", "999999"]}, "history[1]"),
        ("/recommend", {"history": ["999999", "i1"], "explain": True}, "history[0]"),
        ("/explain", {"history": ["i1", "i2", "999999"], "item_id": "i1"}, "history[2]"),
        ("/explain", {"history": ["i1"], "item_id": "999999"}, "item_id"),
        # an unknown user_id sent alone named no field, where an unknown item_id did
        ("/recommend", {"user_id": "999999"}, "user_id"),
        ("/recommend", {"user_id": "999999", "explain": True}, "user_id"),
        ("/explain", {"user_id": "999999", "item_id": "i1"}, "user_id"),
        ("/recommend/batch", {"requests": [{"user_id": "u1"}, {"history": ["i1", "999999"]}]},
         "requests[1].history[1]"),
        ("/recommend/batch", {"requests": [{"user_id": "u1"}, {"user_id": "999999"}]}, "requests[1].user_id"),
        # a batch of one names its request as any batch does (it said "history[1]", and nothing for user_id)
        ("/recommend/batch", {"requests": [{"history": ["i1", "999999"]}]}, "requests[0].history[1]"),
        ("/recommend/batch", {"requests": [{"user_id": "999999"}]}, "requests[0].user_id"),
    ],
)
def test_an_unknown_id_names_its_field_and_position(client, path, body, field):
    r = client.post(path, json=body)
    assert r.status_code == 404
    err = r.json()["error"]
    kind = "user" if field.endswith("user_id") else "item"
    assert err["message"].startswith(f"{field}: unknown {kind} '999999'"), err["message"]
    assert err["field"] == field and err["kind"] == kind and err["id"] == "999999"


def test_a_batch_names_the_position_once(client):
    body = {"requests": [{"user_id": "u1"}, {"history": ["999999"]}]}
    msg = client.post("/recommend/batch", json=body).json()["error"]["message"]
    assert msg.count("history[0]") == 1 and msg.endswith("the other requests were not answered")


def test_a_batch_of_one_names_its_request_without_the_note_about_others(client):
    r = client.post("/recommend/batch", json={"requests": [{"user_id": "u1", "filters": {"genres": []}}]})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == "requests[0].filters.genres is empty; give at least one value or drop the filter"


def test_python_callers_get_the_position_too(service):
    from twotower.errors import NotFoundError
    from twotower.serving import RecRequest

    with pytest.raises(NotFoundError, match=r"^history\[2\]: unknown item 'nope'"):
        service.recommend(RecRequest(history=("i1", "i2", "nope")))


# ------------------------------------------------------------------ 4. /healthz
def test_healthz_pid_is_an_integer(client):
    body = client.get("/healthz").json()
    assert body == {"status": "ok", "pid": os.getpid()} and type(body["pid"]) is int


def test_healthz_schema_says_integer(client):
    schema = client.get("/openapi.json").json()
    ref = schema["paths"]["/healthz"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]["pid"]["type"] == "integer"


# ------------------------------------------------------------------ one shape for every 4xx
def _four_xx(client, small) -> list[tuple[str, object]]:
    post_json = {"content-type": "application/json"}
    return [
        ("unknown route", client.get("/nope")),
        ("unknown static file", client.get("/static/nope.js")),
        ("wrong method", client.get("/recommend")),
        ("unknown user", client.post("/recommend", json={"user_id": "ghost"})),
        ("unknown history item", client.post("/recommend", json={"history": ["nope"]})),
        ("unknown item (GET)", client.get("/items/nope")),
        ("invalid body", client.post("/recommend", json={"user_id": "u1", "k": 0})),
        ("malformed JSON", client.post("/recommend", content=b"{", headers=post_json)),
        ("invalid path id", client.get("/items/" + "x" * 300)),
        ("unknown filter value", client.post("/recommend", json={"user_id": "u1", "filters": {"genres": ["Nope"]}})),
        ("not JSON", client.post("/recommend", content=b"user_id=u1", headers={"content-type": FORM})),
        ("too large", small.post("/recommend", content=b"{" + b" " * 200 + b"}", headers=post_json)),
        ("not UTF-8", client.post("/recommend", content=b'{"user_id": "\xff"}', headers=post_json)),
        ("compressed", client.post("/recommend", content=gzip.compress(b'{"user_id": "u1"}'),
                                   headers={**post_json, "content-encoding": "gzip"})),
    ]


def test_every_4xx_answer_has_one_body_shape(client, make_client):
    small = make_client(max_body_bytes=100)
    extras = {"details", "kind", "id", "field"}  # optional additions; code, type and message are always there
    for what, r in _four_xx(client, small):
        assert 400 <= r.status_code < 500, (what, r.status_code)
        assert r.headers["content-type"].startswith("application/json"), what
        body = r.json()
        assert set(body) == {"error"}, (what, body)
        err = body["error"]
        assert {"code", "type", "message"} <= set(err) <= {"code", "type", "message"} | extras, (what, err)
        assert err["code"] == r.status_code, (what, err)
        assert isinstance(err["type"], str) and err["type"].islower() and " " not in err["type"], (what, err)
        assert isinstance(err["message"], str) and err["message"], (what, err)


@pytest.mark.parametrize(
    ("path", "body", "said"),
    [
        ("/recommend", b"", 'body: nothing was sent; send a JSON object, such as {"user_id": "42", "k": 10}'),
        ("/explain", b"", 'body: nothing was sent; send a JSON object, such as {"user_id": "42", "item_id": "50"}'),
        ("/recommend", b"null", 'body: must be a JSON object {...}, got null; send one, such as {"user_id": "42", "k": 10}'),
        ("/similar-items", b"[]",
         'body: must be a JSON object {...}, got an array; send one, such as {"item_id": "50", "k": 10}'),
        ("/recommend", b"{}", "body: give exactly one of user_id (a known user) or history (item ids, oldest first)"),
    ],
)
def test_an_empty_or_non_object_body_says_what_to_send(client, path, body, said):
    """pydantic's words were 'body: Field required' for no body and 'Input should be a valid dictionary ...'."""
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["error"]["message"] == said


@pytest.mark.parametrize(
    ("path", "body", "said"),
    [
        ("/recommend", {"user_id": ["u1"]}, "body.user_id: an id must be a string or an integer, got an array"),
        ("/recommend", {"user_id": {"id": "u1"}}, "body.user_id: an id must be a string or an integer, got an object"),
        ("/recommend", {"history": ["i1", None]}, "body.history[1]: an id must be a string or an integer, got null"),
        ("/recommend", {"history": [["i1"]]}, "body.history[0]: an id must be a string or an integer, got an array"),
        ("/similar-items", {"item_id": ["i1"]}, "body.item_id: an id must be a string or an integer, got an array"),
        ("/explain", {"user_id": "u1", "item_id": None},
         "body.item_id: an id must be a string or an integer, got null"),
        ("/recommend", {"user_id": "u1", "filters": {"genres": [["a"]]}},
         "body.filters.genres[0]: a filter value must be a string or an integer, got an array"),
    ],
)
def test_an_id_of_another_json_type_says_what_was_sent(client, path, body, said):
    """pydantic's "Input should be a valid string" for ["u1"] or null, while 4.2 and true were answered in these
    words: one rule (ids are strings or integers) in one wording, whatever the wrong type."""
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["message"] == said


def test_a_null_user_id_beside_a_history_is_still_no_user_id(client):
    assert client.post("/recommend", json={"user_id": None, "history": ["i1"], "k": 2}).status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "said"),
    [
        ("/recommend", {"user_id": "u1", "kk": 3},
         "body.kk: not a field of this request; did you mean 'k'? (the fields: user_id, history, user_features, k, "
         "exclude_seen, exclude_items, filters, explain, explain_k)"),
        ("/explain", {"user_id": "u1", "item_id": "i1", "k": 3},
         "body.k: not a field of this request (the fields: user_id, history, user_features, item_id, top, method)"),
        ("/recommend/batch", {"requests": [{"user_id": "u1"}, {"user": "u1"}]},
         "body.requests[1].user: not a field of this request; did you mean 'user_id'? (the fields: user_id, history, "
         "user_features, k, exclude_seen, exclude_items, filters, explain, explain_k)"),
        ("/similar-items", {"item_id": "i1", "filter": {}},
         "body.filter: not a field of this request; did you mean 'filters'? (the fields: item_id, k, exclude_items, "
         "filters)"),
    ],
)
def test_an_unknown_field_names_the_fields_and_the_nearest(client, path, body, said):
    """pydantic's "Extra inputs are not permitted" said neither which fields there are nor that "kk" was a typo."""
    r = client.post(path, json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["message"] == said


def test_a_compressed_body_is_refused_naming_its_content_encoding(client) -> None:
    """A gzip body was answered 400 "holds bytes that are not UTF-8", and one whose bytes happened to read as
    text 422 "malformed JSON": neither named the header or the fix."""
    post_json = {"content-type": "application/json"}
    for body in (gzip.compress(b'{"user_id": "u1", "k": 3}'), b'{"user_id": "u1", "k": 3'):
        r = client.post("/recommend", content=body, headers={**post_json, "content-encoding": "gzip"})
        assert r.status_code == 415, r.text
        assert r.json()["error"]["message"].startswith("the request body is sent with Content-Encoding 'gzip', which "
                                                       "this server does not decode; send it uncompressed")
    assert client.post("/recommend", json={"user_id": "u1", "k": 3},
                       headers={"content-encoding": "identity"}).status_code == 200
