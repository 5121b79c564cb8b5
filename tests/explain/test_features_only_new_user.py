"""A user with no history yet who filled in a sign-up form (user features) is served from those features alone,
on a run trained with user features, by all three interfaces: `recommend --history '' --user-features`, POST
/recommend ``{"history": [], "user_features": ...}`` and ``tt.recommend(run, history=[], user_features=...)``, and
explained so (``explain``, POST /explain, ``tt.explain_by_id``). All three refused it ("no item ids given"), though
the row-level explainer scored such a user. Without a known feature, or on a run without user features, the
refusal stands, in its words."""
from __future__ import annotations

import json
import math

import pytest
from fastapi.testclient import TestClient

import twotower as tt
from twotower.cli.main import main
from twotower.errors import ConfigError, DataError

REFUSAL = "no item ids given; a new user's history needs at least one item id, oldest first"


@pytest.fixture(scope="module")
def feature_client(feature_run):
    from twotower.serving import RecommenderService, create_app

    with TestClient(create_app(service=RecommenderService.load(feature_run.dir))) as client:
        yield client


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("features", [{"age": 22}, {"age": 58}])
def test_features_alone_give_the_same_list_everywhere(feature_run, feature_client, capsys, features) -> None:
    run = feature_run
    py = tt.recommend(run, history=[], user_features=features, k=6)[0]
    rc, out, err = _cli(capsys, "recommend", "--run", str(run.dir), "--history", "", "--user-features",
                        json.dumps(features), "--k", "6", "--json")
    assert rc == 0, err
    r = feature_client.post("/recommend", json={"history": [], "user_features": features, "k": 6})
    assert r.status_code == 200, r.text
    assert py == json.loads(out)["items"] == r.json()["items"]
    assert len(py) == 6 and all(math.isfinite(i["score"]) for i in py)
    batch = feature_client.post("/recommend/batch", json={"requests": [{"history": [], "user_features": features,
                                                                        "k": 6}]})
    assert batch.status_code == 200, batch.text
    assert batch.json()["results"][0]["items"] == py
    # explained from the features, with the score the list holds
    item = py[0]["item_id"]
    e = tt.explain_by_id(run, history=[], item_id=item, user_features=features)
    assert e["basis"] == "features" and e["history"] == []
    assert e["score"] == pytest.approx(py[0]["score"], abs=1e-5)
    rc, out, err = _cli(capsys, "explain", "--run", str(run.dir), "--history", "", "--user-features",
                        json.dumps(features), "--item", item, "--json")
    assert rc == 0, err
    r = feature_client.post("/explain", json={"history": [], "user_features": features, "item_id": item})
    assert r.status_code == 200, r.text
    assert json.loads(out)["score"] == r.json()["explanation"]["score"] == e["score"]


def test_different_features_give_different_lists(feature_run) -> None:
    young, old = (tt.recommend(feature_run, history=[], user_features={"age": a}, k=10, exclude_seen=False)[0]
                  for a in (20, 59))
    assert [(i["item_id"], i["score"]) for i in young] != [(i["item_id"], i["score"]) for i in old]


@pytest.mark.parametrize("features", [None, {}, {"age": None}])
def test_no_known_feature_is_still_refused_with_a_hint(feature_run, feature_client, capsys, features) -> None:
    run = feature_run
    hint = ("; a user with no history yet is served from user_features alone, with a value for at least one of "
            "this run's user features (age)")
    with pytest.raises(ConfigError) as e:
        tt.recommend(run, history=[], user_features=features)
    assert str(e.value) == f"history: {REFUSAL}{hint}"
    with pytest.raises(ConfigError) as e:
        tt.explain_by_id(run, history=[], item_id=run.item_vocab.ids[0], user_features=features)
    assert str(e.value) == f"history: {REFUSAL}{hint}"
    flags = [] if features is None else ["--user-features", json.dumps(features)]
    for cmd in (["recommend"], ["explain", "--item", run.item_vocab.ids[0]]):
        rc, _, err = _cli(capsys, *cmd, "--run", str(run.dir), "--history", "", *flags)
        assert rc != 0
        assert f"--history: {REFUSAL}{hint.replace('user_features', '--user-features', 1)}" in err
    body = {"history": []} if features is None else {"history": [], "user_features": features}
    for path, extra in (("/recommend", {}), ("/explain", {"item_id": run.item_vocab.ids[0]})):
        r = feature_client.post(path, json={**body, **extra})
        assert r.status_code == 422
        assert r.json()["error"]["details"] == [{"loc": ["body", "history"], "msg": REFUSAL + hint}]
    r = feature_client.post("/recommend/batch", json={"requests": [{"history": [], "user_features": {"age": 30}},
                                                                   body]})
    assert r.status_code == 422
    assert r.json()["error"]["details"] == [{"loc": ["body", "requests", "1", "history"], "msg": REFUSAL + hint}]


