"""A request without k gets the service's default_k from Python as over HTTP: RecRequest's k defaulted to the class's
10, so a service with ServiceSettings(default_k=20) answered 10 items from Python and 20 over HTTP, and one with
max_k=5 refused from Python ("k: must be at most 5") what HTTP answered with 5 items."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize("limits, want", [({"default_k": 20}, 20), ({"max_k": 5}, 5), ({}, 10)])
def test_a_request_without_k_gets_the_same_list_from_python_and_http(run_dir, limits, want) -> None:
    from twotower.serving import RecommenderService, ServiceSettings, create_app
    from twotower.serving.service import RecRequest

    service = RecommenderService.load(run_dir, settings=ServiceSettings(**limits))
    user = service.run.user_vocab.ids[0]
    item = service.run.item_vocab.ids[0]
    with TestClient(create_app(service=service)) as client:
        for body, req in (({"user_id": user}, RecRequest(user_id=user)),
                          ({"history": [item]}, RecRequest(history=(item,))),
                          ({"user_id": user, "explain": True}, RecRequest(user_id=user, explain=True))):
            r = client.post("/recommend", json=body)
            assert r.status_code == 200, r.text
            py = service.recommend(req)
            assert r.json()["k"] == py["k"] == want
            assert [i["item_id"] for i in r.json()["items"]] == [i["item_id"] for i in py["items"]]
            assert len(py["items"]) == want
        batch = service.recommend_batch([RecRequest(user_id=user), RecRequest(user_id=user, k=3)])
        assert [a["k"] for a in batch] == [want, 3]


def test_create_app_refuses_settings_that_are_not_service_settings(run_dir) -> None:
    # a dict failed at startup with "AttributeError: 'dict' object has no attribute 'max_k'"
    from twotower.errors import ConfigError
    from twotower.serving import create_app

    with pytest.raises(ConfigError, match=r"^create_app settings: a twotower\.serving\.ServiceSettings, e\.g\. "
                                          r"ServiceSettings\(\*\*\{'max_k': 5\}\); got a dict$"):
        create_app(run_dir, settings={"max_k": 5})
