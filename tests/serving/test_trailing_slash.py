"""A GET route asked with a trailing slash (``/items/50/``) answers as without it: a 307 to the URL without the
slash, which the client follows, as Starlette answers ``/healthz/``.

``GET /items/{id}`` and ``/users/{id}`` read the rest of the path as the id (ids may hold a slash, sent as
``%2F``), so ``/items/50/`` looked up item "50/" and answered 404 while ``/items/50`` found the item."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("path", ["/items/i5", "/users/u1"])
def test_an_id_route_with_a_trailing_slash_answers_as_without_it(client, path) -> None:
    plain = client.get(path)
    assert plain.status_code == 200
    moved = client.get(path + "/", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == path, (moved.status_code, moved.text)
    followed = client.get(path + "/")
    assert followed.status_code == 200 and followed.json() == plain.json()
    assert client.get(path + "//").json() == plain.json()  # every trailing slash
    assert client.head(path + "/", follow_redirects=False).status_code == 307


def test_the_redirect_keeps_the_query_and_the_encoding_of_the_path(client) -> None:
    moved = client.get("/items/i5/?x=1", follow_redirects=False)
    assert moved.status_code == 307 and moved.headers["location"] == "/items/i5?x=1"
    # an unknown id with a slash in it, sent encoded: the Location keeps it encoded, so it names the same id
    moved = client.get("/items/a%2Fb%20c/", follow_redirects=False)
    assert moved.headers["location"] == "/items/a%2Fb%20c"
    assert client.get("/items/a%2Fb%20c/").json()["error"]["id"] == "a/b c"


def test_an_unknown_id_with_a_trailing_slash_is_named_without_it(client) -> None:
    err = client.get("/items/nope/").json()["error"]
    assert err["kind"] == "item" and err["id"] == "nope"


def test_the_other_get_routes_still_answer_with_a_trailing_slash(client) -> None:
    for path in ("/healthz", "/readyz", "/examples", "/metrics"):
        r = client.get(path + "/")
        assert r.status_code == 200, (path, r.status_code, r.text[:200])


def test_an_id_ending_in_a_slash_is_still_the_item_it_names(service) -> None:
    """Ids may end in a slash (URLs): such an id is answered, not redirected; sent encoded (%2F), an unknown one is
    refused rather than redirected to itself."""
    from fastapi.testclient import TestClient

    from twotower.serving import RecommenderService, create_app
    from twotower.serving.catalog import ItemCatalog

    base = service.catalog
    slashed = ItemCatalog([f"{i}/" for i in base.ids], base.columns)  # the same items, each id ending in "/"
    svc = RecommenderService(service.run, service.index, catalog=slashed, item_vectors=service.item_vectors,
                             user_vectors=service.user_vectors)
    with TestClient(create_app(service=svc)) as c:
        for path in ("/items/i5/", "/items/i5%2F"):
            r = c.get(path, follow_redirects=False)
            assert r.status_code == 200 and r.json()["item_id"] == "i5/", (path, r.status_code, r.text[:200])
        r = c.get("/items/nope%2F", follow_redirects=False)
        assert r.status_code == 404 and r.json()["error"]["id"] == "nope/"
