"""A new user's features in POST /recommend: read as training read its user table (serving/service.py)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

N_USERS, N_ITEMS = 240, 40


@pytest.fixture(scope="module")
def feature_service(tmp_path_factory: pytest.TempPathFactory):
    from twotower.config import load_config
    from twotower.pipeline.run import train_run
    from twotower.serving import RecommenderService

    d = tmp_path_factory.mktemp("features")
    rng = np.random.default_rng(0)
    rows = [(f"u{u}", f"i{i}", t) for u in range(N_USERS)
            for t, i in enumerate(rng.choice(N_ITEMS, size=4 + u % 6, replace=False))]
    df = pd.DataFrame(rows, columns=["user_id", "item_id", "timestamp"])
    last = df.groupby("user_id")["timestamp"].transform("max")
    df[df.timestamp < last].to_csv(d / "train.csv", index=False)
    df[df.timestamp == last].to_csv(d / "valid.csv", index=False)
    tags = ["a", "b", "c", "d"]
    users = pd.DataFrame({"user_id": [f"u{u}" for u in range(N_USERS)],
                          "gender": ["F" if u % 2 else "M" for u in range(N_USERS)],
                          "age": [18 + u % 50 for u in range(N_USERS)],
                          "tags": ["|".join(tags[: 1 + u % 4]) for u in range(N_USERS)]})
    users.loc[7, "age"] = None  # one training user with a missing numeric
    users.to_csv(d / "users.csv", index=False)
    out = d / "run"
    train_run(load_config(overrides=[
        f"data.train={json.dumps(str(d / 'train.csv'))}", f"data.valid={json.dumps(str(d / 'valid.csv'))}",
        f"data.users={json.dumps(str(d / 'users.csv'))}", "data.user_categorical=gender", "data.user_numeric=age",
        "data.user_multi=tags", "model.user.use_id=false", "model.user.history=recency", "model.user.hidden=16",
        "model.item.hidden=16", "model.user.out_dim=8", "model.item.out_dim=8", "model.user.history_dim=8",
        "model.item.id_dim=8", "train.epochs=1", "train.batch_size=128", "train.progress=false",
        "train.checkpoint=false", "train.threads=1", "eval.ks=10", "eval.baselines=",
    ]), out)
    return RecommenderService.load(out), users


@pytest.fixture()
def client(feature_service):
    from twotower.serving import ServiceSettings, create_app

    service, _ = feature_service
    with TestClient(create_app(service=service, settings=ServiceSettings())) as c:
        yield c


def _history(service, user: str) -> list[str]:
    """A training user's history: item ids, oldest first."""
    return [service.run.item_vocab.ids[i] for i in service.run.seen_rows(service.run.user_row(user))]


@pytest.mark.parametrize("user", ["u3", "u7", "u10"])
def test_a_new_user_with_a_known_users_features_and_history_gets_that_users_list(client, feature_service, user):
    service, users = feature_service
    history = _history(service, user)
    row = users.set_index("user_id").loc[user]
    feats = {"gender": row.gender, "age": None if pd.isna(row.age) else int(row.age), "tags": row.tags.split("|")}
    known = client.post("/recommend", json={"user_id": user, "k": 10}).json()["items"]
    new = client.post("/recommend", json={"history": history, "user_features": feats, "k": 10}).json()["items"]
    assert [i["item_id"] for i in new] == [i["item_id"] for i in known]
    np.testing.assert_allclose([i["score"] for i in new], [i["score"] for i in known], atol=1e-5)
    # the multi-valued column as one string joined by the table's separator reads the same
    joined = client.post("/recommend", json={"history": history, "user_features": {**feats, "tags": row.tags},
                                             "k": 10}).json()["items"]
    assert [i["score"] for i in joined] == [i["score"] for i in new]


