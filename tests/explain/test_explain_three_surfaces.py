"""One explain question, three surfaces: `twotower explain --json`, POST /explain and tt.explain_by_id give the same
explanation and say the same warnings (a new user's feature value training never saw). From Python the warning
went nowhere: not logged, not returned, where tt.recommend logs it for the same user."""
from __future__ import annotations

import json
import logging

import pytest
from fastapi.testclient import TestClient

from twotower.cli.main import main


@pytest.fixture(scope="module")
def feature_client(feature_run):
    from twotower.serving import RecommenderService, create_app

    with TestClient(create_app(service=RecommenderService.load(feature_run.dir))) as client:
        yield client


def test_explain_warnings_agree_on_cli_http_and_python(feature_run, feature_client, capsys, caplog) -> None:
    import twotower as tt

    run = feature_run
    hist = [run.item_vocab.ids[int(r)] for r in run.history.of(2)]
    item = next(i for i in run.item_vocab.ids if i not in hist)
    feats = {"age": 900}  # far outside training's range: read all the same, with a warning

    r = feature_client.post("/explain", json={"history": hist, "item_id": item, "user_features": feats})
    assert r.status_code == 200, r.text
    http = r.json()
    capsys.readouterr()
    assert main(["explain", "--run", str(run.dir), "--json", "--history", ",".join(hist), "--item", item,
                 "--user-features", json.dumps(feats)]) == 0
    cli = json.loads(capsys.readouterr().out)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="twotower"):
        py = tt.explain_by_id(run, history=hist, item_id=item, user_features=feats)
    logged = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]

    assert http["warnings"] and http["warnings"][0].startswith("user_features.age: ")
    assert cli["warnings"] == http["warnings"]
    assert logged == http["warnings"]  # was []: the Python caller was never told
    assert {k: v for k, v in cli.items() if k != "warnings"} == http["explanation"] == py


def test_the_explained_rank_is_the_items_place_in_the_served_list(feature_run, feature_client) -> None:
    """`rank` is where /recommend lists the item (no filters, exact search); `empty_history_rank` where the same
    list puts it when the user tower reads no history, as /recommend with user features alone would."""
    run = feature_run
    for user in run.user_vocab.ids[:6]:
        listed = feature_client.post("/recommend", json={"user_id": user, "k": 8}).json()["items"]
        for place, entry in enumerate(listed, start=1):
            e = feature_client.post("/explain", json={"user_id": user, "item_id": entry["item_id"]}).json()
            assert e["explanation"]["rank"] == place
    # a new user: the empty history's list is the one features alone give, without their history's items
    hist = [run.item_vocab.ids[int(r)] for r in run.history.of(2)]
    feats = {"age": 30}
    alone = feature_client.post("/recommend", json={"history": [], "user_features": feats, "k": 50}).json()["items"]
    order = [i["item_id"] for i in alone if i["item_id"] not in hist]
    for item in order[:5]:
        e = feature_client.post("/explain", json={"history": hist, "item_id": item, "user_features": feats}).json()
        assert e["explanation"]["empty_history_rank"] == order.index(item) + 1


def test_under_history_from_the_rank_counts_among_the_items_the_list_shows(mean_run, tmp_path, capsys) -> None:
    """A known user's list under --history-from leaves out their training history and their input history alike;
    explain counted its `rank` (and `already_seen`) against the input history alone, so an item the list showed
    first was explained second, and an item of the training history, never listed, was "not seen" at some rank.
    A user without rows in the files is read from the empty history: their `empty_history_rank` is their `rank`."""
    import pandas as pd

    import twotower as tt
    from twotower.serving import RecommenderService, create_app

    run = mean_run
    trained = [run.item_vocab.ids[int(r)] for r in run.history.of(run.user_vocab.index("u1"))]
    fresh = next(i for i in run.item_vocab.ids if i not in trained)
    inputs = tmp_path / "inputs.csv"  # u1's input history leaves out their training rows; u2 has none
    pd.DataFrame({"user_id": ["u1"], "item_id": [fresh], "timestamp": [1], "rating": [4]}).to_csv(inputs, index=False)
    service = RecommenderService.load(run.dir, history_from=str(inputs))
    with TestClient(create_app(service=service)) as client:
        for user in ("u1", "u2"):
            listed = tt.recommend(run, [user], history_from=str(inputs), k=10, exact=True)[0]
            for place, entry in enumerate(listed, start=1):
                py = tt.explain_by_id(run, user_id=user, item_id=entry["item_id"], history_from=str(inputs))
                http = client.post("/explain", json={"user_id": user, "item_id": entry["item_id"]}).json()
                assert (py["rank"], py["already_seen"]) == (place, False), (user, entry)
                assert http["explanation"]["rank"] == place
                if user == "u2":  # the empty input history is what the tower reads: no history, the same place
                    assert py["empty_history_rank"] == place
        seen = client.post("/explain", json={"user_id": "u1", "item_id": trained[0]}).json()["explanation"]
    assert (seen["already_seen"], seen["rank"]) == (True, None)
    capsys.readouterr()
    assert main(["explain", "--run", str(run.dir), "--json", "--user", "u1", "--history-from", str(inputs),
                 "--item", trained[0]]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert (cli["already_seen"], cli["rank"]) == (True, None)
