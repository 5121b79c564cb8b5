"""History items without training interactions: the user tower has not learned them (a pooled tower's own table
keeps their initial random rows), yet explanations named them as reasons ("Because you watched Time Tracers (1995)
and Great Day in Harlem, A (1994)", both such items) and `recommend --history` used them without a word."""
from __future__ import annotations

import json
import logging

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from tests.explain.explain_tiny_run import train_tiny_run, write_tiny_data
from twotower.explain import explain_recommendation
from twotower.pipeline.artifacts import TrainedRun

COLD = ("i30", "i31")


NOTE = "history: 2 of its items had no training interactions ('i30', 'i31'): the user tower has not learned them"


@pytest.fixture(scope="module")
def cold_run(tmp_path_factory) -> TrainedRun:
    tmp_path = tmp_path_factory.mktemp("cold_history")
    data = tmp_path / "run_data"
    write_tiny_data(data)
    for name in ("train.csv", "valid.csv"):  # the items stay in the item table, with no interactions
        rows = pd.read_csv(data / name)
        rows[~rows.item_id.isin(COLD)].to_csv(data / name, index=False)
    return TrainedRun.load(train_tiny_run(tmp_path / "run", history="recency", epochs=1, write_data=False))


def test_cold_history_items_are_flagged_never_named_and_warned_about(cold_run, capsys) -> None:
    from twotower.cli.main import main
    from twotower.serving import RecommenderService, create_app

    run = cold_run
    rows = [run.item_vocab.index(i) for i in (*COLD, "i1")]
    item = run.item_vocab.index("i5")
    e = explain_recommendation(run, history_rows=rows, item_row=item, top=10)
    cold = {h["item_id"] for h in e["history"] if h.get("cold")}
    assert cold == set(COLD) and all("cold" not in h for h in e["history"] if h["item_id"] not in COLD)
    for i in COLD:
        assert f"Film {i[1:]}" not in e["text"], e["text"]
    with TestClient(create_app(service=RecommenderService.load(run.dir))) as client:
        answer = client.post("/explain", json={"history": [*COLD, "i1"], "item_id": "i5"}).json()
        listed = client.post("/recommend", json={"history": [*COLD, "i1"], "k": 3}).json()
    note = NOTE
    assert any(w.startswith(note) for w in answer["warnings"]) and any(w.startswith(note) for w in listed["warnings"])
    capsys.readouterr()
    assert main(["recommend", "--run", str(run.dir), "--history", "i30,i31,i1", "--k", "3"]) == 0
    assert note in capsys.readouterr().err


def test_explain_warns_of_cold_history_items_as_post_explain_does(cold_run, capsys, caplog) -> None:
    """POST /explain warned of them; `explain --json` had no warnings, `explain` said nothing on stderr and listed
    such an item in its table as any other, and tt.explain_by_id said nothing."""
    from twotower.cli.main import main
    from twotower.explain import explain_by_id

    args = ["explain", "--run", str(cold_run.dir), "--history", "i30,i31,i1", "--item", "i5", "--top", "3"]
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    out = capsys.readouterr()
    assert [w for w in json.loads(out.out)["warnings"] if w.startswith(NOTE)]
    assert f"warning: --{NOTE}" in out.err
    assert main(args) == 0
    out = capsys.readouterr()
    assert f"warning: --{NOTE}" in out.err
    rows = {line.split()[1]: line.split()[0] for line in out.out.splitlines() if line.split()[1:2] in (["i30"], ["i31"], ["i1"])}
    assert rows["i30"].endswith("*") and rows["i31"].endswith("*") and not rows["i1"].endswith("*")
    assert "* no training interactions (a cold item): the user tower has not learned it" in out.out
    with caplog.at_level(logging.WARNING, logger="twotower"):
        explain_by_id(cold_run, history=["i30", "i31", "i1"], item_id="i5")
    assert [r for r in caplog.records if r.getMessage().startswith(NOTE)]