def test_features_change_the_vector_and_none_read_as_missing(client, feature_service):
    service, _ = feature_service
    history = _history(service, "u3")
    def scores(**body):
        return [i["score"] for i in client.post("/recommend", json={"history": history, "k": 40, **body}).json()["items"]]
    assert scores(user_features={"gender": "F", "age": 20}) != scores(user_features={"gender": "M", "age": 60})
    # no features at all, an empty object and all-null values: every feature missing, one vector
    plain = scores()
    np.testing.assert_allclose(scores(user_features={}), plain, atol=1e-6)
    np.testing.assert_allclose(scores(user_features={"gender": None, "age": None, "tags": None}), plain, atol=1e-6)


def test_a_new_user_without_features_reads_as_a_training_user_without_a_table_row(feature_service):
    import torch

    service, _ = feature_service
    tower = service.run.model.user_tower
    cat, multi, num = tower.features.missing_rows(1)
    want = service.run.encode_user_features([{}])
    assert torch.equal(cat, want[0]) and torch.equal(num, want[2])
    assert all(not m.any() for m in multi) and all(not m.any() for m in want[1])


@pytest.mark.parametrize("body, message", [
    ({"user_features": {"agee": 30}}, "user_features.agee: not a user feature of this run"),
    ({"user_features": {"age": "old"}}, "user_features.age: expected a JSON number, got the string 'old'"),
    ({"user_features": {"gender": ["F"]}}, "user_features.gender: one value"),
    ({"user_features": {"tags": {"a": 1}}}, "user_features.tags: a list of values"),
])
@pytest.mark.parametrize("path, extra", [("/recommend", {}), ("/recommend", {"explain": True}),
                                         ("/explain", {"item_id": "i5"})])
def test_bad_features_are_refused_with_the_field_named(client, body, message, path, extra):
    r = client.post(path, json={"history": ["i1", "i2"], **body, **extra})
    assert r.status_code == 422, r.text
    assert message in r.json()["error"]["message"]


def test_features_with_a_known_user_and_in_a_batch(client):
    r = client.post("/recommend", json={"user_id": "u3", "user_features": {"age": 30}})
    assert r.status_code == 422 and "go with a history, not with user_id" in r.json()["error"]["message"]
    r = client.post("/explain", json={"user_id": "u3", "user_features": {"age": 30}, "item_id": "i1"})
    assert r.status_code == 422 and "go with a history, not with user_id" in r.json()["error"]["message"]
    ok = {"history": ["i1"], "user_features": {"age": 30}, "k": 3}
    r = client.post("/recommend/batch", json={"requests": [ok, {"history": ["i2"], "k": 3},
                                                           {"history": ["i1"], "user_features": {"age": "x"}}]})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("requests[2].user_features.age")
    r = client.post("/recommend/batch", json={"requests": [ok, {"history": ["i2"], "k": 3}]})
    assert r.status_code == 200 and len(r.json()["results"]) == 2
    single = client.post("/recommend", json=ok).json()["items"]
    assert [i["item_id"] for i in r.json()["results"][0]["items"]] == [i["item_id"] for i in single]


def test_the_cli_takes_the_same_features(client, feature_service, capsys):
    from twotower.cli.main import main

    service, _ = feature_service
    history = _history(service, "u4")
    feats = {"gender": "F", "age": 33, "tags": ["b", "c"]}
    want = client.post("/recommend", json={"history": history, "user_features": feats, "k": 10}).json()["items"]
    args = ["recommend", "--run", str(service.run.dir), "--history", ",".join(history), "--k", "10", "--exact", "--json"]
    assert main([*args, "--user-features", json.dumps(feats)]) == 0
    got = json.loads(capsys.readouterr().out)["items"]
    assert [i["item_id"] for i in got] == [i["item_id"] for i in want]
    assert main([*args, "--user-features", "{age: 3}"]) != 0  # one line naming the flag
    assert "--user-features: not JSON" in capsys.readouterr().err
    assert main([*args, "--user-features", '{"agee": 3}']) != 0
    assert "error: --user-features agee: not a user feature" in capsys.readouterr().err


