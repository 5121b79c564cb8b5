"""`twotower serve --history-from F...`: known users read their input history from files, as the CLI does.

Without it the service embedded every known user from the training history only, so after a leave-one-out
split `POST /recommend {"user_id"}` disagreed with `twotower recommend --history-from train.csv valid.csv`
and could return a user's own validation item.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from tests.synthetic import LOO_FAST, write_loo_split
from twotower.cli.main import main
from twotower.pipeline.artifacts import TrainedRun
from twotower.pipeline.histories import read_input_histories

FAST = LOO_FAST


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory):
    """A SASRec-format file split leave-last-one-out by the CLI: each user's newest item is in valid.csv."""
    return write_loo_split(tmp_path_factory.mktemp("loo"))


@pytest.fixture(scope="module", params=["recency", "transformer"])
def run(request, split_dir, tmp_path_factory) -> TrainedRun:
    out = tmp_path_factory.mktemp("run") / "run"
    assert main(["-q", "train", "--train", str(split_dir / "train.csv"), "--valid", str(split_dir / "valid.csv"),
                 "--out", str(out), "--epochs", "2", "--no-eval", f"model.user.history={request.param}",
                 "model.user.seq_layers=1", "model.user.seq_dropout=0.0", *FAST]) == 0
    return TrainedRun.load(out)


@pytest.fixture(scope="module")
def files(split_dir) -> list[str]:
    return [str(split_dir / "train.csv"), str(split_dir / "valid.csv")]


@pytest.fixture(scope="module")
def service(run, files):
    from twotower.serving import RecommenderService

    return RecommenderService.load(run.dir, exact=True, history_from=files)


@pytest.fixture()
def client(service):
    from twotower.serving import create_app

    with TestClient(create_app(service=service)) as c:
        yield c


def test_http_lists_equal_the_cli_lists_and_leave_the_input_items_out(run, files, split_dir, client, tmp_path):
    out = tmp_path / "recs.csv"
    assert main(["-q", "recommend", "--run", str(run.dir), "--exact", "--users", "all", "--history-from", *files,
                 "--k", "5", "--out", str(out)]) == 0
    recs = pd.read_csv(out, dtype={"user_id": str, "item_id": str})
    valid = pd.read_csv(split_dir / "valid.csv", dtype={"user_id": str, "item_id": str})
    newest = dict(zip(valid["user_id"], valid["item_id"]))
    for uid in run.user_vocab.ids:
        got = client.post("/recommend", json={"user_id": uid, "k": 5}).json()["items"]
        cli = recs.loc[recs["user_id"] == uid].sort_values("rank")
        assert [i["item_id"] for i in got] == cli["item_id"].tolist(), uid
        assert [i["score"] for i in got] == pytest.approx(cli["score"].tolist(), abs=1e-6)
        assert newest[uid] not in {i["item_id"] for i in got}  # the input history counts as seen
    batch = client.post("/recommend/batch", json={"requests": [{"user_id": u, "k": 5} for u in run.user_vocab.ids]})
    assert [[i["item_id"] for i in a["items"]] for a in batch.json()["results"]] == [
        recs.loc[recs["user_id"] == u].sort_values("rank")["item_id"].tolist() for u in run.user_vocab.ids]


def test_the_input_history_changes_the_lists(run, files, client):
    """The served vectors are the input history's: not the training history's (the valid item is newest)."""
    from twotower.serving import RecommenderService
    from twotower.serving.service import RecRequest

    plain = RecommenderService.load(run.dir, exact=True)
    changed = 0
    for uid in run.user_vocab.ids:
        a = [i["item_id"] for i in client.post("/recommend", json={"user_id": uid, "k": 5}).json()["items"]]
        b = [i["item_id"] for i in plain.recommend(RecRequest(user_id=uid, k=5))["items"]]
        changed += a != b
    assert changed > 0


def test_user_endpoint_and_explanations_read_the_input_history(run, files, split_dir, client):
    from twotower.explain import explain_recommendation

    uid = run.user_vocab.ids[4]
    user = client.get(f"/users/{uid}").json()
    # the files' names: their paths (the server's folders, here pytest's tmp path) are not the client's business
    assert user["history_source"] == [Path(f).name for f in files] == ["train.csv", "valid.csv"]
    assert str(Path(files[0]).parent) not in json.dumps(user)
    assert user["n_history"] == 10 - 1  # all but the test item: train (8) + valid (1)
    valid = pd.read_csv(split_dir / "valid.csv", dtype={"user_id": str, "item_id": str})
    assert user["history"][0]["item_id"] == valid.loc[valid["user_id"] == uid, "item_id"].item()  # newest first
    top = client.post("/recommend", json={"user_id": uid, "k": 3}).json()["items"][0]
    got = client.post("/explain", json={"user_id": uid, "item_id": top["item_id"]}).json()["explanation"]
    hist = read_input_histories(run, files).sequences.of(run.user_vocab.index(uid)).tolist()
    want = explain_recommendation(run, user_row=run.user_vocab.index(uid), history_rows=hist,
                                  item_row=run.item_vocab.index(top["item_id"]))
    assert got["score"] == pytest.approx(top["score"], abs=1e-5)  # the explained score is the listed one
    assert got["score"] == pytest.approx(want["score"]) and got["text"] == want["text"]
    inline = client.post("/recommend", json={"user_id": uid, "k": 3, "explain": True}).json()["items"][0]
    assert inline["explanation"]["text"] == want["text"]


