"""`twotower recommend --user/--history --json` prints POST /recommend's answer, as `similar --item --json` prints
POST /similar-items': the same keys (``user_id``, ``k``, ``shortfall``) and item records (``display_name``)."""
from __future__ import annotations

import json

import pytest

from twotower.cli.main import main


def _cli(run_dir, capsys, *argv: str) -> dict:
    assert main(["recommend", "--run", str(run_dir), "--exact", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("argv, body", [
    (["--user", "u3", "--k", "5"], {"user_id": "u3", "k": 5}),
    (["--history", "i1,i5,i1", "--k", "7"], {"history": ["i1", "i5", "i1"], "k": 7}),
    (["--user", "u3", "--k", "5", "--no-exclude-seen"], {"user_id": "u3", "k": 5, "exclude_seen": False}),
])
def test_cli_json_is_the_http_answer(run_dir, client, capsys, argv, body) -> None:
    http = client.post("/recommend", json=body).json()
    assert _cli(run_dir, capsys, *argv) == http
    assert all("display_name" in it for it in http["items"])


def test_cli_json_shortfall_is_the_http_one(run_dir, service, client, capsys) -> None:
    k = len(service.run.item_vocab) + 5  # more than the catalogue: a short list, said the same way by both
    http = client.post("/recommend", json={"user_id": "u0", "k": k}).json()
    cli = _cli(run_dir, capsys, "--user", "u0", "--k", str(k))
    assert "shortfall" in http and cli == http


def test_cli_json_keys_come_in_the_http_order(run_dir, client, capsys) -> None:
    http = client.post("/recommend", json={"user_id": "u3", "k": 3}).json()
    cli = _cli(run_dir, capsys, "--user", "u3", "--k", "3")
    assert list(cli) == list(http) and [list(i) for i in cli["items"]] == [list(i) for i in http["items"]]


def test_python_lists_hold_the_http_records(service, client) -> None:
    import twotower as tt

    run = service.run
    assert tt.recommend(run, ["u3"], k=5, exact=True)[0] == client.post("/recommend", json={"user_id": "u3", "k": 5}).json()["items"]
    assert tt.similar(run, ["i3"], k=5, exact=True)[0] == client.post("/similar-items", json={"item_id": "i3", "k": 5}).json()["items"]