def test_the_python_recommend_gives_the_cli_lists(feature_service, capsys):
    import twotower as tt
    from twotower.cli.main import main
    from twotower.errors import ConfigError, NotFoundError

    service, _ = feature_service
    run = service.run
    lists = tt.recommend(run, ["u4", "u9"], k=7)
    for user, got in zip(["u4", "u9"], lists):
        assert main(["recommend", "--run", str(run.dir), "--user", user, "--k", "7", "--json"]) == 0
        want = json.loads(capsys.readouterr().out)["items"]
        assert got == want
    history, feats = _history(service, "u4"), {"age": 41, "gender": "M"}
    assert main(["recommend", "--run", str(run.dir), "--history", ",".join(history), "--k", "7", "--json",
                 "--user-features", json.dumps(feats)]) == 0
    assert tt.recommend(run, history=history, user_features=feats, k=7)[0] == json.loads(capsys.readouterr().out)["items"]
    seen = set(_history(service, "u4"))
    assert not seen & {i["item_id"] for i in lists[0]}
    assert seen & {i["item_id"] for i in tt.recommend(run, ["u4"], k=N_ITEMS, exclude_seen=False)[0]}
    with pytest.raises(ConfigError, match="exactly one"):
        tt.recommend(run, ["u4"], history=history)
    with pytest.raises(ConfigError, match="a list of user ids"):
        tt.recommend(run, "u4")
    # an empty history is refused as `recommend --history ""` and POST /recommend refuse it (it was answered here)
    assert main(["recommend", "--run", str(run.dir), "--history", ""]) != 0
    assert "no item ids given" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"^history: no item ids given"):
        tt.recommend(run, history=[])
    with pytest.raises(ConfigError, match=r"^history: no item ids given"):
        tt.recommend(run, history=(), user_features={})  # no feature: features alone need at least one
    # a user with no history yet, served from their features alone (tests/explain/test_features_only_new_user.py)
    assert tt.recommend(run, history=(), user_features=feats, k=7)[0]
    with pytest.raises(NotFoundError):
        tt.recommend(run, ["nobody"])


def _same_explanation(a: dict, b: dict) -> None:
    """Equal but for float rounding (one item scored alone, or with the list's others in one matmul)."""
    assert [h["item_id"] for h in a["history"]] == [h["item_id"] for h in b["history"]]
    for key in ("score", "empty_history_score"):
        assert a[key] == pytest.approx(b[key], abs=1e-5)
    assert {k: v for k, v in a.items() if k not in ("score", "empty_history_score", "history_total", "history")} == \
        {k: v for k, v in b.items() if k not in ("score", "empty_history_score", "history_total", "history")}


def test_explain_reads_a_new_users_features_as_recommend_does(client, feature_service):
    """POST /explain and "explain": true with user_features: the explained score is the listed one."""
    service, _ = feature_service
    history = _history(service, "u5")
    feats = {"gender": "F", "age": 27, "tags": ["a", "d"]}
    body = {"history": history, "user_features": feats, "k": 5}
    listed = client.post("/recommend", json={**body, "explain": True, "explain_k": 3}).json()["items"]
    assert [i["item_id"] for i in listed] == [i["item_id"] for i in client.post("/recommend", json=body).json()["items"]]
    for i in listed[:3]:
        e = i["explanation"]
        assert e["score"] == pytest.approx(i["score"], abs=1e-5)
        assert e["profile"] == "features" and e["user_features"] == ["gender", "tags", "age"]
        assert e["history"] and e["basis"] == "history" and e["user_id"] is None
    assert all("explanation" not in i for i in listed[3:])
    r = client.post("/explain", json={"history": history, "user_features": feats, "item_id": listed[0]["item_id"]})
    assert r.status_code == 200, r.text
    _same_explanation(r.json()["explanation"], listed[0]["explanation"])
    # the same history without the features is another user: another score (and a plain new user's profile)
    plain = client.post("/explain", json={"history": history, "item_id": listed[0]["item_id"]}).json()["explanation"]
    assert plain["score"] != pytest.approx(listed[0]["explanation"]["score"], abs=1e-6)
    assert plain["profile"] == "popularity"


