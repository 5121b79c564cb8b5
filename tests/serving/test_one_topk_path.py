"""One top-K path: `twotower recommend` and the HTTP service return the same lists (issue 12).

With an exact index the CLI's top 10 and ``POST /recommend`` / ``/recommend/batch``
agree for every user of the tiny run, scores included; filters are allow-lists
applied by the index and equal a brute-force ranking over the allowed items;
with an ANN index ``recommend`` uses it and says so, unless ``--exact``.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from twotower.cli.main import main


def _cli_lists(capsys, *argv: str) -> tuple[dict[str, list[tuple[str, float]]], str]:
    assert main(["recommend", *argv, "--json"]) == 0
    out = capsys.readouterr()
    lists: dict[str, list[tuple[str, float]]] = {}
    for rec in sorted(json.loads(out.out), key=lambda r: (r["user_id"], r["rank"])):
        lists.setdefault(rec["user_id"], []).append((rec["item_id"], round(rec["score"], 6)))
    return lists, out.err


def test_cli_and_http_top10_identical_for_every_user(run_dir, service, client, capsys):
    assert service.index.is_exact
    cli, err = _cli_lists(capsys, "--run", str(run_dir), "--users", "all", "--k", "10")
    assert "ranking with exact search" in err
    users = list(service.run.user_vocab.ids)
    assert sorted(cli) == sorted(users)  # every user of the run has a training history here
    batch = client.post("/recommend/batch", json={"requests": [{"user_id": u, "k": 10} for u in users]})
    assert batch.status_code == 200
    for u, answer in zip(users, batch.json()["results"]):
        http = [(it["item_id"], it["score"]) for it in answer["items"]]
        assert http == cli[u], u  # same items, same order, same scores
    for u in users[:5]:  # one request at a time takes the same path
        one = client.post("/recommend", json={"user_id": u, "k": 10}).json()
        assert [(it["item_id"], it["score"]) for it in one["items"]] == cli[u]


def test_history_user_cli_equals_http(run_dir, client, capsys):
    assert main(["recommend", "--run", str(run_dir), "--history", "i1,i5,i9", "--k", "10", "--json"]) == 0
    cli = [(it["item_id"], it["score"]) for it in json.loads(capsys.readouterr().out)["items"]]
    http = client.post("/recommend", json={"history": ["i1", "i5", "i9"], "k": 10}).json()["items"]
    assert [(it["item_id"], it["score"]) for it in http] == cli and len(cli) == 10


def test_filters_are_an_allow_list_equal_to_brute_force(service, client):
    run = service.run
    user = "u3"
    row = run.user_row(user)
    mask = service.catalog.filter_mask({"genres": ["Horror"]})
    seen = set(run.history.of(row).tolist())
    query = service.user_vectors[row]
    allowed = [i for i in np.flatnonzero(mask) if i not in seen]
    scores = {i: float(service.item_vectors[i].astype(np.float64) @ query.astype(np.float64)) for i in allowed}
    expected = sorted(allowed, key=lambda i: (-scores[i], i))[:5]
    got = client.post("/recommend", json={"user_id": user, "k": 5, "filters": {"genres": ["Horror"]}}).json()
    assert [it["item_id"] for it in got["items"]] == [run.item_vocab.ids[i] for i in expected]
    assert all("Horror" in it["genres"] for it in got["items"])


def test_similar_items_shortfall_names_the_item_it_left_out_not_seen_items(client):
    """/similar-items has no user and so no seen items, but its shortfall said "after the excluded (seen) items":
    what it leaves out is the query item itself."""
    got = client.post("/similar-items", json={"item_id": "i3", "k": 100}).json()
    assert got["shortfall"] == {"missing": 41, "reason": "fewer than k=100 items are left in the index after leaving "
                                                         "out item 'i3' itself; all 59 eligible items are returned"}
    got = client.post("/recommend", json={"user_id": "u0", "k": 100}).json()  # a user's list still says "seen"
    assert "after the excluded (seen) items" in got["shortfall"]["reason"]


def test_shortfall_is_stated_not_silent(service, client):
    # three allowed items, one of them seen by the user: 2 of k=10 can come back, and the answer says why
    row = service.run.user_row("u0")
    seen = service.run.item_vocab.ids[int(service.run.history.of(row)[0])]
    others = [i for i in ("i50", "i51", "i52", "i53") if i != seen][:2]
    body = {"user_id": "u0", "k": 10, "filters": {"item_id": [seen, *others]}}
    got = client.post("/recommend", json=body).json()
    assert sorted(it["item_id"] for it in got["items"]) == sorted(others)
    assert got["shortfall"]["missing"] == 8 and "fewer" in got["shortfall"]["reason"]

    # nothing excluded or filtered: the catalogue itself is shorter than k (it said "left ... after nothing")
    every = client.post("/recommend", json={"user_id": "u0", "k": 100, "exclude_seen": False}).json()
    assert every["shortfall"] == {"missing": 40, "reason": "fewer than k=100 items are in the index; all 60 eligible "
                                                           "items are returned"}


def test_recommend_uses_the_built_ann_index_unless_exact(run_dir, tmp_path, capsys):
    pytest.importorskip("faiss")
    run = tmp_path / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("index"))
    assert main(["index", "build", "--run", str(run), "--index", "IVF2,Flat", "--queries", "10"]) == 0
    capsys.readouterr()
    ann, err = _cli_lists(capsys, "--run", str(run), "--users", "u1,u2", "--k", "10")
    assert "approximate IVF2,Flat" in err and "--exact" in err
    exact, err = _cli_lists(capsys, "--run", str(run), "--users", "u1,u2", "--k", "10", "--exact")
    assert "exact search" in err and "(--exact)" in err
    assert all(len(v) == 10 for v in ann.values()) and all(len(v) == 10 for v in exact.values())


def test_service_refuses_an_index_below_its_recall_target_unless_allowed(run_dir, tmp_path):
    pytest.importorskip("faiss")
    from twotower.errors import ConfigError
    from twotower.serving import RecommenderService

    run = tmp_path / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("index"))
    # a 2-bit PQ cannot reach recall 1.0: the build says so, and the service will not start on it
    assert main(["index", "build", "--run", str(run), "--index", "IVF2,PQ2x2", "--target-recall", "1.0",
                 "--queries", "10"]) == 0
    with pytest.raises(ConfigError, match=r"measured recall@10 0\.\d+ on 10 queries .* below its target 1\.0.*"
                                          r"exact=True, or pass allow_low_recall=True"):
        RecommenderService.load(run)  # a Python caller is told the keyword arguments, not serve's flags
    service = RecommenderService.load(run, allow_low_recall=True)
    assert not service.index.is_exact and "approximate IVF2,PQ2x2" in service.index_description
    # or serve exactly, as the refusal suggests, without removing the built index
    service = RecommenderService.load(run, exact=True)
    assert service.index.is_exact and "(exact=True)" in service.index_description  # its own words
    assert main(["serve", "--run", str(run), "--exact", "--index", str(run / "index")]) == 2


def test_evaluate_ranks_through_the_same_index_path(service, client):
    from twotower.pipeline.evaluate_run import RunScorer
    from twotower.pipeline.recommend import exclusions_from_files

    run = service.run
    users = np.arange(len(run.user_vocab))
    seen = exclusions_from_files(run, [], include_seen=True)
    ranked = RunScorer(run).rank(users, 10, seen)  # what `twotower evaluate` ranks for the two-tower model
    batch = client.post("/recommend/batch", json={"requests": [{"user_id": u, "k": 10} for u in run.user_vocab.ids]})
    http = [[run.item_vocab.index(it["item_id"]) for it in r["items"]] for r in batch.json()["results"]]
    assert ranked.tolist() == http


def test_filter_exact_max_decides_the_filtered_path(service, client, monkeypatch):
    """``ServiceSettings.filter_exact_max`` was read nowhere (the index used its own 4096 / 1/8 rule): a filter
    matching at most that many items is ranked exactly over them, a broader one widens the index search;
    either way the list is the brute-force ranking over the allowed items."""
    from twotower.serving import ServiceSettings

    mask = service.catalog.filter_mask({"genres": ["Horror"]}) & service.in_index
    n = int(mask.sum())
    asked: list[int] = []
    real = service.index._search_allowed_exactly

    def spy(query, k, allow, exclude):
        asked.append(int(allow.size))
        return real(query, k, allow, exclude)

    monkeypatch.setattr(service.index, "_search_allowed_exactly", spy)
    body = {"user_id": "u3", "k": 5, "filters": {"genres": ["Horror"]}}
    lists = []
    for limit, exact in ((n, True), (n - 1, False)):
        monkeypatch.setattr(service, "settings", ServiceSettings(filter_exact_max=limit))
        asked.clear()
        got = client.post("/recommend", json=body)
        assert got.status_code == 200
        assert asked == ([n] if exact else []), limit
        lists.append([(it["item_id"], it["score"]) for it in got.json()["items"]])
    assert lists[0] == lists[1] and len(lists[0]) == 5  # the same list by both paths (an exact index)


def test_serve_filter_exact_max_flag_is_the_setting():
    import argparse

    from twotower.cli.serve_cmd import _settings, register
    from twotower.errors import ConfigError
    from twotower.serving import ServiceSettings

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    assert _settings(parser.parse_args(["serve", "--run", "r"])).filter_exact_max == ServiceSettings().filter_exact_max
    assert _settings(parser.parse_args(["serve", "--run", "r", "--filter-exact-max", "7"])).filter_exact_max == 7
    with pytest.raises(ConfigError, match="--filter-exact-max: must be at least 0, got -1"):
        _settings(parser.parse_args(["serve", "--run", "r", "--filter-exact-max", "-1"]))


def test_an_index_served_below_its_recall_target_says_so_in_readyz_and_metrics(run_dir, tmp_path):
    """Before: `serve --allow-low-recall` logged the shortfall once at start-up; /readyz and /metrics said
    nothing of the recall measured, so a dashboard saw an approximate index missing its target as healthy."""
    pytest.importorskip("faiss")
    from fastapi.testclient import TestClient

    from twotower.serving import RecommenderService, create_app

    run = tmp_path / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("index"))
    assert main(["index", "build", "--run", str(run), "--index", "IVF2,PQ2x2", "--target-recall", "1.0",
                 "--queries", "10"]) == 0
    tune = json.loads((run / "index" / "tune.json").read_text())
    with TestClient(create_app(service=RecommenderService.load(run, allow_low_recall=True))) as client:
        recall = client.get("/readyz").json()["index"]["recall"]
        text = client.get("/metrics").text
    assert recall == {"recall": tune["chosen"]["recall"], "k": 10, "queries": 10, "target": 1.0, "met_target": False}
    assert f"twotower_index_recall {tune['chosen']['recall']}" in text and "twotower_index_recall_target 1.0" in text
    with TestClient(create_app(service=RecommenderService.load(run, exact=True))) as exact:
        assert exact.get("/readyz").json()["index"]["recall"] is None  # exact search: nothing approximated
        assert "twotower_index_recall" not in exact.get("/metrics").text
