"""``RecommenderService.recommend(RecRequest(user_id=" u3"))`` echoes the id it served, as POST /recommend does: HTTP
drops the white space of an id (coerce_id) and answers ``"user_id": "u3"``; Python served user u3 and answered
``" u3"``."""
from __future__ import annotations


def test_python_echoes_the_served_id_as_http(service, client) -> None:
    from twotower.serving.service import RecRequest

    http = client.post("/recommend", json={"user_id": " u3\t", "k": 3}).json()
    py = service.recommend(RecRequest(user_id=" u3\t", k=3))
    assert http["user_id"] == py["user_id"] == "u3"
    assert py == http
    batch = service.recommend_batch([RecRequest(user_id=" u3", k=3)])
    assert batch[0]["user_id"] == "u3"