def test_a_batch_explains_each_users_features(client, feature_service):
    """One history, two sets of features in one batch: each request is explained with its own features."""
    service, _ = feature_service
    history = _history(service, "u6")
    reqs = [{"history": history, "user_features": f, "k": 3, "explain": True, "exclude_seen": False}
            for f in ({"age": 19, "gender": "M"}, {"age": 70, "gender": "F"}, {"age": 19, "gender": "M"})]
    r = client.post("/recommend/batch", json={"requests": reqs})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    for res in results:
        for i in res["items"]:
            assert i["explanation"]["score"] == pytest.approx(i["score"], abs=1e-5)
    assert results[0] == results[2]


def test_the_python_service_explains_with_features(feature_service):
    from twotower.errors import ConfigError
    from twotower.serving.service import RecRequest

    service, _ = feature_service
    history = tuple(_history(service, "u8"))
    feats = {"age": 35}
    answer = service.recommend(RecRequest(history=history, user_features=feats, k=2, explain=True))
    top = answer["items"][0]
    e = service.explain(item_id=top["item_id"], history=history, user_features=feats)["explanation"]
    _same_explanation(e, top["explanation"])
    with pytest.raises(ConfigError, match="^user_features: must map user feature columns to values"):
        service.explain(item_id=top["item_id"], history=history, user_features=[("age", 35)])


@pytest.mark.parametrize("age", ["100000000000000000000", "1e39", "-1e300"])
@pytest.mark.parametrize("path, extra", [("/recommend", ""), ("/explain", ', "item_id": "i5"')])
def test_a_number_outside_float32_is_refused_naming_the_field(client, age, path, extra):
    """An integer beyond uint64 (10**20) was a 500 (np.isfinite raised TypeError on it); 1e39 passed the check
    and became inf in the tower's float32. Both are 422 naming the field, as the user table's reader refuses them."""
    body = f'{{"history": ["i1"], "user_features": {{"age": {age}}}{extra}}}'.encode()
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    if age.startswith("1000"):  # 1e20 is a float32 number: read, however odd an age
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 422, r.text
        assert r.json()["error"]["message"].startswith("user_features.age: a finite number (float32 range)")


def test_features_that_overflow_the_tower_are_refused_naming_the_field(client):
    """A finite age of 3e38 overflows float32 inside the user tower: /recommend answered 422 "queries contain
    NaN or inf; check the encoder output" (no field named) and /explain 200 with "score": NaN, which is not JSON."""
    body = {"history": ["i1"], "user_features": {"age": 3e38}}
    said = "user_features: the user tower's output is not finite"
    r = client.post("/explain", json={**body, "item_id": "i5"})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith(said), r.text
    r = client.post("/recommend", json={**body, "explain": True})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith(said), r.text
    r = client.post("/recommend/batch", json={"requests": [{"history": ["i2"]}, body]})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("requests[1]." + said), r.text


@pytest.mark.parametrize("features", [{"age": "x" * 100_000}, {"gender": ["F"] * 20_000}, {"tags": {"a": "b" * 100_000}}])
def test_a_refused_feature_value_is_not_echoed_whole(client, features):
    """A refused value came back whole in the 422 (a 100 kB string: a 100 kB error), where request validation
    errors echo no input; the message still names the field and the start of the value."""
    r = client.post("/recommend", json={"history": ["i1"], "user_features": features})
    assert r.status_code == 422
    message = r.json()["error"]["message"]
    assert message.startswith(f"user_features.{next(iter(features))}: ") and len(message) < 300, message[:400]
    assert message.endswith(" characters)")


def test_an_unseen_category_is_not_echoed_whole_in_the_warnings(client):
    """A category training never saw is read as unknown and named in the answer's warnings, which quoted it
    whole: a 100 kB string sent as a gender came back as a 100 kB warning (a refused value is cut, see above)."""
    r = client.post("/recommend", json={"history": ["i1"], "k": 2, "user_features": {"gender": "x" * 100_000}})
    assert r.status_code == 200
    (warning,) = r.json()["warnings"]
    assert warning.startswith("user_features.gender: 'xxx") and len(warning) < 300, warning[:400]
    assert "(100,002 characters) never occurs in training" in warning


