"""An item the model cannot place gets no similar items, and says why, on every path.

Items x0..x3 of the ``unplaced_run_dir`` run are in the item table but never in training, and its item tower
reads only the item ID: they share one vector (the zeroed ID embedding through the tower), so their "neighbours"
were each other and then the first catalogue items, ranked by nothing the model learnt.
"""
from __future__ import annotations

import csv
import json
import logging

import pytest
from fastapi.testclient import TestClient

from twotower.cli.main import main

UNPLACED = ("x0", "x1", "x2", "x3")
NOTE = ("item 'x0' had no training interactions and the item tower reads only the item ID (no features or text), "
        "so the model cannot place it: its vector comes from the zeroed ID embedding, not from any interaction, "
        "and no similar items are returned")


@pytest.fixture(scope="module")
def unplaced_service(unplaced_run_dir):
    from twotower.serving import RecommenderService

    return RecommenderService.load(unplaced_run_dir)


def test_the_run_holds_unplaced_items(unplaced_service) -> None:
    from twotower.pipeline.similar import unplaced_item_mask

    run = unplaced_service.run
    assert [run.item_vocab.id_at(int(r)) for r in unplaced_item_mask(run).nonzero()[0]] == list(UNPLACED)


def test_http_answers_an_empty_list_and_why(unplaced_service) -> None:
    from twotower.serving import create_app

    with TestClient(create_app(service=unplaced_service, settings=unplaced_service.settings)) as client:
        got = client.post("/similar-items", json={"item_id": "x0", "k": 5}).json()
        warm = client.post("/similar-items", json={"item_id": "i0", "k": 5}).json()
    assert got == {"items": [], "item_id": "x0", "k": 5, "query_space": "none", "warnings": [NOTE]}
    assert warm["query_space"] == "item" and len(warm["items"]) == 5
    # this tiny tower maps the zeroed ID through a hidden layer to a vector near many items: i0's list holds such
    # items, and says so, as a /recommend list does
    held = [it["item_id"] for it in warm["items"] if it["item_id"] in UNPLACED]
    assert held, warm
    assert warm["warnings"] == [
        f"item{'s' if len(held) > 1 else ''} {', '.join(repr(i) for i in held)} had no training interactions and the "
        "item tower reads only the item ID (no features or text), so the model cannot place "
        f"{'them' if len(held) > 1 else 'it'}: their scores come from the zeroed ID embedding, not from any interaction"]


def test_cli_item_says_why(unplaced_run_dir, capsys) -> None:
    assert main(["similar", "--run", str(unplaced_run_dir), "--item", "x0", "--exact", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["items"] == [] and answer["warnings"] == [NOTE] and answer["query_space"] == "none"
    assert main(["similar", "--run", str(unplaced_run_dir), "--item", "x0", "--exact"]) == 0
    captured = capsys.readouterr()
    assert f"warning: {NOTE}" in captured.err and "x1" not in captured.out


def test_cli_item_prints_a_list_that_holds_them_and_warns(unplaced_run_dir, capsys) -> None:
    # i0's neighbours hold x0.. (see test_http_answers_an_empty_list_and_why): the list is printed, with the warning
    assert main(["similar", "--run", str(unplaced_run_dir), "--item", "i0", "--exact", "--k", "5"]) == 0
    captured = capsys.readouterr()
    assert "warning: item" in captured.err and "so the model cannot place" in captured.err
    assert "top 5 similar to" in captured.out and len(captured.out.strip().splitlines()) == 6


def test_cli_all_items_has_no_rows_for_them(unplaced_run_dir, tmp_path, capsys) -> None:
    out = tmp_path / "similar.csv"
    assert main(["similar", "--run", str(unplaced_run_dir), "--items", "all", "--exact", "--k", "5",
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("4 of 64 items have no training interactions and the item tower reads only the item ID, so the model "
            "cannot place them: no rows for them (e.g. item x0)") in err
    assert f"wrote 300 rows for 60 items to {out}" in err and "shorter than k" not in err  # said 64
    with open(out, newline="", encoding="utf-8") as f:
        queried = {r["item_id"] for r in csv.DictReader(f)}
    assert len(queried) == 60 and not queried & set(UNPLACED)


def test_python_api_returns_an_empty_list(unplaced_service, caplog) -> None:
    import twotower as tt

    with caplog.at_level(logging.WARNING, logger="twotower.pipeline.similar"):
        lists = tt.similar(unplaced_service.run, ["x0", "i0"], k=5, exact=True)
    assert lists[0] == [] and len(lists[1]) == 5
    assert NOTE in caplog.text


# a filter on year 2000 leaves i10, i30, i50 and x0..x3: a list of 7 must hold the items the model cannot place
YEAR_2000 = {"year": ["2000"]}
LIST_NOTE = ("items 'x0', 'x1', 'x2', 'x3' had no training interactions and the item tower reads only the item ID "
             "(no features or text), so the model cannot place them: their scores come from the zeroed ID embedding, "
             "not from any interaction")
ITEM_NOTE = ("item 'x0' had no training interactions and the item tower reads only the item ID (no features or "
             "text), so the model cannot place it: its score comes from the zeroed ID embedding, not from any "
             "interaction, and /similar-items returns no items for it")


def test_recommend_warns_when_a_list_holds_them(unplaced_service) -> None:
    from twotower.serving.service import RecRequest
    got = unplaced_service.recommend(RecRequest(user_id="u0", k=7, filters=YEAR_2000))
    assert {it["item_id"] for it in got["items"]} >= set(UNPLACED)
    assert LIST_NOTE in got["warnings"]
    plain = unplaced_service.recommend(RecRequest(user_id="u0", k=5))
    assert "warnings" not in plain or all("cannot place" not in w for w in plain["warnings"])


def test_item_and_explain_say_so(unplaced_service) -> None:
    assert unplaced_service.item("x0")["warnings"] == [ITEM_NOTE]
    assert "warnings" not in unplaced_service.item("i0")
    got = unplaced_service.explain(user_id="u0", item_id="x0")
    assert got["explanation"]["cold"] is True and ITEM_NOTE in got["warnings"]
    assert "warnings" not in unplaced_service.explain(user_id="u0", item_id="i0")


def test_recommend_cli_json_warns_as_http(unplaced_run_dir, capsys) -> None:
    # k=60 of 64 items: every unseen item is in the list, the four unplaced ones included
    assert main(["recommend", "--run", str(unplaced_run_dir), "--user", "u0", "--k", "60", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert set(UNPLACED) <= {it["item_id"] for it in answer["items"]} and LIST_NOTE in answer["warnings"]
