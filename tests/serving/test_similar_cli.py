"""`twotower similar` and `tt.similar` answer as POST /similar-items: one search (pipeline/similar.py) behind all three.

With an exact index every item's CLI list equals the HTTP list (ids, ranks, scores), `--item --json` prints the
HTTP answer itself, the item is never its own neighbour, and a dual-head run's cold item is queried by its
semantic head by both. Here beside the `recommend` == `POST /recommend` test, whose tiny run and client it reuses.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from twotower.cli.main import main
from twotower.errors import ConfigError
from tests.serving.test_cold_similar import COLD, dual_run  # noqa: F401 - the dual-head run fixture


def _csv_lists(path: Path) -> dict[str, list[tuple[str, int, float]]]:
    lists: dict[str, list[tuple[str, int, float]]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            lists.setdefault(r["item_id"], []).append((r["similar_item_id"], int(r["rank"]), round(float(r["score"]), 6)))
    return lists


def test_every_items_cli_list_equals_http(run_dir, service, client, tmp_path, capsys) -> None:
    out = tmp_path / "similar.csv"
    assert main(["similar", "--run", str(run_dir), "--items", "all", "--exact", "--k", "10", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "ranking with exact search over 60 items (--exact)" in err and f"wrote 600 rows for 60 items to {out}" in err
    cli = _csv_lists(out)
    items = list(service.run.item_vocab.ids)
    assert sorted(cli) == sorted(items)
    for item in items:
        http = client.post("/similar-items", json={"item_id": item, "k": 10}).json()["items"]
        assert [(it["item_id"], it["rank"], it["score"]) for it in http] == cli[item], item
        assert item not in [i for i, _, _ in cli[item]]  # never its own neighbour


def test_item_json_is_the_http_answer(run_dir, client, capsys) -> None:
    for k in (10, 100):  # 100: a shortfall, in the service's words
        assert main(["similar", "--run", str(run_dir), "--item", "i3", "--k", str(k), "--json"]) == 0
        cli = json.loads(capsys.readouterr().out)
        assert cli == client.post("/similar-items", json={"item_id": "i3", "k": k}).json()
    assert "leaving out item 'i3' itself" in cli["shortfall"]["reason"]


def test_item_prints_titles_and_defaults_to_the_services_k(run_dir, capsys) -> None:
    from twotower.serving.settings import ServiceSettings

    assert main(["similar", "--run", str(run_dir), "--item", "i3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"top {ServiceSettings.default_k} similar to Movie 3"
    assert len(lines) == 1 + ServiceSettings.default_k and "(item i" in lines[1]


@pytest.mark.parametrize("flag, value", [("--item", "nope"), ("--items", "i1,nope,i2")])
def test_an_unknown_id_is_one_line_naming_it_and_its_flag(run_dir, flag, value, capsys) -> None:
    assert main(["similar", "--run", str(run_dir), flag, value]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    place = "item 2 of 3: " if flag == "--items" else ""  # a list's refusal names the id's place in it
    assert err == [f"error: {flag}: {place}unknown item 'nope' (not among the 60 known items)"]  # before the index is opened


def test_an_unknown_id_is_named_alike_by_the_cli_and_the_service(run_dir, service, client, capsys) -> None:
    """One wording (NotFoundError.not_among): a catalogue built beside the run (bench/serve_load.py's, a test's)
    said "not among the 60 catalogue items" where the CLI and a run's service say "known items"."""
    from twotower.serving import RecommenderService, create_app
    from twotower.serving.catalog import ItemCatalog

    assert main(["similar", "--run", str(run_dir), "--item", "nope"]) != 0
    cli = capsys.readouterr().err.strip().removeprefix("error: --item: ")
    http = client.post("/similar-items", json={"item_id": "nope", "k": 5}).json()["error"]["message"]
    own = ItemCatalog(service.catalog.ids, service.catalog.columns)  # its own lookup, not the run's vocabulary
    svc = RecommenderService(service.run, service.index, catalog=own, item_vectors=service.item_vectors,
                             user_vectors=service.user_vectors)
    with TestClient(create_app(service=svc)) as c:
        built = c.post("/similar-items", json={"item_id": "nope", "k": 5}).json()["error"]["message"]
    # the 404 names its field, item_id, as POST /explain's and /recommend's do (it had none, alone of the routes
    # taking an id in the body); after it, the CLI's words
    assert http.removeprefix("item_id: ") == built.removeprefix("item_id: ") == cli
    assert http == built == "item_id: unknown item 'nope' (not among the 60 known items)"


def _error(capsys, *argv: str) -> str:
    """The error line `twotower similar ARGV` ends with (exit status not 0)."""
    assert main(["similar", *argv]) != 0
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_out_on_a_run_file_is_refused(run_dir, capsys) -> None:
    for name in ("model.safetensors", "config.json"):
        target = run_dir / name
        before = target.read_bytes()
        err = _error(capsys, "--run", str(run_dir), "--items", "all", "--out", str(target))
        assert err == f"error: --out {target}: is a file of the run '{run_dir}', which writing there would damage; " \
                      "choose another file name"
        assert target.read_bytes() == before