def test_a_run_without_user_features_refuses_in_its_words(mean_run, capsys) -> None:
    from twotower.serving import RecommenderService, create_app

    run = mean_run
    with pytest.raises(ConfigError) as e:
        tt.recommend(run, history=[])
    assert str(e.value) == f"history: {REFUSAL}"
    rc, _, err = _cli(capsys, "recommend", "--run", str(run.dir), "--history", "")
    assert rc != 0 and err.rstrip().endswith(f"--history: {REFUSAL}")
    with TestClient(create_app(service=RecommenderService.load(run.dir))) as client:
        r = client.post("/recommend", json={"history": []})
        assert r.status_code == 422
        assert r.json()["error"]["details"] == [{"loc": ["body", "history"], "msg": REFUSAL}]


@pytest.mark.parametrize("history", ["mean", "transformer"])
def test_pooled_and_sequence_towers_give_finite_lists_that_follow_the_features(tmp_path, history) -> None:
    """A pooled tower reads an empty history as zero weights (a zero pool, never 0/0), a sequence tower through
    its fitted empty-history state: either way the list is finite and moves with the features."""
    from explain_tiny_run import train_tiny_run

    run = tt.TrainedRun.load(train_tiny_run(tmp_path / "run", history=history, user_features=True, epochs=2))
    young, old = ([(i["item_id"], i["score"]) for i in tt.recommend(run, history=[], user_features={"age": a}, k=8)[0]]
                  for a in (21, 57))
    assert len(young) == len(old) == 8
    assert all(math.isfinite(s) for _, s in young + old)
    assert young != old


@pytest.mark.parametrize("features", [{"nope": 3}, {"nope": 3, "age": None}])
def test_an_unknown_column_alone_is_refused_as_the_column_everywhere(feature_run, feature_client, capsys,
                                                                      features) -> None:
    # was the empty-history refusal with "served from user_features alone", though the column is what is wrong
    # (the answer a request with a history gets)
    run = feature_run
    said = "user_features.nope: not a user feature of this run; its user tower reads age"
    item = run.item_vocab.ids[0]
    for history in ([], [item]):
        with pytest.raises(DataError) as e:
            tt.recommend(run, history=history, user_features=features)
        assert str(e.value) == said
        with pytest.raises(DataError) as e:
            tt.explain_by_id(run, history=history, item_id=item, user_features=features)
        assert str(e.value) == said
        rc, _, err = _cli(capsys, "recommend", "--run", str(run.dir), "--history", ",".join(history),
                          "--user-features", json.dumps(features))
        # the command line names its flag, as `--filter genres: ...` does
        assert rc == 2 and err.rstrip().endswith(f"error: {said.replace('user_features.', '--user-features ', 1)}")
        for path, extra in (("/recommend", {}), ("/explain", {"item_id": item})):
            r = feature_client.post(path, json={"history": history, "user_features": features, **extra})
            assert r.status_code == 422
            assert r.json() == {"error": {"code": 422, "type": "invalid_request", "message": said}}
        r = feature_client.post("/recommend/batch", json={"requests": [{"history": history,
                                                                        "user_features": features}]})
        assert r.status_code == 422 and r.json()["error"]["message"] == f"requests[0].{said}"


@pytest.mark.parametrize("method", ["loo", "gradxinput"])
def test_a_user_with_no_history_is_told_their_history_adds_exactly_nothing(feature_run, feature_client, method) -> None:
    """With no history item pooled the score is the empty-history score, yet a second row of the float32 tower's
    pass scored it a few ulps apart: `explain --history '' --user-features ...` printed "history adds -0.0000" and
    POST /explain answered "history_total": -5.3e-09, score != empty_history_score (a known user explained from an
    --history-from file without their rows alike)."""
    from twotower.explain import explain_recommendations

    run = feature_run
    items = list(range(run.n_items))
    for age in (18, 25, 33, 47, 61):
        new = explain_recommendations(run, history_rows=[], user_features={"age": age}, item_rows=items,
                                      method=method)
        known = explain_recommendations(run, user_row=run.user_row("u3"), history_rows=[], item_rows=items,
                                        method=method)
        for e in new + known:
            assert e["history_total"] == 0.0 and e["score"] == e["empty_history_score"], (age, e["item_id"])
        r = feature_client.post("/explain", json={"history": [], "user_features": {"age": age}, "item_id": "i1",
                                                  "method": method})
        assert r.status_code == 200, r.text
        got = r.json()["explanation"]
        assert got["history_total"] == 0.0 and got["score"] == got["empty_history_score"], (age, got)
