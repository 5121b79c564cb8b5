"""An id with white space at an end (a pasted " u1") is the same id from the command line, over HTTP and from Python:
POST /recommend, /similar-items and /explain drop the white space (as the file readers drop it from every stored id,
and `--users` / `--history` from their comma lists), while `recommend --user ' u1'`, `similar --item`, `explain`,
tt.recommend, tt.similar and tt.explain_by_id refused it as an unknown id."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from twotower.cli.main import main


@pytest.fixture(scope="module")
def loaded(run_dir):
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.serving import RecommenderService, create_app

    run = TrainedRun.load(run_dir)
    with TestClient(create_app(service=RecommenderService.load(run))) as client:
        yield run, client


def _cli(run, capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main([args[0], "--run", str(run.dir), "--threads", "1", "--json", *args[1:]]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _ids(items: list[dict]) -> list[str]:
    return [i["item_id"] for i in items]


def test_padded_ids_are_one_id_on_every_surface(loaded, capsys) -> None:
    import twotower as tt

    run, client = loaded
    user, item = " u1", "i3\t"
    want_rec = _ids(tt.recommend(run, ["u1"], k=5)[0])

    http = client.post("/recommend", json={"user_id": user, "k": 5}).json()
    cli = _cli(run, capsys, "recommend", "--user", user, "--k", "5")
    assert _ids(http["items"]) == _ids(cli["items"]) == _ids(tt.recommend(run, [user], k=5)[0]) == want_rec
    assert cli["user_id"] == http["user_id"] == "u1"

    hist = ["i3 ", " i7"]
    want_hist = _ids(tt.recommend(run, history=["i3", "i7"], k=5)[0])
    assert _ids(tt.recommend(run, history=hist, k=5)[0]) == want_hist
    assert _ids(client.post("/recommend", json={"history": hist, "k": 5}).json()["items"]) == want_hist

    want_sim = _ids(tt.similar(run, ["i3"], k=5)[0])
    http = client.post("/similar-items", json={"item_id": item, "k": 5}).json()
    cli = _cli(run, capsys, "similar", "--item", item, "--k", "5")
    assert _ids(http["items"]) == _ids(cli["items"]) == _ids(tt.similar(run, [item], k=5)[0]) == want_sim

    want = tt.explain_by_id(run, user_id="u1", item_id="i3")
    http = client.post("/explain", json={"user_id": user, "item_id": item}).json()["explanation"]
    cli = _cli(run, capsys, "explain", "--user", user, "--item", item)
    assert http == cli == tt.explain_by_id(run, user_id=user, item_id=item) == want