def test_cli_explain_reads_the_input_history_as_http_does(run, files, client, capsys):
    # `twotower explain` had no --history-from: after a leave-one-out split it explained the training history's
    # score, not the one `recommend --history-from` listed and POST /explain (serve --history-from) explains
    import json

    uid = run.user_vocab.ids[4]
    top = client.post("/recommend", json={"user_id": uid, "k": 3}).json()["items"][0]
    http = client.post("/explain", json={"user_id": uid, "item_id": top["item_id"]}).json()["explanation"]
    capsys.readouterr()
    assert main(["-q", "explain", "--run", str(run.dir), "--user", uid, "--item", top["item_id"], "--json",
                 "--history-from", *files]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["score"] == pytest.approx(http["score"], abs=1e-6) and cli["text"] == http["text"]
    assert cli["history"] == http["history"]
    assert main(["explain", "--run", str(run.dir), "--history", top["item_id"], "--item", top["item_id"],
                 "--history-from", *files]) == 2
    assert "--history-from reads known users' histories from files" in capsys.readouterr().err


def test_a_user_without_rows_in_the_history_files_is_warned_about_in_the_answer(run, split_dir):
    # the CLI says it on stderr; the HTTP answer gave the empty-history list (for a history-only tower every score
    # 0, the catalogue in row order) as the user's, without a word
    from twotower.serving import RecommenderService
    from twotower.serving.service import RecRequest

    uid = run.user_vocab.ids[3]
    train = pd.read_csv(split_dir / "train.csv", dtype=str)
    service = RecommenderService.load(run.dir, exact=True, history_from=[train[train["user_id"] != uid]])
    answer = service.recommend(RecRequest(user_id=uid, k=3))
    assert answer["warnings"] == [f"user_id: {uid!r} has no rows of known items in the serve --history-from files, so the list is "
                                  "ranked from an empty input history, not from their training history"]
    assert "warnings" not in service.recommend(RecRequest(user_id=run.user_vocab.ids[4], k=3))


def test_workers_share_the_input_histories(run, files, service, tmp_path):
    from twotower.serving import ServiceSettings
    from twotower.serving.service import RecRequest
    from twotower.serving.workers import WorkerSpec, open_shared_service, share_arrays

    share_arrays(service, tmp_path)
    spec = WorkerSpec(shared_dir=str(tmp_path), settings=asdict(ServiceSettings()), run_dir=str(run.dir),
                      fingerprint=service.fingerprint, history_files=files)
    worker = open_shared_service(spec)
    for uid in run.user_vocab.ids[:10]:
        req = RecRequest(user_id=uid, k=5)
        assert worker.recommend(req) == service.recommend(req)
        assert worker.user(uid) == service.user(uid)
    np.testing.assert_array_equal(worker.histories.sequences.items, service.histories.sequences.items)


def test_serve_history_from_needs_a_run(files, capsys):
    assert main(["serve", "--search-index", "nowhere", "--history-from", *files]) == 2
    assert "--history-from" in capsys.readouterr().err


def test_an_explanation_from_no_input_rows_is_warned_about_as_the_list_is(run, split_dir, tmp_path, capsys, caplog):
    # /recommend warned that such a user is ranked from an empty input history; POST /explain and
    # `explain --history-from` told the same user "You have no history yet" without a word
    from twotower.serving import RecommenderService

    uid = run.user_vocab.ids[3]
    train = pd.read_csv(split_dir / "train.csv", dtype=str)
    service = RecommenderService.load(run.dir, exact=True, history_from=[train[train["user_id"] != uid]])
    item = run.item_vocab.ids[0]
    answer = service.explain(user_id=uid, item_id=item)
    assert answer["explanation"]["text"].startswith("You have no history yet")
    assert answer["warnings"] == [f"user_id: {uid!r} has no rows of known items in the serve --history-from files, so the item is "
                                  "explained from an empty input history, not from their training history"]
    assert "warnings" not in service.explain(user_id=run.user_vocab.ids[4], item_id=item)
    f = tmp_path / "others.csv"
    train[train["user_id"] != uid].to_csv(f, index=False)
    capsys.readouterr()
    assert main(["explain", "--run", str(run.dir), "--user", uid, "--item", item, "--history-from", str(f)]) == 0
    said = capsys.readouterr().err + caplog.text
    assert f"user {uid} has no rows of known items in the --history-from files: the item is explained from an empty input" in said


def test_explain_json_carries_the_no_input_rows_warning(run, split_dir, tmp_path, capsys):
    # `explain --json --history-from` said it on stderr only: POST /explain answers it in "warnings"
    uid = run.user_vocab.ids[3]
    train = pd.read_csv(split_dir / "train.csv", dtype=str)
    f = tmp_path / "others.csv"
    train[train["user_id"] != uid].to_csv(f, index=False)
    capsys.readouterr()
    item = run.item_vocab.ids[0]
    assert main(["explain", "--run", str(run.dir), "--user", uid, "--item", item, "--history-from", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["text"].startswith("You have no history yet")
    assert out["warnings"] == [f"user {uid} has no rows of known items in the --history-from files: the item is explained "
                               "from an empty input history, not from their training history"]
