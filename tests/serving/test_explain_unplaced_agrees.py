"""Explaining an item the model cannot place (no training interactions, an ID-only item tower): POST /explain warns
that its score comes from no interaction; `twotower explain --json` and tt.explain_by_id said nothing, so the same
question got a caveat over HTTP and a bare explanation on the other two surfaces."""
from __future__ import annotations

import json
import logging

from fastapi.testclient import TestClient

from twotower.cli.main import main


def test_unplaced_item_explained_with_one_warning_on_every_surface(unplaced_run_dir, capsys, caplog) -> None:
    import twotower as tt
    from twotower.serving import create_app

    run = tt.TrainedRun.load(unplaced_run_dir)
    with TestClient(create_app(run)) as client:
        r = client.post("/explain", json={"user_id": "u1", "item_id": "x0"})
    assert r.status_code == 200, r.text
    http = r.json()
    assert len(http["warnings"]) == 1 and "item 'x0' had no training interactions" in http["warnings"][0]

    capsys.readouterr()
    assert main(["explain", "--run", str(unplaced_run_dir), "--threads", "1", "--json", "--user", "u1",
                 "--item", "x0"]) == 0
    cli = json.loads(capsys.readouterr().out)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="twotower"):
        py = tt.explain_by_id(run, user_id="u1", item_id="x0")
    logged = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.WARNING]

    assert cli.get("warnings") == http["warnings"]
    assert logged == http["warnings"]
    assert {k: v for k, v in cli.items() if k != "warnings"} == http["explanation"] == py
