"""Per-request exclusions on every surface: POST /recommend's (and each /recommend/batch request's)
``exclude_items``, ``tt.recommend(exclude=...)`` and `recommend --exclude-items a,b` leave the listed items out of
the answer as a seen item is left out, give the same list, and refuse an unknown id in a history id's words. HTTP
had no per-request exclusion: a client could not say "not these" (already in the cart, already shown)."""
from __future__ import annotations

import json

import pytest

import twotower as tt
from twotower.cli.main import main
from twotower.errors import TwoTowerError


@pytest.fixture(scope="module")
def run(run_dir):
    return tt.TrainedRun.load(run_dir)


def _cli_json(run_dir, capsys, *argv: str):
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--threads", "1", "--json", *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _ids(items: list[dict]) -> list[str]:
    return [i["item_id"] for i in items]


@pytest.mark.parametrize("body, cli, py", [
    ({"user_id": "u3", "k": 5}, ["--user", "u3", "--k", "5"], lambda run, x: tt.recommend(run, ["u3"], k=5, exclude=x)),
    ({"history": ["i1", "i5"], "k": 5}, ["--history", "i1,i5", "--k", "5"],
     lambda run, x: tt.recommend(run, history=["i1", "i5"], k=5, exclude=x)),
])
def test_the_listed_items_are_left_out_alike_on_every_surface(run_dir, run, client, capsys, body, cli, py) -> None:
    plain = client.post("/recommend", json=body).json()
    drop = _ids(plain["items"])[:2]  # the two best: the list moves up, two new items at its end
    http = client.post("/recommend", json={**body, "exclude_items": drop}).json()
    assert not set(drop) & set(_ids(http["items"])) and len(http["items"]) == 5
    assert _ids(http["items"])[:3] == _ids(plain["items"])[2:]
    assert _cli_json(run_dir, capsys, *cli, "--exclude-items", ",".join(drop)) == http
    assert py(run, drop)[0] == http["items"]
    batch = client.post("/recommend/batch", json={"requests": [body, {**body, "exclude_items": drop}]}).json()
    assert batch["results"] == [plain, http]  # per request: the other request's list is untouched


def test_users_csv_leaves_the_listed_items_out_of_every_list(run_dir, client, capsys) -> None:
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--threads", "1", "--users", "u1,u2", "--k", "3",
                 "--exclude-items", "i1,i2,i3"]) == 0
    rows = [ln.split(",") for ln in capsys.readouterr().out.splitlines()[1:]]
    batch = client.post("/recommend/batch", json={"requests": [
        {"user_id": u, "k": 3, "exclude_items": ["i1", "i2", "i3"]} for u in ("u1", "u2")]}).json()["results"]
    assert [r[1] for r in rows] == _ids(batch[0]["items"]) + _ids(batch[1]["items"])


def test_an_unknown_listed_id_is_refused_as_a_history_id_is(run_dir, run, client, capsys) -> None:
    core = "unknown item 'nope' (not among the 60 known items)"
    r = client.post("/recommend", json={"user_id": "u3", "exclude_items": ["i1", "nope"]})
    assert r.status_code == 404 and r.json()["error"]["field"] == "exclude_items[1]"
    assert r.json()["error"]["message"] == f"exclude_items[1]: {core}"
    r = client.post("/recommend/batch", json={"requests": [{"user_id": "u3"}, {"user_id": "u3", "exclude_items": ["nope"]}]})
    assert r.status_code == 404 and r.json()["error"]["field"] == "requests[1].exclude_items[0]"
    with pytest.raises(TwoTowerError) as e:
        tt.recommend(run, ["u3"], exclude=["i1", "nope"])
    assert str(e.value) == f"exclude[1]: {core}"
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--user", "u3", "--exclude-items", "i1,nope"]) == 2
    err = capsys.readouterr().err
    assert f"error: --exclude-items: item 2 of 2: {core}" in err and "ranking with" not in err


def test_the_list_is_bounded_by_the_servers_setting(make_client) -> None:
    r = make_client(max_exclude=2).post("/recommend", json={"user_id": "u3", "exclude_items": ["i1", "i2", "i3"]})
    assert r.status_code == 422
    assert r.json()["error"]["details"] == [{"loc": ["body", "exclude_items"], "msg": (
        "must hold at most 2 item ids (this server's max_exclude: `twotower serve --max-exclude` sets it), got 3")}]


def test_a_shortfall_names_the_listed_items(client) -> None:
    body = {"user_id": "u3", "k": 60, "exclude_items": ["i1", "i2"]}
    reason = client.post("/recommend", json=body).json()["shortfall"]["reason"]
    assert "after the excluded (seen) items and the listed exclude_items" in reason
