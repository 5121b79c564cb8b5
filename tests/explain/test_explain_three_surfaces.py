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
