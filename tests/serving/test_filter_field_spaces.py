"""A filter field name is read with the white space at its ends dropped, as ids and filter values are, on every
surface: `--filter 'genres =Drama'` filtered on genres, where POST /recommend's {"filters": {"genres ": ["Drama"]}}
was a 422 "filters.genres : not an item metadata field" and tt.recommend raised the same."""
from __future__ import annotations

import pytest

import twotower as tt
from twotower.cli.main import main
from twotower.errors import ConfigError


def test_a_spaced_field_name_filters_as_the_cli_reads_it(run_dir, service, client, capsys) -> None:
    want = client.post("/recommend", json={"user_id": "u1", "k": 5, "filters": {"genres": ["Drama"]}}).json()["items"]
    for name in ("genres ", " genres", "\tgenres "):
        r = client.post("/recommend", json={"user_id": "u1", "k": 5, "filters": {name: ["Drama"]}})
        assert r.status_code == 200, r.text
        assert r.json()["items"] == want
        sim = client.post("/similar-items", json={"item_id": "i1", "k": 5, "filters": {name: ["Drama"]}})
        assert sim.status_code == 200, sim.text
        assert tt.recommend(service.run, ["u1"], k=5, filters={name: ["Drama"]})[0] == want
    capsys.readouterr()
    assert main(["recommend", "--run", str(run_dir), "--user", "u1", "--k", "5", "--filter", "genres =Drama",
                 "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["items"] == want


def test_two_names_of_one_field_are_refused_as_the_cli_refuses_a_field_given_twice(service, client) -> None:
    body = {"user_id": "u1", "filters": {"genres": ["Drama"], "genres ": ["Comedy"]}}
    r = client.post("/recommend", json=body)
    assert r.status_code == 422
    said = "filters.genres is given twice (as 'genres' and 'genres '); list its values under one name"
    assert r.json()["error"]["message"].startswith(said), r.text
    with pytest.raises(ConfigError, match=r"^filters\.genres is given twice"):
        tt.recommend(service.run, ["u1"], filters=body["filters"])
