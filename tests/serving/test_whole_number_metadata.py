"""Item metadata in JSON: a float column whose values are all whole numbers is written as integers.

pandas reads an integer column with an empty cell (MovieLens' ``year``) as float, so `recommend --json`, `similar
--json`, `explain --json` and their HTTP answers said ``"year": 1995.0``. Whole numbers are integers now, a missing
value null, and a column with a real fraction keeps its floats (``10.0`` beside ``9.99``); the CLI and HTTP agree.
"""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tiny_run import N_ITEMS, build_tiny_run  # noqa: I001 - helper next to this file
from twotower.cli.main import main

YEARS = [None if j == 5 else 1990 + j % 20 for j in range(N_ITEMS)]
PRICES = [10.0 if j % 2 else 9.99 for j in range(N_ITEMS)]  # 10.0 beside 9.99: a float column, kept as floats


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return build_tiny_run(tmp_path_factory.mktemp("whole"), item_columns={"year": YEARS, "price": PRICES})


@pytest.fixture(scope="module")
def client(run_dir):
    from twotower.serving import RecommenderService, create_app

    with TestClient(create_app(service=RecommenderService.load(run_dir))) as c:
        yield c


def _cli(run_dir, capsys, *argv: str) -> dict:
    capsys.readouterr()
    exact = [] if argv[0] == "explain" else ["--exact"]
    assert main([argv[0], "--run", str(run_dir), "--threads", "1", *exact, "--json", *argv[1:]]) == 0, \
        capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _records(answer: dict) -> list[dict]:
    if "items" in answer:
        return answer["items"]
    answer = answer.get("explanation", answer)  # POST /explain's explanation is what `explain --json` prints
    return [answer["item"], *answer["history"]]  # an explanation: the item and its history


def _check(records: list[dict]) -> None:
    by_id = {r["item_id"]: r for r in records}
    for item_id, r in by_id.items():
        j = int(item_id[1:])
        year, price = r["year"], r["price"]
        assert (year is None) if YEARS[j] is None else (type(year) is int and year == YEARS[j]), r
        assert type(price) is float and price == PRICES[j], r


@pytest.mark.parametrize("argv, route, body", [
    (["recommend", "--user", "u3", "--k", "60"], "/recommend", {"user_id": "u3", "k": 60}),
    (["recommend", "--history", "i6,i7", "--k", "58"], "/recommend", {"history": ["i6", "i7"], "k": 58}),
    (["similar", "--item", "i3", "--k", "59"], "/similar-items", {"item_id": "i3", "k": 59}),
    (["explain", "--history", "i5,i6,i7", "--item", "i8"], "/explain", {"history": ["i5", "i6", "i7"], "item_id": "i8"}),
])
def test_whole_numbers_are_integers_in_cli_and_http_alike(run_dir, client, capsys, argv, route, body) -> None:
    cli = _cli(run_dir, capsys, *argv)
    r = client.post(route, json=body)
    assert r.status_code == 200, r.text
    http = r.json()
    cli_records, http_records = _records(cli), _records(http)
    assert [json.dumps(x) for x in cli_records] == [json.dumps(x) for x in http_records]  # types too: 1995 != "1995.0"
    _check(http_records)
    if argv[0] != "explain":
        assert {"i5"} & {x["item_id"] for x in http_records}  # the item with no year is listed, as null


def test_item_lookup_and_python_agree(run_dir, client) -> None:
    import twotower as tt

    _check([client.get(f"/items/i{j}").json() for j in (4, 5, 6)])
    run = tt.TrainedRun.load(run_dir)
    _check(tt.recommend(run, ["u3"], k=60)[0])