def test_values_training_never_saw_are_answered_as_warnings(client, feature_service):
    """An unknown category reads as unknown and a far-off number is read as given, but the answer says so
    (with the nearest known spelling), from POST /recommend, POST /explain and recommend_history alike."""
    service, _ = feature_service
    history = _history(service, "u3")
    plain = client.post("/recommend", json={"history": history, "k": 5,
                                            "user_features": {"gender": "F", "age": 30, "tags": ["a", "b"]}}).json()
    assert "warnings" not in plain  # known values, a list for the multi-valued column: nothing to say
    body = {"history": history, "k": 5, "user_features": {"gender": "f", "age": 900, "tags": ["a", "zz"]}}
    got = client.post("/recommend", json=body).json()
    assert len(got["items"]) == 5
    w = got["warnings"]
    assert w[0] == "user_features.gender: 'f' never occurs in training, so it reads as unknown (did you mean 'F'?)"
    assert w[1] == "user_features.tags: 'zz' never occurs in training, so it reads as unknown"
    assert w[2].startswith("user_features.age: 900 is ") and "standard deviations from the training mean" in w[2]
    assert len(w) == 3
    e = client.post("/explain", json={"history": history, "item_id": got["items"][0]["item_id"],
                                      "user_features": body["user_features"]}).json()
    assert e["warnings"] == w
    batch = client.post("/recommend/batch", json={"requests": [body, {"history": history, "k": 5}]}).json()
    assert batch["results"][0]["warnings"] == w and "warnings" not in batch["results"][1]


def test_the_cli_path_logs_the_same_lines(feature_service, caplog):
    from twotower.pipeline.recommend import recommend_history

    service, _ = feature_service
    with caplog.at_level("WARNING", logger="twotower"):
        recommend_history(service.run, _history(service, "u3"), 5, user_features={"gender": "X"})
    assert "user_features.gender: 'X' never occurs in training, so it reads as unknown" in caplog.text


def test_an_explanation_does_not_cite_a_feature_that_read_as_unknown(client, feature_service):
    """'rests on your profile (user features: gender, age)' named a gender of 'f' that training never saw
    (it reads as unknown, as every unseen value does, so it says nothing of this user)."""
    service, _ = feature_service
    history = _history(service, "u3")
    item = client.post("/recommend", json={"history": history, "k": 1}).json()["items"][0]["item_id"]
    e = client.post("/explain", json={"history": history, "item_id": item,
                                      "user_features": {"gender": "f", "age": 30}}).json()
    assert e["explanation"]["user_features"] == ["age"] and e["warnings"][0].startswith("user_features.gender")
    known = client.post("/explain", json={"history": history, "item_id": item,
                                          "user_features": {"gender": "F", "age": 30}}).json()
    assert known["explanation"]["user_features"] == ["gender", "age"]
    none = client.post("/explain", json={"history": history, "item_id": item,
                                         "user_features": {"gender": "X", "tags": ["zz"]}}).json()
    assert none["explanation"]["user_features"] == [] and none["explanation"]["profile"] == "popularity"


def test_a_history_longer_than_the_tower_reads_is_said(feature_service, caplog):
    from twotower.pipeline.recommend import recommend_history

    service, _ = feature_service
    L = int(service.run.model.history_len)
    items = (list(service.run.item_vocab.ids) * 3)[: L + 3]  # a catalogue of 40: items come back, as re-watches do
    with caplog.at_level("WARNING", logger="twotower"):
        recommend_history(service.run, items[: L + 3], 5)
    assert f"history: {L + 3} items given; the user tower reads the newest {L}" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="twotower"):
        recommend_history(service.run, items[:L], 5)
    assert "items given" not in caplog.text


