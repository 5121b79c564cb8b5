"""Per-request exclusions of /similar-items on every surface: POST /similar-items' ``exclude_items``,
``tt.similar(exclude=...)`` and `similar --exclude-items a,b` leave the listed items out as the query item itself
is left out, give the same list, refuse an unknown id in an item id's words and are bounded by ``max_exclude``, as
/recommend's are. /similar-items took no exclusion list: "more like this, but not the ones already shown"."""
from __future__ import annotations

import json

import pytest

import twotower as tt
from twotower.cli.main import main
from twotower.errors import TwoTowerError


@pytest.fixture(scope="module")
def run(run_dir):
    return tt.TrainedRun.load(run_dir)


def _ids(items: list[dict]) -> list[str]:
    return [i["item_id"] for i in items]


def _cli(run_dir, capsys, *argv: str) -> str:
    capsys.readouterr()
    assert main(["similar", "--run", str(run_dir), "--threads", "1", *argv]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_the_listed_items_are_left_out_alike_on_every_surface(run_dir, run, client, capsys) -> None:
    plain = client.post("/similar-items", json={"item_id": "i3", "k": 5}).json()
    drop = _ids(plain["items"])[:2]  # the two nearest: the list moves up, two new items at its end
    http = client.post("/similar-items", json={"item_id": "i3", "k": 5, "exclude_items": drop}).json()
    assert not set(drop) & set(_ids(http["items"])) and len(http["items"]) == 5
    assert _ids(http["items"])[:3] == _ids(plain["items"])[2:]
    assert json.loads(_cli(run_dir, capsys, "--item", "i3", "--k", "5", "--json",
                           "--exclude-items", ",".join(drop))) == http
    assert tt.similar(run, ["i3"], k=5, exclude=drop)[0] == http["items"]


def test_items_csv_leaves_the_listed_items_out_of_every_list(run_dir, client, capsys) -> None:
    out = _cli(run_dir, capsys, "--items", "i1,i2", "--k", "3", "--exclude-items", "i4,i5,i6")
    rows = [ln.split(",") for ln in out.splitlines()[1:]]
    http = [client.post("/similar-items", json={"item_id": i, "k": 3, "exclude_items": ["i4", "i5", "i6"]}).json()
            for i in ("i1", "i2")]
    assert [r[1] for r in rows] == _ids(http[0]["items"]) + _ids(http[1]["items"])
    assert not {"i4", "i5", "i6"} & {r[1] for r in rows}


def test_an_unknown_listed_id_is_refused_as_an_item_id_is(run_dir, run, client, capsys) -> None:
    core = "unknown item 'nope' (not among the 60 known items)"
    r = client.post("/similar-items", json={"item_id": "i3", "exclude_items": ["i1", "nope"]})
    assert r.status_code == 404 and r.json()["error"]["field"] == "exclude_items[1]"
    assert r.json()["error"]["message"] == f"exclude_items[1]: {core}"
    with pytest.raises(TwoTowerError) as e:
        tt.similar(run, ["i3"], exclude=["i1", "nope"])
    assert str(e.value) == f"exclude[1]: {core}"
    capsys.readouterr()
    assert main(["similar", "--run", str(run_dir), "--item", "i3", "--exclude-items", "i1,nope"]) == 2
    err = capsys.readouterr().err
    assert f"error: --exclude-items: item 2 of 2: {core}" in err and "ranking with" not in err


def test_the_list_is_bounded_by_the_servers_setting(make_client) -> None:
    r = make_client(max_exclude=2).post("/similar-items", json={"item_id": "i3", "exclude_items": ["i1", "i2", "i4"]})
    assert r.status_code == 422
    assert r.json()["error"]["details"] == [{"loc": ["body", "exclude_items"], "msg": (
        "must hold at most 2 item ids (this server's max_exclude: `twotower serve --max-exclude` sets it), got 3")}]


def test_a_shortfall_names_the_listed_items(run_dir, client, capsys) -> None:
    body = {"item_id": "i3", "k": 60, "exclude_items": ["i1", "i2"]}
    reason = client.post("/similar-items", json=body).json()["shortfall"]["reason"]
    assert "after leaving out item 'i3' itself and the listed exclude_items" in reason
    capsys.readouterr()
    assert main(["similar", "--run", str(run_dir), "--threads", "1", "--items", "i3", "--k", "60",
                 "--exclude-items", "i1,i2"]) == 0
    assert "after leaving out item 'i3' itself and the listed exclude_items" in capsys.readouterr().err