def test_out_is_for_items_and_k_is_bounded(run_dir, tmp_path, capsys) -> None:
    from twotower.config import MAX_K

    out = tmp_path / "x.csv"
    assert _error(capsys, "--run", str(run_dir), "--item", "i3", "--out", str(out)) == (
        f"error: --out writes the CSV of --items; for one item write `--items i3 --out {out}`, or --json for the "
        "printed answer")
    assert not out.exists()
    assert _error(capsys, "--run", str(run_dir), "--item", "i3", "--k", "0") == "error: --k: must be at least 1, got 0"
    assert _error(capsys, "--run", str(run_dir), "--item", "i3", "--k", str(MAX_K + 1)) == \
        f"error: --k: must be at most {MAX_K} (twotower.config.MAX_K), got {MAX_K + 1}"


def test_json_with_out_is_refused_not_ignored(run_dir, tmp_path, capsys) -> None:
    # `--items ... --json --out sim.json` wrote CSV into sim.json (and its record sim.json.json), --json ignored
    out = tmp_path / "sim.json"
    assert _error(capsys, "--run", str(run_dir), "--items", "i3,i5", "--json", "--out", str(out)) == (
        "error: --json prints the lists of --items as JSON records and --out writes them as CSV: pass one of them "
        "(JSON in a file: --json > FILE)")
    assert not out.exists() and not (tmp_path / "sim.json.json").exists()


def test_items_to_stdout_and_json(run_dir, capsys) -> None:
    assert main(["similar", "--run", str(run_dir), "--items", "i3,i3,i5", "--k", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "item_id,similar_item_id,rank,score" and len(lines) == 1 + 2 * 3  # i3 listed once
    assert main(["similar", "--run", str(run_dir), "--items", "i5", "--k", "3", "--json"]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in recs] == [1, 2, 3] and {r["item_id"] for r in recs} == {"i5"}
    # the scores to the digits of `--item --json` (and of POST /similar-items): they were printed to 10 decimals
    assert main(["similar", "--run", str(run_dir), "--item", "i5", "--k", "3", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)["items"]
    assert [(r["similar_item_id"], r["score"]) for r in recs] == [(r["item_id"], r["score"]) for r in one]


def test_python_api_equals_the_service(run_dir, service) -> None:
    import twotower as tt

    got = tt.similar(service.run, ["i0", "i7"], k=5, exact=True)
    for item, lst in zip(["i0", "i7"], got):
        http = service.similar_items(item, 5)["items"]
        assert [(it["item_id"], it["score"], it["rank"]) for it in lst] == [
            (it["item_id"], it["score"], it["rank"]) for it in http]
    with pytest.raises(ConfigError, match="item_ids: must be a list of item ids"):
        tt.similar(service.run, "i0")


def test_a_cold_item_is_queried_by_its_semantic_head_by_all(dual_run, monkeypatch, capsys, tmp_path) -> None:  # noqa: F811
    import twotower as tt
    from twotower.index.exact import ExactIndex
    from twotower.pipeline.artifacts import TrainedRun
    from twotower.serving import RecommenderService, create_app
    from twotower.serving.settings import ServiceSettings

    import numpy as np

    service = RecommenderService(dual_run, ExactIndex().build(dual_run.item_embeddings(), np.arange(dual_run.n_items)),
                                 settings=ServiceSettings())
    with TestClient(create_app(service=service, settings=service.settings)) as client:
        http = client.post("/similar-items", json={"item_id": COLD, "k": 10}).json()
    assert http["query_space"] == "semantic"
    monkeypatch.setattr(TrainedRun, "load", classmethod(lambda cls, *a, **kw: dual_run))  # the in-memory run
    assert main(["similar", "--run", str(dual_run.dir), "--item", COLD, "--k", "10", "--json", "--exact"]) == 0
    assert json.loads(capsys.readouterr().out) == http
    out = tmp_path / "cold.csv"
    assert main(["similar", "--run", str(dual_run.dir), "--items", f"{COLD},i0", "--k", "10", "--exact", "--out", str(out)]) == 0
    assert "1 of 2 items have no training interactions" in capsys.readouterr().err
    assert _csv_lists(out)[COLD] == [(it["item_id"], it["rank"], it["score"]) for it in http["items"]]
    api = tt.similar(dual_run, [COLD], k=10, exact=True)[0]
    assert [(it["item_id"], it["score"]) for it in api] == [(it["item_id"], it["score"]) for it in http["items"]]
    # --cold-similar item: the served vector, as `serve --cold-similar item`
    assert main(["similar", "--run", str(dual_run.dir), "--item", COLD, "--k", "10", "--json", "--cold-similar", "item"]) == 0
    assert json.loads(capsys.readouterr().out)["query_space"] == "item"


def test_one_index_search_per_block_of_items(service) -> None:
    import numpy as np

    from twotower.pipeline.similar import similar_items

    calls: list[int] = []

    class Counting:
        def search(self, queries, k, **kw):  # noqa: ANN001, ANN202
            calls.append(len(queries))
            return service.index.search(queries, k, **kw)

    rows = np.arange(service.run.n_items)
    res, spaces = similar_items(service.run, rows, 5, Counting(), block=25)
    assert calls == [25, 25, 10] and res.ids.shape == (60, 5) and spaces == ["item"] * 60
    assert not (res.ids == rows[:, None]).any()  # no item is its own neighbour