def test_numpy_values_from_a_user_table_row_are_read_as_python_values(feature_service):
    # a row of a user DataFrame (dict(users.loc[3]), users.at[3, "age"]) holds np.int64: tt.recommend refused it with
    # "user_features.age: a finite number, got np.int64(21)"
    import twotower as tt
    from twotower.errors import DataError

    service, users = feature_service
    run = service.run
    history = _history(service, "u3")
    row = dict(users.drop(index=7).astype({"age": "int64"}).set_index("user_id")[["age"]].loc["u3"])
    assert isinstance(row["age"], np.integer)
    plain = {"age": int(row["age"])}
    assert tt.recommend(run, history=history, user_features=row, k=5) == \
        tt.recommend(run, history=history, user_features=plain, k=5)
    assert tt.recommend(run, history=history, user_features={"age": np.float32(21.0), "tags": [np.str_("a")]}, k=5) == \
        tt.recommend(run, history=history, user_features={"age": 21.0, "tags": ["a"]}, k=5)
    # true/false is 1/0, as the user table's reader reads a column of them (training took them, the service refused)
    assert tt.recommend(run, history=history, user_features={"age": np.bool_(True)}, k=5) == \
        tt.recommend(run, history=history, user_features={"age": True}, k=5) == \
        tt.recommend(run, history=history, user_features={"age": 1}, k=5)
    with pytest.raises(DataError, match=r"user_features.age: expected a JSON number, got the string "):
        tt.recommend(run, history=history, user_features={"age": "1"}, k=5)


def test_a_user_table_rows_missing_values_read_as_missing(feature_service):
    # dict(users.loc[7]) of a user without an age was refused: "user_features.age: a finite number (float32 range),
    # got nan" (pd.NA of an Int64 column: "a finite number, got <NA>"; of a category: "one value ..., got <NA>"),
    # though None reads as missing and the user table's reader read that very cell as missing
    import twotower as tt

    service, users = feature_service
    run = service.run
    history = _history(service, "u3")
    row = dict(users.set_index("user_id")[["age", "gender"]].loc["u7"])
    assert np.isnan(row["age"])
    missing_age = tt.recommend(run, history=history, user_features={"age": None, "gender": row["gender"]}, k=5)
    assert tt.recommend(run, history=history, user_features=row, k=5) == missing_age
    nullable = dict(users.astype({"age": "Int64"}).set_index("user_id")[["age", "gender"]].loc["u7"])
    assert nullable["age"] is pd.NA
    assert tt.recommend(run, history=history, user_features=nullable, k=5) == missing_age
    assert tt.recommend(run, history=history, user_features={"age": 30, "gender": pd.NA}, k=5) == \
        tt.recommend(run, history=history, user_features={"age": 30}, k=5)


def test_a_number_sent_as_a_string_is_said_to_be_a_string(client, feature_service):
    """{"age": "25"} was refused as "user_features.age: a finite number, got '25'", which reads as if 25 were no
    finite number; every surface now says it was a string and how to write it. Strings stay refused."""
    import twotower as tt
    from twotower.errors import DataError

    service, _ = feature_service
    said = """user_features.age: expected a JSON number, got the string '25' (write {"age": 25})"""
    history = _history(service, "u3")
    with pytest.raises(DataError) as e:
        tt.recommend(service.run, history=history, user_features={"age": "25"}, k=5)
    assert str(e.value) == said
    for route, extra in (("/recommend", {}), ("/explain", {"item_id": service.run.item_vocab.ids[0]})):
        r = client.post(route, json={"history": history, "user_features": {"age": "25"}, **extra})
        assert r.status_code == 422 and r.json()["error"]["message"] == said, r.text


@pytest.mark.parametrize("features", [{"gender": ""}, {"gender": "  "}, {"tags": []}, {"tags": ["", " "]},
                                      {"gender": "", "tags": [], "age": None}])
def test_blank_features_alone_are_refused_like_no_features(client, feature_service, features):
    """A blank category and an empty list encode as missing, as an empty cell of the user table does: with an empty
    history they were taken as "a value for a user feature" and answered with the all-missing list, the same for
    every caller (the list the empty-history refusal is there to avoid). Refused as null is, everywhere; a blank
    age is still refused as not a number, naming the column."""
    import twotower as tt
    from twotower.errors import ConfigError

    service, _ = feature_service
    refusal = "no item ids given; a new user's history needs at least one item id"
    with pytest.raises(ConfigError, match=refusal):
        tt.recommend(service.run, history=[], user_features=features)
    r = client.post("/recommend", json={"history": [], "user_features": features})
    assert r.status_code == 422 and refusal in r.json()["error"]["message"], r.text
    r = client.post("/recommend", json={"history": [], "user_features": {"gender": "", "age": ""}})
    assert r.status_code == 422 and "user_features.age: expected a JSON number, got the string ''" in \
        r.json()["error"]["message"]
    r = client.post("/recommend", json={"history": [], "user_features": {"gender": "F"}, "k": 3})
    assert r.status_code == 200 and len(r.json()["items"]) == 3, r.text


