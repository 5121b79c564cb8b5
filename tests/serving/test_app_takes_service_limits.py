"""``create_app(service=...)`` checks requests against the loaded service's own limits: it checked them against
the defaults, so one question got an answer from Python (``service.recommend``) and a refusal over HTTP, or the
reverse, depending on which surface asked."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize("max_k,max_history", [(5, 3), (2000, 600)])
def test_http_and_python_service_refuse_and_answer_alike(run_dir, max_k, max_history) -> None:
    from twotower.serving import RecommenderService, ServiceSettings, create_app
    from twotower.serving.service import RecRequest

    service = RecommenderService.load(run_dir, settings=ServiceSettings(max_k=max_k, max_history=max_history))
    user = service.run.user_vocab.ids[0]
    item = service.run.item_vocab.ids[0]
    with TestClient(create_app(service=service)) as client:
        for k in (5, 8, 1500):  # within both limits, over max_k=5, over the default max_k (1000)
            r = client.post("/recommend", json={"user_id": user, "k": k})
            try:
                py = service.recommend(RecRequest(user_id=user, k=k))
            except Exception as e:  # noqa: BLE001 - compared with the HTTP refusal below
                assert r.status_code == 422, (k, r.text)
                assert r.json()["error"]["message"].endswith(str(e).split(": ", 1)[1]), (r.text, str(e))
            else:
                assert r.status_code == 200, (k, r.text)
                assert [i["item_id"] for i in r.json()["items"]] == [i["item_id"] for i in py["items"]]
        # a history longer than the default max_history (500) but within this service's 600, or over its 3
        history = [item] * 4 if max_history == 3 else [item] * 550
        r = client.post("/recommend", json={"history": history, "k": 5})
        if max_history == 3:
            assert r.status_code == 422, r.text
        else:
            assert r.status_code == 200, r.text
            py = service.recommend(RecRequest(history=tuple(history), k=5))
            assert [i["item_id"] for i in r.json()["items"]] == [i["item_id"] for i in py["items"]]


def test_explain_without_explain_k_is_answered_when_the_app_allows_more_than_the_service(service) -> None:
    """An app given settings of its own over a loaded service filled a request's missing explain_k with the app's
    explain_k (20), which the service (its own explain_k 10) then refused: {"explain": true} alone was answered
    422 "explain_k: must be at most 10 ..., got 20", naming a field the client never sent."""
    from twotower.serving import ServiceSettings, create_app

    assert service.settings.explain_k == 10
    body = {"user_id": service.run.user_vocab.ids[0], "k": 15, "explain": True}
    with TestClient(create_app(service=service, settings=ServiceSettings(explain_k=20))) as client:
        one = client.post("/recommend", json=body)
        batch = client.post("/recommend/batch", json={"requests": [body]})
    assert one.status_code == 200 and batch.status_code == 200, (one.text, batch.text)
    for items in (one.json()["items"], batch.json()["results"][0]["items"]):
        assert sum("explanation" in i for i in items) == 10
