"""`twotower explain --json` prints what POST /explain answers: its ``explanation``, field for field, with its
``warnings`` when there are any (they reached stderr only, so a JSON reader of the CLI never saw them)."""
from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from twotower.cli.main import main


@pytest.fixture(scope="module")
def feature_client(feature_run):
    from twotower.serving import RecommenderService, create_app

    with TestClient(create_app(service=RecommenderService.load(feature_run.dir))) as client:
        yield client


def _cli_json(run_dir: str, args: list[str], capsys) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["explain", "--run", run_dir, "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _as_cli(answer: dict[str, Any]) -> dict[str, Any]:
    """POST /explain's answer as `explain --json` prints it: the explanation, plus the warnings if any."""
    return {**answer["explanation"], **({"warnings": answer["warnings"]} if "warnings" in answer else {})}


@pytest.mark.parametrize("case", ["user", "history", "history+features", "seen item"])
def test_explain_json_is_the_http_explanation(feature_run, feature_client, capsys, case) -> None:
    run = feature_run
    user = run.user_vocab.ids[2]
    hist = [run.item_vocab.ids[int(r)] for r in run.history.of(2)]
    item = next(i for i in run.item_vocab.ids if i not in hist)
    if case == "user":
        body, args = {"user_id": user, "item_id": item}, ["--user", user, "--item", item]
    elif case == "history":
        body, args = {"history": hist, "item_id": item}, ["--history", ",".join(hist), "--item", item]
    elif case == "history+features":  # an age far outside training's range: a warning on both sides
        feats = {"age": 900}
        body = {"history": hist, "item_id": item, "user_features": feats}
        args = ["--history", ",".join(hist), "--item", item, "--user-features", json.dumps(feats)]
    else:
        body, args = {"user_id": user, "item_id": hist[0]}, ["--user", user, "--item", hist[0]]
    r = feature_client.post("/explain", json=body)
    assert r.status_code == 200, r.text
    http = r.json()
    cli = _cli_json(str(run.dir), [*args, "--top", "5"], capsys)
    want = _as_cli(http)
    assert sorted(cli) == sorted(want)
    for field in want:
        assert cli[field] == want[field], field
    if case == "history+features":
        assert cli["warnings"] and cli["warnings"][0].startswith("user_features.age: ")
    else:
        assert "warnings" not in cli


@pytest.mark.parametrize("method", ["loo", "gradxinput"])
def test_post_explain_takes_top_and_method_as_the_cli_does(feature_run, feature_client, capsys, method) -> None:
    # {"top": 2} was refused as "not a field of this request" where `explain --top 2 --method gradxinput` and
    # tt.explain_by_id(top=, method=) take them
    run = feature_run
    user = run.user_vocab.ids[2]
    hist = [run.item_vocab.ids[int(r)] for r in run.history.of(2)]
    item = next(i for i in run.item_vocab.ids if i not in hist)
    answer = feature_client.post("/explain", json={"user_id": user, "item_id": item, "top": 2, "method": method})
    assert answer.status_code == 200, answer.text
    got = _as_cli(answer.json())
    assert len(got["history"]) == min(2, len(hist)) and got["method"] == method
    assert got == _cli_json(str(run.dir), ["--user", user, "--item", item, "--top", "2", "--method", method], capsys)
    bad = feature_client.post("/explain", json={"user_id": user, "item_id": item, "top": -1})
    assert bad.status_code == 422 and "top" in bad.text