def test_a_category_given_as_a_number_is_warned_of_as_it_was_sent(client, feature_service):
    """{"gender": 3} was warned of as '3' (the text it is looked up as), and refused values in Python's words
    (True, ['F']): the values are named as the JSON body held them."""
    history = _history(feature_service[0], "u3")
    w = client.post("/recommend", json={"history": history, "user_features": {"gender": 3}}).json()["warnings"]
    assert w == ["user_features.gender: 3 never occurs in training, so it reads as unknown"]
    for sent, said in ((True, "true"), (["F"], '["F"]'), ({"a": None}, '{"a": null}')):
        r = client.post("/recommend", json={"history": history, "user_features": {"gender": sent}})
        assert r.json()["error"]["message"] == f"user_features.gender: one value (a string or a number), got {said}"


def test_features_with_a_known_user_say_the_same_from_python(feature_service, client):
    """tt.recommend said "user_features describe a new user: give them with history ..." where POST /recommend and
    RecommenderService say "user_features: the features of a user unseen in training go with a history, ...": one
    refusal, in HTTP's words, with Python's argument (user_ids) where HTTP names user_id."""
    import twotower as tt
    from twotower.errors import ConfigError

    service, _ = feature_service
    http = client.post("/recommend", json={"user_id": "u3", "user_features": {"age": 3}}).json()["error"]["message"]
    with pytest.raises(ConfigError) as e:
        tt.recommend(service.run, ["u3"], user_features={"age": 3})
    assert str(e.value) == http.replace("not with user_id", "not with user_ids"), (str(e.value), http)
    assert str(e.value).startswith("user_features: the features of a user unseen in training go with a history")


@pytest.mark.parametrize("cmd, who, route", [
    ("recommend", ["--user", "u3"], "/recommend"),
    ("recommend", ["--users", "u3,u4"], "/recommend"),
    ("explain", ["--user", "u3", "--item", "i1"], "/explain"),
])
def test_features_with_a_known_user_say_the_same_on_the_command_line(feature_service, client, capsys, cmd, who,
                                                                     route):
    """`recommend --user 42 --user-features ...` said "--user-features describes a new user: give it with --history
    ...", a third wording: HTTP's words, with the flags where HTTP names its fields."""
    from tests.serving.refusal_words import cli_refusal

    run_dir = feature_service[0].run.dir
    body = {"user_id": "u3", "user_features": {"age": 3}, **({"item_id": "i1"} if route == "/explain" else {})}
    http = client.post(route, json=body).json()["error"]["message"]
    cli = cli_refusal(capsys, cmd, "--run", str(run_dir), *who, "--user-features", '{"age": 3}')
    assert cli == (http.replace("user_features: ", "--user-features: ", 1).replace("a history", "--history")
                   .replace("not with user_id", f"not with {who[0]}")), (cli, http)


def test_a_row_of_features_that_is_no_mapping_is_refused_in_the_words_of_http(feature_service):
    # "user_features must be an object of column -> value, got str": the words POST /recommend's 422, tt.recommend
    # and --user-features had left ("user_features: must map user feature columns to values, ...")
    from twotower.errors import DataError

    service, _ = feature_service
    with pytest.raises(DataError) as e:
        service.run.encode_user_features(["age=3"])
    assert str(e.value) == ('user_features: must map user feature columns to values, e.g. {"age": 25, "gender": "F"}, '
                            "got a string")
    with pytest.raises(DataError, match=r"^user_features\[1\]: must map user feature columns to values, .*, got a list$"):
        service.run.encode_user_features([{"age": 30}, [("age", 3)]])
