"""`POST /recommend` with ``"explain": true`` explains its first items in one call; each explanation is the one
`POST /explain` gives for that item alone, number for number (the item tower ran over the whole batch in float32,
which rounds otherwise than a batch of one: on MovieLens-100K the inline score and contributions were ~4e-8 off)."""
from __future__ import annotations

from fastapi.testclient import TestClient

from twotower.explain import explain_recommendation, explain_recommendations


def test_explaining_items_together_gives_each_one_s_own_explanation(mean_run) -> None:
    run = mean_run
    items = list(range(run.n_items))
    for who in ({"user_row": 2}, {"history_rows": [int(r) for r in run.history.of(3)]}):
        together = explain_recommendations(run, item_rows=items, **who)
        for item, e in zip(items, together):
            assert e == explain_recommendation(run, item_row=item, **who)


def test_inline_explanations_are_post_explain_s(mean_run) -> None:
    from twotower.serving import RecommenderService, create_app

    user = mean_run.user_vocab.ids[2]
    with TestClient(create_app(service=RecommenderService.load(mean_run.dir))) as client:
        listed = client.post("/recommend", json={"user_id": user, "k": 5, "explain": True}).json()["items"]
        for it in listed:
            alone = client.post("/explain", json={"user_id": user, "item_id": it["item_id"]}).json()["explanation"]
            assert it["explanation"] == alone
