"""On a search-only server (`serve --search-index DIR`, no --run) the recommender's GET routes name `--run`.

POST /recommend said "restart the server with `twotower serve --run DIR`", but GET /users/1, /items/50 and
/examples answered the generic "no route ...; the endpoints are listed at /docs", which lists none of them.
"""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from twotower.serving import create_app
from twotower.serving.search_service import SearchService


@pytest.mark.parametrize("path", ["/users/1", "/items/50", "/items/a/b", "/examples", "/examples/"])
def test_recommender_get_routes_name_the_run_flag(tmp_path, path) -> None:
    app = create_app(search_service=SearchService(index=None, reranker=None, index_dir=tmp_path))
    with TestClient(app) as client:
        r = client.get(path)
    assert r.status_code == 404, r.text
    message = r.json()["error"]["message"]
    assert message == f"GET {path} needs a recommender run; restart the server with `twotower serve --run DIR`"


def test_unknown_routes_keep_the_generic_answer(tmp_path) -> None:
    app = create_app(search_service=SearchService(index=None, reranker=None, index_dir=tmp_path))
    with TestClient(app) as client:
        r = client.get("/nowhere")
    assert r.status_code == 404 and r.json()["error"]["message"].startswith("no route GET /nowhere"), r.text
